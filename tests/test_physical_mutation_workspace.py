"""Mutation tests of the construction verifier, invocation workspaces of groups split over programs: slots, tickets
and who writes outside them.

Each mutation breaks a valid program in exactly one way (see `tests/mutations.py`) and expects the rule's
exact message at the KIR source of the broken item.
"""

from __future__ import annotations

import dataclasses

import pytest

from kir import BinaryFn
from kir.dtypes import DType
from kir.pointwise import CmpFn
from physical import ops as P
from physical.launch_expr import LBin, LConst, LConstexpr
from physical.model import Fragment, Guard, Program, PValue
from physical.verifier import check
from tests.mutations import (
    Mutations,
    assert_reported,
    balanced_segments,
    buffer_named,
    fresh_id,
    only,
    shared_branch,
    split_rows,
    swap,
    with_ops,
    with_shared,
    workspace_ops,
)

FAMILY = Mutations()
mutation = FAMILY.rule
more = FAMILY.also


@mutation("workspace-protocol")
def slot_written_at_another_programs_slot():
    k, p = split_rows()
    top, _, ops = shared_branch(p)
    (write,) = workspace_ops(p, P.Store, "partial")
    per = next(op for op in top if isinstance(op, P.ShapeValue) and op.results[0].name == "chunks_per_split")
    other = per.results[0]
    ops[ops.index(write)] = dataclasses.replace(write, access=dataclasses.replace(write.access, copy=other))
    return k, with_shared(p, ops), (f"[workspace-protocol] store (from reduce at mutation.py:10) writes slot array "
                                  f"partial at slot %{other.id}, not its program's split position: two programs "
                                  f"would write one slot")


@more("counter_not_reset", "workspace-protocol")
def ticket_counter_left_for_the_next_launch():
    k, p = split_rows()
    ops = shared_branch(p)[2]
    (reset,) = workspace_ops(p, P.Store, "arrivals")
    ops.remove(reset)
    return k, with_shared(p, ops), ("[workspace-protocol] ticket counter arrivals is not reset by the program that "
                                  "draws the last ticket: the next launch would start from a stale count")


@more("slots_combined_out_of_order", "workspace-protocol")
def slots_read_in_reverse_order():
    k, p = split_rows()
    outer, _, ops = shared_branch(p)
    (read,) = workspace_ops(p, P.Load, "partial")
    pos = read.access.copy
    top = max(v.id for op in p.walk() for v in op.results) + 100
    last = PValue(top + 1, Fragment(DType.i64, index=True))
    rev = PValue(top + 2, pos.type)
    splits = next(op.splits for op in outer if isinstance(op, P.SplitIndex))
    at = ops.index(read)
    ops[at:at] = [P.ShapeValue(results=(last,), expr=LBin("-", LConstexpr(splits), LConst(1))),
                  P.Binary(results=(rev,), fn=BinaryFn.sub, lhs=last, rhs=pos)]
    ops[at + 2] = dataclasses.replace(read, access=dataclasses.replace(read.access, copy=rev))
    return k, with_shared(p, ops), ("[workspace-protocol] load (from reduce at mutation.py:10) reads slot array "
                                  "partial out of slot order: the slot must be the position along a tile axis that "
                                  "one reduce folds, so that the partials always meet in the same order")


@more("slot_written_after_the_ticket", "workspace-protocol")
def slot_published_after_the_ticket():
    k, p = split_rows()
    ops = shared_branch(p)[2]
    (write,) = workspace_ops(p, P.Store, "partial")
    (ticket,) = [op for op in ops if isinstance(op, P.Ticket)]
    ops.remove(write)
    ops.insert(ops.index(ticket) + 1, write)
    return k, with_shared(p, ops), ("[workspace-protocol] store (from reduce at mutation.py:10) writes slot array "
                                  "partial after its program's ticket (or with no ticket): the last holder may read "
                                  "the slot before the write is released")


