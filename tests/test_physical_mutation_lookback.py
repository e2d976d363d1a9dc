"""Mutation tests of the construction verifier, the helper slots of balanced region scans (lookback-protocol).

A helper of a balanced region scan publishes its aggregate in slot `blocks * BLOCK + x` of the group's slot
buffers, past every lane of the blocks (physical/passes/balance_region_scan.py: over one axis, x is its position
among the helpers). The rule proves x inside the helpers' `HELPERS * BLOCK` slots and apart for any two helpers,
or two lanes of one helper, that both publish. Each mutation breaks one of those in the one-axis form (a segmented
cumsum) and expects the rule's exact message; both forms, forward and reverse, must still verify.
"""

from __future__ import annotations

import dataclasses

import pytest

from kir import BinaryFn
from kir.dtypes import DType
from physical import ops as P
from physical.launch_expr import LConstexpr
from physical.model import Fragment, POp, Program, PValue
from physical.verifier import check
from tests.mutations import Mutations, assert_reported, balanced, fresh_id, named, only, retype, swap, value
from tests.test_balance_jagged_scans import backwards, running
from tests.test_balance_region_scans import backward, cumsum

FAMILY = Mutations()
more = FAMILY.also

SCANS = {"cumsum": cumsum, "backward": backward, "running": running, "backwards": backwards}


def outside(x: PValue) -> str:
    return (f"[lookback-protocol] group 0: publish_slot writes a helper's slot blocks * BLOCK_I0 + %{x.id}, which may "
            f"lie outside the helpers' slots [blocks * BLOCK_I0, blocks * BLOCK_I0 + HELPERS_0 * BLOCK_I0)")


def shared(x: PValue) -> str:
    return (f"[lookback-protocol] group 0: publish_slot may write one helper's slot blocks * BLOCK_I0 + %{x.id} for "
            f"two helpers, or two lanes of one helper, that both publish: one would overwrite the other's aggregate")


def with_slot(p: Program, x: PValue, before: list | None = None) -> Program:
    """The helpers' slot `blocks * BLOCK + x` (the ops computing `x` inserted before it)."""
    slot = named(p, "helper_slot")
    return swap(p, slot, [*(before or []), dataclasses.replace(slot, rhs=x)])


def fresh(p: Program, types: list[Fragment], name: str) -> list[PValue]:
    first = fresh_id(p)
    return [PValue(first + k, t, f"{name}{k}") for k, t in enumerate(types)]


I64 = Fragment(DType.i64)


# ---------------------------------------------------------------------------------------------- one axis


@more("helper_slot_collapsed", "lookback-protocol")
def helpers_publish_past_the_buffer():
    """x = blocks * BLOCK: every helper publishes into the one slot 2 * blocks * BLOCK."""
    k, p = balanced(cumsum)
    base = value(p, "helper_slots")
    slot = named(p, "helper_slot")
    broken = swap(p, slot, dataclasses.replace(slot, lhs=base, rhs=base))
    return k, broken, outside(base)


@more("helper_slot_one_past_the_buffer", "lookback-protocol")
def helpers_a_block_of_lanes_late():
    """x = (position + 1) * BLOCK: the last helper's slot is blocks * BLOCK + HELPERS * BLOCK, one past the end."""
    k, p = balanced(cumsum)
    one, block, after, x = fresh(p, [I64] * 4, "late")
    ops = [P.Const(results=(one,), value=1, dtype=DType.i64),
           P.ShapeValue(results=(block,), expr=LConstexpr("BLOCK_I0")),
           P.Binary(results=(after,), fn=BinaryFn.add, lhs=value(p, "helper_position"), rhs=one),
           P.Binary(results=(x,), fn=BinaryFn.mul, lhs=after, rhs=block)]
    return k, with_slot(p, x, ops), outside(x)


