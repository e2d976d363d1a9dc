"""Top-level region scans: `out[b:e, :] = intent.cumsum(values[b:e, :], axis=0)` with the bounds kernel arguments
(no enclosing `parallel`). The frontend writes it as `for c in parallel(D): out[b:e, c] = ...` (a region scan per
column); every column scans the same span, so construction proves the columns independent from the write map
alone (`instances_independent`: the span is one element range every instance shares, the column differs), and
the long span splits over programs by look-back (split-region-scans) in one launch. The 1-D form
`out[b:e] = intent.cumsum(x[b:e])` is one instance whose span splits the same way.

Launches are sized as for a 132-multiprocessor device; the held tile is lowered (`INTENT_LOOP_BUDGET`) so that a
span of a few thousand rows is several pieces and the interpreter stays quick."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import intent
import physical
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, i32, i64, parallel
from kir import control as KCt
from physical.analysis import instances_independent
from physical.lowering import run_pipeline
from physical.verifier import check
from tests.breadth_support import three_ways
from tests.launch_fixtures import isolated_cache, small_tile  # noqa: F401  (fixtures)

TE, TD, TS = dims("TE TD TS")


@intent.kernel
def running(values: f32[TE, TD], b: i64, e: i64, out: Out[f32[TE, TD]]):
    out[b:e, :] = intent.cumsum(values[b:e, :], axis=0)


@intent.kernel
def backwards(values: f32[TE, TD], b: i64, e: i64, out: Out[f32[TE, TD]]):
    out[b:e, :] = intent.cumsum(values[b:e, :], axis=0, reverse=True, exclusive=True)


@intent.kernel
def before(values: f32[TE, TD], b: i64, e: i64, out: Out[f32[TE, TD]]):
    out[b:e, :] = intent.cumsum(values[b:e, :], axis=0, exclusive=True)


@intent.kernel
def highest(values: i32[TE, TD], b: i32, e: i32, out: Out[i32[TE, TD]]):
    out[b:e, :] = intent.cummax(values[b:e, :], axis=0)


@intent.kernel
def from_offsets(values: f32[TE, TD], marks: i64[3], out: Out[f32[TE, TD]]):
    out[marks[0]:marks[2], :] = intent.cumsum(values[marks[0]:marks[2], :], axis=0)


@intent.kernel
def flat(x: f32[TE], b: i64, e: i64, out: Out[f32[TE]]):
    out[b:e] = intent.cumsum(x[b:e])


@intent.kernel
def flat_back(x: f32[TE], b: i64, e: i64, out: Out[f32[TE]]):
    out[b:e] = intent.cumsum(x[b:e], reverse=True, exclusive=True)


@intent.kernel
def flat_max(x: i32[TE], b: i64, e: i64, out: Out[i32[TE]]):
    out[b:e] = intent.cummax(x[b:e])


def splits(kernel, args) -> int:
    return int(re.findall(r"SPLITS_0 = (\d+)", kernel.explain(*args.values()))[-1])


def expected(name: str, v: np.ndarray, b: int, e: int, out: np.ndarray) -> np.ndarray:
    """The oracle of the tests, in float64 (or exact integers): `out` with rows [b, e) scanned."""
    want = out.astype(np.float64 if v.dtype.kind == "f" else np.int64)
    part = v[b:e].astype(want.dtype)
    if name == "running":
        want[b:e] = np.cumsum(part, axis=0)
    elif name == "backwards":
        want[b:e] = np.cumsum(part[::-1], axis=0)[::-1] - part
    elif name == "before":
        want[b:e] = np.cumsum(part, axis=0) - part
    else:
        want[b:e] = np.maximum.accumulate(part, axis=0) if e > b else part
    return want


KERNELS = {"running": running, "backwards": backwards, "before": before, "highest": highest}

# (kernel, rows, columns, b, e): spans that split over several programs at the lowered held tile (256 rows), an
# empty span, a span from the first row and one to the last, odd and single columns
CASES = [("running", 1500, 5, 7, 1430), ("running", 1200, 1, 0, 1200), ("running", 700, 3, 9, 9),
         ("backwards", 1300, 3, 0, 1111), ("before", 1100, 2, 3, 1100), ("highest", 1400, 7, 1, 1399)]


def inputs(name: str, rows: int, cols: int, b: int, e: int, seed: int = 0) -> dict[str, object]:
    g = torch.Generator().manual_seed(seed)
    if name == "highest":
        values = torch.randint(-1000, 1000, (rows, cols), generator=g, dtype=torch.int32)
        out = torch.full((rows, cols), -7, dtype=torch.int32)
    else:
        values, out = torch.randn(rows, cols, generator=g), torch.full((rows, cols), 0.5)
    return {"values": values, "b": b, "e": e, "out": out}


def test_the_columns_of_a_top_level_region_scan_are_independent() -> None:
    """The frontend writes a `parallel` over the kept axis whose region scans share their bounds: construction
    proves the instances independent (the column differs, the rows are one range), and the plan is a workset over
    the columns split by split-region-scans, the physical program verified after every pass."""
    args = inputs("running", 40, 3, 2, 30)
    k = running.specialize(args)
    par = next(op for op in k.body.ops if isinstance(op, KCt.Parallel))
    assert instances_independent(k, par) == (True, "")
    constructed = physical.construct(k)
    assert check(constructed, k) == []
    program, names = run_pipeline(constructed, verify_with=k)
    assert names[-1] == "split-region-scans"
    assert [str(d) for d in program.groups[0].domain] == ["TD"] and not program.groups[0].serial
    with simulated_multiprocessors(132):
        text = running.explain(*args.values())
    assert "group 0 (parallel at test_toplevel_region_scans.py:35): workset over (TD)" in text
    assert "across programs: cdiv(TD, BLOCK_I0) * SPLITS_0 programs" in text
    assert "performance notes:\n  none" in text
    # every column scans the same rows: a program takes a run of neighbouring columns (whole sectors of each row)
    assert re.findall(r"BLOCK_I0 = (\d+)", text)[-1] == "4"


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_a_top_level_region_scan_splits_and_agrees_with_the_oracle(case, small_tile) -> None:  # noqa: F811
    name, rows, cols, b, e = case
    k, args = KERNELS[name], inputs(name, rows, cols, b, e)
    with simulated_multiprocessors(132):
        # a piece is a run of whole 256-row chunks: never more pieces than the span's axis has chunks
        assert 1 < splits(k, args) <= -(-rows // 256)
        got = three_ways(k, args, ("out",), rtol=1e-4, atol=1e-3) if name != "highest" else \
            three_ways(k, args, ("out",), rtol=0, atol=0)
    want = expected(name, args["values"].numpy(), b, e, args["out"].numpy())
    np.testing.assert_allclose(got["out"], want, rtol=1e-4 if name != "highest" else 0,
                               atol=1e-3 if name != "highest" else 0)


def test_a_split_top_level_scan_is_bitwise_reproducible(small_tile) -> None:  # noqa: F811
    """The pieces' aggregates meet in slot order: a second launch gives the same bits."""
    args = inputs("running", 1600, 4, 3, 1597, seed=4)
    with simulated_multiprocessors(132):
        assert splits(running, args) > 1
        first = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
        second = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
        running(**first)
        running(**second)
    assert first["out"].numpy().tobytes() == second["out"].numpy().tobytes()


