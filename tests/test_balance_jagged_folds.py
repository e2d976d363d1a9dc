"""Balanced jagged folds (physical/passes/balance_segments.py over a (segments, columns) workset): the bounds of
`out[s, :] = intent.mean(values[b:e, :], axis=0)` are `offsets[flat // D]`, `offsets[flat // D + 1]`, so helper
programs past the blocks fold a chunk of rows of the segment that holds it for its columns in one block (a helper
per chunk and block the segment's columns may span), and the last participant folds head, chunks and tail in
order. Launches are sized as for a 132-multiprocessor device: the data decides, one program per block."""

from __future__ import annotations

import dataclasses
import itertools
import re

import numpy as np
import pytest
import torch

import intent
import physical
from bench.traffic import TrafficCounter
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, i64, parallel
from physical import ops as P
from physical.lowering import run_pipeline
from physical.verifier import check
from tests.mutations import edit

J, JE, JD = dims("J JE JD")


@intent.kernel
def jagged(values: f32[JE, JD], offsets: i64[J + 1], avg: Out[f32[J, JD]], top: Out[f32[J, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        avg[s, :] = intent.mean(values[b:e, :], axis=0)
        top[s, :] = intent.max(values[b:e, :], axis=0)


OUTS = ("avg", "top")


def skewed(at: int, big: int = 9000, n: int = 47) -> list[int]:
    lengths = [7] * n
    lengths[at] = big
    lengths[1] = lengths[n - 3] = 0  # empty segments
    lengths[n - 2] = 1
    return lengths


def args_for(lengths: list[int], width: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    off = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int64)
    n, s = int(off[-1]), len(lengths)
    return {"values": torch.randn(max(n, 1), width, generator=g), "offsets": off,
            **{k: torch.empty(s, width) for k in OUTS}}


def constexprs(args) -> dict[str, int]:
    text = jagged.explain(*args.values())
    line = next(x for x in text.splitlines() if x.strip().startswith("constexprs: "))
    return {k: int(v) for k, v in re.findall(r"(\w+) = (\d+)", line)}


def run(args) -> dict[str, np.ndarray]:
    out = {k: v.clone() for k, v in args.items()}
    jagged(**out)
    return {k: out[k].numpy() for k in OUTS}


def agree(args) -> dict[str, np.ndarray]:
    got = run(args)
    v, o = args["values"].double(), args["offsets"].tolist()
    width = v.shape[1]
    avg = [v[b:e].mean(0).numpy() if e > b else np.full(width, np.nan) for b, e in zip(o, o[1:])]
    top = [v[b:e].amax(0).numpy() if e > b else np.full(width, -np.inf) for b, e in zip(o, o[1:])]
    np.testing.assert_allclose(got["avg"], np.stack(avg), rtol=1e-5, atol=1e-5, equal_nan=True)
    assert np.array_equal(got["top"], np.stack(top).astype(np.float32))
    return got


@pytest.mark.parametrize(("width", "at"), [(4, 17), (3, 4), (3, 2), (1, 17)])
def test_a_huge_segment_is_spread_over_helpers_for_all_its_columns(width: int, at: int) -> None:
    """D = 4 (a block per segment), odd D = 3 with the huge segment in one block (columns 12..14 of the block
    [12, 16)) and across two (columns 6..8 in blocks of 4), D = 1."""
    args = args_for(skewed(at), width, seed=width + at)
    with simulated_multiprocessors(132):
        c = constexprs(args)
        assert c["SPLITS_0"] == 1 and c["HELPERS_0"] > 1  # the shape split gives nothing; the data does
        agree(args)


def helper_bytes(args, c: dict[str, int]) -> tuple[int, dict[str, np.ndarray]]:
    """The bytes the helper programs (the last HELPERS_0 of the grid) move, and the results."""
    segments, width = args["offsets"].numel() - 1, args["values"].shape[1]
    blocks = -(-segments * width // c["BLOCK_I0"]) * c["SPLITS_0"]
    with TrafficCounter() as counter:
        got = agree(args)
    t = counter.traffic
    assert max(t.program_sector_bytes) < blocks + c["HELPERS_0"]
    return sum(b for p, b in t.program_sector_bytes.items() if p >= blocks), got


@pytest.mark.parametrize(("width", "at", "span"), [(3, 2, 2), (5, 3, 2), (20, 17, 2), (40, 17, 3), (40, 2, 3)])
def test_a_segment_across_blocks_gets_a_helper_per_block(width: int, at: int, span: int) -> None:
    """Odd D whose huge segment straddles a block's edge (D = 3 in blocks of 4: columns 6..8; D = 5 in blocks of 8:
    columns 15..19), D > 16 (blocks of 16: D = 20 spans 2 blocks, D = 40 up to 3): each chunk has a helper per
    block the segment's columns may span (HELPER_SPAN_0), and the helper programs move most of the huge segment."""
    big = 60000 // width
    args = args_for(skewed(at, big=big), width, seed=width + at)
    with simulated_multiprocessors(132):
        c = constexprs(args)
        assert c["HELPER_SPAN_0"] == span and c["CHUNKS_0"] > 1
        assert c["HELPERS_0"] == span * c["CHUNKS_0"]
        moved, _ = helper_bytes(args, c)
    assert moved >= 0.6 * big * width * 4  # the head and tail (under a chunk each) stay with the blocks


def test_results_are_bitwise_identical_run_to_run() -> None:
    args = args_for(skewed(17, big=12000), 4, seed=9)
    wide = args_for(skewed(2, big=1500), 40, seed=10)
    with simulated_multiprocessors(132):
        runs = [run(args) for _ in range(3)]
        wide_runs = [run(wide) for _ in range(2)]
    for k in OUTS:
        assert runs[0][k].tobytes() == runs[1][k].tobytes() == runs[2][k].tobytes()
        assert wide_runs[0][k].tobytes() == wide_runs[1][k].tobytes()


def test_all_empty_segments_with_wide_rows() -> None:
    """Segments all empty (E = 0: the one row of values is never read) and nearly all empty over D = 20: every
    empty segment's mean is NaN and its max -inf."""
    with simulated_multiprocessors(132):
        got = agree(args_for([0] * 9, 20, seed=9))
        agree(args_for([0, 0, 3, 0], 20, seed=4))
    assert np.isnan(got["avg"]).all() and (got["top"] == -np.inf).all()


def test_one_segment_and_the_interpreter_agree() -> None:
    with simulated_multiprocessors(132):
        agree(args_for([5000], 4, seed=3))
    with simulated_multiprocessors(0):
        args = args_for(skewed(17), 4, seed=4)
        assert constexprs(args)["HELPERS_0"] == 0
        agree(args)


def lowered(args):
    k = jagged.specialize(args)
    program, names = run_pipeline(physical.construct(k), verify_with=k)  # the verifier after every pass
    return k, program, names


@pytest.fixture(scope="module")
def plan():
    """The kernel lowered once for the tests of the plan and of the verifier: the program depends on the
    arguments' dtypes only (the segments, the columns and the device are launch values)."""
    with simulated_multiprocessors(132):
        return lowered(args_for(skewed(17), 4))


def test_the_plan_uses_helpers_and_verifies(plan) -> None:
    args = args_for(skewed(17), 4)
    k, program, names = plan
    with simulated_multiprocessors(132):
        text = jagged.explain(*args.values())
    assert "split-segments" in names
    ops = list(program.walk())
    assert sum(isinstance(o, P.HelperIndex) for o in ops) == 1
    assert "balanced by the data: HELPERS_0 helper programs past the blocks" in text
    # a helper's chunk slot holds an element per column of its segment
    assert re.search(r"chunk0: f32\[JD\] invocation_workspace.*\(HELPERS_0 copies\)", text)


def test_verifier_refuses_a_helper_joining_lanes_outside_its_block(plan) -> None:
    """Without the test that a lane lies in the block its helper decodes (`flat // BLOCK_I0 == helper_block`), the
    helpers of a segment whose columns span two blocks (D = 3 in blocks of 4) could join lanes of another block:
    they would wait for a participant that never comes."""
    k, program, _ = plan
    helper_block = next(op.helper_block for op in program.walk() if isinstance(op, P.OwnedInstances))

    def loose(op):
        if isinstance(op, P.Binary) and op.fn.value == "and" and op.results[0].name == "joins":
            test = next((x for x in program.walk() if any(r.id == op.rhs.id for r in x.results)), None)
            if isinstance(test, P.Compare) and test.rhs.id == helper_block.id:
                return dataclasses.replace(op, rhs=op.lhs)
        return op

    broken = edit(program, lambda op: None if (new := loose(op)) is op else new)
    found = [str(v) for v in check(broken, k)]
    assert found == [
        f"[ownership] a helper of group 0 (parallel) joins a lane by a test of neither form `flat == u` nor `flat // "
        f"BLOCK == helper_block`: that the lane lies in the block %{helper_block.id} its owned_instances decodes is "
        f"not proven, and the lane's last participant might never come"]


def test_verifier_refuses_a_chunk_shared_by_helpers_without_the_part_test(plan) -> None:
    """A chunk of a segment whose columns span blocks has a helper per block; without the test that a lane joins
    the helper of its own part, nothing shows that only one of a chunk's helpers joins each lane, so the last
    participant's count (its segment's chunks) is not proven, nor that a lane's part is one a chunk has a helper
    for (ownership)."""
    k, program, _ = plan

    def producer(v):
        return next((x for x in program.walk() if any(r.id == v.id for r in x.results)), None)

    def loose(op):
        if isinstance(op, P.Binary) and op.fn.value == "and":
            test = producer(op.rhs)
            if isinstance(test, P.Compare) and test.lhs.name == "lane_part":
                return dataclasses.replace(op, rhs=op.lhs)
        return op

    broken = edit(program, lambda op: None if (new := loose(op)) is op else new)
    violations = check(broken, k)
    # the stores after the last participant's test are then no one participant's either (split-effects)
    assert {v.rule for v in violations} == {"ownership", "workspace-protocol", "split-effects"}
    assert [v.message for v in violations if v.rule == "ownership"] == [
        "a helper of group 0 (parallel) joins a lane by no part test `E == part` of a known form: a chunk the lane "
        "hands to the helpers might be taken for it by none"]
    found = [v.message for v in violations if v.rule == "workspace-protocol"]
    tests = [m for m in found if m.startswith("compare")]
    assert tests and all(re.fullmatch(
        r"compare \(from region_fold at test_balance_jagged_folds\.py:\d+\) tests for the last participant of "
        r"arrivals at %\d+, not at SPLITS_0 - 1 plus the helpers that join the lane \(select\(D, maximum\(hi - lo, "
        r"0\), 0\) for D and lo <= chunk < hi of the helpers' join test\): the last ticket would go to an early "
        r"participant or to none", m) for m in tests)
    # and so the slots' reads and the counter's reset are not proven to be the last participant's
    assert all(re.fullmatch(r"load \(from region_fold at test_balance_jagged_folds\.py:\d+\) reads slot array "
                            r"\w+ outside the holder of the last ticket: the other programs' slots may not be "
                            r"written yet", m) or m == "ticket counter arrivals is not reset by the program that "
                            "draws the last ticket: the next launch would start from a stale count"
               for m in found if m not in tests)
    assert not [v for v in check(program, k)]


def test_blocks_spanned_is_the_most_blocks_a_segment_lies_in() -> None:
    """HELPER_SPAN_g against counting: segment u's columns u * D .. u * D + D - 1 over blocks of B instances."""
    from physical.launch_expr import LConst
    from physical.passes.balance_segments import blocks_spanned

    for b in (1, 2, 4, 8, 16, 32):
        for d in range(1, 100):
            most = max((u * d + d - 1) // b - (u * d) // b + 1 for u in range(2 * b + 1))
            assert blocks_spanned(LConst(d), LConst(b)).evaluate({}) == most, (d, b)
