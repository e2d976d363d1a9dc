"""Balanced region scans by the data (physical/passes/balance_region_scan.py): where a group's region scans take
their subregions from one offsets tensor, helper programs past the blocks scan equal chunks of the scanned tensor
(the subregion owning a chunk found by balance_segments' binary search), each folding the aggregates of its
subregion's earlier helpers in index order. The launches are sized as for a 132-multiprocessor device; Triton's
interpreter runs the programs one at a time in ticket order, so nobody waits. The held tile is lowered
(`INTENT_LOOP_BUDGET`) so that a helper's chunk also scans a rest after its tile."""

from __future__ import annotations

import dataclasses
import itertools
import re

import numpy as np
import pytest
import torch

import intent
import physical
from emit_triton.compile import clear_emitted
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, i32, i64, parallel
from kir.dtypes import DType
from physical import ops as P
from physical.lowering import run_pipeline
from physical.passes.looped import BUDGET_VARIABLE
from physical.verifier import check
from tests.launch_fixtures import isolated_cache, small_tile  # noqa: F401  (fixtures)

S, E = dims("S E")

# one long segment, empty ones (also at its ends), short ones, boundaries at chunk edges
LENGTHS = [0, 3, 0, 30000, 0, 1, 4096, 10240, 257, 0, 5, 2000, 0]
HELD = 512


@intent.func
def add(p, q):
    return p + q


@intent.kernel
def cumsum(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]]):
    for s in parallel(S):
        out[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])


