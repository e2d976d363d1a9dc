"""Positions and conditions split and balance (physical/passes/partials.py): argmax/argmin region folds combine
their pieces' (value, position) pairs, the position counted from the subregion's begin and NO_POSITION where a
piece holds no member, in piece order with the fold's own tie rule (the first position among equal values, NaN the
extreme, the first NaN); any/all pieces combine their pred partials, held in their slots as bytes. Over the shape
split's pieces (split-segments), the helpers' chunks (balance-segments, by the data) and the pieces of a scan
beside them (scan-folds). Launches are sized as for a 132-multiprocessor device so that small sizes still split."""

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
from physical import ops as P
from physical.lowering import run_pipeline
from physical.passes.split_region_scan import plan_region_scans
from physical.passes.split_segments import SegmentPlan, plan_segments
from tests.breadth_support import three_ways
from tests.launch_fixtures import isolated_cache, small_tile  # noqa: F401  (fixtures)

S, E, J, JE, JD = dims("S E J JE JD")


@intent.kernel
def positions(values: f32[E], offsets: i64[S + 1], hi: Out[i64[S]], lo: Out[i64[S]], some: Out[pred[S]],
              every: Out[pred[S]]):
    for s in parallel(S):
        b, e = offsets[s], offsets[s + 1]
        hi[s] = intent.argmax(values[b:e])
        lo[s] = intent.argmin(values[b:e])
        some[s] = intent.any(values[b:e] > 2.0)
        every[s] = intent.all(values[b:e] > -2.0)