def last_count(p: Program) -> tuple[P.Compare, P.Binary, P.Select]:
    """The last participant's test `ticket == S - 1 + delegated`, the sum and the delegated chunks."""
    test = only(p, P.Compare, lambda op: op.results[0].name == "last")
    cast = only(p, P.Cast, lambda op: op.results[0].id == test.rhs.id)
    total = only(p, P.Binary, lambda op: op.results[0].id == cast.x.id)
    delegated = only(p, P.Select, lambda op: op.results[0].id == total.rhs.id)
    return test, total, delegated


@more("last_count_off_by_one", "workspace-protocol")
def last_participant_counted_one_helper_too_many():
    k, p = balanced_segments()
    test, total, delegated = last_count(p)
    one = PValue(fresh_id(p), Fragment(DType.i64), "one")
    more_ = PValue(one.id + 1, delegated.results[0].type, "more")
    broken = swap(p, total, [P.Const(results=(one,), value=1, dtype=DType.i64),
                             P.Binary(results=(more_,), fn=BinaryFn.add, lhs=delegated.results[0], rhs=one),
                             dataclasses.replace(total, rhs=more_)])
    return k, broken, (f"[workspace-protocol] compare (from region_fold) tests for the last participant of arrivals "
                       f"at %{test.rhs.id}, not at SPLITS_0 - 1 plus the helpers that join the lane (select(D, "
                       f"maximum(hi - lo, 0), 0) for D and lo <= chunk < hi of the helpers' join test): the last "
                       f"ticket would go to an early participant or to none")


@more("last_count_ignores_delegation", "workspace-protocol")
def last_participant_counts_chunks_the_lane_does_not_delegate():
    k, p = balanced_segments()
    test, total, delegated = last_count(p)
    broken = swap(p, total, dataclasses.replace(total, rhs=delegated.on_true))  # whole chunks, delegated or not
    return k, broken, (f"[workspace-protocol] compare (from region_fold) tests for the last participant of arrivals "
                       f"at %{test.rhs.id}, not at SPLITS_0 - 1 plus the helpers that join the lane (select(D, "
                       f"maximum(hi - lo, 0), 0) for D and lo <= chunk < hi of the helpers' join test): the last "
                       f"ticket would go to an early participant or to none")


def chunk_store(p: Program) -> P.Store:
    """The store of a helper's chunk partial into its slot (copy: its helper_index)."""
    helper = only(p, P.HelperIndex).results[0]
    return only(p, P.Store, lambda op: op.access.copy is not None and op.access.copy.id == helper.id)


@more("helper_slot_written_by_every_lane", "unordered-conflict")
def helper_writes_its_slot_for_every_lane_of_its_block():
    k, p = balanced_segments()
    st = chunk_store(p)
    lane_ok = next(c for c in conjunct_leaves(p, st.access.mask) if c.name is None and _is_lane_test(p, c))
    is_helper = next(c for c in conjunct_leaves(p, st.access.mask) if c.name == "is_helper")
    both = PValue(fresh_id(p), lane_ok.type, "helper_lanes")
    broken = swap(p, st, [P.Binary(results=(both,), fn=BinaryFn.and_, lhs=lane_ok, rhs=is_helper),
                          dataclasses.replace(st, access=dataclasses.replace(st.access, mask=both,
                                                                               bounds=Guard(both)))])
    return k, broken, ("[unordered-conflict] store (from region_fold) may write the element of helper slot array "
                       "chunk that it writes for another member (another lane of the same helper, or another "
                       "participant): a helper writes its slot only for the one lane it joins")


@more("helper_joins_without_its_owner", "ownership")
def helper_join_test_drops_the_owner():
    """Every lane of the block would join (unordered-conflict reports the slot writes too; ownership comes first:
    the join names no lane)."""
    k, p = balanced_segments()
    owner = only(p, P.Compare, lambda op: op.fn.value == "eq" and op.rhs.name == "owner")
    join = only(p, P.Binary, lambda op: op.fn is BinaryFn.and_ and op.rhs.id == owner.results[0].id)
    block = only(p, P.OwnedInstances).helper_block
    broken = swap(p, join, dataclasses.replace(join, rhs=join.lhs))  # delegates and delegates
    assert "unordered-conflict" in {v.rule for v in check(broken, k)}
    return k, broken, (f"[ownership] a helper of group 0 (parallel) joins a lane by a test of neither form "
                       f"`flat == u` nor `flat // BLOCK == helper_block`: that the lane lies in the block "
                       f"%{block.id} its owned_instances decodes is not proven, and the lane's last participant "
                       f"might never come")


