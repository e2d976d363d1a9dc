"""Balanced region scans (physical/passes/split_region_scan.py): each segment of a segmented scan is split over
several programs of one launch that pass piece aggregates on by look-back, in a fixed order; each program holds the
first tile of its piece on chip between its aggregate and its writes. Small sizes still split: the launches are
sized as for a 132-multiprocessor device; Triton's interpreter runs the programs one at a time in program order, so
the tickets follow it and nobody waits. Most tests lower the held tile (`INTENT_LOOP_BUDGET`) so that long pieces
also scan a rest after their tile, and the interpreter stays quick."""

from __future__ import annotations

import dataclasses
import itertools
import re

import numpy as np
import pytest
import torch

import intent
import oracle
import physical
from emit_triton.compile import clear_emitted
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, i32, i64, parallel
from kir.dims import dim_bin
from physical import ops as P
from physical.launch_expr import LConst
from physical.lowering import run_pipeline
from physical.passes import PIPELINE, SplitRegionScans
from physical.verifier import check
from tests.breadth_support import three_ways
from tests.launch_fixtures import isolated_cache, small_tile  # noqa: F401  (fixtures)

S, E = dims("S E")

# one huge segment, empty ones, many short ones, boundaries at chunk edges (256) and just past them
LENGTHS = [0, 40000, 1, 255, 256, 257, 0, 3, 512, 2, 0, 1, 700, 5, 0, 256]


@intent.func
def add(p, q):
    return p + q