@more("helpers_share_a_slot", "lookback-protocol")
def helpers_without_their_position():
    """x = 0: the helper term dropped, every helper publishes into the first slot past the blocks."""
    k, p = balanced(cumsum)
    (zero,) = fresh(p, [I64], "zero")
    return k, with_slot(p, zero, [P.Const(results=(zero,), value=0, dtype=DType.i64)]), shared(zero)


@more("every_lane_of_a_helper_publishes", "lookback-protocol")
def helper_publishes_in_every_lane():
    """A helper publishes in every valid lane of its block, not only in the one it joins: its lanes share its
    slot."""
    k, p = balanced(cumsum)
    pub = only(p, P.PublishSlot)
    lane_ok = named(p, "publishes").lhs
    broken = swap(p, pub, dataclasses.replace(pub, active=lane_ok))
    return k, broken, shared(value(p, "helper_position"))


# ---------------------------------------------------------------------------------------------- columns
# over a (segments, columns) workset (a jagged cumsum) x is `column * CHUNKS + position`, the column the lane's
# `flat % D` and the position the helper's among its part's (`column_slots` + `helper_position`)


def column_slot(p: Program) -> POp:
    """The add `column * CHUNKS + position` that the helpers' slot takes past the blocks' lanes."""
    return only(p, P.Binary, lambda op: op.fn is BinaryFn.add and op.lhs == value(p, "column_slots")
                and op.rhs == value(p, "helper_position"))


def uniform_slot(p: Program, x: PValue) -> Program:
    """The helpers' slot `blocks * BLOCK + x` for a uniform x: one value per program, as a uniform slot is (the
    lanes' own slots are picked beside it)."""
    slot = with_slot(p, x)
    old = named(slot, "helper_slot").results[0]
    return retype(slot, old, PValue(old.id, I64, old.name))


@more("column_slot_collapsed", "lookback-protocol")
def column_helpers_publish_past_the_buffer():
    """x = blocks * BLOCK: every helper publishes, for every column, into the one slot 2 * blocks * BLOCK."""
    k, p = balanced(running)
    base = named(p, "helper_slot").lhs
    return k, uniform_slot(p, base), outside(base)


@more("column_slot_one_past_the_buffer", "lookback-protocol")
def column_slot_one_late():
    """x = column * CHUNKS + (position + 1): the last helper's slot in the last column a part's block may hold is
    blocks * BLOCK + HELPERS * BLOCK, one past the end."""
    k, p = balanced(running)
    one, after = fresh(p, [I64, I64], "late")
    add = column_slot(p)
    ops = [P.Const(results=(one,), value=1, dtype=DType.i64),
           P.Binary(results=(after,), fn=BinaryFn.add, lhs=add.rhs, rhs=one), dataclasses.replace(add, rhs=after)]
    return k, swap(p, add, ops), outside(add.results[0])


@more("column_helpers_share_a_slot", "lookback-protocol")
def column_slot_without_the_helper():
    """x = column * CHUNKS: the helper term dropped, the helpers of a chunk's column write one slot."""
    k, p = balanced(running)
    (zero,) = fresh(p, [I64], "zero")
    add = column_slot(p)
    broken = swap(p, add, [P.Const(results=(zero,), value=0, dtype=DType.i64), dataclasses.replace(add, rhs=zero)])
    return k, broken, shared(add.results[0])


@more("columns_of_a_helper_share_a_slot", "lookback-protocol")
def column_slot_without_the_column():
    """x = position: the column term dropped, a helper writes each column of its segment into one slot."""
    k, p = balanced(running)
    position = value(p, "helper_position")
    return k, uniform_slot(p, position), shared(position)


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("name", sorted(SCANS))
def test_the_balanced_scans_verify(name):
    """Both forms, forward and reverse: the helpers' slots are proven in range and apart."""
    k, p = balanced(SCANS[name])
    assert check(p, k) == []


@pytest.mark.parametrize("name", sorted(FAMILY.more))
def test_more_mutations_are_reported_by_their_rule(name):
    rule, make = FAMILY.more[name]
    assert_reported(rule, *make())