@more("helper_decodes_its_owner_as_a_block", "ownership")
def helper_block_set_to_the_owner_instance():
    k, p = balanced_segments()
    owned = only(p, P.OwnedInstances)
    found = next(op for op in p.groups[0].body.ops if isinstance(op, P.If)
                 and any(r.id == owned.helper_block.id for r in op.results))
    owner = found.results[1]  # the instance the helper joins, not its block
    assert owner.name == "owner"
    broken = swap(p, owned, dataclasses.replace(owned, helper_block=owner))
    return k, broken, (f"[ownership] a helper of group 0 (parallel) joins the lane whose instance is %{owner.id}, "
                       f"which may lie outside the block %{owner.id} its owned_instances decodes: the helper would "
                       f"draw no ticket and write no slot, and the lane's last participant would never come")



@more("helper_joins_by_an_unplaced_test", "ownership")
def helper_join_test_of_no_known_form():
    k, p = balanced_segments()
    owner = only(p, P.Compare, lambda op: op.fn.value == "eq" and op.rhs.name == "owner")
    block = only(p, P.OwnedInstances).helper_block
    broken = swap(p, owner, dataclasses.replace(owner, fn=CmpFn.le))  # every lane up to the owner's
    return k, broken, (f"[ownership] a helper of group 0 (parallel) joins a lane by a test of neither form "
                       f"`flat == u` nor `flat // BLOCK == helper_block`: that the lane lies in the block "
                       f"%{block.id} its owned_instances decodes is not proven, and the lane's last participant "
                       f"might never come")

def conjunct_leaves(p: Program, mask: PValue) -> list[PValue]:
    defs = {v.id: op for op in p.walk() for v in op.results}
    out, work = [], [mask]
    while work:
        v = work.pop()
        op = defs.get(v.id)
        if isinstance(op, P.Binary) and op.fn is BinaryFn.and_:
            work += [op.rhs, op.lhs]
        else:
            out.append(v)
    return out


def _is_lane_test(p: Program, v: PValue) -> bool:
    flat = only(p, P.OwnedInstances).results[0]
    return any(isinstance(op, P.Compare) and op.fn.value == "lt" and op.lhs.id == flat.id and op.results[0].id == v.id
               for op in p.walk())


@mutation("split-effects")
def output_stored_by_every_split():
    k, p = split_rows()
    ops = list(p.groups[0].body.ops)
    store = next(op for op in ops if isinstance(op, P.Store) and op.access.buffer != buffer_named(p, "partial").id
                 and op.access.buffer != buffer_named(p, "arrivals").id)
    flat = next(op.results[0] for op in ops if isinstance(op, P.OwnedInstances))
    lane_ok = next(op.results[0] for op in ops if isinstance(op, P.Compare) and op.lhs.id == flat.id)
    ops[ops.index(store)] = dataclasses.replace(store, access=dataclasses.replace(store.access, mask=lane_ok))
    return k, with_ops(p, ops), ("[split-effects] store (from store at mutation.py:10) writes sums in every program "
                                  "that shares its block: a group split over programs writes outside its workspace "
                                  "only as the holder of the last ticket")


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("rule", sorted(FAMILY.first))
def test_mutation_is_reported_by_its_rule(rule):
    assert_reported(rule, *FAMILY.first[rule]())


@pytest.mark.parametrize("name", sorted(FAMILY.more))
def test_more_mutations_are_reported_by_their_rule(name):
    rule, make = FAMILY.more[name]
    assert_reported(rule, *make())