@intent.kernel
def cumsum(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]]):
    for s in parallel(S):
        out[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def forms(values: f32[E], offsets: i64[S + 1], ex: Out[f32[E]], rev: Out[f32[E]], rex: Out[f32[E]],
          top: Out[f32[E]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        ex[b:e] = intent.cumsum(values[b:e], exclusive=True)
        rev[b:e] = intent.cumsum(values[b:e], reverse=True)
        rex[b:e] = intent.cumsum(values[b:e], reverse=True, exclusive=True)
        top[b:e] = intent.cummax(values[b:e])


@intent.kernel
def ints(values: i32[E], offsets: i32[S + 1], low: Out[i32[E]], total: Out[i32[E]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        low[b:e] = intent.cummin(values[b:e], reverse=True)
        total[b:e] = intent.cumsum(values[b:e], exclusive=True)


@intent.kernel
def custom(values: f32[E], offsets: i64[S + 1], fwd: Out[f32[E]], back: Out[f32[E]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        fwd[b:e] = intent.scan(values[b:e], add, identity=0.0)
        back[b:e] = intent.scan(values[b:e], add, reverse=True, identity=0.0)


@intent.kernel
def moved(values: f32[E], offsets: i64[S + 1], targets: i64[S + 1], out: Out[f32[E]]):
    for s in parallel(S):
        out[targets[s]:targets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])


HELD = 512  # the held tile of most tests: the 40000-long segment's pieces hold a tile and scan a rest
CHUNK = 256  # a region scan's chunk


@pytest.fixture
def shape_pieces(isolated_cache, monkeypatch):  # noqa: F811
    """The shapes decide the pieces, also where one offsets tensor bounds the scans (the data balances those by
    default: tests/test_balance_region_scans.py)."""
    split = next(p for p in PIPELINE if isinstance(p, SplitRegionScans))
    monkeypatch.setattr(split, "by_data", False)
    clear_emitted()
    yield
    clear_emitted()


def offsets_of(lengths: list[int], dtype=torch.int64) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=dtype)


def args_for(seed: int, outputs: tuple[str, ...], dtype=torch.float32, offsets=torch.int64) -> dict:
    g = torch.Generator().manual_seed(seed)
    off = offsets_of(LENGTHS, offsets)
    n = int(off[-1])
    values = torch.randn(n, generator=g) if dtype.is_floating_point else torch.randint(-50, 50, (n,), generator=g,
                                                                                       dtype=dtype)
    return {"values": values.to(dtype), "offsets": off, **{o: torch.zeros(n, dtype=dtype) for o in outputs}}


def splits(kernel, args) -> int:
    return int(re.findall(r"SPLITS_0 = (\d+)", kernel.explain(*args.values()))[-1])


def held(kernel, args) -> int:
    return int(re.findall(r"BLOCK_HELD_0 = (\d+)", kernel.explain(*args.values()))[-1])


def rest_of_pieces(lengths: list[int], pieces: int, tile: int) -> int:
    """The elements past the held tile in every piece: the pieces are whole chunks, at least a tile long."""
    rest = 0
    for n in lengths:
        per = max(tile, -(-n // (pieces * CHUNK)) * CHUNK)
        for s in range(pieces):
            lo = min(s * per, n)
            rest += max(0, min(lo + per, n) - lo - tile)
    return rest


def packed(kernel, args) -> tuple[int, int]:
    """(instances a program, programs a block) of the launch."""
    text = kernel.explain(*args.values())
    return int(re.findall(r"BLOCK_I0 = (\d+)", text)[-1]), int(re.findall(r"SPLITS_0 = (\d+)", text)[-1])


# 132 multiprocessors: a segment a program, each split over many programs; one: the 16 segments two a program, each
# split over several programs (a block's pieces pass each lane's aggregate on)
DEVICES = {132: lambda b, s: b == 1 and s > 1, 1: lambda b, s: b == 2 and s > 1}


@pytest.mark.parametrize("sms", sorted(DEVICES))
def test_a_skewed_segmented_cumsum_splits_and_agrees_with_the_oracle(sms: int, shape_pieces) -> None:
    args = args_for(1, ("out",))
    with simulated_multiprocessors(sms):
        assert DEVICES[sms](*packed(cumsum, args))
        got = three_ways(cumsum, args, ("out",), rtol=1e-4, atol=1e-3, stablehlo=False)
    o = args["offsets"].tolist()
    v = args["values"].double()
    want = torch.cat([v[b:e].cumsum(0) for b, e in zip(o, o[1:])]).numpy()
    np.testing.assert_allclose(got["out"], want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("sms", sorted(DEVICES))
def test_exclusive_reverse_and_max_scans_split_and_reproduce_bitwise(sms: int, small_tile) -> None:  # noqa: F811
    """Every piece folds its predecessors' aggregates in index order (never a timing-dependent mix), and the sync
    buffer restores itself, so a second launch of the same plan (its workspace kept, never filled) gives the same
    bits."""
    outs = ("ex", "rev", "rex", "top")
    args = args_for(2, outs)
    with simulated_multiprocessors(sms):
        assert DEVICES[sms](*packed(forms, args))
        got = three_ways(forms, args, outs, rtol=1e-4, atol=1e-3, stablehlo=False)
        again = {k: v.clone() for k, v in args.items()}
        forms(**again)
    assert [again[k].numpy().tobytes() for k in outs] == [got[k].tobytes() for k in outs]
    o = args["offsets"].tolist()
    v = args["values"]
    assert got["top"].tolist() == torch.cat([v[b:e].cummax(0).values for b, e in zip(o, o[1:])]).tolist()


def test_integer_scans_with_i32_offsets_split_exactly(small_tile) -> None:  # noqa: F811
    args = args_for(3, ("low", "total"), torch.int32, torch.int32)
    with simulated_multiprocessors(132):
        assert splits(ints, args) > 1
        three_ways(ints, args, ("low", "total"), rtol=0, atol=0, stablehlo=False)


@pytest.mark.parametrize("sms", sorted(DEVICES))
def test_custom_combines_split_in_index_order(sms: int, small_tile) -> None:  # noqa: F811
    args = args_for(4, ("fwd", "back"))
    with simulated_multiprocessors(sms):
        assert DEVICES[sms](*packed(custom, args))
        three_ways(custom, args, ("fwd", "back"), rtol=1e-4, atol=1e-3, stablehlo=False)


def test_a_target_at_other_offsets_keeps_its_positions(small_tile) -> None:  # noqa: F811
    """The target segment starts elsewhere: each piece (here a helper's chunk: the source offsets balance the scan
    by the data) writes at its elements' positions moved by the target's offset from the source."""
    args = args_for(5, ())
    n = int(args["offsets"][-1])
    args["values"] = torch.cat([args["values"], torch.randn(7)])
    args["targets"] = args["offsets"] + 7
    args["out"] = torch.zeros(n + 7)
    with simulated_multiprocessors(132):
        assert int(re.findall(r"HELPERS_0 = (\d+)", moved.explain(*args.values()))[-1]) > 1
        got = three_ways(moved, args, ("out",), rtol=1e-4, atol=1e-3, stablehlo=False)
    assert got["out"][:7].tolist() == [0.0] * 7


def test_the_plan_verifies_after_every_pass_and_explain_shows_it(small_tile) -> None:  # noqa: F811
    args = args_for(7, ("ex", "rev", "rex", "top"))
    k = forms.specialize(args)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert "split-region-scans" in names
    ops = program.groups[0].body.ops
    assert sum(isinstance(o, P.PublishSlot) for o in ops) == 1 and sum(isinstance(o, P.FoldSlots) for o in ops) == 4
    assert sum(isinstance(o, P.RegionScan) for o in ops) == 4  # the rests of the pieces
    # each scan's held tile: scanned once at the top level, written by a store of its own
    assert sum(isinstance(o, P.Scan) for o in ops) == 4 and sum(isinstance(o, P.Store) for o in ops) == 4
    assert all(t.block == "BLOCK_HELD_0" for o in ops if isinstance(o, P.Scan) for t in o.results[0].type.tile)
    # each rest's fold sits in a constexpr branch taken only where SPLITS_0 > 1
    branches = [o for o in ops if isinstance(o, P.If) and o.flag == "SPLIT_0"]
    assert len(branches) == 4 and all(isinstance(b.then_.ops[0], P.RegionFold) for b in branches)
    assert sum(w.resets for w in program.workspaces) == 1  # the sync buffer restores itself: no launch fills it
    with simulated_multiprocessors(1):
        plan = forms.explain(*args.values())
    assert "SPLITS_0 programs a block: ticket t scans piece t % SPLITS_0 of the subregion of each instance of " \
           "block t // SPLITS_0" in plan
    assert "at least BLOCK_HELD_0 long; it holds the first BLOCK_HELD_0 elements of its piece on chip from their " \
           "load to their write, so only the rest of a longer piece is read twice" in plan
    assert f"BLOCK_HELD_0 = {HELD // 2}" in plan  # the tile's elements shared by the block's two instances
    assert "one block of BLOCK_I0 instances each (several short segments a program)" in plan
    assert "each program publishes each instance's piece aggregate in slot = instance * SPLITS_0 + piece of " \
           "scan0_slot0_g0, scan1_slot0_g0, scan2_slot0_g0, scan3_slot0_g0, then raises one flag, " \
           "scan_sync_g0[2 + ticket] (release)" in plan
    assert "waits for the flags of every lower ticket of its block (acquire) and each lane folds its instance's " \
           "slots from its instance's first piece up to its own piece, in index order" in plan
    assert "one block of BLOCK_I0 = 2 instances per split: SPLITS_0 = " in plan
    assert "programs per block of subregions, passing piece aggregates on by look-back in index order" in plan
    assert "construction verifier: all" in plan


def test_groups_that_keep_whole_subregions_say_why() -> None:
    @intent.kernel
    def with_fold(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]], total: Out[f32[S]]):
        for s in parallel(S):
            out[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])
            total[s] = intent.sum(values[offsets[s]:offsets[s + 1]])

    k = with_fold.specialize({"values": torch.randn(9), "offsets": torch.tensor([0, 3, 3, 9]), "out": torch.empty(9),
                              "total": torch.empty(3)})
    program, names = run_pipeline(physical.construct(k), verify_with=k)  # the fold rides on the scan's helpers
    ops = list(program.groups[0].body.walk())
    assert names[-1] == "split-region-scans" and any(isinstance(o, P.HelperIndex) for o in ops)
    assert any(isinstance(o, P.FoldSlots) and program.buffer(o.slots[0]).name.startswith("fold") for o in ops)


def test_overlapping_targets_are_refused_under_checks() -> None:
    """Instances of a region scan run at once: their target segments must not overlap (non-decreasing offsets)."""
    args = {"values": torch.randn(10), "offsets": torch.tensor([0, 6, 4, 10]), "out": torch.zeros(10)}
    with pytest.raises(intent.IntentError, match=r"region_scan at .*: the target subregions of several instances "
                                                 r"overlap in out; segment offsets must be non-decreasing"):
        oracle.run(cumsum.specialize(args), args, checks=True)


def _lowered(args):
    k = cumsum.specialize(args)
    return k, physical.lower(k)


def test_a_fold_that_starts_below_its_instance_is_refused() -> None:
    """Mutation: the predecessors' fold starts at slot 0, so a piece would wait for other instances' pieces."""
    k, p = _lowered(args_for(8, ("out",)))
    g = p.groups[0]
    ops = list(g.body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.FoldSlots))
    zero = next(op.results[0] for op in ops if isinstance(op, P.Const) and op.value == 0)
    ops[at] = dataclasses.replace(ops[at], first=zero)
    broken = p.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),))
    assert [str(v) for v in check(broken, k) if v.rule == "lookback-protocol"] == [
        "[lookback-protocol] group 0: fold_slots must start at the first slot of the program's instance (the slots "
        "below it hold other instances' pieces, whose tickets may be higher)"]


def test_a_scan_of_the_whole_subregion_in_every_split_is_refused() -> None:
    """Mutation: the scan walks the whole subregion instead of the rest of the program's piece: every split writes
    it, and it writes the held tile's positions again."""
    k, p = _lowered(args_for(9, ("out",)))
    g = p.groups[0]
    ops = list(g.body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.RegionScan))
    fold = next(op for op in g.body.walk() if isinstance(op, P.RegionFold))
    b = next(op.results[0] for op in ops if isinstance(op, P.Load))  # offsets[s]: the subregion's own begin
    ops[at] = dataclasses.replace(ops[at], begin=b)
    assert fold.begin.id != b.id
    broken = p.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),))
    assert [v.rule for v in check(broken, k)] == ["effect-coverage", "split-effects"]


