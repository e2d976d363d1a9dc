"""Mutation tests of the construction verifier, which program performs what: segments, ownership of instances and
tiles, effect coverage.

Each mutation breaks a valid program in exactly one way (see `tests/mutations.py`) and expects the rule's
exact message at the KIR source of the broken item.
"""

from __future__ import annotations

import dataclasses

import pytest

import physical
from kir import Store
from physical import ops as P
from physical.launch_expr import LBin, LConst, LResidentPrograms, lsum
from physical.model import PValue
from tests import samples
from tests.mutations import Mutations, assert_reported, fresh_id, only, scale_rows, swap, two_groups

FAMILY = Mutations()
mutation = FAMILY.rule
more = FAMILY.also


@mutation("segments-partition")
def second_segment_overlaps_the_first():
    k = two_groups()
    p = physical.lower(k)
    assert len(p.segments) == 2
    second = dataclasses.replace(p.segments[1], offset=LConst(0))
    broken = p.replace(segments=(p.segments[0], second))
    return k, broken, (f"[segments-partition] segment of group 1 starts at 0, but the lengths before it sum to "
                       f"{p.segments[0].length}")


@more("grid_too_small", "segments-partition")
def grid_smaller_than_the_segments():
    k = two_groups()
    p = physical.lower(k)
    broken = p.replace(grid=p.segments[0].length)
    return k, broken, (f"[segments-partition] grid is {p.segments[0].length}, but the segment lengths sum to "
                       f"{lsum((p.segments[0].length, p.segments[1].length))}")


@mutation("ownership")
def store_without_the_lane_validity_guard():
    k = samples.vector_add()
    p = physical.lower(k)  # several instances per program: the last program's lanes run past N
    st = only(p, P.Store)
    broken = swap(p, st, dataclasses.replace(st, access=dataclasses.replace(st.access, mask=None)))
    return k, broken, ("[ownership] store (from store) is not masked by the lane-validity test flat < (instances): "
                       "programs whose lanes run past the domain would perform it")


@more("segment_too_short", "ownership")
def segment_with_too_few_programs():
    k = samples.softmax()
    p = physical.lower(k)
    seg = p.segments[0]
    length = LBin("cdiv", seg.length, LConst(2))
    broken = p.replace(segments=(dataclasses.replace(seg, length=length),), grid=length)
    return k, broken, (f"[ownership] segment of group 0 (parallel) has {length} programs, but its domain needs "
                       f"cdiv(M, BLOCK_I0)")


@more("tile_store_past_the_domain", "ownership")
def tiled_store_without_its_domain_mask():
    k = samples.matmul()
    p = physical.lower(k)  # a program owns a tile of (M, N); tiles at the edges reach past M and N
    assert p.groups[0].tiles
    st = only(p, P.Store)
    broken = swap(p, st, dataclasses.replace(st, access=dataclasses.replace(st.access, mask=None)))
    rows, cols = p.groups[0].tiles
    return k, broken, (f"[ownership] store in tile group 0 is not masked by {rows} positions below M: positions past "
                       f"the domain would perform it")


@more("persistent_segment_without_its_minimum", "ownership")
def persistent_segment_launches_a_program_per_block():
    k = scale_rows()
    p = physical.lower(k)
    seg = p.segments[0]
    length = LResidentPrograms(LConst(4))
    broken = p.replace(segments=(dataclasses.replace(seg, length=length),), grid=length)
    return k, broken, ("[ownership] segment of group 0 (parallel) has resident_programs(4) programs: 1056 for M=2, "
                       "N=2 on 132 multiprocessors, where it needs min(blocks, resident programs) = 1, as "
                       "BLOCK_I0_PERSISTENT is set")


@mutation("effect-coverage")
def store_left_uncovered():
    k = samples.recurrence()
    p = physical.lower(k)
    broken = swap(p, only(p, P.Store), None)
    n = next(n for n, op in enumerate(k.walk()) if isinstance(op, Store))
    return k, broken, f"[effect-coverage] KIR store (op {n}) is performed by no physical effect"


@more("atomic_twice", "effect-coverage")
def atomic_performed_twice():
    k = samples.histogram()
    p = physical.construct(k)  # the initial mapping: one atomic per element
    at = only(p, P.AtomicRMW)
    again = dataclasses.replace(at, results=(PValue(fresh_id(p), at.results[0].type, "again"),))
    broken = swap(p, at, [at, again])
    return k, broken, ("[effect-coverage] atomic_rmw (from atomic) is performed by 2 physical effects in group 0; it "
                       "would happen 2 times per instance")


@more("aggregated_atomic_and_its_fallback_both_run", "effect-coverage")
def aggregated_atomic_also_performed_outside_its_branch():
    k = samples.histogram()
    p = physical.lower(k)  # a uniform `if` picks bin-aggregated atomics or the per-element fallback
    branch = only(p, P.If)
    fallback = only(p, P.AtomicRMW, lambda op: any(op is o for o in branch.else_.ops))
    again = dataclasses.replace(fallback, results=(PValue(fresh_id(p), fallback.results[0].type, "again"),))
    broken = swap(p, branch, [branch, again])
    return k, broken, ("[effect-coverage] atomic_rmw (from atomic) is performed by 3 physical effects in group 0; it "
                       "would happen 3 times per instance")


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("rule", sorted(FAMILY.first))
def test_mutation_is_reported_by_its_rule(rule):
    assert_reported(rule, *FAMILY.first[rule]())


@pytest.mark.parametrize("name", sorted(FAMILY.more))
def test_more_mutations_are_reported_by_their_rule(name):
    rule, make = FAMILY.more[name]
    assert_reported(rule, *make())
