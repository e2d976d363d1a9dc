"""Jagged folds as region folds per column (kir/frontend/jagged_folds.py): inside `for s in parallel(S)`,
`out[s, :] = intent.mean(values[b:e, :], axis=0)` is `for c in parallel(D): out[s, c] = intent.mean(values[b:e,
c])`, so the nest is one (segments, columns) workset whose long segments split over programs (split-segments;
beside jagged scans, scan-folds) instead of an ordered loop over every segment's rows. Bodies with other effects,
folds stored through other work, and folds over a kept axis keep the ordered loop. Launches are sized as for a
132-multiprocessor device so that the long segment's pieces are several."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import torch

import intent
import physical
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, i32, i64, parallel, pred
from kir import control as KCt
from kir.region import RegionFold
from physical.lowering import run_pipeline
from tests.breadth_support import three_ways
from tests.frontend_support import diagnostic
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.perf_reduce_kernels import welford_combine

J, JE, JD, JK = dims("J JE JD JK")

SKEWED = [2, 0, 3000, 3, 0, 257]  # a long segment, two empty ones


@intent.kernel(requires=[JE >= 0, J >= 0])  # no rows, no segments
def stats(values: f32[JE, JD], offsets: i64[J + 1], total: Out[f32[J, JD]], top: Out[f32[J, JD]],
          low: Out[f32[J, JD]], avg: Out[f32[J, JD]], prod: Out[f32[J, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        total[s, :] = intent.sum(values[b:e, :], axis=0)
        top[s, :] = intent.max(values[b:e, :], axis=0)
        low[s] = intent.min(values[b:e, :], axis=-2)  # the kept axis left implicit, the axis counted from the end
        avg[s, :] = intent.mean(values[b:e, :], axis=0)
        prod[s, :] = intent.prod(1.0 + values[b:e, :] * 0.001, axis=0)


@intent.kernel
def positions(values: f32[JE, JD], offsets: i64[J + 1], hi: Out[i64[J, JD]], lo: Out[i64[J, JD]],
              some: Out[pred[J, JD]]):
    for s in parallel(J):
        hi[s, :] = intent.argmax(values[offsets[s]:offsets[s + 1], :], axis=0)
        lo[s, :] = intent.argmin(values[offsets[s]:offsets[s + 1], :], axis=0)
        some[s, :] = intent.any(values[offsets[s]:offsets[s + 1], :] > 2.0, axis=0)


@intent.combine
def add(a, b):
    return a + b


@intent.kernel
def custom(values: f32[JE, JD], weights: f32[JE, JD], offsets: i64[J + 1], scale: f32, wsum: Out[f32[J, JD]],
           mean: Out[f32[J, JD]], m2: Out[f32[J, JD]], n: Out[f32[J, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        wsum[s, :] = intent.reduce(intent.abs(values[b:e, :]) * weights[b:e, :] * scale, add, axis=0, identity=0.0)
        mean[s, :], m2[s, :], n[s, :] = intent.reduce(
            (values[b:e, :], intent.zeros_like(values[b:e, :]), intent.ones_like(values[b:e, :])), welford_combine,
            axis=0, identity=(0.0, 0.0, 0.0))


@intent.kernel
def jagged_mean(values: f32[JE, JD], offsets: i64[J + 1], out: Out[f32[J, JD]], run: Out[f32[JE, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        out[s, :] = intent.mean(values[b:e, :], axis=0)
        run[b:e, :] = intent.cumsum(values[b:e, :], axis=0)


@intent.kernel
def cube(values: i32[JE, JD, JK], offsets: i32[J + 1], top: Out[i32[J, JD, JK]], total: Out[i32[J, JD, JK]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        top[s, :, :] = intent.max(values[b:e, :, :], axis=0)
        total[s] = intent.sum(values[b:e, :, :], axis=0)


@intent.kernel
def plane(values: i32[JE, JD, JK], offsets: i32[J + 1], top: Out[i32[J, JK, JD]]):
    for s in parallel(J):
        top[s, 0, :] = intent.max(values[offsets[s]:offsets[s + 1], :, 0], axis=0)


def offsets_of(lengths: list[int], dtype=torch.int64) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=dtype)


def segments(off: torch.Tensor) -> list[tuple[int, int]]:
    o = off.tolist()
    return list(zip(o, o[1:]))


def splits(kernel, args) -> int:
    with simulated_multiprocessors(132):
        return int(re.findall(r"SPLITS_0 = (\d+)", kernel.explain(*args.values()))[-1])


def spread(kernel, args) -> bool:
    """Whether a long segment's work spreads over programs: pieces of the shapes' split, or helper programs past
    the blocks (bounds of one offsets tensor: the data decides, SPLITS_0 = 1)."""
    with simulated_multiprocessors(132):
        text = kernel.explain(*args.values())
    helpers = re.findall(r"HELPERS_0 = (\d+)", text)
    return int(re.findall(r"SPLITS_0 = (\d+)", text)[-1]) > 1 or bool(helpers) and int(helpers[-1]) > 1


def per_segment(v: torch.Tensor, off: torch.Tensor, f, empty: float) -> np.ndarray:
    rows = [f(v[b:e]) if e > b else torch.full(v.shape[1:], empty, dtype=v.dtype) for b, e in segments(off)]
    return torch.stack(rows).numpy() if rows else np.zeros((0, *v.shape[1:]))


def stats_args(lengths: list[int], width: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    off = offsets_of(lengths)
    n, s = int(off[-1]), len(lengths)
    return {"values": torch.randn(n, width, generator=g), "offsets": off,
            **{k: torch.zeros(s, width) for k in ("total", "top", "low", "avg", "prod")}}


def check_stats(args: dict[str, torch.Tensor], got: dict[str, np.ndarray]) -> None:
    v, off = args["values"].double(), args["offsets"]
    tol = {"rtol": 1e-4, "atol": 1e-3}
    np.testing.assert_allclose(got["total"], per_segment(v, off, lambda x: x.sum(0), 0.0), **tol)
    np.testing.assert_allclose(got["top"], per_segment(v, off, lambda x: x.amax(0), -np.inf), **tol)
    np.testing.assert_allclose(got["low"], per_segment(v, off, lambda x: x.amin(0), np.inf), **tol)
    np.testing.assert_allclose(got["avg"], per_segment(v, off, lambda x: x.mean(0), np.nan), equal_nan=True, **tol)
    np.testing.assert_allclose(got["prod"], per_segment(v, off, lambda x: (1.0 + x * 0.001).prod(0), 1.0), **tol)


def test_a_jagged_fold_is_a_region_fold_per_column() -> None:
    """No ordered loop over the rows: the folds are region folds inside a `parallel` over the kept axis, and the
    nest is one workset over (segments, columns) that split-segments splits, the verifier checking every pass."""
    args = stats_args([4, 0, 5], 3)
    k = stats.specialize(args)
    ops = list(k.walk())
    assert sum(isinstance(op, RegionFold) for op in ops) >= 5 and not any(isinstance(op, KCt.For) for op in ops)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert [str(d) for d in program.groups[0].domain] == ["J", "JD"] and "split-segments" in names


@pytest.mark.parametrize("sms", [132, 1])
def test_a_long_segment_splits_over_programs(sms: int, isolated_cache) -> None:  # noqa: F811
    """Skewed and empty segments, odd width: every fold kind agrees with torch and the oracle, on a device whose
    long segment is cut into several pieces and on one of a single multiprocessor."""
    args = stats_args(SKEWED, 3, seed=1)
    assert spread(stats, args)
    with simulated_multiprocessors(sms):
        got = three_ways(stats, args, ("total", "top", "low", "avg", "prod"), rtol=1e-4, atol=1e-3)
    check_stats(args, got)


@pytest.mark.parametrize("lengths,width", [([5000], 1), ([0, 0, 0], 5), ([], 3), ([0], 1)],
                         ids=["one-segment-one-column", "all-empty", "no-segments", "no-rows"])
def test_edge_shapes(lengths: list[int], width: int, isolated_cache) -> None:  # noqa: F811
    args = stats_args(lengths, width, seed=2)
    with simulated_multiprocessors(132):
        got = three_ways(stats, args, ("total", "top", "low", "avg", "prod"), rtol=1e-4, atol=1e-3)
    check_stats(args, got)
    if lengths == [5000]:
        assert spread(stats, args)


def test_split_folds_are_bitwise_reproducible(isolated_cache) -> None:  # noqa: F811
    args = stats_args(SKEWED, 5, seed=3)
    outs = []
    with simulated_multiprocessors(132):
        for _ in range(2):
            run = {k: v.clone() for k, v in args.items()}
            stats(**run)
            outs.append([run[k].numpy().tobytes() for k in ("total", "top", "low", "avg", "prod")])
    assert outs[0] == outs[1]


def test_positions_and_conditions_per_column(isolated_cache) -> None:  # noqa: F811
    """argmax/argmin (the row in the segment, the first extreme, NaN the extreme, -1 when empty) and any: region
    folds per column too, which split and balance like any other (tests/test_split_positions.py)."""
    g = torch.Generator().manual_seed(4)
    off = offsets_of([3, 0, 1, 700, 2])
    v = torch.randn(int(off[-1]), 3, generator=g)
    v[5, 1] = v[9, 1] = 10.0          # a tie in the long segment: the first row wins
    v[6, 2] = v[8, 2] = float("nan")  # NaN is the extreme for both
    args = {"values": v, "offsets": off, "hi": torch.zeros(5, 3, dtype=torch.int64),
            "lo": torch.zeros(5, 3, dtype=torch.int64), "some": torch.zeros(5, 3, dtype=torch.bool)}
    k = positions.specialize(args)
    assert not any(isinstance(op, KCt.For) for op in k.walk())
    assert [str(d) for d in run_pipeline(physical.construct(k), verify_with=k)[0].groups[0].domain] == ["J", "JD"]
    with simulated_multiprocessors(132):
        got = three_ways(positions, args, ("hi", "lo", "some"), rtol=0, atol=0)
    for s, (b, e) in enumerate(segments(off)):
        for c in range(3):
            col = v[b:e, c]
            nans = col.isnan().nonzero()
            want_hi = -1 if b == e else int(nans[0]) if len(nans) else int((col == col.max()).nonzero()[0])
            want_lo = -1 if b == e else int(nans[0]) if len(nans) else int((col == col.min()).nonzero()[0])
            assert (got["hi"][s, c], got["lo"][s, c]) == (want_hi, want_lo), (s, c)
            assert bool(got["some"][s, c]) == bool((col > 2.0).any())
    assert got["hi"][3, 1] == 1 and got["hi"][3, 2] == 2


def test_custom_combines_split(isolated_cache) -> None:  # noqa: F811
    """A one-value combine over an elementwise expression of two subregions and a scalar, and Welford's three
    values stored into three targets: per column, split."""
    g = torch.Generator().manual_seed(5)
    off = offsets_of(SKEWED)
    n = int(off[-1])
    args = {"values": torch.randn(n, 3, generator=g) + 4.0, "weights": torch.rand(n, 3, generator=g),
            "offsets": off, "scale": 0.5, **{k: torch.zeros(6, 3) for k in ("wsum", "mean", "m2", "n")}}
    k = custom.specialize(args)
    assert not any(isinstance(op, KCt.For) for op in k.walk())
    assert "split-segments" in run_pipeline(physical.construct(k), verify_with=k)[1]
    assert spread(custom, args)
    with simulated_multiprocessors(132):
        got = three_ways(custom, args, ("wsum", "mean", "m2", "n"), rtol=1e-4, atol=1e-3)
    v, w = args["values"].double(), args["weights"].double()
    tol = {"rtol": 1e-4, "atol": 1e-3}
    np.testing.assert_allclose(got["wsum"], np.stack([(v[b:e].abs() * w[b:e] * 0.5).sum(0).numpy()
                                                      for b, e in segments(off)]), **tol)
    np.testing.assert_allclose(got["n"], np.stack([np.full(3, e - b) for b, e in segments(off)]), **tol)
    for s, (b, e) in enumerate(segments(off)):
        if e > b:
            np.testing.assert_allclose(got["mean"][s], v[b:e].mean(0).numpy(), **tol)
            np.testing.assert_allclose(got["m2"][s] / (e - b), v[b:e].var(0, unbiased=False).numpy(), **tol)


def test_a_fold_beside_a_scan_is_one_workset_that_splits(isolated_cache) -> None:  # noqa: F811
    """The `jagged_mean` body of docs/language.md: the fold's and the scan's column loops fuse into one (J, JD)
    workset; scan-folds splits the scan and folds the mean on the same pieces."""
    g = torch.Generator().manual_seed(6)
    off = offsets_of(SKEWED)
    n = int(off[-1])
    args = {"values": torch.randn(n, 3, generator=g), "offsets": off, "out": torch.zeros(6, 3),
            "run": torch.zeros(n, 3)}
    k = jagged_mean.specialize(args)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert [str(d) for d in program.groups[0].domain] == ["J", "JD"] and "split-region-scans" in names
    with simulated_multiprocessors(132):
        plan = jagged_mean.explain(*args.values())
        assert "the region folds beside the scans" in plan and int(re.findall(r"SPLITS_0 = (\d+)", plan)[-1]) > 1
        got = three_ways(jagged_mean, args, ("out", "run"), rtol=1e-4, atol=1e-3)
        again = {k: v.clone() for k, v in args.items()}
        jagged_mean(**again)
    assert again["out"].numpy().tobytes() == got["out"].tobytes()
    assert again["run"].numpy().tobytes() == got["run"].tobytes()
    v = args["values"].double()
    np.testing.assert_allclose(got["out"], per_segment(v, off, lambda x: x.mean(0), np.nan), rtol=1e-4, atol=1e-3,
                               equal_nan=True)
    np.testing.assert_allclose(got["run"], torch.cat([v[b:e].cumsum(0) for b, e in segments(off)]).numpy(),
                               rtol=1e-4, atol=1e-3)


def test_two_kept_axes_and_a_point_fold_exactly(isolated_cache) -> None:  # noqa: F811
    """`values[b:e, :, :]` folds per (column, column) point; a point among the kept axes (`values[b:e, :, 0]`)
    stays a point; the target's whole axes take the columns in order."""
    g = torch.Generator().manual_seed(7)
    off = offsets_of([3000, 0, 5], torch.int32)
    n = int(off[-1])
    v = torch.randint(-100, 100, (n, 2, 3), generator=g, dtype=torch.int32)
    args = {"values": v, "offsets": off, "top": torch.zeros(3, 2, 3, dtype=torch.int32),
            "total": torch.zeros(3, 2, 3, dtype=torch.int32)}
    flat = {"values": v, "offsets": off, "top": torch.zeros(3, 3, 2, dtype=torch.int32)}
    for kernel, a, domain in ((cube, args, ["J", "JD", "JK"]), (plane, flat, ["J", "JD"])):
        k = kernel.specialize(a)
        assert not any(isinstance(op, KCt.For) for op in k.walk())
        program, names = run_pipeline(physical.construct(k), verify_with=k)
        assert [str(d) for d in program.groups[0].domain] == domain and "split-segments" in names
        assert spread(kernel, a)
    with simulated_multiprocessors(132):
        got = three_ways(cube, args, ("top", "total"), rtol=0, atol=0)
        got_plane = three_ways(plane, flat, ("top",), rtol=0, atol=0)
    low = torch.iinfo(torch.int32).min
    for s, (b, e) in enumerate(segments(off)):
        want = v[b:e].amax(0) if e > b else torch.full((2, 3), low, dtype=torch.int32)
        assert (got["top"][s] == want.numpy()).all() and (got_plane["top"][s, 0] == want[:, 0].numpy()).all()
        assert (got["total"][s] == v[b:e].sum(0).numpy()).all()


