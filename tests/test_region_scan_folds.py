"""Region folds beside region scans (physical/passes/scan_folds.py): a `parallel` body that both scans and folds
its segment (`run[b:e] = intent.cumsum(values[b:e])` and `total[s] = intent.sum(values[b:e])`) splits each segment
over the pieces of split-region-scans; each fold's pieces meet in slot order in the last ticket's holder (`stats`
scans in both directions, so the shapes' pieces serve it; scans of one direction beside folds balance by the data,
tests/test_balance_scan_folds.py). Launches
are sized as for a 132-multiprocessor device (Triton's interpreter runs the programs one at a time in order); the
held tile is lowered (`INTENT_LOOP_BUDGET`) so that the long segment's pieces are several and the run stays quick."""

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
from physical import ops as P
from physical.lowering import run_pipeline
from physical.passes.split_region_scan import plan_region_scans
from physical.passes.split_segments import plan_segments
from physical.verifier import check
from tests.breadth_support import three_ways
from tests.launch_fixtures import isolated_cache, small_tile  # noqa: F401  (fixtures)

S, E = dims("S E")

# one long segment, empty ones, short ones, boundaries at a chunk's edge (256) and past it
LENGTHS = [0, 6000, 1, 255, 256, 257, 0, 3, 2, 0, 700, 5]


@intent.func
def add(p, q):
    return p + q


@intent.kernel
def stats(values: f32[E], offsets: i64[S + 1], run: Out[f32[E]], back: Out[f32[E]], total: Out[f32[S]],
          peak: Out[f32[S]], mixed: Out[f32[S]], avg: Out[f32[S]]):
    for s in parallel(S):
        b, e = offsets[s], offsets[s + 1]
        total[s] = intent.sum(values[b:e])
        run[b:e] = intent.cumsum(values[b:e])
        peak[s] = intent.max(intent.abs(values[b:e]))
        back[b:e] = intent.cumsum(values[b:e], reverse=True, exclusive=True)
        mixed[s] = intent.reduce(values[b:e] * 0.5, add, identity=0.0) + 1.0
        avg[s] = intent.mean(values[b:e])


OUTS = ("run", "back", "total", "peak", "mixed", "avg")


@intent.kernel
def counts(values: i32[E], offsets: i32[S + 1], run: Out[i32[E]], total: Out[i32[S]], low: Out[i32[S]]):
    for s in parallel(S):
        b, e = offsets[s], offsets[s + 1]
        run[b:e] = intent.cumsum(values[b:e], exclusive=True)
        total[s] = intent.sum(values[b:e])
        low[s] = intent.min(values[b:e])


def args_for(seed: int, lengths: list[int] = LENGTHS) -> dict:
    g = torch.Generator().manual_seed(seed)
    off = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int64)
    n, m = int(off[-1]), len(lengths)
    return {"values": torch.randn(n, generator=g), "offsets": off, "run": torch.zeros(n), "back": torch.zeros(n),
            **{o: torch.zeros(m) for o in OUTS[2:]}}


def constexpr(kernel, args, name: str) -> int:
    return int(re.findall(rf"{name} = (\d+)", kernel.explain(*args.values()))[-1])


def expected(args: dict) -> dict[str, np.ndarray]:
    o = args["offsets"].tolist()
    v = args["values"].double()
    segs = [v[b:e] for b, e in zip(o, o[1:])]
    return {"run": torch.cat([x.cumsum(0) for x in segs]).numpy(),
            "back": torch.cat([x.flip(0).cumsum(0).flip(0) - x for x in segs]).numpy(),
            "total": np.array([float(x.sum()) for x in segs]),
            "peak": np.array([float(x.abs().max()) if len(x) else -np.inf for x in segs]),
            "mixed": np.array([float(x.sum()) * 0.5 + 1.0 for x in segs]),
            "avg": np.array([float(x.mean()) if len(x) else np.nan for x in segs])}


@pytest.mark.parametrize("sms", [132, 1])
def test_a_skewed_segment_scan_and_its_folds_split_and_agree_with_the_oracle(sms: int, small_tile) -> None:  # noqa: F811
    args = args_for(1)
    with simulated_multiprocessors(sms):
        assert constexpr(stats, args, "SPLITS_0") > 1
        got = three_ways(stats, args, OUTS, rtol=1e-4, atol=1e-3, stablehlo=False)
    for name, want in expected(args).items():
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-3, err_msg=name)


def test_the_split_is_bitwise_reproducible(small_tile) -> None:  # noqa: F811
    """The pieces meet in slot order and the counters restore themselves: a second launch on the same workspace
    (never filled) gives the same bits."""
    args = args_for(2)
    runs = []
    with simulated_multiprocessors(132):
        for _ in range(2):
            out = {k: v.clone() for k, v in args.items()}
            stats(**out)
            runs.append(tuple(out[k].numpy().tobytes() for k in OUTS))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("lengths", [[3000], [0, 0, 1, 0], [1], [2000, 0, 0]], ids=["one", "empty", "single", "tail"])
