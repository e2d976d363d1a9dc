"""Jagged scans as region scans (kir/frontend/region_loop.py `scan_per_column`): `out[b:e, :] =
intent.cumsum(values[b:e, :], axis=0)` is a region scan per point of the kept axes (`for c in parallel(D)`), so the
segments' columns run at once and a long segment splits over programs (split-region-scans) instead of one ordered
loop over every segment's rows in one program. Launches are sized as for a 132-multiprocessor device; the held tile
is lowered (`INTENT_LOOP_BUDGET`) so that the long segment's pieces are several and the interpreter stays quick."""

from __future__ import annotations

import dataclasses
import itertools
import re

import numpy as np
import pytest
import torch

import intent
import physical
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, i32, i64, parallel
from kir import control as KCt
from kir.region import RegionScan
from physical import ops as P
from physical.lowering import PIPELINE, run_pipeline
from physical.verifier import check
from tests.breadth_support import three_ways
from tests.launch_fixtures import isolated_cache, small_tile  # noqa: F401  (fixtures)

J, JE, JD, JK = dims("J JE JD JK")

LENGTHS = [2, 0, 4000, 3, 0, 257]


@intent.kernel
def running(values: f32[JE, JD], offsets: i64[J + 1], run: Out[f32[JE, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        run[b:e, :] = intent.cumsum(values[b:e, :], axis=0)


@intent.kernel
def backwards(values: f32[JE, JD], offsets: i64[J + 1], back: Out[f32[JE, JD]]):
    for s in parallel(J):
        back[offsets[s]:offsets[s + 1], :] = intent.cumsum(values[offsets[s]:offsets[s + 1], :], axis=0,
                                                          reverse=True, exclusive=True)


@intent.kernel
def cube(values: i32[JE, JD, JK], offsets: i32[J + 1], top: Out[i32[JE, JD, JK]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        top[b:e, :, :] = intent.cummax(values[b:e, :, :], axis=0)


def offsets_of(lengths: list[int], dtype=torch.int64) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=dtype)


def segments(off: torch.Tensor) -> list[tuple[int, int]]:
    o = off.tolist()
    return list(zip(o, o[1:]))


def splits(kernel, args) -> int:
    """How many programs a long segment spreads over: SPLITS_0 pieces from the shapes, or HELPERS_0 helper
    programs from the data (balance_region_scan.py, where the offsets decide)."""
    text = kernel.explain(*args.values())
    return max(int(re.findall(rf"{name}_0 = (\d+)", text)[-1]) if f"{name}_0 = " in text else 0
               for name in ("SPLITS", "HELPERS"))


def test_a_jagged_scan_is_a_region_scan_per_column() -> None:
    """The frontend writes the kept axis as a `parallel` loop around a region scan of one column: no ordered loop
    over the rows, and the nest is one workset over (segments, columns)."""
    args = {"values": torch.randn(9, 3), "offsets": offsets_of([4, 0, 5]), "run": torch.zeros(9, 3)}
    k = running.specialize(args)
    ops = list(k.walk())
    assert any(isinstance(op, RegionScan) for op in ops) and not any(isinstance(op, KCt.For) for op in ops)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert names[-1] == "split-region-scans" and [str(d) for d in program.groups[0].domain] == ["J", "JD"]


@pytest.mark.parametrize("sms", [132, 1])
def test_one_long_segment_spreads_over_programs(sms: int, small_tile) -> None:  # noqa: F811
    g = torch.Generator().manual_seed(1)
    off = offsets_of(LENGTHS)
    n = int(off[-1])
    args = {"values": torch.randn(n, 4, generator=g), "offsets": off, "run": torch.zeros(n, 4)}
    with simulated_multiprocessors(sms):
        assert splits(running, args) > 1
        got = three_ways(running, args, ("run",), rtol=1e-4, atol=1e-3)
    v = args["values"].double()
    want = torch.cat([v[b:e].cumsum(0) for b, e in segments(off)]).numpy()
    np.testing.assert_allclose(got["run"], want, rtol=1e-4, atol=1e-3)


def test_reverse_exclusive_jagged_scans_split_and_are_reproducible(small_tile) -> None:  # noqa: F811
    """A reverse jagged scan (an ordered loop could not write it) splits too; a second launch gives the same
    bits."""
    g = torch.Generator().manual_seed(2)
    off = offsets_of(LENGTHS)
    n = int(off[-1])
    args = {"values": torch.randn(n, 3, generator=g), "offsets": off, "back": torch.zeros(n, 3)}
    with simulated_multiprocessors(132):
        assert splits(backwards, args) > 1
        got = three_ways(backwards, args, ("back",), rtol=1e-4, atol=1e-3)
        again = {k: v.clone() for k, v in args.items()}
        backwards(**again)
    assert again["back"].numpy().tobytes() == got["back"].tobytes()
    v = args["values"].double()
    want = torch.cat([v[b:e].flip(0).cumsum(0).flip(0) - v[b:e] for b, e in segments(off)]).numpy()
    np.testing.assert_allclose(got["back"], want, rtol=1e-4, atol=1e-3)


def test_two_kept_axes_scan_per_point_exactly(small_tile) -> None:  # noqa: F811
    g = torch.Generator().manual_seed(3)
    off = offsets_of([3000, 0, 5], torch.int32)
    n = int(off[-1])
    args = {"values": torch.randint(-100, 100, (n, 2, 3), generator=g, dtype=torch.int32), "offsets": off,
            "top": torch.zeros(n, 2, 3, dtype=torch.int32)}
    with simulated_multiprocessors(132):
        assert splits(cube, args) > 1
        got = three_ways(cube, args, ("top",), rtol=0, atol=0)
    want = torch.cat([args["values"][b:e].cummax(0).values for b, e in segments(off)]).numpy()
    assert (got["top"] == want).all()


def test_a_held_tile_written_at_the_segments_start_is_refused() -> None:
    """Mutation: the held tile's positions start at the segment's begin, not its piece's: every program of the
    block writes the segment's first elements (the column coordinate, the instance's own point, is no excuse)."""
    args = {"values": torch.randn(50, 4), "offsets": offsets_of([2, 38, 10]), "run": torch.zeros(50, 4)}
    k = running.specialize(args)
    p = physical.lower(k)
    g = p.groups[0]
    ops = list(g.body.ops)
    begin = next(op.results[0] for op in ops if isinstance(op, P.Load) and p.buffer(op.access.buffer).name == "offsets")
    held = [n for n, op in enumerate(ops) if isinstance(op, P.Broadcast) and op.x.name == "range_begin"
            and op.results[0].type.tile]
    assert len(held) == 2  # the held tile's load and its store
    ops[held[-1]] = dataclasses.replace(ops[held[-1]], x=begin)
    new = dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops)))
    found = [str(v) for v in check(p.replace(groups=(new,)), k) if v.rule == "split-effects"]
    assert len(found) == 1 and re.fullmatch(
        r"\[split-effects\] store \(from region_scan at test_jagged_region_scans\.py:\d+\) writes run in every "
        r"program that shares its block: a group split over programs writes outside its workspace only as the "
        r"holder of the last ticket", found[0]), found


@intent.kernel
def by_row(values: f32[JE, J], offsets: i64[JD + 1], run: Out[f32[JE, J]]):
    for s in parallel(J):
        for d in parallel(JD):
            run[offsets[d]:offsets[d + 1], s] = intent.cumsum(values[offsets[d]:offsets[d + 1], s], axis=0)


def test_a_program_takes_a_run_of_a_segments_columns() -> None:
    """The columns of one segment scan equally long subregions over neighbouring elements: a program takes at
    least a run of them (BLOCK_I0 = next_pow2(JD)), even where spreading single instances would fill the device.
    Where the subregion follows the innermost index, each instance keeps a program of its own."""
    from physical.passes.enlarge import shared_along_inner_axis

    off = offsets_of([2, 0, 40, 3])
    args = {"values": torch.randn(45, 4), "offsets": off, "run": torch.zeros(45, 4)}
    with simulated_multiprocessors(132):
        assert re.findall(r"BLOCK_I0 = (\d+)", running.explain(*args.values()))[-1] == "4"
    # the group as the ownership pass sees it (the split passes after it rewrite the bounds per program)
    passes = list(itertools.takewhile(lambda p: p.name != "split-region-scans", PIPELINE))

    def group_of(kernel, a):
        return run_pipeline(physical.construct(kernel.specialize(a)), passes=passes)[0].groups[0]

    assert shared_along_inner_axis(group_of(running, args))
    across = {"values": torch.randn(45, 2), "offsets": off, "run": torch.zeros(45, 2)}
    assert not shared_along_inner_axis(group_of(by_row, across))
    with simulated_multiprocessors(132):
        assert re.findall(r"BLOCK_I0 = (\d+)", by_row.explain(*across.values()))[-1] == "1"
        three_ways(by_row, across, ("run",), rtol=1e-5, atol=1e-5)


@intent.kernel
def two_scans(values: f32[JE, JD], offsets: i64[J + 1], run: Out[f32[JE, JD]], best: Out[f32[JE, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        run[b:e, :] = intent.cumsum(values[b:e, :], axis=0)
        best[b:e, :] = intent.cummax(values[b:e, :], axis=0, exclusive=True)


@intent.kernel
def chained(values: f32[JE, JD], offsets: i64[J + 1], run: Out[f32[JE, JD]], twice: Out[f32[JE, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        run[b:e, :] = intent.cumsum(values[b:e, :], axis=0)
        twice[b:e, :] = intent.cumsum(run[b:e, :], axis=0)


def test_several_jagged_scans_of_one_body_are_one_workset(small_tile) -> None:  # noqa: F811
    """Two jagged scans of a segment are two `parallel(JD)` loops over one domain touching no buffer the other
    writes: construction fuses them (each instance runs both), so the nest is one (J, JD) workset that splits.
    A scan of what the other writes keeps the loops apart (the body runs in order)."""
    g = torch.Generator().manual_seed(5)
    off = offsets_of([2, 0, 6000, 3])
    n = int(off[-1])
    args = {"values": torch.randn(n, 2, generator=g), "offsets": off, "run": torch.zeros(n, 2),
            "best": torch.zeros(n, 2)}
    program, _ = run_pipeline(physical.construct(two_scans.specialize(args)))
    assert [str(d) for d in program.groups[0].domain] == ["J", "JD"]
    with simulated_multiprocessors(132):
        assert splits(two_scans, args) > 1
        got = three_ways(two_scans, args, ("run", "best"), rtol=1e-4, atol=1e-3)
    v = args["values"].double()
    np.testing.assert_allclose(got["run"], torch.cat([v[b:e].cumsum(0) for b, e in segments(off)]).numpy(),
                               rtol=1e-4, atol=1e-3)
    small = {"values": torch.randn(9, 2, generator=g), "offsets": offsets_of([4, 0, 5]), "run": torch.zeros(9, 2),
             "twice": torch.zeros(9, 2)}
    k = chained.specialize(small)
    assert physical.construct(k).groups[0].single_instance
    got = three_ways(chained, small, ("run", "twice"), rtol=1e-5, atol=1e-5)
    w = small["values"].double()
    want = torch.cat([w[b:e].cumsum(0).cumsum(0) for b, e in segments(small["offsets"])]).numpy()
    np.testing.assert_allclose(got["twice"], want, rtol=1e-5, atol=1e-5)