def test_a_rest_that_overlaps_the_held_tile_is_refused(shape_pieces) -> None:
    """Mutation: the rest of the piece starts at the piece's begin, not past the held tile: the tile's positions
    are written twice (by its store and by the scan), though both stay within the program's piece."""
    k, p = _lowered(args_for(11, ("out",)))
    g = p.groups[0]
    ops = list(g.body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.RegionScan))
    begin = next(op.results[0] for op in ops if op.results and op.results[0].name == "piece_begin")
    assert ops[at].begin.id != begin.id
    ops[at] = dataclasses.replace(ops[at], begin=begin)
    broken = p.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),))
    found = [str(v) for v in check(broken, k)]
    assert len(found) == 1 and re.fullmatch(
        r"\[effect-coverage\] store \(from region_scan at test_split_region_scans\.py:\d+\) is performed by 2 "
        r"physical effects in group 0; it would happen 2 times per instance", found[0]), found


def test_one_piece_an_instance_reads_each_segment_once(shape_pieces) -> None:
    """Where the launch decides SPLITS_0 = 1 (here: Triton's interpreter), the kernel holds no piece fold: the
    values are read once, by the held tiles and the scans of the rests. Split, a piece that fits its held tile is
    read once too (the default tile holds every piece here)."""
    from bench.traffic import counting

    args = args_for(10, ("out",))
    out = {n: v.clone() for n, v in args.items()}
    with simulated_multiprocessors(0), counting(out) as traffic:
        cumsum(**out)
    assert traffic.read_by["values"] == 4 * args["values"].numel()
    with simulated_multiprocessors(132), counting(out) as split:
        assert rest_of_pieces(LENGTHS, splits(cumsum, args), held(cumsum, args)) == 0
        cumsum(**out)
    assert split.read_by["values"] == 4 * args["values"].numel()


