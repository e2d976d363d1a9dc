"""Forms that ports of real kernels need: 0-d tensor parameters, clamp/lerp, masked gathers, optional tensor
parameters, and the oracle's pairwise float sums. Each runs through the oracle, the launcher and StableHLO."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intent
from intent import InOut, Out, dims, f32, i64, parallel
from kir.errors import DiagnosticError, IntentError
from tests.breadth_support import three_ways
from tests.frontend_support import diagnostic

M, N, K = dims("M N K")
g = torch.Generator().manual_seed(0)


def rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


# ---------------------------------------------------------------------------------------------- 0-d tensors


@intent.kernel
def add_bias(x: f32[N], b: f32[()], out: Out[f32[N]], total: Out[f32[()]]):
    for i in parallel(N):
        out[i] = x[i] + b[()]
    for _ in parallel(1):
        total[()] = intent.sum(x[:]) * b[()]


def test_zero_dim_parameters_load_and_store() -> None:
    x, b = rand(8), torch.tensor(2.5)
    got = three_ways(add_bias, {"x": x, "b": b, "out": torch.empty(8), "total": torch.empty(())},
                     ("out", "total"), rtol=1e-6)
    np.testing.assert_array_equal(got["out"], (x + 2.5).numpy())
    assert got["total"].shape == ()


# ---------------------------------------------------------------------------------------------- clamp, lerp


@intent.kernel
def clamp_lerp(x: f32[N], y: f32[N], w: f32[N], lo: Out[f32[N]], hi: Out[f32[N]], both: Out[f32[N]],
               mix: Out[f32[N]], half: Out[f32[N]]):
    for i in parallel(N):
        lo[i] = intent.clamp(x[i], lo=-0.5)
        hi[i] = intent.clamp(x[i], hi=0.25)
        both[i] = intent.clamp(x[i], -0.5, 0.5)
        mix[i] = intent.lerp(x[i], y[i], w[i])
        half[i] = intent.lerp(x[i], y[i], 0.75)


def test_clamp_and_lerp_match_torch() -> None:
    n = 33
    x, y = rand(n), rand(n)
    x[3] = float("nan")
    w = torch.linspace(-0.5, 1.5, n)
    outs = {k: torch.empty(n) for k in ("lo", "hi", "both", "mix", "half")}
    # XLA's CPU backend contracts the multiply-add of lerp into an FMA: 1 ulp.
    got = three_ways(clamp_lerp, {"x": x, "y": y, "w": w, **outs}, tuple(outs), rtol=2e-7, atol=0)
    np.testing.assert_array_equal(got["lo"], torch.clamp(x, min=-0.5).numpy())
    np.testing.assert_array_equal(got["hi"], torch.clamp(x, max=0.25).numpy())
    np.testing.assert_array_equal(got["both"], torch.clamp(x, -0.5, 0.5).numpy())
    # torch.lerp's CPU kernel may fuse the multiply-add; the formula is the same.
    np.testing.assert_allclose(got["mix"], torch.lerp(x, y, w).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["half"], torch.lerp(x, y, 0.75).numpy(), rtol=1e-6, atol=1e-6)


@intent.kernel
def lerp_ends(x: f32[N], y: f32[N], out: Out[f32[N]]):
    for i in parallel(N):
        out[i] = intent.lerp(x[i], y[i], f32(1.0))


def test_lerp_with_weight_one_gives_the_end_exactly() -> None:
    x, y = rand(16) * 1e8, rand(16) * 1e-8
    got = three_ways(lerp_ends, {"x": x, "y": y, "out": torch.empty(16)}, ("out",), rtol=0, atol=0)
    np.testing.assert_array_equal(got["out"], y.numpy())


def test_clamp_needs_a_bound(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for i in parallel(N):
                out[i] = intent.clamp(x[i])
        """, "intent.clamp(x[i])", "intent.clamp() needs at least one of `lo` and `hi`")


