"""Balanced jagged scans (physical/passes/balance_region_scan.py over a (segments, columns) workset): the bounds of
`out[b:e, :] = intent.cumsum(values[b:e, :], axis=0)` are `offsets[flat // D]`, `offsets[flat // D + 1]`, so helper
programs past the blocks scan a chunk of rows of the segment that holds it in each of its columns (the lanes of the
block that holds the segment), each lane after the aggregates of the segment's earlier helpers in its column.
Launches are sized as for a 132-multiprocessor device, where the shape split gives one program per block."""

from __future__ import annotations

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
from tests.test_balance_jagged_folds import skewed

J, JE, JD = dims("J JE JD")


@intent.kernel
def running(values: f32[JE, JD], offsets: i64[J + 1], fwd: Out[f32[JE, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        fwd[b:e, :] = intent.cumsum(values[b:e, :], axis=0)


@intent.kernel
def backwards(values: f32[JE, JD], offsets: i64[J + 1], back: Out[f32[JE, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        back[b:e, :] = intent.cumsum(values[b:e, :], axis=0, reverse=True)


@intent.kernel
def exclusive(values: f32[JE, JD], offsets: i64[J + 1], ex: Out[f32[JE, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        ex[b:e, :] = intent.cumsum(values[b:e, :], axis=0, exclusive=True)


@intent.kernel
def tops(values: f32[JE, JD], offsets: i64[J + 1], top: Out[f32[JE, JD]]):
    for s in parallel(J):
        b, e = offsets[s], offsets[s + 1]
        top[b:e, :] = intent.cummax(values[b:e, :], axis=0)


def args_for(lengths: list[int], width: int, outs: tuple[str, ...], seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    off = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int64)
    n = max(int(off[-1]), 1)
    return {"values": torch.randn(n, width, generator=g), "offsets": off,
            **{k: torch.zeros(n, width) for k in outs}}


def constexprs(kernel, args) -> dict[str, int]:
    text = kernel.explain(*args.values())
    line = next(x for x in text.splitlines() if x.strip().startswith("constexprs: "))
    return {k: int(v) for k, v in re.findall(r"(\w+) = (\d+)", line)}


def run(kernel, args, outs) -> dict[str, np.ndarray]:
    out = {k: v.clone() for k, v in args.items()}
    kernel(**out)
    return {k: out[k].numpy() for k in outs}


def oracle(args, reverse: bool, excl: bool, top: bool = False) -> np.ndarray:
    v, o = args["values"].double().numpy(), args["offsets"].tolist()
    want = np.zeros_like(v)
    for b, e in zip(o, o[1:]):
        seg = v[b:e][::-1] if reverse else v[b:e]
        run_ = np.maximum.accumulate(seg, axis=0) if top else np.cumsum(seg, axis=0)
        if excl:
            run_ = run_ - seg
        want[b:e] = run_[::-1] if reverse else run_
    return want


def agree(kernel, args, outs) -> dict[str, np.ndarray]:
    got = run(kernel, args, outs)
    for k in outs:
        want = oracle(args, reverse=k == "back", excl=k == "ex", top=k == "top")
        np.testing.assert_allclose(got[k], want, rtol=1e-4, atol=1e-3, err_msg=k)
    return got


@pytest.mark.parametrize(("width", "at"), [(4, 17), (3, 4), (3, 2), (1, 17)])
def test_a_huge_segment_is_scanned_by_helpers_in_all_its_columns(width: int, at: int) -> None:
    """D = 4 (a block per segment), odd D = 3 with the huge segment in one block (columns 12..14 of the block
    [12, 16)) and across two (columns 6..8: its block programs scan it whole), D = 1; forward and reverse."""
    for kernel, out in ((running, "fwd"), (backwards, "back")):
        args = args_for(skewed(at, big=6000 if width > 1 else 20000), width, (out,), seed=width + at)
        with simulated_multiprocessors(132):
            c = constexprs(kernel, args)
            assert c["SPLITS_0"] == 1 and c["HELPERS_0"] > 1  # the shape split gives nothing; the data does
            agree(kernel, args, (out,))


def test_an_exclusive_scan_is_balanced() -> None:
    args = args_for(skewed(17, big=6000), 4, ("ex",), seed=5)
    with simulated_multiprocessors(132):
        assert constexprs(exclusive, args)["HELPERS_0"] > 1
        agree(exclusive, args, ("ex",))


def test_results_are_bitwise_identical_run_to_run() -> None:
    args = args_for(skewed(17, big=8000), 4, ("fwd",), seed=9)
    with simulated_multiprocessors(132):
        runs = [run(running, args, ("fwd",))["fwd"] for _ in range(3)]
    assert runs[0].tobytes() == runs[1].tobytes() == runs[2].tobytes()


def test_one_segment_and_the_interpreter_agree() -> None:
    with simulated_multiprocessors(132):
        agree(running, args_for([4000], 4, ("fwd",), seed=3), ("fwd",))
    with simulated_multiprocessors(0):
        args = args_for(skewed(17, big=6000), 4, ("fwd",), seed=4)
        assert constexprs(running, args)["HELPERS_0"] == 0
        agree(running, args, ("fwd",))


def test_the_plan_uses_helpers_and_verifies() -> None:
    args = args_for(skewed(17, big=6000), 4, ("fwd",))
    with simulated_multiprocessors(132):
        k = running.specialize(args)
        program, _ = run_pipeline(physical.construct(k), verify_with=k)  # the verifier after every pass
        text = running.explain(*args.values())
    assert sum(isinstance(o, P.HelperIndex) for o in program.walk()) == 1
    assert "balanced: HELPERS_0 = " in text
    assert "in each of the segment's columns (a lane a column: where a segment's columns may span several " \
           "blocks, a chunk has a helper per block" in text
    assert "per column (its held tile, then its rest) in slot = blocks * BLOCK_I0 + column * CHUNKS_0 + its " \
           "position among the helpers of its part" in text
    assert "write no slot, only their flag" in text


def helper_traffic(kernel, args, out: str) -> tuple[list[int], int]:
    """The sector bytes each program moved (in ticket order: the interpreter runs them one at a time), and how
    many of them are helpers (the last HELPERS_0)."""
    from bench.traffic import counting

    with simulated_multiprocessors(132):
        helpers_ = constexprs(kernel, args)["HELPERS_0"]
        copy = {k: v.clone() for k, v in args.items()}
        with counting(copy) as traffic:
            kernel(**copy)
    want = oracle(args, reverse=out == "back", excl=out == "ex", top=out == "top")
    np.testing.assert_allclose(copy[out].numpy(), want, rtol=1e-4, atol=1e-3, err_msg=out)
    moved = [traffic.program_sector_bytes.get(p, 0) for p in range(traffic.programs)]
    return moved, helpers_


@pytest.mark.parametrize(("width", "span"), [(40, 3), (20, 2), (3, 2)])
def test_a_segment_whose_columns_span_blocks_gets_a_helper_per_block(width: int, span: int) -> None:
    """D = 40 and D = 20 (more columns than a block holds: BLOCK_I0 is at most 16) and an odd D = 3 whose huge
    segment (columns 6..8) straddles the blocks [4, 8) and [8, 12): each chunk of its rows has a helper in each of
    its blocks, so the helpers move nearly all of the huge segment and no program holds much more than a chunk;
    forward and reverse, with empty segments around it."""
    big = 2400 if width > 3 else 12000
    for kernel, out in ((running, "fwd"), (backwards, "back")):
        args = args_for(skewed(2, big=big), width, (out,), seed=width)
        with simulated_multiprocessors(132):
            c = constexprs(kernel, args)
        assert c["HELPER_SPAN_0"] == span and c["HELPERS_0"] == span * c["CHUNKS_0"] and c["CHUNKS_0"] >= 2
        moved, n = helper_traffic(kernel, args, out)
        segment = big * width * 4 * 2  # read once and written once
        assert sum(moved[-n:]) > 0.9 * segment  # the helpers scan it, not its blocks
        assert max(moved) < 0.6 * sum(moved[-n:])  # no program takes most of it


def test_wide_exclusive_and_max_scans_are_balanced_and_verify() -> None:
    for kernel, out in ((exclusive, "ex"), (tops, "top")):
        args = args_for(skewed(0, big=2000), 20, (out,), seed=11)
        with simulated_multiprocessors(132):
            k = kernel.specialize(args)
            run_pipeline(physical.construct(k), verify_with=k)  # the verifier after every pass
        moved, n = helper_traffic(kernel, args, out)
        assert sum(moved[-n:]) > 0.9 * 2000 * 20 * 8


def test_wide_results_are_bitwise_identical_run_to_run() -> None:
    args = args_for(skewed(5, big=2400), 40, ("back",), seed=13)
    with simulated_multiprocessors(132):
        assert constexprs(backwards, args)["HELPER_SPAN_0"] == 3
        runs = [agree(backwards, args, ("back",))["back"] for _ in range(3)]
    assert runs[0].tobytes() == runs[1].tobytes() == runs[2].tobytes()


def test_only_the_helpers_write_slots() -> None:
    """No one folds a block's aggregate (a subregion a block scans is its alone), so the blocks write no slot: what
    the launch writes into its workspace is each program's ticket, flag and retirement (three i32 atomics), the
    helpers' slots (one per column of the segment each joins) and the last program's reset (a flag per program and
    the two counters)."""
    from bench.traffic import OTHER, counting

    args = args_for(skewed(17, big=6000), 4, ("fwd",))
    with simulated_multiprocessors(132):
        helpers_ = constexprs(running, args)["HELPERS_0"]
        copy = {k: v.clone() for k, v in args.items()}
        with counting(copy) as traffic:
            running(**copy)
    slots = traffic.written_by[OTHER] - 4 * 3 * traffic.programs - (4 * traffic.programs + 8)
    assert 0 < slots <= 4 * 4 * helpers_ and slots % (4 * 4) == 0  # D = 4 columns of each helper that joins
