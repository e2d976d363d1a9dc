"""Region folds beside region scans balanced by the data (physical/passes/balance_scan_folds.py): where one offsets
tensor bounds a group's scans and folds, the helpers that scan a long segment's chunks also fold them, publish
their partials beside the scans' aggregates, and the subregion's last helper folds them in index order and stores
the result. The launches are sized as for a 132-multiprocessor device (Triton's interpreter runs the programs one
at a time in ticket order); the held tile is lowered so that a helper's chunk also scans a rest after its tile."""

from __future__ import annotations

import itertools
import re

import numpy as np
import torch

import intent
import physical
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, i64, parallel, pred
from physical import ops as P
from physical.lowering import run_pipeline
from tests.breadth_support import three_ways
from tests.launch_fixtures import isolated_cache, small_tile  # noqa: F401  (fixtures)

S, E = dims("S E")

# one long segment, empty ones (also at its ends), short ones, boundaries at chunk edges
LENGTHS = [0, 3, 0, 30000, 0, 1, 4096, 10240, 257, 0, 5, 2000, 0]


@intent.func
def latest(p, q):
    return intent.where(q != 0.0, q, p)  # the last nonzero element: the partials must meet in position order


@intent.kernel
def stats(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]], total: Out[f32[S]], top: Out[i64[S]],
          last: Out[f32[S]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        out[b:e] = intent.cumsum(values[b:e])
        total[s] = intent.sum(values[b:e])
        top[s] = intent.argmax(values[b:e])
        last[s] = intent.reduce(values[b:e], latest, identity=0.0)


@intent.kernel
def back_stats(values: f32[E], offsets: i64[S + 1], rev: Out[f32[E]], total: Out[f32[S]], low: Out[i64[S]],
               last: Out[f32[S]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        rev[b:e] = intent.cumsum(values[b:e], reverse=True)
        total[s] = intent.sum(values[b:e]) * 2.0
        low[s] = intent.argmin(values[b:e])
        last[s] = intent.reduce(values[b:e], latest, identity=0.0)


@intent.kernel
def flags(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]], some: Out[pred[S]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        out[b:e] = intent.cumsum(values[b:e])
        some[s] = intent.any(values[b:e] > 2.5)


STATS = ("out", "total", "top", "last")
BACK = ("rev", "total", "low", "last")


def args_for(seed: int, outputs: tuple[str, ...], lengths: list[int] = LENGTHS, nans: bool = False) -> dict:
    """Small integers (exact sums in any order; many ties of the extremes, so the first position must win) with
    zeros (the last nonzero element depends on where the chunks meet)."""
    g = torch.Generator().manual_seed(seed)
    offsets = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int64)
    n = int(offsets[-1])
    values = torch.randint(-4, 5, (n,), generator=g).float()
    if nans:  # two NaNs in the long segment, in different chunks: the first one wins argmin
        values[20000] = values[9000] = float("nan")
    segments = len(lengths)
    shapes = {"out": (n,), "rev": (n,), "total": (segments,), "last": (segments,), "top": (segments,),
              "low": (segments,)}
    made = {k: torch.zeros(shapes[k], dtype=torch.int64 if k in ("top", "low") else torch.float32) for k in outputs}
    return {"values": values, "offsets": offsets, **made}


def constexprs(kernel, args) -> dict[str, int]:
    text = kernel.explain(*args.values())
    line = next(x for x in text.splitlines() if x.strip().startswith("constexprs: "))  # at these shapes
    return {k: int(v) for k, v in re.findall(r"(\w+) = (\d+)", line)}


def check_exact(kernel, args: dict, outputs: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The launch against the oracle, bit for bit (integer-valued sums are exact in any order; NaN equals NaN)."""
    return three_ways(kernel, args, outputs, rtol=0.0, atol=0.0, stablehlo=False)


def test_a_segments_total_beside_its_running_sum_balances_by_the_data(small_tile) -> None:  # noqa: F811
    args = args_for(1, STATS)
    with simulated_multiprocessors(132):
        c = constexprs(stats, args)
        assert c["SPLITS_0"] == 1 and c["HELPERS_0"] > 3  # the helpers, not the shapes' pieces
        check_exact(stats, args, STATS)


def test_folds_beside_a_reverse_scan_meet_in_position_order(small_tile) -> None:  # noqa: F811
    """The helpers of a scan from the end take the chunks from the last one down: the last helper of a subregion
    holds its first chunk, and folds its earlier helpers' partials (the later chunks) after its own."""
    args = args_for(2, BACK, nans=True)
    with simulated_multiprocessors(132):
        assert constexprs(back_stats, args)["HELPERS_0"] > 3
        got = check_exact(back_stats, args, BACK)
    assert got["low"][3] == 9000 - 3  # the first NaN of the long segment (which begins at 3)


def test_balanced_folds_beside_scans_are_bitwise_reproducible(small_tile) -> None:  # noqa: F811
    """Float values: the partials meet in one order whoever arrives when, and the workspace restores itself, so
    a second launch (the workspace kept, never filled) gives the same bits."""
    g = torch.Generator().manual_seed(3)
    args = args_for(3, STATS)
    args["values"] = torch.randn(args["values"].shape, generator=g)
    runs = []
    with simulated_multiprocessors(132):
        for _ in range(2):
            out = {k: v.clone() for k, v in args.items()}
            stats(**out)
            runs.append(tuple(out[k].numpy().tobytes() for k in STATS))
        got = three_ways(stats, args, STATS, rtol=1e-5, atol=1e-3, stablehlo=False)
    assert runs[0] == runs[1]
    assert got["top"].tolist() == stats.oracle(**args)["top"].tolist()


def test_the_interpreter_has_no_helpers_and_agrees(isolated_cache) -> None:  # noqa: F811
    args = args_for(4, STATS, [0, 3, 0, 3000, 1, 700, 0])
    assert constexprs(stats, args)["HELPERS_0"] == 0
    check_exact(stats, args, STATS)


def test_a_pred_fold_beside_scans_keeps_the_shapes_pieces(small_tile) -> None:  # noqa: F811
    """any/all partials are bytes in their slots: such folds split on the shapes' pieces (scan_folds.py)."""
    args = args_for(5, ("out",))
    args["some"] = torch.zeros(len(LENGTHS), dtype=torch.bool)
    program = physical.lower(flags.specialize(args))
    assert not any(isinstance(op, P.HelperIndex) for op in program.walk())
    with simulated_multiprocessors(132):
        three_ways(flags, args, ("out", "some"), rtol=0.0, atol=0.0, stablehlo=False)


def test_the_plan_verifies_after_every_pass_and_explain_shows_it(small_tile) -> None:  # noqa: F811
    args = args_for(6, STATS)
    k = stats.specialize(args)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert "split-region-scans" in names
    ops = program.groups[0].body.ops
    assert sum(isinstance(o, P.PublishSlot) for o in ops) == 1  # the partials travel with the aggregates
    assert sum(isinstance(o, P.FoldSlots) for o in ops) == 4  # the scan's look-back and one per fold
    assert not any(isinstance(o, P.Ticket) for o in program.groups[0].body.walk())  # no arrivals counter
    slots = sorted(b.name for b in program.buffers if b.name.startswith("fold"))
    assert slots == ["fold0_slot0_g0", "fold1_slot0_g0", "fold1_slot1_g0", "fold2_slot0_g0"]
    with simulated_multiprocessors(132):
        plan = stats.explain(*args.values())
    assert "and beside it its partial of each region fold beside the scans (its lanes' partials, each of the " \
           "range the lane scans, folded across the lanes in lane order) in the same slot of fold0_slot0_g0, " \
           "fold1_slot0_g0, fold1_slot1_g0, fold2_slot0_g0" in plan
    assert "then the last helper of each subregion handed over (the highest ticket among its helpers) waits for " \
           "the same flags and folds the slots of fold1_slot0_g0, fold1_slot1_g0 of its subregion's earlier " \
           "helpers in index order" in plan
    assert "(a fold that is a scan's total takes that scan's aggregate of each range as its partial: the " \
           "subregion is read once, by the scan)" in plan
    assert "construction verifier: all" in plan