def test_bounds_read_from_a_tensor_inside_the_loop_are_shared(small_tile) -> None:  # noqa: F811
    """`out[marks[0]:marks[2], :]`: each column's instance loads the bounds itself, from a tensor the loop does
    not write, at the same indices (not two neighbouring offsets of a segment): every instance sees the same span,
    so the columns are independent too."""
    g = torch.Generator().manual_seed(6)
    args = {"values": torch.randn(1300, 2, generator=g), "marks": torch.tensor([5, 700, 1290]),
            "out": torch.zeros(1300, 2)}
    k = from_offsets.specialize(args)
    par = next(op for op in k.body.ops if isinstance(op, KCt.Parallel))
    assert instances_independent(k, par) == (True, "")
    with simulated_multiprocessors(132):
        assert splits(from_offsets, args) > 1
        got = three_ways(from_offsets, args, ("out",), rtol=1e-4, atol=1e-3)
    want = expected("running", args["values"].numpy(), 5, 1290, args["out"].numpy())
    np.testing.assert_allclose(got["out"], want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("kernel", [flat, flat_back, flat_max], ids=["cumsum", "reverse-exclusive", "cummax"])
def test_the_one_dimensional_form_splits_too(kernel, small_tile) -> None:  # noqa: F811
    g = torch.Generator().manual_seed(7)
    n, b, e = 2000, 11, 1990
    x = torch.randint(-50, 50, (n,), generator=g, dtype=torch.int32) if kernel is flat_max else \
        torch.randn(n, generator=g)
    args = {"x": x, "b": b, "e": e, "out": torch.zeros(n, dtype=x.dtype)}
    k = kernel.specialize(args)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert names[-1] == "split-region-scans" and program.groups[0].single_instance
    exact = kernel is flat_max
    with simulated_multiprocessors(132):
        assert splits(kernel, args) > 1
        got = three_ways(kernel, args, ("out",), rtol=0 if exact else 1e-4, atol=0 if exact else 1e-3)
    name = {flat: "running", flat_back: "backwards", flat_max: "highest"}[kernel]
    want = expected(name, x.numpy()[:, None], b, e, args["out"].numpy()[:, None])[:, 0]
    np.testing.assert_allclose(got["out"], want, rtol=0 if exact else 1e-4, atol=0 if exact else 1e-3)


def test_one_column_loads_and_stores_whole_sectors() -> None:
    """A span of a single column: the instance's column enters the addresses as `flat % TD`, which Triton folds to
    0 at TD = 1 (a constant), so the rows of a chunk are contiguous and 16-byte aligned in its analysis and the
    sm_90 loads and stores are 128 bits wide. The bare program-derived flat index had no divisibility Triton could
    see: every access was 32 bits. The program still verifies after every pass."""
    from bench.ptx import global_accesses  # (imported here: the kernels above keep their line numbers)

    args = inputs("running", 4096, 1, 0, 4096)
    k = running.specialize(args)
    run_pipeline(physical.construct(k), verify_with=k)
    with simulated_multiprocessors(132):
        source = running.triton_source(*args.values())
        ptx = running.ptx(*args.values(), arch=90)
    assert re.search(r"v_column = v_flat % v_total\n", source)
    assert "v_flat[:, None] * p_values_stride_1" not in source and "v_column[:, None] * p_values_stride_1" in source
    widths = global_accesses(ptx)
    assert widths.count("ld", 128) > 0 and widths.count("st", 128) > 0, dict(widths.widths)
    # only the workspace's flags and slots and the bounds stay scalar-wide; the column's values are all 128-bit
    assert widths.count("ld", 128) >= widths.count("ld", 32), dict(widths.widths)


@intent.kernel
def every_one_alike(x: f32[TE], y: f32[TS], b: i64, e: i64, out: Out[f32[TE]]):
    for _s in parallel(TS):
        out[b:e] = intent.cumsum(x[b:e])


@intent.kernel
def next_column(b: i64, e: i64, out: Out[f32[TE, TD]]):
    for c in parallel(TD - 1):
        out[b:e, c] = intent.cumsum(out[b:e, c + 1], axis=0)


@intent.kernel
def in_place(b: i64, e: i64, out: Out[f32[TE, TD]]):
    for c in parallel(TD):
        out[b:e, c] = intent.cumsum(out[b:e, c], axis=0)


@intent.kernel
def at_row(x: f32[TD], k: i64, out: Out[f32[TE, TD]]):
    for c in parallel(TD):
        out[k, c] = x[c]


def _independent(kernel, args) -> tuple[bool, str]:
    k = kernel.specialize(args)
    return instances_independent(k, next(op for op in k.body.ops if isinstance(op, KCt.Parallel)))


def test_shared_spans_that_collide_are_named() -> None:
    """Instances scanning one shared span of one column write the same elements, and a scan reading the column
    its neighbour writes reads another instance's write: the note names the accesses and the instances."""
    ok, why = _independent(every_one_alike, {"x": torch.zeros(5), "y": torch.zeros(3), "b": 1, "e": 4,
                                             "out": torch.zeros(5)})
    assert not ok and re.fullmatch(r"region_scan at \S+test_toplevel_region_scans\.py:\d+:\d+ in instance \(_s=0\) "
                                   r"and region_scan at \S+:\d+:\d+ in instance \(_s=1\) write the same element "
                                   r"\(with TS=2\)", why), why
    ok, why = _independent(next_column, {"b": 1, "e": 4, "out": torch.zeros(5, 3)})
    assert not ok and re.fullmatch(r"region_scan at \S+:\d+:\d+ in instance \(c=0\) reads the element that "
                                   r"region_scan at \S+:\d+:\d+ in instance \(c=1\) writes \(with TD=3\)", why), why
    assert _independent(in_place, {"b": 1, "e": 4, "out": torch.zeros(5, 3)}) == (True, "")
    # a kernel scalar is one value for every instance: a row chosen by it, written per column, is a workset
    assert _independent(at_row, {"x": torch.zeros(3), "k": 1, "out": torch.zeros(4, 3)}) == (True, "")