def test_lerp_needs_floats(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: i32[N], out: Out[f32[N]]):
            for i in parallel(N):
                out[i] = intent.lerp(x[i], 1.0, 0.5)
        """, "x[i], 1.0", "intent.lerp needs float operands, got an i32 value")


# ---------------------------------------------------------------------------------------------- masked gathers


@intent.kernel
def shifted(x: f32[N], idx: i64[N], out: Out[f32[N]], out2: Out[f32[M, N]], table: f32[M, K]):
    for i in parallel(N):
        out[i] = intent.gather(x, idx[i], fill=-float("inf"))
    for r, c in parallel(M, N):
        out2[r, c] = intent.gather(table, (r, idx[c]), fill=7)


@pytest.mark.parametrize("checks", [False, True])
def test_gather_with_fill_reads_the_fill_outside(checks: bool) -> None:
    n, m, k = 12, 3, 5
    x, table = rand(n), rand(m, k)
    idx = torch.arange(n) * 2 - 5
    args = {"x": x, "idx": idx, "out": torch.empty(n), "out2": torch.empty(m, n), "table": table}
    got = three_ways(shifted.with_options(checks=checks), args, ("out", "out2"), rtol=0, atol=0)
    inside = (idx >= 0) & (idx < n)
    want = torch.where(inside, x[idx.clamp(0, n - 1)], -float("inf"))
    np.testing.assert_array_equal(got["out"], want.numpy())
    inside = (idx >= 0) & (idx < k)
    want2 = torch.where(inside[None, :], table[:, idx.clamp(0, k - 1)], 7.0)
    np.testing.assert_array_equal(got["out2"], want2.numpy())


def test_gather_text_form_round_trips() -> None:
    from kir.text import parse_kernel, print_kernel

    text = print_kernel(shifted.kir)
    assert "fill=-inf masked=true" in text
    assert parse_kernel(text, "shifted.kir") == shifted.kir


def test_gather_arity_error(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], idx: i64[N], out: Out[f32[N]]):
            for i in parallel(N):
                out[i] = intent.gather(x, idx[i], fill=0.0)
        """, "idx[i], fill", "intent.gather(x, ...): 1 indices for a rank-2 tensor [M, N]; give one integer index per "
                             "axis")


def test_gather_fill_must_fit(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: i8[N], idx: i64[N], out: Out[i8[N]]):
            for i in parallel(N):
                out[i] = intent.gather(x, idx[i], fill=300)
        """, "300", "intent.gather(): the fill 300 does not fit i8")


# ---------------------------------------------------------------------------------------------- optional tensors


@intent.kernel
def norm(x: f32[M, N], out: Out[f32[M, N]], w: f32[N] | None = None, b: f32[N] | None = None):
    for i in parallel(M):
        r = x[i, :]
        y = r * intent.rsqrt(intent.mean(r * r) + 1e-6)
        if w is not None:
            y = y * w[:]
        if b is None:
            out[i, :] = y
        else:
            out[i, :] = y + b[:]


@pytest.mark.parametrize("given", ["", "w", "b", "wb"])
def test_optional_tensor_parameters_one_specialisation_each(given: str) -> None:
    x, w, b = rand(4, 8), rand(8), rand(8)
    args: dict[str, object] = {"x": x, "out": torch.empty(4, 8)}
    want = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    if "w" in given:
        args["w"] = w
        want = want * w
    if "b" in given:
        args["b"] = b
        want = want + b
    got = three_ways(norm, args, ("out",), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["out"], want.numpy(), rtol=1e-5, atol=1e-6)
    kernel = norm.specialize({**args, **{n: None for n in "wb" if n not in given}})
    assert [p.name for p in kernel.params] == ["x", "out", *given]


def test_optional_absent_passed_as_none_positionally() -> None:
    x, b = rand(2, 4), rand(4)
    out = torch.empty(2, 4)
    norm(x, out, None, b)
    want = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) + b
    torch.testing.assert_close(out, want)
    assert [p.name for p in norm.kir.params] == ["x", "out", "w", "b"]  # the generic kernel has them all


@intent.kernel
def scale_inout(x: InOut[f32[N]] | None, y: Out[f32[N]]):
    for i in parallel(N):
        if x is not None:
            x[i] = x[i] * 2.0
            y[i] = x[i]
        else:
            y[i] = 0.0


def test_optional_inout() -> None:
    x, y = rand(5), torch.empty(5)
    want = x * 2
    scale_inout(x, y)
    torch.testing.assert_close(x, want)
    torch.testing.assert_close(y, want)
    scale_inout(None, y)
    assert (y == 0).all()


def test_optional_errors(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]] | None = None):
            for i in parallel(N):
                out[i] = x[i]
        """, "Out[f32[N]] | None", "parameter `out`: an Out[...] parameter cannot be optional; an output that may be "
                                   "absent is a separate kernel (or an InOut[...] | None)")
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]], w: f32[N] = None):
            for i in parallel(N):
                out[i] = x[i]
        """, "f32[N] = None", "parameter `w` has a default value; only intent.const[...] parameters and optional "
                              "tensors (`f32[N] | None = None`) may have defaults")
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for i in parallel(N):
                if x is x:
                    out[i] = x[i]
        """, "x is x", "`is` compares with None only (`w is None` for an optional tensor parameter); compare values "
                       "with == != < <= > >=")


