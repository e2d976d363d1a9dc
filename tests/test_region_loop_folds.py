"""argmax/argmin and custom combines over jagged subregions (`values[b:e, :]`, ordered loops over the range) and
over several subregions with the same bounds (`x[b:e] * w[b:e]`, one region fold), checked through the oracle,
the launcher on CPU and the StableHLO exit against torch."""

from __future__ import annotations

import numpy as np
import torch

import intent
from intent import Out, dims, f32, i32, i64, parallel
from tests.breadth_support import three_ways
from tests.frontend_support import diagnostic

S, E, D, C = dims("S E D C")
g = torch.Generator().manual_seed(17)
OFFSETS = torch.tensor([0, 3, 3, 4, 9])  # segments of 3, 0 (empty), 1 and 5 rows


def segments(offsets: torch.Tensor) -> list[tuple[int, int]]:
    return [(int(offsets[s]), int(offsets[s + 1])) for s in range(len(offsets) - 1)]


@intent.kernel
def jagged_arg(values: f32[E, D], offsets: i64[S + 1], hi: Out[i64[S, D]], lo: Out[i64[S, D]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        hi[s, :] = intent.argmax(values[b:e, :], axis=0)
        lo[s, :] = intent.argmin(values[b:e, :], axis=0)


def test_jagged_argmax_argmin_per_column() -> None:
    """Positions are relative to the segment's start; ties keep the first row, NaN counts as the extreme (its
    first row), an all -inf column still has an argmax, an empty segment gives -1."""
    v = torch.randn(9, 6, generator=g)
    v[5, 1] = v[7, 1] = 10.0          # a tie: the first row wins
    v[4:9, 2] = -float("inf")         # all -inf: row 0 of the segment
    v[6, 3] = v[8, 3] = float("nan")  # NaN is the extreme for both
    args = {"values": v, "offsets": OFFSETS, "hi": torch.empty(4, 6, dtype=torch.int64),
            "lo": torch.empty(4, 6, dtype=torch.int64)}
    got = three_ways(jagged_arg, args, ("hi", "lo"), rtol=0, atol=0)
    for s, (b, e) in enumerate(segments(OFFSETS)):
        if b == e:
            assert (got["hi"][s] == -1).all() and (got["lo"][s] == -1).all()
            continue
        seg = v[b:e]
        for col in range(6):
            c = seg[:, col]
            nans = c.isnan().nonzero()
            first_hi = int(nans[0]) if len(nans) else int((c == c.max()).nonzero()[0])
            first_lo = int(nans[0]) if len(nans) else int((c == c.min()).nonzero()[0])
            assert got["hi"][s, col] == first_hi and got["lo"][s, col] == first_lo
    assert got["hi"][3, 1] == 1 and got["hi"][3, 2] == 0 and got["lo"][3, 3] == 2


R = dims("R")


@intent.kernel
def sparse_arg(data: f32[E], cols: i64[E], indptr: i64[R + 1], bias: f32[C], best: Out[i64[R]],
               worst: Out[i64[R]], ibest: Out[i64[R]]):
    for r in parallel(R):
        b = indptr[r]
        e = indptr[r + 1]
        best[r] = intent.argmax(data[b:e] + bias[cols[b:e]])
        worst[r] = intent.argmin(data[b:e] * bias[cols[b:e]])
        ibest[r] = intent.argmax(cols[b:e].to(i32) * 0 + (data[b:e] > 0.0).to(i32))


def test_argmax_over_several_subregions() -> None:
    """A CSR row's scores read through its column indices: the position of the best entry in the row."""
    indices = torch.tensor([0, 2, 4, 1, 3, 0, 4, 2, 1])
    data, bias = torch.randn(9, generator=g), torch.randn(5, generator=g)
    args = {"data": data, "cols": indices, "indptr": OFFSETS, "bias": bias, "best": torch.empty(4, dtype=torch.int64),
            "worst": torch.empty(4, dtype=torch.int64), "ibest": torch.empty(4, dtype=torch.int64)}
    got = three_ways(sparse_arg, args, ("best", "worst", "ibest"), rtol=0, atol=0)
    for r, (b, e) in enumerate(segments(OFFSETS)):
        if b == e:
            assert got["best"][r] == got["worst"][r] == got["ibest"][r] == -1
            continue
        assert got["best"][r] == int((data[b:e] + bias[indices[b:e]]).argmax())
        assert got["worst"][r] == int((data[b:e] * bias[indices[b:e]]).argmin())
        assert got["ibest"][r] == int((data[b:e] > 0).int().argmax())  # ints: the first of equal values


@intent.combine
def welford_combine(a, b):
    mean_a, m2_a, n_a = a
    mean_b, m2_b, n_b = b
    n = n_a + n_b
    frac = intent.where(n == 0.0, 0.0, n_b / intent.maximum(n, 1.0))
    delta = mean_b - mean_a
    return mean_a + delta * frac, m2_a + m2_b + delta * delta * n_a * frac, n


@intent.combine
def add(a, b):
    return a + b


@intent.kernel
def jagged_welford(values: f32[E, D], weights: f32[E], offsets: i64[S + 1], mean: Out[f32[S, D]],
                   var: Out[f32[S, D]], wmean: Out[f32[S]], wsum: Out[f32[S]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        mu, m2, n = intent.reduce((values[b:e, :], intent.zeros_like(values[b:e, :]),
                                   intent.ones_like(values[b:e, :])), welford_combine, axis=0, identity=(0.0, 0.0, 0.0))
        mean[s, :] = mu
        var[s, :] = m2 / n
        wm, _, _ = intent.reduce((values[b:e, 0] * weights[b:e], intent.zeros_like(weights[b:e]),
                                  intent.ones_like(weights[b:e])), welford_combine, identity=(0.0, 0.0, 0.0))
        wmean[s] = wm
        wsum[s] = intent.reduce(values[b:e, 1] * weights[b:e], add, identity=0.0)


def test_custom_combines_over_jagged_and_several_subregions() -> None:
    """Welford's (mean, M2, n) over a jagged segment's rows (per column) and over a product of two subregions;
    a one-component combine; an empty segment gives the identity (a 0 / 0 variance is NaN)."""
    v, w = torch.randn(9, 3, generator=g) + 4.0, torch.rand(9, generator=g)
    args = {"values": v, "weights": w, "offsets": OFFSETS, "mean": torch.empty(4, 3), "var": torch.empty(4, 3),
            "wmean": torch.empty(4), "wsum": torch.empty(4)}
    got = three_ways(jagged_welford, args, ("mean", "var", "wmean", "wsum"), rtol=1e-5, atol=1e-5)
    for s, (b, e) in enumerate(segments(OFFSETS)):
        if b == e:
            assert (got["mean"][s] == 0).all() and np.isnan(got["var"][s]).all() and got["wsum"][s] == 0
            continue
        np.testing.assert_allclose(got["mean"][s], v[b:e].mean(0).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["var"][s], v[b:e].var(0, unbiased=False).numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got["wmean"][s], (v[b:e, 0] * w[b:e]).mean().item(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["wsum"][s], (v[b:e, 1] * w[b:e]).sum().item(), rtol=1e-5, atol=1e-5)


def test_custom_fold_over_several_subregions_needs_an_identity(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.combine
        def add(a, b):
            return a + b

        @intent.kernel
        def k(x: f32[E], w: f32[E], offsets: i64[S + 1], out: Out[f32[S]]):
            for s in parallel(S):
                out[s] = intent.reduce(x[offsets[s]:offsets[s + 1]] * w[offsets[s]:offsets[s + 1]], add)
        """, "intent.reduce(x", "intent.reduce() with a combine function needs identity=(...), one literal per "
                                "component (1), e.g. identity=(0.0)")


def test_custom_jagged_fold_along_a_kept_axis_is_refused(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.combine
        def add(a, b):
            return a + b

        @intent.kernel
        def k(values: f32[E, N], offsets: i64[S + 1], out: Out[f32[S, E]]):
            for s in parallel(S):
                out[s, :] = intent.reduce(values[offsets[s]:offsets[s + 1], :], add, axis=1, identity=0.0)
        """, "intent.reduce(values", "intent.reduce: a jagged subregion `x[b:e, :]` is reduced along its "
                                     "data-dependent axis: write axis=0 (no keepdims)")