@intent.kernel
def centred(values: f32[JE, JD], offsets: i64[J + 1], out: Out[f32[J, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        out[s, :] = intent.sum(values[b:e, :], axis=0) / intent.maximum(e - b, 1).to(f32) \
            - intent.min(values[b:e, :], axis=0) * 0.5


def test_an_expression_of_folds_and_scalars_is_stored_per_column(isolated_cache) -> None:  # noqa: F811
    """`intent.sum(...) / n - intent.min(...) * 0.5`: each fold of the stored expression is the column's region
    fold, the scalars are the same in every column; the folds split."""
    g = torch.Generator().manual_seed(9)
    off = offsets_of(SKEWED)
    args = {"values": torch.randn(int(off[-1]), 3, generator=g), "offsets": off, "out": torch.zeros(6, 3)}
    k = centred.specialize(args)
    assert not any(isinstance(op, KCt.For) for op in k.walk())
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert [str(d) for d in program.groups[0].domain] == ["J", "JD"] and "split-segments" in names
    assert spread(centred, args)
    with simulated_multiprocessors(132):
        got = three_ways(centred, args, ("out",), rtol=1e-4, atol=1e-3)
    v = args["values"].double()
    want = [v[b:e].sum(0) / max(e - b, 1) - (v[b:e].amin(0) if e > b else torch.full((3,), np.inf)) * 0.5
            for b, e in segments(off)]
    np.testing.assert_allclose(got["out"], torch.stack(want).numpy(), rtol=1e-4, atol=1e-3)


@intent.kernel
def with_count(values: f32[JE, JD], offsets: i64[J + 1], out: Out[f32[J, JD]], count: Out[i64[J]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        count[s] = e - b
        out[s, :] = intent.mean(values[b:e, :], axis=0)


@intent.kernel
def through_work(values: f32[JE, JD], offsets: i64[J + 1], out: Out[f32[J, JD]], twice: Out[f32[J, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        out[s, :] = intent.sum(values[b:e, :], axis=0)
        m = intent.max(values[b:e, :], axis=0)
        twice[s, :] = m + m


@intent.kernel
def by_row(values: f32[JE, JD], offsets: i64[J + 1], row: f32[JD], out: Out[f32[J, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        out[s, :] = intent.sum(values[b:e, :] * row, axis=0)


@intent.kernel
def two_domains(values: f32[JE, JD], offsets: i64[J + 1], w: f32[JE, JK], out: Out[f32[J, JD]],
                first: Out[f32[J, JK]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        out[s, :] = intent.sum(values[b:e, :], axis=0)
        first[s, :] = intent.max(w[b:e, :], axis=0)


@pytest.mark.parametrize("kernel", [with_count, through_work, by_row, two_domains], ids=lambda k: k.__name__)
def test_other_bodies_keep_the_ordered_loop(kernel) -> None:
    """A body with another store (the column loop could not join the segments' workset), a fold held in a name, a
    fold of a kept-axis vector, a fold beside a fold of other columns:
    the ordered loop over the rows, as before, with the segments a workset."""
    g = torch.Generator().manual_seed(8)
    off = offsets_of([3, 0, 40, 2])
    v = torch.randn(45, 3, generator=g)
    args = {"values": v, "offsets": off}
    if kernel is by_row:
        args["row"] = torch.randn(3, generator=g)
    if kernel is two_domains:
        args["w"] = v[:, :2].contiguous()
    args["out"] = torch.zeros(4, 3)
    outs = ("out",)
    if kernel is with_count:
        args["count"], outs = torch.zeros(4, dtype=torch.int64), ("out", "count")
    if kernel is through_work:
        args["twice"], outs = torch.zeros(4, 3), ("out", "twice")
    if kernel is two_domains:
        args["first"], outs = torch.zeros(4, 2), ("out", "first")
    k = kernel.specialize(args)
    assert any(isinstance(op, KCt.For) for op in k.walk())
    program, _ = run_pipeline(physical.construct(k), verify_with=k)
    assert [str(d) for d in program.groups[0].domain] == ["J"]
    got = three_ways(kernel, args, outs, rtol=1e-5, atol=1e-5)
    vd = v.double()
    if kernel is with_count:
        np.testing.assert_allclose(got["out"], per_segment(vd, off, lambda x: x.mean(0), np.nan), rtol=1e-5,
                                   atol=1e-5, equal_nan=True)
        assert got["count"].tolist() == [3, 0, 40, 2]
    elif kernel is through_work:
        np.testing.assert_allclose(got["out"], per_segment(vd, off, lambda x: x.sum(0), 0.0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["twice"], per_segment(vd, off, lambda x: x.amax(0) * 2, -np.inf), rtol=1e-5)
    elif kernel is two_domains:
        np.testing.assert_allclose(got["out"], per_segment(vd, off, lambda x: x.sum(0), 0.0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["first"], per_segment(vd[:, :2], off, lambda x: x.amax(0), -np.inf),
                                   rtol=1e-5, atol=1e-5)
    else:
        row = args["row"].double()
        np.testing.assert_allclose(got["out"], per_segment(vd, off, lambda x: (x * row).sum(0), 0.0), rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize("call,name", [
    ("intent.sum(values[offsets[s]:offsets[s + 1], :], axis=1)", "sum"),
    ("intent.mean(values[offsets[s]:offsets[s + 1], :], axis=0, keepdims=True)", "mean"),
    ("intent.max(values[offsets[s]:offsets[s + 1], :])", "max"),
])
def test_folds_over_a_kept_axis_are_refused(tmp_path, call: str, name: str) -> None:
    diagnostic(tmp_path, f"""
        @intent.kernel
        def k(values: f32[E, N], offsets: i64[S + 1], out: Out[f32[S, N]]):
            for s in parallel(S):
                out[s, :] = {call}
        """, f"intent.{name}(values", f"intent.{name}: a jagged subregion `x[b:e, :]` is reduced along its "
                                      f"data-dependent axis: write axis=0 (no keepdims)")


@pytest.mark.parametrize("call,message", [
    ("intent.mean(values[offsets[s]:offsets[s + 1], :], axis=0)",
     "intent.mean of i32 values; convert first, e.g. intent.mean(x[b:e].to(f32))"),
    ("intent.any(values[offsets[s]:offsets[s + 1], :], axis=0)",
     "intent.any() needs conditions (pred values), got i32; compare first, e.g. intent.any(x != 0)"),
])
def test_a_column_fold_reports_at_the_call(tmp_path, call: str, message: str) -> None:
    """The region fold of each column checks its values as any region fold does, at the author's call."""
    diagnostic(tmp_path, f"""
        @intent.kernel
        def k(values: i32[E, N], offsets: i64[S + 1], out: Out[f32[S, N]]):
            for s in parallel(S):
                out[s, :] = {call}
        """, call.split("[")[0], message)


def test_a_column_store_reports_at_the_statement(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(values: f16[E, N], offsets: i64[S + 1], out: Out[f32[S, N]]):
            for s in parallel(S):
                out[s, :] = intent.sum(values[offsets[s]:offsets[s + 1], :], axis=0)
        """, "out[s, :]", "store to `out`: the value is f16 but f32 is expected; KIR never converts implicitly: "
                          "write `x.to(f32)`")


JB = dims("JB")


@intent.kernel
def batched(values: f32[JB, JE, JD], offsets: i64[JB, J + 1], spread: Out[f32[JB, J, JD]]):
    for t, s in parallel(JB, J):
        b, e = offsets[t, s], offsets[t, s + 1]
        spread[t, s, :] = intent.max(values[t, b:e, :], axis=0) - intent.min(values[t, b:e, :], axis=0)


def test_a_batch_of_jagged_tensors_in_a_two_axis_parallel(isolated_cache) -> None:  # noqa: F811
    """A point before the data-dependent axis (`values[t, b:e, :]`) and a two-axis `parallel`: one (JB, J, JD)
    workset whose long segments split."""
    g = torch.Generator().manual_seed(10)
    off = torch.tensor([[0, 3, 3, 2000], [0, 1, 1500, 2000]])
    v = torch.randn(2, 2000, 3, generator=g)
    args = {"values": v, "offsets": off, "spread": torch.zeros(2, 3, 3)}
    k = batched.specialize(args)
    assert not any(isinstance(op, KCt.For) for op in k.walk())
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert [str(d) for d in program.groups[0].domain] == ["JB", "J", "JD"] and "split-segments" in names
    assert splits(batched, args) > 1
    with simulated_multiprocessors(132):
        got = three_ways(batched, args, ("spread",), rtol=1e-5, atol=1e-5)
    for t in range(2):
        want = per_segment(v[t].double(), off[t], lambda x: x.amax(0) - x.amin(0), -np.inf)
        np.testing.assert_allclose(got["spread"][t], want, rtol=1e-5, atol=1e-5)