def _mutated(p, g, ops):
    new = dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops)))
    return p.replace(groups=tuple(new if x.id == g.id else x for x in p.groups))


def test_a_block_of_several_instances_keeps_the_protocol() -> None:
    """S tickets a block of BLOCK_I0 instances: the look-back takes a block of any size (each lane its own slot,
    the program one flag), where a look-back without pieces keeps one instance a program."""
    k, p = _lowered(args_for(11, ("out",)))
    assert p.constexpr("BLOCK_I0") != LConst(1) and check(p, k) == []
    owned = next(op for op in p.groups[0].body.ops if isinstance(op, P.OwnedInstances))
    assert owned.splits == "SPLITS_0" and owned.ticket is not None


def test_a_slot_buffer_without_a_slot_per_lane_is_refused() -> None:
    """Mutation: the slot buffer holds a slot per program, not per lane of its block (exact message)."""
    k, p = _lowered(args_for(12, ("out",)))
    pub = next(op for op in p.groups[0].body.ops if isinstance(op, P.PublishSlot))
    sync = p.buffer(pub.sync)
    slot = p.buffer(pub.slots[0])
    small = dataclasses.replace(slot, shape=(dim_bin("-", sync.shape[0], P.SYNC_FLAGS),))
    broken = p.replace(buffers=tuple(small if b.id == slot.id else b for b in p.buffers))
    assert [str(v) for v in check(broken, k) if v.rule == "lookback-protocol"] == [
        "[lookback-protocol] group 0: scan0_slot0_g0 holds 9 elements, fewer than the 9 programs of 16 lanes need "
        "(a slot per lane)"]


