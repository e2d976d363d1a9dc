"""Atomic aggregation: a program counts its members per bin (tl.histogram) and issues one atomic per bin.

Integer results are compared exactly with torch.bincount (out-of-range values dropped); the number of
atomics per address per program is counted under the interpreter (bench/traffic.py's counter).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import intent
import physical
from bench.traffic import TrafficCounter
from intent import InOut, dims, f32, i32, i64, parallel
from physical import ops as P
from physical.passes import AggregateAtomics
from physical.passes.aggregate import candidates
from physical.verifier import check

E, B = dims("E B")


@intent.kernel
def histogram(x: i32[E], counts: InOut[i32[B]]):
    for e in parallel(E):
        intent.atomic_add(counts, x[e], 1)


@intent.kernel
def weighted(x: i32[E], w: i64, counts: InOut[i64[B]]):
    for e in parallel(E):
        intent.atomic_add(counts, x[e], w)


@intent.kernel
def uses_old(x: i32[E], counts: InOut[i32[B]], old: InOut[i32[E]]):
    for e in parallel(E):
        old[e] = intent.atomic_add(counts, x[e], 1)


def _reference(x: torch.Tensor, start: torch.Tensor, weight: int = 1) -> torch.Tensor:
    b = start.numel()
    inside = x[(x >= 0) & (x < b)].long()
    return start + weight * torch.bincount(inside, minlength=b).to(start.dtype)


@pytest.mark.parametrize("e, b", [(1, 1), (1000, 7), (5000, 300), (3000, 1500)])
def test_counts_are_exact_including_out_of_range_values(e: int, b: int) -> None:
    g = torch.Generator().manual_seed(e + b)
    x = torch.randint(-3, b + 3, (e,), generator=g, dtype=torch.int32)
    start = torch.randint(0, 5, (b,), generator=g, dtype=torch.int32)
    counts = start.clone()
    histogram(x, counts)
    assert torch.equal(counts, _reference(x, start))


def test_at_most_one_atomic_per_bin_per_program() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 16, (4096,), generator=g, dtype=torch.int32)
    counts = torch.zeros(16, dtype=torch.int32)
    with TrafficCounter({"x": x, "counts": counts}) as counter:
        histogram(x, counts)
    assert counter.traffic.max_atomics_per_address_per_program == 1
    assert counter.traffic.atomic_ops <= 16 * counter.traffic.programs
    assert torch.equal(counts, _reference(x, torch.zeros(16, dtype=torch.int32)))


def test_many_bins_fall_back_to_one_atomic_per_member() -> None:
    # more bins than a program owns instances: the per-member atomics are issued instead
    g = torch.Generator().manual_seed(2)
    x = torch.randint(-5, 5000, (300,), generator=g, dtype=torch.int32)
    counts = torch.zeros(4000, dtype=torch.int32)
    with TrafficCounter({"x": x, "counts": counts}) as counter:
        histogram(x, counts)
    assert counter.traffic.atomic_ops == int(((x >= 0) & (x < 4000)).sum())
    assert torch.equal(counts, _reference(x, torch.zeros(4000, dtype=torch.int32)))


def test_uniform_weights_multiply_the_counts() -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-2, 40, (2000,), generator=g, dtype=torch.int32)
    start = torch.zeros(37, dtype=torch.int64)
    counts = start.clone()
    weighted(x, -(2**40) + 3, counts)
    assert torch.equal(counts, _reference(x, start, -(2**40) + 3))


def test_source_has_one_histogram_and_one_atomic_per_bin_path() -> None:
    x, counts = torch.zeros(100, dtype=torch.int32), torch.zeros(10, dtype=torch.int32)
    src = histogram.triton_source(x=x, counts=counts)
    assert src.count("tl.histogram(") == 1
    assert src.count("tl.atomic_add(") == 2  # one per bin (aggregated), one per member (fallback)
    aggregated, fallback = src.split("else:")
    assert "tl.histogram(" in aggregated and "tl.atomic_add(" in aggregated and "tl.atomic_add(" in fallback


def test_program_verifies_and_keeps_one_effect_per_branch() -> None:
    kernel = histogram.kir
    program = physical.lower(kernel, verify=True)
    assert check(program, kernel) == []
    (branch,) = [op for op in program.groups[0].body.ops if isinstance(op, P.If)]
    (loop,) = branch.then_.ops[:-1]
    assert [op.NAME for op in loop.body.ops if isinstance(op, P.BinCount | P.AtomicRMW)] == ["bincount", "atomic_rmw"]
    assert [op.NAME for op in branch.else_.ops[:-1]] == ["atomic_rmw"]


def test_an_atomic_whose_old_value_is_read_is_not_aggregated() -> None:
    program = physical.lower(uses_old.kir, verify=True)
    assert not any(isinstance(op, P.BinCount) for op in program.walk())
    assert AggregateAtomics().legal(program) == ("no integer atomic add with an unused old value and a uniform value "
                                                 "in a multi-instance group")
    x = torch.tensor([1, 1, 3], dtype=torch.int32)
    counts, old = torch.zeros(4, dtype=torch.int32), torch.zeros(3, dtype=torch.int32)
    uses_old(x, counts, old)
    assert torch.equal(counts, torch.tensor([0, 2, 0, 1], dtype=torch.int32))
    assert sorted(old.tolist()) == [0, 0, 1]


def test_one_instance_per_program_is_not_profitable() -> None:
    program = physical.construct(histogram.kir)
    assert candidates(program, program.groups[0])
    assert AggregateAtomics().legal(program) is True and not AggregateAtomics().profitable(program)


def test_duplicated_effect_outside_exclusive_branches_is_a_violation() -> None:
    program = physical.lower(histogram.kir)
    g = program.groups[0]
    (branch,) = [op for op in g.body.ops if isinstance(op, P.If)]
    atomic = branch.else_.ops[0]
    twice = dataclasses.replace(g, body=physical.model.PRegion(g.body.args, (*g.body.ops[:-1], atomic,
                                                                             g.body.ops[-1])))
    bad = dataclasses.replace(program, groups=(twice,))
    found = [str(v) for v in check(bad) if v.rule == "effect-coverage"]
    # the copy at the top runs besides whichever branch runs: three effects, none of them exclusive of it
    assert found == ["[effect-coverage] atomic_rmw (from atomic at test_perf_histogram_aggregate.py:29) is performed "
                     "by 3 physical effects in group 0; it would happen 3 times per instance"]


@intent.kernel
def root_bins(x: i32[E], counts: InOut[i32[B]]):
    for e in parallel(E):
        intent.atomic_add(counts, intent.sqrt(x[e].to(f32)).to(i32), 1)


def _lanes(kernel, **args) -> int:
    program = physical.lower(kernel.specialize(args), verify=True)
    (g,) = program.groups
    env = {"E": args["x"].numel(), "B": args["counts"].numel()}
    for name, e in program.constexprs:
        env[name] = e.evaluate(env)
    return env[g.block]


def test_a_light_histogram_counts_many_values_per_program() -> None:
    from emit_triton.targets import simulated_multiprocessors
    from physical.passes.aggregate import AGGREGATE_LANES

    assert _lanes(histogram, x=torch.zeros(100_000, dtype=torch.int32), counts=torch.zeros(256, dtype=torch.int32)) \
        == AGGREGATE_LANES
    assert _lanes(histogram, x=torch.zeros(3000, dtype=torch.int32), counts=torch.zeros(8, dtype=torch.int32)) == 4096
    # a square root per value: the body is not light, it keeps enlarge-ownership's 1024 lanes
    assert _lanes(root_bins, x=torch.zeros(100_000, dtype=torch.int32),
                  counts=torch.zeros(256, dtype=torch.int32)) == 1024
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-2, 258, (40_000,), generator=g, dtype=torch.int32)
    counts = torch.zeros(256, dtype=torch.int32)
    with simulated_multiprocessors(132), TrafficCounter() as counter:
        histogram(x, counts)
    assert torch.equal(counts, _reference(x, torch.zeros(256, dtype=torch.int32)))
    t = counter.traffic
    assert t.programs == 3 and t.max_atomics_per_address_per_program == 1
    assert t.sector_bytes <= x.numel() * 4 + 3 * 256 * 32  # the values once, at most one atomic per bin and program
