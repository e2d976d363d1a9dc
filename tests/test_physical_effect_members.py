"""The lane-masking part of the `ownership` rule and the `access-complete` rule pick their ops by trait: every
effect op (EFFECTS without CONTROL) declares the members it acts for beside its class, and every access reads
or writes by its READS/WRITES traits. Each op these rules cover because of that has a mutation here: drop its
mask (or break its data) and the rule reports it, with its exact message."""

from __future__ import annotations

import dataclasses

import pytest

import intent
import physical
from intent import Out, dims, f32, i32, parallel
from kir.dtypes import DType
from physical import ops as P
from physical.model import Trait
from physical.verifier import PhysicalVerifyError, check, verify
from tests.mutations import buffer_named, only, split_rows, swap

M, N = dims("M N")


@intent.kernel(checks=True)
def checked_gather(x: f32[M], idx: i32[N], out: Out[f32[N]]):
    for n in parallel(N):
        out[n] = x[idx[n]]


def _reported(kernel, broken, rule: str, message: str) -> None:
    with pytest.raises(PhysicalVerifyError) as info:
        verify(broken, kernel)
    assert (info.value.rule, info.value.message) == (rule, message)


def test_every_effect_op_declares_its_members():
    for name, cls in P.OP_CLASSES.items():
        if Trait.EFFECTS in cls.TRAITS and Trait.CONTROL not in cls.TRAITS:
            assert callable(getattr(cls, "members_rule", None)), f"{name} declares no effect members"


def test_a_check_that_lanes_past_the_domain_could_fail_is_reported():
    k = checked_gather.kir
    p = physical.lower(k)  # several instances per program: the last program's lanes run past N
    assert check(p, k) == []
    chk = only(p, P.Check)
    test = next(op for op in p.walk() if op.results and op.results[0].id == chk.cond.id)
    assert isinstance(test, P.Binary)
    broken = swap(p, chk, dataclasses.replace(chk, cond=test.rhs))  # the bounds test alone: no members left out
    _reported(k, broken, "ownership", "[ownership] check (from gather at test_physical_effect_members.py:27) is "
              "not masked by the lane-validity test flat < (instances): programs whose lanes run past the domain "
              "would perform it")


def test_a_ticket_drawn_by_lanes_past_the_domain_is_reported():
    k, p = split_rows()
    assert check(p, k) == []
    ticket = only(p, P.Ticket)
    assert ticket.results[0].type.lanes
    broken = swap(p, ticket, dataclasses.replace(ticket, access=dataclasses.replace(ticket.access, mask=None)))
    _reported(k, broken, "ownership", "[ownership] ticket (from reduce at mutation.py:10) is not masked by the "
              "lane-validity test flat < (instances): programs whose lanes run past the domain would perform it")


def test_a_ticket_is_typed_against_its_counter():
    k, p = split_rows()
    counter = buffer_named(p, "arrivals")
    wide = dataclasses.replace(counter, dtype=DType.i64)
    broken = p.replace(buffers=tuple(wide if b.id == counter.id else b for b in p.buffers))
    found = [v.message for v in check(broken, k) if v.rule == "access-complete"]
    # the counter's reset (a store, covered before) and the ticket (an atomic update: it reads and writes)
    assert sorted(found) == ["store (from reduce at mutation.py:10) writes i32 through i64 buffer arrivals",
                             "ticket (from reduce at mutation.py:10) writes i32 through i64 buffer arrivals"]