def test_absent_parameter_used_in_the_body(tmp_path) -> None:
    from tests.frontend_support import kernel

    k = kernel(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]], w: f32[N] | None = None):
            for i in parallel(N):
                out[i] = x[i] * w[i]
        """)
    with pytest.raises(DiagnosticError) as info:
        k(rand(3), torch.empty(3))
    assert info.value.message == ("None (the optional parameter `w` is absent in this specialisation: test `if w is "
                                  "not None:` before using it) cannot be indexed")
    with pytest.raises(IntentError) as info2:
        k.specialize_with(absent=["x"])
    assert "parameter `x` of k is not an optional tensor (`f32[N] | None`), so it cannot be absent" in str(info2.value)


# ---------------------------------------------------------------------------------------------- oracle sums


@intent.kernel
def column_sums(x: f32[M, N], out: Out[f32[N]]):
    for j in parallel(N):
        out[j] = intent.sum(x[:, j])


@intent.kernel
def all_sum(x: f32[M, N], out: Out[f32[()]]):
    for _ in parallel(1):
        out[()] = intent.sum(x[:, :])


@intent.kernel
def segment_sums(values: f32[M], offsets: i64[K], out: Out[f32[K - 1]]):
    for s in parallel(K - 1):
        out[s] = intent.sum(values[offsets[s]:offsets[s + 1]])


def _pairwise_bound(x: np.ndarray) -> float:
    """A pairwise float32 sum of n terms is within about eps * log2(n) * sum|x| of the exact value."""
    n = x.size
    return float(np.finfo(np.float32).eps * max(1.0, np.log2(n)) * np.abs(x.astype(np.float64)).sum())


def test_oracle_float_sums_are_pairwise() -> None:
    import oracle

    rng = np.random.default_rng(1)
    x = (rng.random((1536, 2)) * 1000).astype(np.float32)
    exact = x.astype(np.float64).sum(axis=0)
    seq = np.zeros(2, np.float32)
    for row in x:
        seq = seq + row
    got = oracle.run(column_sums.kir, {"x": x, "out": np.empty(2, np.float32)})["out"]
    err = np.abs(got.astype(np.float64) - exact)
    assert (err <= np.abs(seq.astype(np.float64) - exact) / 4).all(), (err, seq - exact)
    assert (err <= _pairwise_bound(x[:, 0]) / 8).all()
    total = oracle.run(all_sum.kir, {"x": x, "out": np.empty((), np.float32)})["out"]
    assert abs(float(total) - exact.sum()) <= _pairwise_bound(x) / 8
    values = x[:, 0].copy()
    offsets = np.array([0, 1536], np.int64)
    seg = oracle.run(segment_sums.kir, {"values": values, "offsets": offsets, "out": np.empty(1, np.float32)})
    assert abs(float(seg["out"][0]) - exact[0]) == pytest.approx(float(err[0]), abs=1e-2)


# ---------------------------------------------------------------------------------------------- refinements


@intent.kernel(requires=[N % 2 == 0])
def halves(x: f32[M, N], y: Out[f32[M, N // 2]]):
    for i in parallel(M):
        y[i, :] = x[i, 0:N // 2] + x[i, N // 2:N]


def test_equal_extents_under_requires_share_a_tile() -> None:
    """`N - N // 2` and `N // 2` are one extent under `N % 2 == 0`: explain() and the physical verifier accept
    the kernel (they used to report `[fragment-types] ... cannot broadcast`)."""
    import physical

    x = rand(3, 8)
    got = three_ways(halves, {"x": x, "y": torch.empty(3, 4)}, ("y",), rtol=0, atol=0)
    np.testing.assert_array_equal(got["y"], (x[:, :4] + x[:, 4:]).numpy())
    assert halves.explain(x, torch.empty(3, 4)).startswith("kernel halves: one launch")
    physical.lower(halves.kir, verify=True)
