"""share-loads (physical/share_loads.py): construction reads each element of a buffer the launch never writes once per
group body, where the author names it twice (a segment's bounds for the write slice and the read slice)."""

from __future__ import annotations

import importlib

import numpy as np
import torch

import intent
import physical
from emit_triton.targets import simulated_multiprocessors
from intent import InOut, Out, dims, f32, i64, parallel
from physical import ops as P
from physical.counts import operation_counts
from physical.lowering import run_pipeline
from physical.share_loads import share_loads
from physical.verifier import check
from tests.breadth_support import three_ways

S, E = dims("S E")


@intent.kernel
def running(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]]):
    for s in parallel(S):
        out[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def doubled(x: InOut[f32[S]]):
    for s in parallel(S):
        x[s] = x[s] * 2.0 + x[s]


def loads(program, buffer: str) -> list[P.Load]:
    ids = {b.id for b in program.buffers if b.name == buffer}
    return [op for op in program.groups[0].body.ops if isinstance(op, P.Load) and op.access.buffer in ids]


def args_of(lengths: list[int], seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int64)
    n = int(offsets[-1])
    return {"values": torch.randn(n, generator=g), "offsets": offsets, "out": torch.zeros(n)}


def test_a_segment_scan_reads_each_bound_once() -> None:
    """`offsets[s]` and `offsets[s + 1]` twice each in the source: two loads in the program, the read slice and
    the write slice starting at one value, the verifier content after construction and after every pass."""
    args = args_of([3, 0, 700, 5])
    k = running.specialize(args)
    program = physical.construct(k)
    bounds = loads(program, "offsets")
    assert len(bounds) == 2
    assert check(program, k) == []
    scan = next(op for op in program.groups[0].body.ops if isinstance(op, P.RegionScan))
    assert (scan.begin.id, scan.end.id) == tuple(b.results[0].id for b in bounds)
    # the `+ 1` of the second read is computed once: no op is left that only a dropped load used
    adds = [op for op in program.groups[0].body.ops if isinstance(op, P.Binary) and op.fn.name == "add"]
    assert len(adds) == 1
    run_pipeline(program, verify_with=k)


def test_the_bytes_counted_drop_by_the_second_read_of_each_bound() -> None:
    """Two i64 bounds a segment read once less: 16 bytes a segment fewer in the launch's count."""
    args = args_of([3, 0, 700, 5])
    k = running.specialize(args)
    shared = physical.construct(k)
    env = {"S": 4, "E": 708}
    with_both = operation_counts(_unshared(k)).bytes.evaluate(env)
    assert with_both - operation_counts(shared).bytes.evaluate(env) == 16 * 4


def _unshared(k):
    """The program construction built before sharing (construct with the rewrite left out)."""
    C = importlib.import_module("physical.construct")  # the module (the package exports its function)
    original = C.share_loads
    C.share_loads = lambda p: p
    try:
        return physical.construct(k)
    finally:
        C.share_loads = original


def test_a_buffer_the_launch_writes_keeps_every_read() -> None:
    """`x[s]` twice in an in-out tensor: each read stays where the author put it."""
    k = doubled.specialize({"x": torch.ones(5)})
    program = physical.construct(k)
    assert len(loads(program, "x")) == 2
    assert share_loads(program) is program


def test_shared_bounds_agree_with_the_oracle_when_split() -> None:
    args = args_of([0, 3000, 1, 255, 256, 257, 0, 600], seed=3)
    with simulated_multiprocessors(132):
        got = three_ways(running, args, ("out",), rtol=1e-4, atol=1e-3, stablehlo=False)
        again = {k: v.clone() for k, v in args.items()}
        running(**again)
    assert got["out"].tobytes() == again["out"].numpy().tobytes()
