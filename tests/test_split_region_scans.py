"""Balanced region scans (physical/passes/split_region_scan.py): each segment of a segmented scan is split over
several programs of one launch that pass piece aggregates on by look-back, in a fixed order. Small sizes still
split: the launches are sized as for a 132-multiprocessor device; Triton's interpreter runs the programs one at a
time in program order, so the tickets follow it and nobody waits."""

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
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, i32, i64, parallel
from physical import ops as P
from physical.passes import PIPELINE
from physical.passes.split_region_scan import plan_region_scans
from physical.verifier import check
from tests.breadth_support import three_ways

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


def test_a_skewed_segmented_cumsum_splits_and_agrees_with_the_oracle() -> None:
    args = args_for(1, ("out",))
    with simulated_multiprocessors(132):
        assert splits(cumsum, args) > 1
        got = three_ways(cumsum, args, ("out",), rtol=1e-4, atol=1e-3, stablehlo=False)
    o = args["offsets"].tolist()
    v = args["values"].double()
    want = torch.cat([v[b:e].cumsum(0) for b, e in zip(o, o[1:])]).numpy()
    np.testing.assert_allclose(got["out"], want, rtol=1e-4, atol=1e-3)


def test_exclusive_reverse_and_max_scans_split() -> None:
    args = args_for(2, ("ex", "rev", "rex", "top"))
    with simulated_multiprocessors(132):
        assert splits(forms, args) > 1
        got = three_ways(forms, args, ("ex", "rev", "rex", "top"), rtol=1e-4, atol=1e-3, stablehlo=False)
    o = args["offsets"].tolist()
    v = args["values"]
    assert got["top"].tolist() == torch.cat([v[b:e].cummax(0).values for b, e in zip(o, o[1:])]).tolist()


def test_integer_scans_with_i32_offsets_split_exactly() -> None:
    args = args_for(3, ("low", "total"), torch.int32, torch.int32)
    with simulated_multiprocessors(132):
        assert splits(ints, args) > 1
        three_ways(ints, args, ("low", "total"), rtol=0, atol=0, stablehlo=False)


def test_custom_combines_split_in_index_order() -> None:
    args = args_for(4, ("fwd", "back"))
    with simulated_multiprocessors(132):
        assert splits(custom, args) > 1
        three_ways(custom, args, ("fwd", "back"), rtol=1e-4, atol=1e-3, stablehlo=False)


def test_a_target_at_other_offsets_keeps_its_positions() -> None:
    """The target segment starts elsewhere: each piece writes at its elements' positions moved by the target's
    offset from the source."""
    args = args_for(5, ())
    n = int(args["offsets"][-1])
    args["values"] = torch.cat([args["values"], torch.randn(7)])
    args["targets"] = args["offsets"] + 7
    args["out"] = torch.zeros(n + 7)
    with simulated_multiprocessors(132):
        assert splits(moved, args) > 1
        got = three_ways(moved, args, ("out",), rtol=1e-4, atol=1e-3, stablehlo=False)
    assert got["out"][:7].tolist() == [0.0] * 7


def test_split_scans_are_bitwise_reproducible() -> None:
    """Every piece folds its predecessors' aggregates in index order (never a timing-dependent mix), and the sync
    buffer restores itself, so a second launch of the same plan (its workspace kept, never filled) gives the same
    bits."""
    args = args_for(6, ("ex", "rev", "rex", "top"))
    runs = []
    with simulated_multiprocessors(132):
        for _ in range(2):
            out = {k: v.clone() for k, v in args.items()}
            forms(**out)
            runs.append(tuple(out[k].numpy().tobytes() for k in ("ex", "rev", "rex", "top")))
    assert runs[0] == runs[1]


def test_the_plan_verifies_after_every_pass_and_explain_shows_it() -> None:
    args = args_for(7, ("ex", "rev", "rex", "top"))
    k = forms.specialize(args)
    program = physical.construct(k)
    names = []
    for p in PIPELINE:
        if p.legal(program) is True and p.profitable(program):
            program = p.run(program)
            names.append(p.name)
            assert check(program, k) == [], p.name
    assert "split-region-scans" in names
    ops = program.groups[0].body.ops
    assert sum(isinstance(o, P.PublishSlot) for o in ops) == 1 and sum(isinstance(o, P.FoldSlots) for o in ops) == 4
    assert sum(isinstance(o, P.RegionScan) for o in ops) == 4
    # each piece's fold sits in a constexpr branch taken only where SPLITS_0 > 1
    branches = [o for o in ops if isinstance(o, P.If) and o.flag == "SPLIT_0"]
    assert len(branches) == 4 and all(isinstance(b.then_.ops[0], P.RegionFold) for b in branches)
    assert sum(w.resets for w in program.workspaces) == 1  # the sync buffer restores itself: no launch fills it
    with simulated_multiprocessors(132):
        plan = forms.explain(*args.values())
    assert "SPLITS_0 programs an instance: ticket t scans piece t % SPLITS_0 of instance t // SPLITS_0" in plan
    assert "waits for the flags of every lower ticket of its instance (acquire) and folds their slots from its " \
           "instance's first piece up to its own ticket, in index order" in plan
    assert "programs per block of subregions, passing piece aggregates on by look-back in index order" in plan
    assert "construction verifier: all" in plan


def test_groups_that_keep_whole_subregions_say_why() -> None:
    @intent.kernel
    def with_fold(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]], total: Out[f32[S]]):
        for s in parallel(S):
            out[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])
            total[s] = intent.sum(values[offsets[s]:offsets[s + 1]])

    program = physical.lower(with_fold.specialize({"values": torch.randn(9), "offsets": torch.tensor([0, 3, 3, 9]),
                                                    "out": torch.empty(9), "total": torch.empty(3)}))
    assert plan_region_scans(program, program.groups[0]) == "it also folds subregions"


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
    """Mutation: the scan walks the whole subregion instead of the program's piece: every split writes it."""
    k, p = _lowered(args_for(9, ("out",)))
    g = p.groups[0]
    ops = list(g.body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.RegionScan))
    fold = next(op for op in g.body.walk() if isinstance(op, P.RegionFold))
    b = next(op.results[0] for op in ops if isinstance(op, P.Load))  # offsets[s]: the subregion's own begin
    ops[at] = dataclasses.replace(ops[at], begin=b)
    assert fold.begin.id != b.id
    broken = p.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),))
    assert [v.rule for v in check(broken, k)] == ["split-effects"]


def test_one_piece_an_instance_reads_each_segment_once() -> None:
    """Where the launch decides SPLITS_0 = 1 (here: Triton's interpreter), the kernel holds no piece fold: the
    values are read once, by the scan."""
    from bench.traffic import counting

    args = args_for(10, ("out",))
    out = {n: v.clone() for n, v in args.items()}
    with simulated_multiprocessors(0), counting(out) as traffic:
        cumsum(**out)
    assert traffic.read_by["values"] == 4 * args["values"].numel()
    with simulated_multiprocessors(132), counting(out) as split:
        cumsum(**out)
    assert split.read_by["values"] == 2 * 4 * args["values"].numel()  # a piece's fold, then its scan