def test_a_publish_by_lanes_past_the_instances_is_refused() -> None:
    """Mutation: every lane of the last block publishes, those past the instances too."""
    k, p = _lowered(args_for(13, ("out",)))
    g = p.groups[0]
    ops = [dataclasses.replace(op, active=None) if isinstance(op, P.PublishSlot) else op for op in g.body.ops]
    found = [v.message.split(" (from")[0] for v in check(_mutated(p, g, ops), k)]
    assert found == ["publish_slot", "group 0: publish_slot may write one helper's slot blocks * BLOCK_I0 + "
                     f"{found[1].split('+ ')[1].split(' ')[0]} for two helpers, or two lanes of one helper, that both "
                     "publish: one would overwrite the other's aggregate"]


def test_many_short_segments_pack_several_a_program() -> None:
    """200 short segments on a device of 8 resident programs: 16 segments a program (13 programs, not 200), each
    scanned whole (SPLITS_0 = 1: no piece fold, each value read once)."""
    from bench.traffic import counting

    g = torch.Generator().manual_seed(14)
    lengths = torch.randint(0, 9, (200,), generator=g).tolist()
    off = offsets_of(lengths)
    n = int(off[-1])
    args = {"values": torch.randn(n, generator=g), "offsets": off, "out": torch.zeros(n)}
    with simulated_multiprocessors(1):
        assert packed(cumsum, args) == (16, 1)
        assert "grid = 13 programs" in cumsum.explain(*args.values())
        got = three_ways(cumsum, args, ("out",), rtol=1e-4, atol=1e-4, stablehlo=False)
        out = {k: v.clone() for k, v in args.items()}
        with counting(out) as traffic:
            cumsum(**out)
    assert traffic.read_by["values"] == 4 * n
    o = off.tolist()
    want = torch.cat([args["values"][b:e].double().cumsum(0) for b, e in zip(o, o[1:])]).numpy()
    np.testing.assert_allclose(got["out"], want, rtol=1e-4, atol=1e-4)


def test_only_the_rest_of_a_piece_longer_than_its_tile_is_read_twice(small_tile, shape_pieces) -> None:  # noqa: F811
    """A piece longer than its held tile folds its rest for the aggregate and scans it after the look-back: those
    elements are read twice, the tile's once."""
    from bench.traffic import counting

    args = args_for(12, ("out",))
    with simulated_multiprocessors(132), counting(args) as split:
        pieces, tile = splits(cumsum, args), held(cumsum, args)
        rest = rest_of_pieces(LENGTHS, pieces, tile)
        assert tile == HELD and pieces > 1 and rest > 0
        cumsum(**args)
    assert split.read_by["values"] == 4 * (args["values"].numel() + rest)
    o = args["offsets"].tolist()
    v = args["values"].double()
    want = torch.cat([v[b:e].cumsum(0) for b, e in zip(o, o[1:])]).numpy()
    np.testing.assert_allclose(args["out"].numpy(), want, rtol=1e-4, atol=1e-3)


def test_a_fold_whose_active_test_has_a_tile_is_refused() -> None:
    """Mutation: the test that lets a program skip its fold is the held tile's membership (a tile), not one
    predicate per lane."""
    k, p = _lowered(args_for(13, ("out",)))
    g = p.groups[0]
    ops = list(g.body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.FoldSlots))
    assert ops[at].active is not None and not ops[at].active.type.tile
    member = next(op.results[0] for op in ops if isinstance(op, P.Compare) and op.results[0].type.tile)
    ops[at] = dataclasses.replace(ops[at], active=member)
    broken = p.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),))
    found = [str(v) for v in check(broken, k) if v.rule == "fragment-types"]
    assert len(found) == 1 and found[0].endswith(
        f"the active lanes must be a predicate with the slot's lanes and no tile, got {member.type}"), found


