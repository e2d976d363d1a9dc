"""Balanced jagged folds (physical/passes/balance_segments.py over a (segments, columns) workset): the bounds of
`out[s, :] = intent.mean(values[b:e, :], axis=0)` are `offsets[flat // D]`, `offsets[flat // D + 1]`, so helper
programs past the blocks fold a chunk of rows of the segment that holds it for all of its columns (the lanes of
the block that holds the segment), and the last participant folds head, chunks and tail in order. Launches are
sized as for a 132-multiprocessor device, where the shape split gives one program per block."""

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
    [12, 16)) and across two (columns 6..8: its block programs fold it whole), D = 1."""
    args = args_for(skewed(at), width, seed=width + at)
    with simulated_multiprocessors(132):
        c = constexprs(args)
        assert c["SPLITS_0"] == 1 and c["HELPERS_0"] > 1  # the shape split gives nothing; the data does
        agree(args)


def test_results_are_bitwise_identical_run_to_run() -> None:
    args = args_for(skewed(17, big=12000), 4, seed=9)
    with simulated_multiprocessors(132):
        runs = [run(args) for _ in range(3)]
    for k in OUTS:
        assert runs[0][k].tobytes() == runs[1][k].tobytes() == runs[2][k].tobytes()


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


def test_the_plan_uses_helpers_and_verifies() -> None:
    args = args_for(skewed(17), 4)
    with simulated_multiprocessors(132):
        k, program, names = lowered(args)
        text = jagged.explain(*args.values())
    assert "split-segments" in names
    ops = list(program.walk())
    assert sum(isinstance(o, P.HelperIndex) for o in ops) == 1
    assert "balanced by the data: HELPERS_0 helper programs past the blocks" in text
    # a helper's chunk slot holds an element per column of its segment
    assert re.search(r"chunk0: f32\[JD\] invocation_workspace.*\(HELPERS_0 copies\)", text)


def test_verifier_refuses_a_helper_joining_a_segment_across_blocks() -> None:
    """Without the test that the block a helper decodes (its segment's first column's) holds the segment's last
    column, the helper could join lanes of another block: they would wait for a participant that never comes."""
    args = args_for(skewed(17), 3)
    with simulated_multiprocessors(132):
        k, program, _ = lowered(args)
    helper_block = next(op.helper_block for op in program.walk() if isinstance(op, P.OwnedInstances))

    def loose(op):
        if isinstance(op, P.Binary) and op.fn.value == "and" and op.results[0].name == "joins":
            test = next((x for x in program.walk() if any(r.id == op.rhs.id for r in x.results)), None)
            if isinstance(test, P.Compare) and test.rhs.id == helper_block.id:
                return dataclasses.replace(op, rhs=op.lhs)
        return op

    broken = edit(program, lambda op: None if (new := loose(op)) is op else new)
    found = [str(v) for v in check(broken, k)]
    assert len(found) == 1 and re.fullmatch(
        r"\[ownership\] a helper of group 0 \(parallel\) joins the lane whose instance is %\d+, which may lie "
        r"outside the block %\d+ its owned_instances decodes: the helper would draw no ticket and write no slot, "
        r"and the lane's last participant would never come", found[0])