def test_every_shape_splits_correctly(lengths: list[int], small_tile) -> None:  # noqa: F811
    """One segment, empty segments around one value, one value, a long segment followed by empty ones (a launch
    holds at least one value: E >= 1)."""
    args = args_for(3, lengths)
    with simulated_multiprocessors(132):
        if sum(lengths) >= 2000:
            assert constexpr(stats, args, "SPLITS_0") > 1
        got = three_ways(stats, args, OUTS, rtol=1e-4, atol=1e-3, stablehlo=False)
    for name, want in expected(args).items():
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-3, err_msg=name)


def test_integer_folds_balance_exactly(small_tile) -> None:  # noqa: F811
    """A forward scan and folds over i32 offsets: the data balances them (balance_scan_folds.py), the long segment's
    helpers carrying the folds' partials beside the scan's aggregates."""
    g = torch.Generator().manual_seed(4)
    lengths = [0, 14000, *LENGTHS[2:]]  # three helpers' chunks of 5376 values: two of them whole in segment 1
    off = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32)
    n, m = int(off[-1]), len(lengths)
    args = {"values": torch.randint(-50, 50, (n,), generator=g, dtype=torch.int32), "offsets": off,
            "run": torch.zeros(n, dtype=torch.int32), "total": torch.zeros(m, dtype=torch.int32),
            "low": torch.zeros(m, dtype=torch.int32)}
    with simulated_multiprocessors(132):
        assert constexpr(counts, args, "SPLITS_0") == 1 and constexpr(counts, args, "HELPERS_0") == 3
        got = three_ways(counts, args, ("run", "total", "low"), rtol=0, atol=0, stablehlo=False)
    o = off.tolist()
    assert got["total"].tolist() == [int(args["values"][b:e].sum()) for b, e in zip(o, o[1:])]


def test_the_plan_verifies_after_every_pass_and_explain_shows_it(small_tile) -> None:  # noqa: F811
    args = args_for(5)
    k = stats.specialize(args)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert names[-1] == "split-region-scans" and "split-segments" not in names
    ops = program.groups[0].body.ops
    assert sum(isinstance(o, P.PublishSlot) for o in ops) == 1 and sum(isinstance(o, P.FoldSlots) for o in ops) == 2
    # the folds' pieces sit between the publish and the look-back's wait
    publish = next(n for n, o in enumerate(ops) if isinstance(o, P.PublishSlot))
    wait = next(n for n, o in enumerate(ops) if isinstance(o, P.FoldSlots))
    # the max and the custom fold fold their pieces; the sum and the mean's sum are the running sum's total: its
    # piece aggregates where SPLITS_0 > 1, their own fold otherwise
    assert sum(isinstance(o, P.RegionFold) for o in ops[publish:wait]) == 2
    totals = [o for o in ops[publish:wait] if isinstance(o, P.If) and o.results[0].name == "partial"]
    assert len(totals) == 2 and all(isinstance(t.else_.ops[-2], P.RegionFold) for t in totals)
    assert sum(w.resets for w in program.workspaces) == 2  # the look-back's sync buffer and the folds' counter
    with simulated_multiprocessors(132):
        plan = stats.explain(*args.values())
    assert "the region folds beside the scans: the program of piece s folds piece s of each fold's subregion " \
           "(whole chunks) into its own slot of fold0, fold1, fold2, fold3 (one slot per piece) while " \
           "the predecessors' aggregates arrive, and draws a ticket from arrivals (acq_rel atomic, device scope); " \
           "the one that draws the last folds the SPLITS_0 slots in slot order with each fold's combine (the same " \
           "order every run: bitwise reproducible, no float atomics), stores the results and resets the counter " \
           "(nobody waits for it)" in plan
    assert "construction verifier: all" in plan


def _lowered():
    args = args_for(6)
    k = stats.specialize(args)
    return k, physical.lower(k)


def _mutated(p, g, ops):
    new = dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops)))
    return p.replace(groups=tuple(new if x.id == g.id else x for x in p.groups))


def test_a_fold_result_stored_by_every_piece_is_refused() -> None:
    """Mutation: the store of a segment's total drops the last ticket from its mask, so every piece's program
    would write its own partial."""
    k, p = _lowered()
    g = p.groups[0]
    ops = list(g.body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.Store) and p.buffer(op.access.buffer).name == "total")
    lane_ok = next(op.results[0] for op in ops if isinstance(op, P.Compare) and op.fn.value == "lt"
                   and op.lhs.name and op.lhs.name.startswith("flat"))
    ops[at] = dataclasses.replace(ops[at], access=dataclasses.replace(ops[at].access, mask=lane_ok))
    found = [str(v) for v in check(_mutated(p, g, ops), k)]
    assert len(found) == 1 and re.fullmatch(
        r"\[split-effects\] store \(from store at test_region_scan_folds\.py:\d+\) writes total in every program "
        r"that shares its block: a group split over programs writes outside its workspace only as the holder of the "
        r"last ticket", found[0]), found