# ---------------------------------------------------------------------------------------------- top level


@intent.kernel
def top_forms(values: f32[E], b: i64, e: i64, run: Out[f32[E]], ex: Out[f32[E]], rev: Out[f32[E]],
              best: Out[f32[E]]):
    run[b:e] = intent.cumsum(values[b:e])
    ex[b:e] = intent.cumsum(values[b:e], exclusive=True)
    rev[b:e] = intent.cumsum(values[b:e], reverse=True)
    best[b:e] = intent.scan(values[b:e], add, reverse=True, identity=0.0)


TOP_OUTS = ("run", "ex", "rev", "best")


def top_args(seed: int, n: int = 20000) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"values": torch.randn(n, generator=g), "b": 3, "e": n - 5, **{o: torch.zeros(n) for o in TOP_OUTS}}


def test_a_top_level_region_scan_splits_its_one_subregion() -> None:
    """`out[b:e] = cumsum(values[b:e])` at top level: one instance, its subregion split over SPLITS_0 programs
    (ticket t scans piece t), in every form; a second launch gives the same bits."""
    args = top_args(15)
    n = args["values"].numel()
    with simulated_multiprocessors(132):
        assert packed(top_forms, args) == (1, 39)
        got = three_ways(top_forms, args, TOP_OUTS, rtol=1e-4, atol=1e-3, stablehlo=False)
        again = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
        top_forms(**again)
    v = args["values"][3:n - 5].double()
    np.testing.assert_allclose(got["run"][3:n - 5], v.cumsum(0).numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got["rev"][3:n - 5], v.flip(0).cumsum(0).flip(0).numpy(), rtol=1e-4, atol=1e-3)
    assert got["run"][:3].tolist() == [0.0] * 3 and got["run"][n - 5:].tolist() == [0.0] * 5
    assert all(again[o].numpy().tobytes() == got[o].tobytes() for o in TOP_OUTS)


def test_a_top_level_plan_verifies_after_every_pass_and_explain_shows_it() -> None:
    args = top_args(16, 3000)
    k = top_forms.specialize(args)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert "split-region-scans" in names and program.groups[0].single_instance
    with simulated_multiprocessors(132):
        plan = top_forms.explain(*args.values())
    # a statement a group, each split over its own programs with its own look-back workspace
    assert plan.count("programs (ticket t scans piece t of the one subregion, the t-th run of whole chunks in "
                      "traversal order, at least BLOCK_HELD_") == 4
    assert plan.count("elements of its piece on chip from their load to their write, so only the rest of a longer "
                      "piece is read twice), one piece each") == 4
    assert "each program publishes its piece's aggregate in slot = its ticket of scan0_slot0_g3, then raises flag " \
           "scan_sync_g3[2 + slot] (release)" in plan
    assert "then waits for the flags of every lower ticket (acquire) and folds their slots from the nearest lower " \
           "ticket down to 0, in index order" in plan
    assert "construction verifier: all" in plan


def _top_lowered():
    args = top_args(17, 3000)
    k = top_forms.specialize(args)
    return k, physical.lower(k)


def test_a_top_level_fold_of_slots_from_another_start_is_refused() -> None:
    """Mutation: a piece folds the slots from its own piece (the predecessors' aggregates are left out)."""
    k, p = _top_lowered()
    g = p.groups[0]
    ops = [dataclasses.replace(op, first=op.upto) if isinstance(op, P.FoldSlots) else op for op in g.body.ops]
    assert [str(v) for v in check(_mutated(p, g, ops), k) if v.rule == "lookback-protocol"] == [
        "[lookback-protocol] group 0: fold_slots of a single instance's pieces must start at slot 0"]


def test_a_single_instance_decoding_instances_without_pieces_is_refused() -> None:
    """Mutation: the top-level group's ticket decodes instances without splitting them into pieces."""
    k, p = _top_lowered()
    g = p.groups[0]
    ops = [dataclasses.replace(op, splits=None) if isinstance(op, P.OwnedInstances) else op for op in g.body.ops]
    assert "[ownership] single-instance group 0 (region_scan) decodes owned instances" in \
        [str(v).split(" (from")[0] for v in check(_mutated(p, g, ops), k)]