@intent.kernel(requires=[E >= 0, S >= 0])
def maybe_empty(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]]):
    for s in parallel(S):
        out[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def forward(values: f32[E], offsets: i64[S + 1], ex: Out[f32[E]], top: Out[f32[E]], fwd: Out[f32[E]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        ex[b:e] = intent.cumsum(values[b:e], exclusive=True)
        top[b:e] = intent.cummax(values[b:e])
        fwd[b:e] = intent.scan(values[b:e], add, identity=0.0)


@intent.kernel
def backward(values: f32[E], offsets: i64[S + 1], rev: Out[f32[E]], rex: Out[f32[E]], back: Out[f32[E]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        rev[b:e] = intent.cumsum(values[b:e], reverse=True)
        rex[b:e] = intent.cumsum(values[b:e], reverse=True, exclusive=True)
        back[b:e] = intent.scan(values[b:e], add, reverse=True, identity=0.0)


@intent.kernel
def ints(values: i32[E], offsets: i32[S + 1], low: Out[i32[E]], total: Out[i32[E]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        low[b:e] = intent.cummin(values[b:e])
        total[b:e] = intent.cumsum(values[b:e], exclusive=True)


def offsets_of(lengths: list[int], dtype=torch.int64) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=dtype)


def args_for(seed: int, outputs: tuple[str, ...], offsets: torch.Tensor | None = None, dtype=torch.float32) -> dict:
    g = torch.Generator().manual_seed(seed)
    off = offsets_of(LENGTHS) if offsets is None else offsets
    n = int(off.max()) if off.numel() else 0
    values = torch.randn(n, generator=g) if dtype.is_floating_point else \
        torch.randint(-50, 50, (n,), generator=g, dtype=dtype)
    return {"values": values, "offsets": off, **{o: torch.zeros(n, dtype=dtype) for o in outputs}}


def helpers(kernel, args) -> int:
    return int(re.findall(r"HELPERS_0 = (\d+)", kernel.explain(*args.values()))[-1])


def segments(args: dict):
    o = args["offsets"].tolist()
    return list(zip(o, o[1:]))


def want_scan(v: torch.Tensor, b: int, e: int, how: str) -> torch.Tensor:
    x = v[b:e].double() if v.dtype.is_floating_point else v[b:e].long()
    if how in ("rev", "rex", "back"):
        x = x.flip(0)
    if how == "top":
        r = x.cummax(0).values
    elif how == "low":
        r = x.cummin(0).values
    else:
        r = x.cumsum(0)
    if how in ("ex", "rex", "total"):
        r = torch.cat([torch.zeros(1, dtype=r.dtype), r[:-1]]) if e > b else r
    return r.flip(0) if how in ("rev", "rex", "back") else r


def run_and_check(kernel, args: dict, outs: tuple[str, ...], sms: int = 132, again: bool = False) -> dict:
    """One launch checked against the scans of each subregion; with `again`, a second launch (its workspace kept,
    never filled) gives the same bits."""
    out = {k: v.clone() for k, v in args.items()}
    with simulated_multiprocessors(sms):
        kernel(**out)
        if again:
            second = {k: v.clone() for k, v in args.items()}
            kernel(**second)
            assert [second[k].numpy().tobytes() for k in outs] == [out[k].numpy().tobytes() for k in outs]
    for name in outs:
        want = torch.zeros(args[name].shape, dtype=torch.float64)
        for b, e in segments(args):
            if e > b:
                want[b:e] = want_scan(args["values"], b, e, name).double()
        got = out[name].double()
        if args["values"].dtype.is_floating_point:
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=2e-3, err_msg=name)
        else:
            assert got.tolist() == want.tolist(), name
    return out


def delegated(lengths_or_offsets: list[int], n: int, h: int, block: int = 256) -> dict[int, int]:
    """Subregion -> the whole chunks it hands to helpers (a model of balance_segments' test for sorted offsets:
    the chunks [k0, k1) inside it, C = cdiv(n, h * block) * block)."""
    c = -(-n // (h * block)) * block
    o = lengths_or_offsets
    out = {}
    for i, (b, e) in enumerate(zip(o, o[1:])):
        k0, k1 = -(-b // c), min(e // c, h)
        if k1 > k0:
            out[i] = k1 - k0
    return out


# multiprocessors -> (helpers, whole chunks handed over per subregion): with one multiprocessor fewer helpers
# (two per resident program slot) and a block holds several segments (its lanes packed)
SKEWED = {132: (11, {3: 5, 7: 2}), 1: (8, {3: 4, 7: 1})}


@pytest.mark.parametrize("sms", sorted(SKEWED))
def test_a_skewed_segmented_cumsum_balances_by_the_data(sms: int, isolated_cache) -> None:  # noqa: F811
    """The long segments are scanned by helpers (several each), the short ones whole by their block."""
    args = args_for(1, ("out",))
    with simulated_multiprocessors(sms):
        text = cumsum.explain(*args.values())
    h = int(re.findall(r"HELPERS_0 = (\d+)", text)[-1])
    block = int(re.findall(r"BLOCK_I0 = (\d+)", text)[-1])
    assert h == SKEWED[sms][0] and (block == 1) == (sms == 132)
    assert re.findall(r"SPLITS_0 = (\d+)", text)[-1] == "1"
    assert delegated(args["offsets"].tolist(), args["values"].numel(), h) == SKEWED[sms][1]
    run_and_check(cumsum, args, ("out",), sms)


# Each helper folds its subregion's earlier helpers' aggregates in index order, and the sync buffer restores itself:
# a second launch gives the same bits (`again`).


def test_exclusive_max_and_custom_scans_balance_and_reproduce_bitwise(small_tile) -> None:  # noqa: F811
    run_and_check(forward, args_for(2, ("ex", "top", "fwd")), ("ex", "top", "fwd"), again=True)


@pytest.mark.parametrize("sms", [132, 1])
def test_reverse_scans_take_the_chunks_from_the_last_one_down(sms: int, small_tile) -> None:  # noqa: F811
    run_and_check(backward, args_for(3, ("rev", "rex", "back")), ("rev", "rex", "back"), sms, again=sms == 132)


def test_integer_scans_with_i32_offsets_balance_exactly(small_tile) -> None:  # noqa: F811
    args = args_for(4, ("low", "total"), offsets_of(LENGTHS, torch.int32), torch.int32)
    run_and_check(ints, args, ("low", "total"))


BOUNDARIES = {
    "one segment": [0, 46000],
    "chunk edges": [0, 4352, 8704, 8704, 30464, 30465, 46000],
    "empty at both ends": [0, 0, 0, 46000, 46000],
    "all empty": [0, 0, 0, 0],
    "no segments": [0],
    # unsorted, not overlapping: the search cannot find the last subregion's chunks, so its block scans it
    "unsorted": [30000, 46000, 0, 30000],
}


@pytest.mark.parametrize("name", sorted(BOUNDARIES))
def test_boundary_offsets(name: str, isolated_cache) -> None:  # noqa: F811
    off = torch.tensor(BOUNDARIES[name], dtype=torch.int64)
    args = args_for(6, ("out",), off)
    run_and_check(maybe_empty, args, ("out",))


def test_the_plan_verifies_after_every_pass_and_explain_shows_it(small_tile) -> None:  # noqa: F811
    args = args_for(7, ("rev", "rex", "back"))
    k = backward.specialize(args)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert "split-region-scans" in names
    ops = program.groups[0].body.ops
    assert sum(isinstance(o, P.HelperIndex) and o.ticket is not None for o in ops) == 1
    assert sum(isinstance(o, P.PublishSlot) for o in ops) == 1 and sum(isinstance(o, P.FoldSlots) for o in ops) == 3
    owned = next(o for o in ops if isinstance(o, P.OwnedInstances))
    assert owned.ticket is not None and owned.helper_block is not None
    assert sum(w.resets for w in program.workspaces) == 1  # the sync buffer restores itself
    with simulated_multiprocessors(132):
        plan = backward.explain(*args.values())
    assert "balanced: HELPERS_0 = 11 helper programs, one chunk of 4352 positions of the scanned tensor each, " \
           "joining the subregion that holds it; each helper folds the aggregates of its subregion's earlier " \
           "helpers by look-back in index order" in plan
    assert "the tickets after them are HELPERS_0 helpers: the scanned tensor is cut into HELPERS_0 chunks" in plan
    assert "(a reverse scan: the helpers take the chunks from the last one down)" in plan
    assert "each helper publishes its chunk's aggregate (its lanes' runs folded across the lanes in lane order, " \
           "each run its held tile, then its rest) in slot = blocks * BLOCK_I0 + its position among the helpers " \
           "of" in plan
    assert "then every lane of a helper waits for the flags of the lower tickets of its subregion's earlier helpers " \
           "(acquire) and folds their slots in index order" in plan
    assert "writes its run after that prefix and the runs of the lanes before it in traversal order" in plan
    assert "holding it across the lanes of the block it joins: lane l takes the l-th run of max(BLOCK_HELD_0, " \
           "cdiv(length, valid lanes)) positions, so a range of up to BLOCK_I0 * BLOCK_HELD_0 elements is read " \
           "once)" in plan
    assert "construction verifier: all" in plan
    # bytes moved: a helper holds BLOCK_HELD_0 in each lane of the block it joins; only its chunk past those tiles
    # is folded for its aggregate
    (moved,) = [line for line in plan.splitlines() if line.startswith("  bytes moved = ")]
    assert "SPLITS_0" not in moved
    assert moved.count("(4 * max(0, E - HELPERS_0 * BLOCK_HELD_0 * BLOCK_I0) if SPLIT_0 else 0)") == 3  # per scan
    assert "or of its helper, BLOCK_HELD_0 in each of the BLOCK_I0 lanes of the block it joins" in plan


def _lowered(args):
    k = cumsum.specialize(args)
    return k, physical.lower(k)


def _mutated(p, ops):
    g = p.groups[0]
    return p.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),))


def _lookback(p, k) -> list[str]:
    return [str(v) for v in check(p, k) if v.rule == "lookback-protocol"]


def test_a_helper_index_from_another_counter_is_refused() -> None:
    """Mutation: the helpers number themselves from another buffer than the blocks' ticket (exact message)."""
    k, p = _lowered(args_for(8, ("out",)))
    assert check(p, k) == []
    ops = list(p.groups[0].body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.HelperIndex))
    owned = next(op for op in ops if isinstance(op, P.OwnedInstances))
    other = next(b.id for b in p.buffers if b.id != owned.ticket and b.name.startswith("scan0_slot"))
    ops[at] = dataclasses.replace(ops[at], ticket=other)
    assert _lookback(_mutated(p, ops), k) == [
        f"[lookback-protocol] group 0: helper_index takes its position from buffer {other}, not from the ticket of "
        f"owned_instances (buffer {owned.ticket}): helpers would not follow the blocks"]


def test_a_helper_slot_among_the_blocks_lanes_is_refused() -> None:
    """Mutation: a helper publishes at its position alone, not after the blocks' lanes: it would overwrite an
    instance's slot (exact message)."""
    k, p = _lowered(args_for(9, ("out",)))
    ops = list(p.groups[0].body.ops)
    add = next(n for n, op in enumerate(ops) if op.results and op.results[0].name == "helper_slot")
    position = next(op.results[0] for op in ops if op.results and op.results[0].name == "helper_position")
    ops[add] = dataclasses.replace(ops[add], lhs=position, rhs=position)
    assert _lookback(_mutated(p, ops), k) == [
        "[lookback-protocol] group 0: publish_slot writes a slot other than the program's own instance (its "
        "ownership slice)",
        "[lookback-protocol] group 0: fold_slots must stop at the program's own ticket (it may wait only for lower "
        "tickets, which have started)"]


def test_a_fold_past_the_helpers_own_slot_is_refused() -> None:
    """Mutation: a helper folds up to the blocks' slot form, not its own: it would wait for another program."""
    k, p = _lowered(args_for(10, ("out",)))
    ops = list(p.groups[0].body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.FoldSlots))
    helper_slot = next(op.results[0] for op in ops if op.results and op.results[0].name == "helper_slot")
    ops[at] = dataclasses.replace(ops[at], upto=helper_slot)
    assert _lookback(_mutated(p, ops), k) == [
        "[lookback-protocol] group 0: fold_slots must stop at the program's own ticket (it may wait only for lower "
        "tickets, which have started)"]


def test_a_helper_scanning_the_whole_subregion_is_refused() -> None:
    """Mutation: the rest of the range a program scans is its whole subregion, whichever program it is: every
    helper of the subregion would write all of it."""
    k, p = _lowered(args_for(11, ("out",)))
    ops = list(p.groups[0].body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.RegionScan))
    loads = [op.results[0] for op in ops if isinstance(op, P.Load)][:2]  # offsets[s], offsets[s + 1]
    ops[at] = dataclasses.replace(ops[at], begin=loads[0], end=loads[1])
    found = [v.rule for v in check(_mutated(p, ops), k)]
    assert found == ["effect-coverage", "split-effects"], found


def _plan_numbers(kernel, args: dict, sms: int) -> dict[str, int]:
    with simulated_multiprocessors(sms):
        text = kernel.explain(*args.values())
    return {n: int(re.findall(rf"{n} = (\d+)", text)[-1]) for n in ("HELPERS_0", "BLOCK_I0", "BLOCK_HELD_0")}


def read_twice(offsets: list[int], n: int, h: int, block: int, held: int, one_lane: bool = False) -> int:
    """Elements the helpers read twice (a model of the pass for sorted offsets): helper k of subregion i holds its
    range [lo, hi) (its chunk; the first helper's from the subregion's begin, the last one's to its end) across
    the valid lanes of block i // block, lane l the l-th run of max(held, cdiv(hi - lo, lanes)) positions; only
    what a run holds past its lane's tile of `held` elements is read twice (its fold, then its scan). `one_lane`:
    the range in the one lane the helper joins."""
    c = -(-n // (h * 256)) * 256
    segments = len(offsets) - 1
    twice = 0
    for i, (b, e) in enumerate(zip(offsets, offsets[1:])):
        k0, k1 = -(-b // c), min(e // c, h)
        lanes = 1 if one_lane else min(block, segments - i // block * block)
        for k in range(k0, k1):
            lo, hi = (b if k == k0 else k * c), (e if k == k1 - 1 else (k + 1) * c)
            per = max(held, -(-(hi - lo) // lanes))
            twice += sum(max(0, min(per, hi - lo - l * per) - held) for l in range(lanes) if l * per < hi - lo)
    return twice


@pytest.mark.parametrize("tile", [None, HELD])
def test_a_helper_holds_its_chunk_across_the_lanes_of_its_block(tile: int | None, isolated_cache,  # noqa: F811
                                                                monkeypatch) -> None:
    """A helper joins a block of several lanes (one multiprocessor: blocks of two segments) and holds its range
    across them, lane l the l-th run: a chunk (5888 values, not a multiple of a lane's tile of 4096) is read once;
    only the first and last helpers of a subregion, whose ranges take its head or tail too, read what their runs
    hold past the lanes' tiles twice. With a lowered tile (256 a lane) every helper reads the rest of its runs
    twice, still less than in one lane."""
    from bench.traffic import counting

    if tile is not None:
        monkeypatch.setenv(BUDGET_VARIABLE, str(tile))
    clear_emitted()
    args = args_for(12, ("out",))
    nums = _plan_numbers(cumsum, args, 1)
    h, block, held = nums["HELPERS_0"], nums["BLOCK_I0"], nums["BLOCK_HELD_0"]
    n = args["values"].numel()
    chunk = -(-n // (h * 256)) * 256
    assert block > 1 and h > 1 and (chunk % held != 0 and chunk <= block * held) == (tile is None)
    twice = read_twice(args["offsets"].tolist(), n, h, block, held)
    assert 0 < twice < read_twice(args["offsets"].tolist(), n, h, block, held, one_lane=True)
    out = {k: v.clone() for k, v in args.items()}
    with simulated_multiprocessors(1), counting(out) as traffic:
        cumsum(**out)
    assert traffic.read_by["values"] == 4 * (n + twice)
    run_and_check(cumsum, args, ("out",), 1)
    clear_emitted()


def test_lane_held_chunks_are_bitwise_reproducible_in_every_direction(isolated_cache) -> None:  # noqa: F811
    """Blocks of several lanes (one multiprocessor): the lanes of a helper combine their runs across the lanes in
    lane order, so two launches give the same bits, forward and reverse, with built-in and custom combines."""
    runs = []
    for _ in range(2):
        f = run_and_check(forward, args_for(15, ("ex", "top", "fwd")), ("ex", "top", "fwd"), 1)
        r = run_and_check(backward, args_for(15, ("rev", "rex", "back")), ("rev", "rex", "back"), 1)
        runs.append(tuple(x[k].numpy().tobytes() for x, ks in ((f, ("ex", "top", "fwd")), (r, ("rev", "rex", "back")))
                          for k in ks))
    assert runs[0] == runs[1]


def test_a_lane_fold_with_a_tiled_input_is_refused() -> None:
    """Mutation: the lane fold that gives a helper its aggregate takes the held tile (a tile axis per lane), not
    one value per lane (exact message)."""
    k, p = _lowered(args_for(16, ("out",)))
    ops = list(p.groups[0].body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.LaneFold) and op.results[0].name == "helper_total")
    tiled = next(op.results[0] for op in ops if isinstance(op, P.Scan))
    ops[at] = dataclasses.replace(ops[at], inputs=(tiled,))
    assert [str(v) for v in check(_mutated(p, ops), k)] == [
        f"[structured-complete] lane_fold (from region_scan at test_balance_region_scans.py:45): lane_fold input "
        f"{tiled.type} is not a value per lane (lanes, no tile)"]


def test_a_lane_scan_without_a_combine_of_its_accumulators_is_refused() -> None:
    """Mutation: the lane scan that gives each lane the runs before it combines i64 accumulators with the f32
    scan's combine region."""
    k, p = _lowered(args_for(17, ("out",)))
    ops = list(p.groups[0].body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.LaneScan))
    ops[at] = dataclasses.replace(ops[at], acc_dtypes=(DType.i64,) * len(ops[at].acc_dtypes))
    where = "lane_scan (from region_scan at test_balance_region_scans.py:45): lane_scan"
    assert [str(v) for v in check(_mutated(p, ops), k)] == [
        f"[structured-complete] {where} identity -0.0 does not fit accumulator i64",
        f"[structured-complete] {where} combine takes (f32, f32); the accumulators need (i64, i64)",
        f"[structured-complete] {where} combine yields (f32), expected (i64)"]