def test_a_fold_piece_written_to_another_pieces_slot_is_refused() -> None:
    """Mutation: a program writes its fold partial into slot 0 whatever its piece: the combine would read pieces
    that were never written."""
    k, p = _lowered()
    g = p.groups[0]
    branch = next(op for op in g.body.ops if isinstance(op, P.If) and any(
        isinstance(o, P.Ticket) for o in op.then_.walk()))
    zero = next(op.results[0] for op in g.body.ops if isinstance(op, P.Const) and op.value == 0
                and op.results[0].type.index)
    ops = [dataclasses.replace(op, access=dataclasses.replace(op.access, copy=zero))
           if isinstance(op, P.Store) and op.access.copy is not None else op for op in branch.then_.ops]
    new = dataclasses.replace(branch, then_=dataclasses.replace(branch.then_, ops=tuple(ops)))
    broken = _mutated(p, g, [new if op is branch else op for op in g.body.ops])
    rules = {v.rule for v in check(broken, k)}
    assert rules == {"workspace-protocol"}, rules


def test_groups_that_keep_whole_subregions_say_why() -> None:
    @intent.kernel
    def with_argmax(values: f32[E], starts: i32[S], offsets: i64[S + 1], out: Out[f32[E]], best: Out[i64[S]]):
        for s in parallel(S):
            out[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])
            best[s] = intent.argmax(values[starts[s]:offsets[s + 1]])

    program = physical.lower(with_argmax.specialize({"values": torch.randn(9), "offsets": torch.tensor([0, 3, 3, 9]),
                                                      "starts": torch.tensor([0, 3, 3], dtype=torch.int32),
                                                      "out": torch.empty(9),
                                                      "best": torch.empty(3, dtype=torch.int64)}))
    assert plan_region_scans(program, program.groups[0]) == "its subregion bounds differ in type"
    program = physical.construct(stats.specialize(args_for(7)))
    assert plan_segments(program, program.groups[0]) == "it has effects before its folds complete"


@intent.kernel
def with_total(values: f32[E], offsets: i64[S + 1], run: Out[f32[E]], total: Out[f32[S]], peak: Out[f32[S]]):
    for s in parallel(S):
        b, e = offsets[s], offsets[s + 1]
        run[b:e] = intent.cumsum(values[b:e])
        total[s] = intent.sum(values[b:e])
        peak[s] = intent.max(values[b:e])


def test_a_fold_that_is_a_scans_total_takes_its_piece_aggregates(isolated_cache) -> None:  # noqa: F811
    """`total[s] = intent.sum(values[b:e])` beside `run[b:e] = intent.cumsum(values[b:e])`: balanced by the data
    (the bounds are one offsets tensor's: balance_scan_folds.py), its partial is the scan's aggregate of each
    range, so the values are read by the scan and the max only; without helpers the fold reads its subregion
    itself."""
    from bench.traffic import counting

    lengths = [0, 40000, 1, 255, 256, 0, 3]  # the default held tile holds each piece: the scan reads each once
    args = args_for(8, lengths)
    args = {k: args[k] for k in ("values", "offsets", "run", "total")} | {"peak": torch.zeros(len(lengths))}
    n = args["values"].numel()
    program = physical.lower(with_total.specialize(args))
    partials = [op for op in program.groups[0].body.ops if isinstance(op, P.If) and op.results
                and op.results[0].name == "partial"]
    assert len(partials) == 1 and len(partials[0].then_.ops) == 1  # the sum's: the aggregate, no fold
    for sms, reads in ((132, 2), (0, 3)):
        out = {k: v.clone() for k, v in args.items()}
        with simulated_multiprocessors(sms):
            assert (constexpr(with_total, out, "HELPERS_0") > 1) == (sms == 132)
            if sms == 132:
                assert "(a fold that is a scan's total takes that scan's aggregate of each range as its partial: " \
                       "the subregion is read once, by the scan)" in with_total.explain(*out.values())
            with counting(out) as traffic:
                with_total(**out)
        assert traffic.read_by["values"] == reads * 4 * n, sms
        want = expected(args)
        np.testing.assert_allclose(out["total"].numpy(), want["total"], rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(out["run"].numpy(), want["run"], rtol=1e-4, atol=1e-3)


def test_a_scan_stands_for_a_fold_only_with_the_identical_identity() -> None:
    """A sum's identity is -0.0: a scan starting from +0.0 would give an empty or all -0.0 segment the total +0.0,
    so it is not that fold's total (identities are compared as emitted, not with `==`, under which 0.0 == -0.0)."""
    from physical.passes.scan_folds import matching_scan

    args = args_for(8, [0, 40, 1])
    args = {k: args[k] for k in ("values", "offsets", "run", "total")} | {"peak": torch.zeros(3)}
    ops = physical.construct(with_total.specialize(args)).groups[0].body.ops
    n = next(i for i, op in enumerate(ops) if isinstance(op, P.RegionScan))
    fold = next(op for op in ops if isinstance(op, P.RegionFold) and op.identity == (-0.0,))
    assert matching_scan(ops, fold, [n]) == n
    plus_zero = (*ops[:n], dataclasses.replace(ops[n], identity=(0.0,)), *ops[n + 1:])
    assert matching_scan(plus_zero, fold, [n]) is None
