"""Mutation tests of the construction verifier, dependences between instances and groups, atomics and the look-back
protocol.

Each mutation breaks a valid program in exactly one way (see `tests/mutations.py`) and expects the rule's
exact message at the KIR source of the broken item.
"""

from __future__ import annotations

import dataclasses

import pytest

import intent
import physical
from kir import BinaryFn
from kir.dims import dim_bin
from kir.dtypes import DType
from physical import ops as P
from physical.launch_expr import ldim
from physical.model import Fragment, PValue
from physical.verifier import PhysicalVerifyError
from tests import samples
from tests.mutations import Mutations, N, assert_reported, buffer_named, fresh_id, only, swap, tickets, two_copies

FAMILY = Mutations()
mutation = FAMILY.rule
more = FAMILY.also


@mutation("ordered-dependence")
def load_of_what_the_next_instance_writes():
    k = samples.vector_add()
    p = physical.lower(k)
    out = buffer_named(p, "out")
    y = buffer_named(p, "y")
    ld = only(p, P.Load, lambda op: op.access.buffer == y.id)
    flat = ld.access.coords[0]
    last = PValue(fresh_id(p), Fragment(DType.i64, index=True), "last")
    mirror = PValue(last.id + 1, flat.type, "mirror")  # N - 1 - flat: in bounds, but another instance's element
    ops = [P.ShapeValue(results=(last,), expr=ldim(dim_bin("-", N, 1))),
           P.Binary(results=(mirror,), fn=BinaryFn.sub, lhs=last, rhs=flat),
           dataclasses.replace(ld, access=dataclasses.replace(ld.access, buffer=out.id, coords=(mirror,)))]
    broken = swap(p, ld, ops)  # type: ignore[arg-type]
    bufs = tuple(dataclasses.replace(b, access=physical.model.Access.READ_WRITE) if b is out else b for b in p.buffers)
    broken = broken.replace(buffers=bufs)
    return k, broken, ("[ordered-dependence] load (from load) may read out where another instance's store (from "
                       "store) writes: instances of group 0 would depend on each other")


@more("groups_share_an_output", "ordered-dependence")
def second_group_writes_the_first_groups_output():
    k = two_copies()
    p = physical.lower(k)
    assert len(p.groups) == 2
    a, b = buffer_named(p, "a"), buffer_named(p, "b")
    st = only(p, P.Store, lambda op: op.access.buffer == b.id)
    broken = swap(p, st, dataclasses.replace(st, access=dataclasses.replace(st.access, buffer=a.id)))
    return k, broken, (
        "[ordered-dependence] store (from store at mutation.py:31) in group 0 writes a, which store (from store at "
        "mutation.py:33) in group 1 also touches: groups run concurrently, so the dependence would be broken")


@mutation("unordered-conflict")
def every_instance_stores_to_element_zero():
    k = samples.vector_add()
    p = physical.lower(k)
    st = only(p, P.Store)
    zero = PValue(fresh_id(p), Fragment(DType.i64), "zero")
    ops = [P.Const(results=(zero,), value=0, dtype=DType.i64),
           dataclasses.replace(st, access=dataclasses.replace(st.access, coords=(zero,)))]
    broken = swap(p, st, ops)  # type: ignore[arg-type]
    return k, broken, ("[unordered-conflict] store (from store) may write the element of out that it writes in "
                       "another instance, with neither unique, reduction nor atomic semantics")


@more("unique_not_stated", "unordered-conflict")
def store_claims_unique_writes_kir_never_stated():
    k, broken, _ = every_instance_stores_to_element_zero()
    st = only(broken, P.Store)
    broken = swap(broken, st, dataclasses.replace(st, unique=True))
    return k, broken, "[unordered-conflict] store (from store) claims unique writes, which its KIR op does not state"


LONG = intent.dims("N")


@intent.kernel
def long_cumsum(x: intent.f32[LONG], out: intent.Out[intent.f32[LONG]]):
    out[:] = intent.cumsum(x)


@mutation("lookback-protocol")
def scan_publishing_another_programs_slot():
    k = long_cumsum.kir
    p = physical.lower(k)  # the row is not bounded: it is split over programs that pass their totals on
    pub = only(p, P.PublishSlot)
    start = next(op.result for op in p.groups[0].body.ops if op.results and op.results[0].name == "chunk_start")
    broken = swap(p, pub, dataclasses.replace(pub, slot=start))
    return k, broken, ("[lookback-protocol] group 0: publish_slot writes a slot other than the program's own instance "
                       "(its ownership slice)")


@mutation("atomic-preserved")
def atomic_loses_its_memory_order():
    k = samples.histogram()
    p = physical.construct(k)  # the initial mapping: one atomic per element
    at = only(p, P.AtomicRMW)
    from kir.atomic import MemOrder

    broken = swap(p, at, dataclasses.replace(at, order=MemOrder.relaxed))
    return k, broken, ("[atomic-preserved] atomic_rmw (from atomic) uses memory order relaxed, but KIR asks for "
                       "acq_rel")


@more("block_scope_on_a_shared_buffer", "atomic-preserved")
def atomic_with_block_scope_on_an_external_buffer():
    from physical.ops.atomic import Sharing

    k = samples.histogram()
    p = physical.construct(k)  # the initial mapping: one atomic per element
    at = only(p, P.AtomicRMW)
    broken = swap(p, at, dataclasses.replace(at, sharing=Sharing.PROGRAM, scope="cta"))
    return k, broken, ("[atomic-preserved] atomic_rmw (from atomic) treats external_view buffer counts as private to "
                       "one program; other programs touch it, so it is shared by the invocation")


@more("old_value_dropped", "atomic-preserved")
def atomic_whose_old_value_is_lost():
    k = tickets()
    p = physical.lower(k)
    st = only(p, P.Store)
    zero = PValue(fresh_id(p), Fragment(DType.i32), "zero")
    broken = swap(p, st, [P.Const(results=(zero,), value=0, dtype=DType.i32), dataclasses.replace(st, value=zero)])
    return k, broken, ("[atomic-preserved] atomic_rmw (from atomic at mutation.py:41) drops the old value its KIR op "
                       "returns to later computation")


def test_the_pipeline_verifier_runs_every_rule():
    kernel, broken, message = FAMILY.first["unordered-conflict"]()
    with pytest.raises(PhysicalVerifyError) as info:
        physical.verify(broken)
    assert info.value.message == message


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("rule", sorted(FAMILY.first))
def test_mutation_is_reported_by_its_rule(rule):
    assert_reported(rule, *FAMILY.first[rule]())


@pytest.mark.parametrize("name", sorted(FAMILY.more))
def test_more_mutations_are_reported_by_their_rule(name):
    rule, make = FAMILY.more[name]
    assert_reported(rule, *make())