@intent.kernel
def int_positions(values: i32[E], offsets: i32[S + 1], hi: Out[i64[S]], lo: Out[i64[S]]):
    for s in parallel(S):
        hi[s] = intent.argmax(values[offsets[s]:offsets[s + 1]])
        lo[s] = intent.argmin(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def two_bounds(values: f32[E], starts: i64[S], ends: i64[S], hi: Out[i64[S]], some: Out[pred[S]]):
    for s in parallel(S):
        hi[s] = intent.argmax(values[starts[s]:ends[s]])
        some[s] = intent.any(values[starts[s]:ends[s]] > 2.0)


@intent.kernel
def beside_scan(values: f32[E], offsets: i64[S + 1], run: Out[f32[E]], hi: Out[i64[S]], every: Out[pred[S]]):
    for s in parallel(S):
        b, e = offsets[s], offsets[s + 1]
        run[b:e] = intent.cumsum(values[b:e])
        hi[s] = intent.argmax(values[b:e])
        every[s] = intent.all(values[b:e] > -3.0)


@intent.kernel
def jagged(values: f32[JE, JD], offsets: i64[J + 1], hi: Out[i64[J, JD]], lo: Out[i64[J, JD]],
           some: Out[pred[J, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        hi[s, :] = intent.argmax(values[b:e, :], axis=0)
        lo[s, :] = intent.argmin(values[b:e, :], axis=0)
        some[s, :] = intent.any(values[b:e, :] > 2.5, axis=0)


OUTS = ("hi", "lo", "some", "every")
# the shape split: few segments, one huge; empty ones, boundaries at a chunk's edge (256) and past it
FEW = [0, 40000, 1, 255, 256, 257, 0, 3, 512, 2, 0, 1, 701, 5, 0, 256]


def offsets_of(lengths: list[int], dtype=torch.int64) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=dtype)


def many(big: int = 24000, n: int = 40, at: int = 17) -> list[int]:
    """Many short segments and one huge one: the shape split gives one program per block, helpers balance."""
    lengths = [3] * n
    lengths[at] = big
    lengths[5] = lengths[30] = 0
    lengths[9] = 1
    return lengths


def first(col: torch.Tensor, largest: bool) -> int:
    """The oracle's rule, written independently: -1 when empty, the first NaN, else the first extreme."""
    if len(col) == 0:
        return -1
    nans = col.isnan().nonzero()
    if len(nans):
        return int(nans[0])
    best = col.max() if largest else col.min()
    return int((col == best).nonzero()[0])


def reference(args: dict[str, torch.Tensor]) -> dict[str, list]:
    v, o = args["values"], args["offsets"].tolist()
    segs = [v[b:e] for b, e in zip(o, o[1:])]
    return {"hi": [first(x, True) for x in segs], "lo": [first(x, False) for x in segs],
            "some": [bool((x > 2.0).any()) for x in segs], "every": [bool((x > -2.0).all()) for x in segs]}


def args_for(lengths: list[int], seed: int, marks=None) -> dict[str, torch.Tensor]:
    """Values with ties of the extremes across pieces; `marks(values, segment begins)` places more."""
    g = torch.Generator().manual_seed(seed)
    off = offsets_of(lengths)
    n = len(lengths)
    values = torch.randn(max(int(off[-1]), 1), generator=g)
    if marks is not None:
        marks(values, off.tolist())
    return {"values": values, "offsets": off, "hi": torch.zeros(n, dtype=torch.int64),
            "lo": torch.zeros(n, dtype=torch.int64), "some": torch.zeros(n, dtype=torch.bool),
            "every": torch.zeros(n, dtype=torch.bool)}


def constexprs(kernel, args) -> dict[str, int]:
    text = kernel.explain(*args.values())
    line = next(x for x in text.splitlines() if x.strip().startswith("constexprs: "))  # at these shapes
    return {k: int(v) for k, v in re.findall(r"(\w+) = (\d+)", line)}


def agree(kernel, args, outs=OUTS) -> dict[str, np.ndarray]:
    """Launcher, oracle and torch's StableHLO bit for bit, and the rule written independently."""
    got = three_ways(kernel, args, outs, rtol=0, atol=0, stablehlo=False)
    want = reference(args)
    for k in outs:
        assert got[k].tolist() == want[k], k
    return got


def few_marks(v: torch.Tensor, o: list[int]) -> None:
    b = o[1]  # the huge segment: a tie of its maximum in its first and its last piece, minima likewise
    v[b + 100] = v[b + 39000] = 9.0
    v[b + 39001] = v[b + 7] = -9.0
    v[o[12]:o[13]] = float("-inf")  # 701 values over three pieces, all -inf: the first wins both
    v[o[8]:o[9]] = 1.5             # all equal: position 0
    v[o[5] + 256] = float("nan")    # 257 values: the NaN alone in the last piece
    v[o[4]:o[5]] = 3.0             # any and all over a whole piece


def test_few_segments_spread_and_agree_with_ties_infinities_and_nan() -> None:
    """Few segments, one huge: the launch spreads it (the shapes' pieces, or the data's helpers where the offsets
    are one tensor's, as here; bounds of two tensors take the pieces below)."""
    args = args_for(FEW, 1, few_marks)
    with simulated_multiprocessors(132):
        c = constexprs(positions, args)
        assert c["SPLITS_0"] > 2 or c["HELPERS_0"] > 2
        got = agree(positions, args)
    assert got["hi"][1] == 100 and got["lo"][1] == 7 and got["hi"][12] == got["lo"][12] == 0
    assert got["hi"][5] == got["lo"][5] == 256 and got["hi"][0] == -1 and bool(got["every"][0])


def test_nan_in_several_pieces_gives_the_first() -> None:
    def marks(v: torch.Tensor, o: list[int]) -> None:
        v[o[1] + 30000] = v[o[1] + 39990] = float("nan")
        v[o[1] + 20000] = float("inf")

    args = args_for(FEW, 2, marks)
    with simulated_multiprocessors(132):
        got = agree(positions, args)
    assert got["hi"][1] == got["lo"][1] == 30000


def many_marks(v: torch.Tensor, o: list[int]) -> None:
    b, e = o[17], o[18]
    v[b + 3] = v[b + (e - b) * 3 // 8] = v[e - 2] = 7.0  # head, a helper's chunk and the tail tie: the head wins
    v[b + (e - b) // 2] = v[e - 1] = -7.0                 # a chunk and the tail: the chunk wins
    v[o[20]:o[21]] = 0.25                         # a short segment all equal


@pytest.mark.parametrize("marks", [many_marks, None], ids=["ties", "random"])
def test_helpers_balance_positions_and_conditions(marks) -> None:
    args = args_for(many(), 3, marks)
    with simulated_multiprocessors(132):
        c = constexprs(positions, args)
        assert c["SPLITS_0"] == 1 and c["HELPERS_0"] > 3  # the shape split gives nothing; the data does
        got = agree(positions, args)
    if marks is not None:
        assert got["hi"][17] == 3 and got["lo"][17] == 12000 and got["hi"][20] == 0


def test_a_segment_all_equal_or_all_nan_over_helpers_gives_its_first_position() -> None:
    """Every participant's partial ties (or every one is NaN): the head's position 0 must win each combine."""
    for fill in (float("-inf"), float("nan"), 0.5):
        def marks(v: torch.Tensor, o: list[int], fill=fill) -> None:
            v[o[17]:o[18]] = fill

        args = args_for(many(big=9000), 4, marks)
        with simulated_multiprocessors(132):
            assert constexprs(positions, args)["HELPERS_0"] > 1
            got = agree(positions, args)
        assert got["hi"][17] == got["lo"][17] == 0


def test_integer_extremes_tie_with_the_identity() -> None:
    """An i32 segment all at the type's lowest (argmax's identity value) or highest (argmin's): its position 0,
    not the identity's -1, over helpers and over the shape split."""
    for lengths in (many(big=9000), FEW):
        g = torch.Generator().manual_seed(5)
        off = offsets_of(lengths, torch.int32)
        values = torch.randint(-50, 50, (int(off[-1]),), generator=g, dtype=torch.int32)
        big = max(range(len(lengths)), key=lambda k: lengths[k])
        values[int(off[big]):int(off[big]) + 4000] = torch.iinfo(torch.int32).min
        values[int(off[big]) + 4000:int(off[big + 1])] = torch.iinfo(torch.int32).max
        n = len(lengths)
        args = {"values": values, "offsets": off, "hi": torch.zeros(n, dtype=torch.int64),
                "lo": torch.zeros(n, dtype=torch.int64)}
        with simulated_multiprocessors(132):
            got = three_ways(int_positions, args, ("hi", "lo"), rtol=0, atol=0, stablehlo=False)
        o = off.tolist()
        assert got["hi"].tolist() == [first(values[b:e], True) for b, e in zip(o, o[1:])]
        assert got["lo"].tolist() == [first(values[b:e], False) for b, e in zip(o, o[1:])]
        assert got["hi"][big] == 4000 and got["lo"][big] == 0


def test_results_are_bitwise_identical_run_to_run() -> None:
    for lengths, marks in ((FEW, few_marks), (many(big=12000), many_marks)):
        args = args_for(lengths, 6, marks)
        runs = []
        with simulated_multiprocessors(132):
            for _ in range(3):
                out = {k: v.clone() for k, v in args.items()}
                positions(**out)
                runs.append(tuple(out[k].numpy().tobytes() for k in OUTS))
        assert runs[0] == runs[1] == runs[2]


def test_the_interpreter_runs_the_direct_form() -> None:
    args = args_for(many(big=5000), 7, many_marks)
    with simulated_multiprocessors(0):
        c = constexprs(positions, args)
        assert c["SPLITS_0"] == 1 and c["HELPERS_0"] == 0
        agree(positions, args)


def test_the_plan_verifies_after_every_pass() -> None:
    args = args_for(many(), 8)
    k = positions.specialize(args)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert "split-segments" in names
    ops = list(program.walk())
    assert sum(isinstance(o, P.HelperIndex) for o in ops) == 1 and sum(isinstance(o, P.Ticket) for o in ops) == 1
    # the any/all partials sit in byte slots; the positions' pairs in (value, i64) slots
    ws = {b.name: b.dtype.name for b in program.buffers if b.storage is not None and b.name != "arrivals"}
    assert {ws[f"{kind}{j}"] for kind in ("partial", "tail", "chunk") for j in (2, 3)} == {"i8"}
    assert {ws[f"{kind}{j}_1"] for kind in ("partial", "tail", "chunk") for j in (0, 1)} == {"i64"}
    plan = plan_segments(physical.construct(k), physical.construct(k).groups[0])
    assert isinstance(plan, SegmentPlan) and len(plan.folds) == 4


def test_bounds_from_two_tensors_split_by_the_shapes() -> None:
    """Bounds that are not one tensor's offsets: the shape split's pieces alone (no helpers)."""
    lengths = FEW
    off = offsets_of(lengths)
    starts, ends = off[:-1].clone(), off[1:].clone()
    ends[3] = starts[3] - 1  # reversed: empty
    g = torch.Generator().manual_seed(9)
    values = torch.randn(int(off[-1]), generator=g)
    values[int(off[1]) + 5] = values[int(off[1]) + 38000] = 8.0
    n = len(lengths)
    args = {"values": values, "starts": starts, "ends": ends, "hi": torch.zeros(n, dtype=torch.int64),
            "some": torch.zeros(n, dtype=torch.bool)}
    k = two_bounds.specialize(args)
    program, _ = run_pipeline(physical.construct(k), verify_with=k)
    assert not any(isinstance(op, P.HelperIndex) for op in program.walk())
    with simulated_multiprocessors(132):
        assert constexprs(two_bounds, args)["SPLITS_0"] > 2
        got = three_ways(two_bounds, args, ("hi", "some"), rtol=0, atol=0, stablehlo=False)
    segs = [values[b:e] if e > b else values[:0] for b, e in zip(starts.tolist(), ends.tolist())]
    assert got["hi"].tolist() == [first(x, True) for x in segs] and got["hi"][1] == 5
    assert got["some"].tolist() == [bool((x > 2.0).any()) for x in segs]


def test_positions_beside_a_scan_ride_on_its_pieces(small_tile) -> None:  # noqa: F811
    """scan-folds: the argmax and all of a segment beside its running sum fold the scan's pieces."""
    lengths = [0, 6000, 1, 255, 256, 257, 0, 3, 2, 0, 700, 5]
    g = torch.Generator().manual_seed(10)
    off = offsets_of(lengths)
    values = torch.randn(int(off[-1]), generator=g)
    values[int(off[1]) + 40] = values[int(off[1]) + 5900] = 9.0
    values[int(off[10]):int(off[11])] = float("-inf")
    n = len(lengths)
    args = {"values": values, "offsets": off, "run": torch.zeros(int(off[-1])),
            "hi": torch.zeros(n, dtype=torch.int64), "every": torch.zeros(n, dtype=torch.bool)}
    k = beside_scan.specialize(args)
    assert not isinstance(plan_region_scans(physical.construct(k), physical.construct(k).groups[0]), str)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert "split-region-scans" in names
    with simulated_multiprocessors(132):
        assert constexprs(beside_scan, args)["SPLITS_0"] > 1
        got = three_ways(beside_scan, args, ("hi", "every"), rtol=0, atol=0, stablehlo=False)
    o = off.tolist()
    segs = [values[b:e] for b, e in zip(o, o[1:])]
    assert got["hi"].tolist() == [first(x, True) for x in segs] and got["hi"][1] == 40 and got["hi"][10] == 0
    assert got["every"].tolist() == [bool((x > -3.0).all()) for x in segs]


@pytest.mark.parametrize(("width", "at"), [(4, 17), (3, 2)])
def test_jagged_positions_split_per_column_over_helpers(width: int, at: int) -> None:
    """`out[s, :] = intent.argmax(values[b:e, :], axis=0)`: helpers fold a chunk of rows for every column of the
    segment (width 3 at segment 2: its columns span two blocks, which fold it whole)."""
    lengths = [7] * 47
    lengths[at] = 9000
    lengths[1] = lengths[44] = 0
    g = torch.Generator().manual_seed(width + at)
    off = offsets_of(lengths)
    values = torch.randn(int(off[-1]), width, generator=g)
    b = int(off[at])
    values[b + 2, 0] = values[b + 8000, 0] = 9.0             # a tie across participants: the first row wins
    values[b + 4000, 1] = values[b + 8990, 1] = float("nan")  # NaN in a chunk and in the tail
    values[b:b + 9000, width - 1] = float("-inf")             # a column all -inf: row 0
    n = len(lengths)
    args = {"values": values, "offsets": off, "hi": torch.zeros(n, width, dtype=torch.int64),
            "lo": torch.zeros(n, width, dtype=torch.int64), "some": torch.zeros(n, width, dtype=torch.bool)}
    with simulated_multiprocessors(132):
        c = constexprs(jagged, args)
        assert c["SPLITS_0"] == 1 and c["HELPERS_0"] > 1
        got = three_ways(jagged, args, ("hi", "lo", "some"), rtol=0, atol=0, stablehlo=False)
    o = off.tolist()
    for s, (lo_, hi_) in enumerate(zip(o, o[1:])):
        for col in range(width):
            x = values[lo_:hi_, col]
            assert (got["hi"][s, col], got["lo"][s, col]) == (first(x, True), first(x, False)), (s, col)
            assert bool(got["some"][s, col]) == bool((x > 2.5).any())
    assert got["hi"][at, 0] == 2 and got["hi"][at, 1] == got["lo"][at, 1] == 4000 and got["hi"][at, width - 1] == 0
