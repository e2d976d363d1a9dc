"""Balanced segments by the data (physical/passes/balance_segments.py): helper programs past the blocks fold equal
chunks of the folded tensor for the subregion that holds each, found by binary search over the offsets; the last
participant folds head, chunks and tail in order. Small sizes still balance: the launches are sized as for a
132-multiprocessor device, where the shape split gives one program per block (many subregions)."""

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
from intent import Out, dims, f32, i64, parallel
from physical import ops as P
from physical.launch_expr import DEVICE_SMS, LBin, LConst, lmin
from physical.lowering import run_pipeline
from physical.verifier import check
from tests.breadth_support import three_ways
from tests.mutations import edit

S, E = dims("S E")


@intent.func
def add(p, q):
    return p + q


@intent.func
def latest(p, q):
    return intent.where(q != 0.0, q, p)  # the last nonzero element: order matters


@intent.kernel
def folds(values: f32[E], offsets: i64[S + 1], total: Out[f32[S]], top: Out[f32[S]], low: Out[f32[S]],
          last: Out[f32[S]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        total[s] = intent.sum(values[b:e]) * 2.0
        top[s] = intent.max(values[b:e])
        low[s] = intent.reduce(values[b:e] * values[b:e], add, identity=0.0)
        last[s] = intent.reduce(values[b:e], latest, identity=0.0)


@intent.kernel
def two_bounds(values: f32[E], starts: i64[S], ends: i64[S], out: Out[f32[S]]):
    for s in parallel(S):
        out[s] = intent.sum(values[starts[s]:ends[s]])


OUTS = ("total", "top", "low", "last")
# the line of `total[s] = ...` in `folds` (the verifier names ops by their source line)
STORE_LINE = next(n for n, line in enumerate(open(__file__).read().splitlines(), 1) if "total[s] = intent.sum" in line)


def offsets_of(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int64)


def skewed(big: int = 24000, short: int = 3, n: int = 16, at: int = 7) -> list[int]:
    """One huge subregion among short ones. Each subregion is a block program, which the interpreter runs one by
    one: few of them keep the tests fast, enough that the huge one has neighbours on both sides."""
    lengths = [short] * n
    lengths[at] = big
    lengths[3] = lengths[12] = 0  # empty subregions
    return lengths


def args_for(offsets: torch.Tensor, seed: int, zeros: bool = True) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(max(int(offsets.max()), 1), generator=g)
    if zeros:  # zeros make the last nonzero element depend on where the chunks meet
        values[torch.rand(values.shape, generator=g) < 0.3] = 0.0
    n = len(offsets) - 1
    return {"values": values, "offsets": offsets, **{k: torch.empty(n) for k in OUTS}}


def constexprs(args) -> dict[str, int]:
    text = folds.explain(*args.values())
    line = next(x for x in text.splitlines() if x.strip().startswith("constexprs: "))  # at these shapes
    return {k: int(v) for k, v in re.findall(r"(\w+) = (\d+)", line)}


def reference(args) -> dict[str, np.ndarray]:
    o = args["offsets"].tolist()
    v = args["values"].double()
    out: dict[str, list[float]] = {k: [] for k in OUTS}
    for b, e in zip(o, o[1:]):
        seg = v[max(b, 0):max(min(e, len(v)), 0)] if e > b else v[:0]
        out["total"].append(2 * seg.sum().item())
        out["top"].append(seg.max().item() if len(seg) else -np.inf)
        out["low"].append((seg ** 2).sum().item())
        nz = seg[seg != 0]
        out["last"].append(nz[-1].item() if len(nz) else 0.0)
    return {k: np.array(x) for k, x in out.items()}


def agree(args) -> dict[str, np.ndarray]:
    got = three_ways(folds, args, OUTS, rtol=1e-5, atol=1e-3, stablehlo=False)
    want = reference(args)
    for k in ("total", "low"):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-3)
    assert np.array_equal(got["top"], want["top"].astype(np.float32))
    assert np.array_equal(got["last"], want["last"].astype(np.float32))  # head, chunks, tail in element order
    return got


def test_one_huge_segment_among_many_is_spread_over_helpers() -> None:
    args = args_for(offsets_of(skewed()), 1)
    with simulated_multiprocessors(132):
        c = constexprs(args)
        assert c["SPLITS_0"] == 1 and c["HELPERS_0"] > 3  # the shape split gives nothing; the data does
        agree(args)


def test_results_are_bitwise_identical_run_to_run() -> None:
    """The participants' partials meet in chunk order whoever arrives last; the counters reset themselves, so a
    second launch (its workspace kept, never filled) gives the same bits."""
    args = args_for(offsets_of(skewed(big=12000)), 2)
    runs = []
    with simulated_multiprocessors(132):
        for _ in range(3):
            out = {k: v.clone() for k, v in args.items()}
            folds(**out)
            runs.append(tuple(out[k].numpy().tobytes() for k in OUTS))
    assert runs[0] == runs[1] == runs[2]


def test_all_segments_short_helpers_fold_nothing() -> None:
    lengths = [int(x) for x in torch.randint(0, 400, (48,), generator=torch.Generator().manual_seed(3))]
    args = args_for(offsets_of(lengths), 3)
    with simulated_multiprocessors(132):
        c = constexprs(args)
        assert c["HELPERS_0"] > 1
        chunk = -(-int(args["offsets"][-1]) // (c["HELPERS_0"] * c["BLOCK_C256"])) * c["BLOCK_C256"]
        assert max(lengths) < chunk  # no subregion holds a whole chunk
        agree(args)


def test_segment_boundaries_exactly_on_chunk_boundaries() -> None:
    """Subregions that begin and end on chunk boundaries (no head, no tail), one that ends on one, one that
    begins one position after one, and a run of empty subregions at a boundary."""
    probe = args_for(offsets_of(skewed()), 4)
    with simulated_multiprocessors(132):
        c = constexprs(probe)
        total = int(probe["offsets"][-1])
        chunk = -(-total // (c["HELPERS_0"] * c["BLOCK_C256"])) * c["BLOCK_C256"]
        bounds = [0, 3, chunk, chunk, chunk, 2 * chunk, 2 * chunk + 1, 3 * chunk, 3 * chunk + 5, 4 * chunk, total]
        assert 4 * chunk < total
        n = len(skewed()) - len(bounds) + 1
        offsets = torch.tensor(bounds[:-1] + [bounds[-2] + (total - bounds[-2]) * k // n for k in range(1, n + 1)])
        args = args_for(offsets, 4)
        assert constexprs(args) == c  # the same shapes: the same chunks
        agree(args)


def test_unsorted_offsets_fall_back_to_whole_subregions() -> None:
    """A subregion hands its whole chunks to helpers only when the binary search (monotone whatever the offsets
    hold) gives it both the first and the last of them; otherwise its block folds it whole and no helper joins
    it. Overlapping, reversed and out-of-range subregions keep the oracle's meaning."""
    lengths = skewed()
    offsets = offsets_of(lengths)
    offsets[2], offsets[10] = offsets[10], offsets[2]     # 1 spans the huge one, 2 and 9 are reversed
    offsets[13] = offsets[-1] + 500                        # past the end: 12 clipped, 13 reversed
    offsets[15] = 0                                        # 14 reversed, 15 spans from the start
    args = args_for(offsets, 5)
    with simulated_multiprocessors(132):
        assert constexprs(args)["HELPERS_0"] > 1
        agree(args)


def test_interpreter_has_no_helpers_and_agrees() -> None:
    args = args_for(offsets_of(skewed(big=5000)), 6)
    with simulated_multiprocessors(0):
        assert constexprs(args)["HELPERS_0"] == 0
        agree(args)


def test_bounds_from_two_tensors_keep_the_shape_split_and_say_so() -> None:
    """Helpers need the bounds as offsets[i], offsets[i + 1] of one tensor (the binary search); other bounds keep
    the shape split, and explain names the cliff."""
    n = 3000
    starts = torch.arange(n, dtype=torch.int64) * 3
    ends = starts + 3
    ends[7] = 3 * n
    args = {"values": torch.randn(3 * n), "starts": starts, "ends": ends, "out": torch.empty(n)}
    program = physical.lower(two_bounds.specialize(args))
    assert not any(isinstance(op, P.HelperIndex) for op in program.walk())
    with simulated_multiprocessors(132):
        assert "performance: SPLITS_0 = 1 at these shapes" in two_bounds.explain(*args.values())


def lowered(args):
    k = folds.specialize(args)
    return k, run_pipeline(physical.construct(k), verify_with=k)[0]


@pytest.fixture(scope="module")
def plan():
    """The kernel lowered (verified after every pass) once for the tests of the plan and of the verifier: the
    program depends on the arguments' dtypes only, not on their data."""
    args = args_for(offsets_of(skewed()), 7)
    return args, *lowered(args)


def test_the_plan_verifies_and_explain_shows_it(plan) -> None:
    args, k, program = plan
    ops = list(program.walk())
    assert sum(isinstance(o, P.HelperIndex) for o in ops) == 1 and sum(isinstance(o, P.Ticket) for o in ops) == 1
    assert sum(isinstance(o, P.While) for o in ops) == 3  # the helper's search and each lane's two
    helpers = program.constexpr("HELPERS_0")
    many, few = {"S": 65536, "E": 1 << 21, "BLOCK_I0": 16}, {"S": 64, "E": 1 << 21, "BLOCK_I0": 1}
    assert program.constexpr("SPLITS_0").evaluate({**many, DEVICE_SMS: 132}) == 1
    assert helpers.evaluate({**many, DEVICE_SMS: 132}) > 132
    assert helpers.evaluate({**many, DEVICE_SMS: 0}) == 0  # the interpreter
    # few segments: the data decides as well (the shapes would cut every segment alike, the huge one too)
    assert program.constexpr("SPLITS_0").evaluate({**few, DEVICE_SMS: 132}) == 1
    assert helpers.evaluate({**few, DEVICE_SMS: 132}) > 132
    tiny = {"S": 2, "E": 4000, "BLOCK_I0": 1, DEVICE_SMS: 132}  # no chunk for a helper: the shapes split
    assert helpers.evaluate(tiny) == 0 and program.constexpr("SPLITS_0").evaluate(tiny) > 1
    with simulated_multiprocessors(132):
        plan = folds.explain(*args.values())
    assert "balanced by the data: HELPERS_0 helper programs past the blocks" in plan
    assert "folds head, chunk slots in chunk order, tail with each fold's combine" in plan
    assert "a subregion with one participant stores its result at once (no workspace traffic)" in plan
    assert re.search(r"instances per program; balanced: HELPERS_0 = \d+ helper programs, one chunk of \d+ "
                     r"positions of the folded tensor each", plan)
    assert "performance: SPLITS_0 = 1" not in plan


def _mutate(program, fn):
    """`program` with `fn` applied to every op of its bodies, nested ones too (the cooperation sits in an `if`)."""
    return edit(program, lambda op: None if (new := fn(op)) is op else new)


def test_verifier_refuses_a_block_program_writing_a_helper_slot(plan) -> None:
    _, k, program = plan
    helper = next(op.results[0] for op in program.walk() if isinstance(op, P.HelperIndex))
    ops = program.groups[0].body.ops
    flat = next(op.results[0] for op in ops if isinstance(op, P.OwnedInstances))
    lane_ok = next(op.results[0] for op in ops if isinstance(op, P.Compare) and op.fn.value == "lt"
                   and op.lhs.id == flat.id)

    def unguarded(op):
        if isinstance(op, P.Store) and op.access.copy is not None and op.access.copy.id == helper.id:
            return dataclasses.replace(op, access=dataclasses.replace(op.access, mask=lane_ok,
                                                                      bounds=physical.model.Guard(lane_ok)))
        return op

    found = [v.message for v in check(_mutate(program, unguarded), k) if v.rule == "workspace-protocol"]
    assert len(found) == 4  # one chunk slot array per fold
    assert found[0].endswith("writes helper slot array chunk0 without the test that its program is a helper "
                             "(helper_index >= 0): a block program would write a helper's slot")


def test_verifier_refuses_helpers_that_overlap_the_blocks(plan) -> None:
    _, k, program = plan

    def shifted(op):
        return dataclasses.replace(op, blocks=LConst(1)) if isinstance(op, P.HelperIndex) else op

    assert [str(v) for v in check(_mutate(program, shifted), k)] == [
        "[ownership] helper_index of group 0 (parallel) counts 1 = 1 block programs, but the group's blocks take 2 "
        "(E=2, S=2 on 132 multiprocessors): helpers would overlap the blocks or leave programs idle"]


def test_verifier_refuses_a_segment_without_room_for_the_helpers(plan) -> None:
    _, k, program = plan
    h = program.constexpr("HELPERS_0")
    seg = program.segments[0]
    short = dataclasses.replace(seg, length=LBin("-", seg.length, h))
    broken = program.replace(segments=(short,), grid=short.length)
    (found,) = check(broken, k)
    assert found.rule == "ownership" and found.message.startswith("segment of group 0 (parallel) has ((cdiv(S, ")
    assert found.message.endswith(" programs, but its domain needs cdiv(S, BLOCK_I0) x SPLITS_0 (the programs that "
                                  "share each block) + HELPERS_0 (the helpers past the blocks)")


def test_verifier_refuses_helpers_given_no_block(plan) -> None:
    """Without `helper_block` a helper program decodes the blocks past the domain: it would join no subregion."""
    _, k, program = plan

    def no_block(op):
        return dataclasses.replace(op, helper_block=None) if isinstance(op, P.OwnedInstances) else op

    assert [str(v) for v in check(_mutate(program, no_block), k)] == [
        "[ownership] group 0 (parallel) has helper programs, but its owned_instances gives them no block: they "
        "would take the instances past the domain"]


def test_verifier_refuses_a_flag_that_ignores_the_helpers(plan) -> None:
    """SPLIT_0 selects the cooperating form; set only where SPLITS_0 > 1, a launch with helpers (SPLITS_0 = 1)
    would run the direct form, every block program storing its own incomplete folds."""
    _, k, program = plan
    consts = dict(program.constexprs)
    consts["SPLIT_0"] = lmin(LBin("-", consts["SPLITS_0"], LConst(1)), LConst(1))
    broken = program.replace(constexprs=tuple((n, consts[n]) for n, _ in program.constexprs))
    found = check(broken, k)
    assert [v.rule for v in found] == ["split-effects"] * 4
    assert str(found[0]) == (
        f"[split-effects] store (from store at test_balance_segments.py:{STORE_LINE}) writes total in every program "
        f"that shares its block: a group split over programs writes outside its workspace only as the holder of the "
        f"last ticket")


def test_verifier_refuses_helper_slots_written_at_the_split_position(plan) -> None:
    """A chunk slot written at the block's split position: helpers and blocks would write the same slots, and the
    last participant's fold would meet them out of order."""
    _, k, program = plan
    split = next(op.results[0] for op in program.walk() if isinstance(op, P.SplitIndex))
    helper = next(op.results[0] for op in program.walk() if isinstance(op, P.HelperIndex))

    def at_split(op):
        if isinstance(op, P.Store) and op.access.copy is not None and op.access.copy.id == helper.id:
            return dataclasses.replace(op, access=dataclasses.replace(op.access, copy=split))
        return op

    found = [str(v) for v in check(_mutate(program, at_split), k) if v.rule == "workspace-protocol"]
    assert found[0] == (
        f"[workspace-protocol] load (from region_fold at test_balance_segments.py:{STORE_LINE}) reads slot array "
        f"chunk0 out of slot order: the slot must be the position along a tile axis that one reduce folds, so that "
        f"the partials always meet in the same order")
    assert len(found) == 4  # one chunk slot array per fold
