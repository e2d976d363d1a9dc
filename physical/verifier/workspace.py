"""The protocol of invocation workspaces shared by the programs of one launch (physical/workspace.py).

* workspace-protocol: a slot array (uninitialised, one copy per split) is written only at the writing
  program's own slot (its `split_index`), before the program draws its ticket (the acquire-release ticket
  releases only earlier writes); it is read only after a ticket, by the program that drew the last one
  (ticket = splits - 1: every slot is written; in a group with helper programs, splits - 1 plus exactly the
  helpers that join the lane, see helpers.py), and in slot order (the slot coordinate is the position
  along a tile axis that one reduce folds in element order). A ticket counter (self-resetting) is touched
  only by tickets and by the reset: every ticket's last holder stores 0 back at the same element, after it,
  so the next launch starts from zero with nothing filled before it.
"""

from __future__ import annotations

from kir.core import Kernel

from .. import ops as P
from ..model import Access, AccessRelation, Buffer, BufferInit, BufferScope, Program, PValue
from .base import Reporter, describe, rule
from .helpers import exact_last_count, helper_values, strip_casts
from .index import AccessSite, ProgramIndex, evaluate, index_of
from .structure import group_helpers


def _split_values(ix: ProgramIndex) -> dict[int, tuple[int, str]]:
    """Value id of every split_index result -> (group, splits constexpr)."""
    return {op.results[0].id: (pl.group, op.splits) for pl in ix.placed
            if isinstance(op := pl.op, P.SplitIndex) and op.results}


def _helper_values(ix: ProgramIndex) -> dict[int, tuple[int, str]]:
    """Value id of every helper_index result -> (group, helpers constexpr)."""
    return {op.results[0].id: (pl.group, op.helpers) for pl in ix.placed
            if isinstance(op := pl.op, P.HelperIndex) and op.results}


def _is_last(ix: ProgramIndex, v: PValue, ticket: PValue, splits: str | None) -> bool:
    """Whether `v` is `ticket == splits - 1` (the holder of the last ticket)."""
    op = ix.producer(v)
    if not isinstance(op, P.Compare) or op.fn.value != "eq":
        return False
    if op.lhs.id == ticket.id:
        other = op.rhs
    elif op.rhs.id == ticket.id:
        other = op.lhs
    else:
        return False
    src = strip_casts(ix, other)[1]
    drawn = ix.producer(ticket)
    pl = ix.place.get(id(drawn)) if drawn is not None else None
    if pl is not None and isinstance(drawn, P.Ticket) and helper_values(ix, pl.group)[1] is not None:
        # balanced segments: S - 1 plus exactly the helpers that join the lane (helpers.py)
        base = exact_last_count(ix, other, drawn, pl.group)
        src = ix.producer(base) if base is not None else None
    if not isinstance(src, P.ShapeValue) or splits is None:
        return False
    pairs = [(evaluate(src.expr, env), env.get(splits)) for env in ix.envs]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    return bool(pairs) and all(a == b - 1 for a, b in pairs)


def _last_conjunct(ix: ProgramIndex, mask: PValue | None, tickets: list[P.Ticket], splits: str | None
                   ) -> P.Ticket | None:
    """The ticket whose last holder `mask` restricts to, if any (a lanes mask broadcast over a tile restricts the
    tile as its lanes do). A conjunct may be the result of an `if` that the constexpr `flag` selects where more
    than one program may take part in a block (splits > 1, or helpers past the blocks): where it is set, the
    then-branch's value (the last holder), where it is not, the program is the only one of its block."""
    for c in ix.conjuncts(mask):
        wide = ix.producer(c)
        if isinstance(wide, P.Broadcast):
            found = _last_conjunct(ix, wide.x, tickets, splits)
            if found is not None:
                return found
        for t in tickets:
            if _is_last(ix, c, t.results[0], splits):
                return t
        branch = ix.producer(c)
        if isinstance(branch, P.If) and branch.flag is not None and splits is not None and _selects_split(
                ix, branch.flag, splits, _branch_helpers(ix, branch)):
            inner = branch.then_.yielded[[r.id for r in branch.results].index(c.id)]
            drawn = [o for o in branch.then_.walk() if isinstance(o, P.Ticket)]
            found = _last_conjunct(ix, inner, drawn, splits)
            if found is not None:
                return found
    return None


def _selects_split(ix: ProgramIndex, flag: str, splits: str, helpers: str | None = None) -> bool:
    """Whether the constexpr `flag` is 1 exactly where more than one program may take part in a block (on every
    sample launch): `splits` > 1, or, in a group with helpers past its blocks, `helpers` > 0."""
    pairs = [(env.get(flag), env.get(splits), env.get(helpers) if helpers is not None else 0) for env in ix.envs]
    pairs = [(f, n, h) for f, n, h in pairs if f is not None and n is not None and h is not None]
    return bool(pairs) and all(f == int(n > 1 or h > 0) for f, n, h in pairs)


def _branch_helpers(ix: ProgramIndex, branch: P.If) -> str | None:
    """The helpers constexpr of the group whose body holds `branch` (balanced segments), if any."""
    pl = ix.place.get(id(branch))
    return group_helpers(ix.groups[pl.group]) if pl is not None else None


def _same_coords(a: AccessRelation, b: AccessRelation) -> bool:
    return [c.id for c in a.coords] == [c.id for c in b.coords]


@rule("workspace-protocol")
def check_workspace_protocol(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """invocation workspaces shared by the programs of a launch: every program writes only its own slot and releases it
    before its ticket; only the last ticket's holder reads the slots, in slot order; every ticket counter is reset by
    that holder"""
    ix = index_of(program)
    splits_of = _split_values(ix)
    group_splits = {g: s for g, s in splits_of.values()}
    helpers_of = _helper_values(ix)
    tickets: dict[int, list[tuple[int, P.Ticket]]] = {}  # group -> (order, ticket)
    for pl in ix.placed:
        if isinstance(pl.op, P.Ticket):
            tickets.setdefault(pl.group, []).append((pl.order, pl.op))
    for gid, found in tickets.items():
        _last_counts(program, ix, gid, [t for _, t in found], group_splits.get(gid), report)
    sites: dict[int, list[AccessSite]] = {}
    for site in ix.accesses:
        sites.setdefault(site.access.buffer, []).append(site)
    for b in ix.buffers.values():
        if b.scope is not BufferScope.INVOCATION_WORKSPACE:
            continue
        if b.init is BufferInit.SELF_RESETTING:
            _counter(program, ix, b, sites.get(b.id, []), group_splits, report)
        else:
            _slots(program, ix, b, sites.get(b.id, []), splits_of, helpers_of, tickets, group_splits, report)
    for gid, found in tickets.items():
        for _, t in found:
            b = ix.buffers.get(t.access.buffer)
            if b is None or b.init is not BufferInit.SELF_RESETTING:
                report(f"{describe(program, t)} draws from {b.name if b else 'an unknown buffer'}, which is no "
                       f"self-resetting ticket counter", t, gid)


def _last_counts(program: Program, ix: ProgramIndex, gid: int, drawn: list[P.Ticket], splits: str | None,
                 report: Reporter) -> None:
    """In a group with helpers, every test of a ticket for equality is the last participant's: S - 1 plus exactly
    the helpers that join the lane (helpers.py)."""
    if helper_values(ix, gid)[1] is None:
        return
    for t in drawn:
        got = t.results[0]
        for pl in ix.group_ops(gid):
            op = pl.op
            if not (isinstance(op, P.Compare) and op.fn.value == "eq" and got.id in (op.lhs.id, op.rhs.id)):
                continue
            if not _is_last(ix, op.results[0], got, splits):
                other = op.rhs if op.lhs.id == got.id else op.lhs
                counter = ix.buffers.get(t.access.buffer)
                report(f"{describe(program, op)} tests for the last participant of "
                       f"{counter.name if counter else '?'} at %{other.id}, not at {splits} - 1 plus the helpers "
                       f"that join the lane (select(D, maximum(hi - lo, 0), 0) for D and lo <= chunk < hi of the "
                       f"helpers' join test): the last ticket would go to an early participant or to none", op, gid)


def _slots(program: Program, ix: ProgramIndex, b: Buffer, found: list[AccessSite],
           splits_of: dict[int, tuple[int, str]], helpers_of: dict[int, tuple[int, str]],
           tickets: dict[int, list[tuple[int, P.Ticket]]], group_splits: dict[int, str], report: Reporter) -> None:
    per_helper = any(s.kind is Access.WRITE and s.access.copy is not None and s.access.copy.id in helpers_of
                     for s in found)
    for site in found:
        op, gid, order = site.op, site.placed.group, site.placed.order
        drawn = tickets.get(gid, [])
        if site.kind is Access.WRITE:
            copy = site.access.copy
            if per_helper:
                if copy is None or copy.id not in helpers_of or helpers_of[copy.id][0] != gid:
                    report(f"{describe(program, op)} writes helper slot array {b.name} at slot "
                           f"{'%' + str(copy.id) if copy is not None else '(none)'}, not its program's helper "
                           f"position: two programs would write one slot", op, gid)
                elif not _helpers_only(ix, site.access.mask, copy):
                    report(f"{describe(program, op)} writes helper slot array {b.name} without the test that its "
                           f"program is a helper (helper_index >= 0): a block program would write a helper's slot",
                           op, gid)
            elif copy is None or copy.id not in splits_of or splits_of[copy.id][0] != gid:
                report(f"{describe(program, op)} writes slot array {b.name} at slot "
                       f"{'%' + str(copy.id) if copy is not None else '(none)'}, not its program's split position: two "
                       f"programs would write one slot", op, gid)
            if not any(t_order > order for t_order, _ in drawn):
                report(f"{describe(program, op)} writes slot array {b.name} after its program's ticket (or with no "
                       f"ticket): the last holder may read the slot before the write is released", op, gid)
            continue
        if site.kind is not Access.READ or not isinstance(op, P.Load):
            report(f"{describe(program, op)} updates slot array {b.name} in place: slots are written by their own "
                   f"program and read by the last ticket's holder", op, gid)
            continue
        earlier = [t for t_order, t in drawn if t_order < order]
        if _last_conjunct(ix, site.access.mask, earlier, group_splits.get(gid)) is None:
            report(f"{describe(program, op)} reads slot array {b.name} outside the holder of the last ticket: the "
                   f"other programs' slots may not be written yet", op, gid)
            continue
        if not (_in_fold_order(ix, op) if per_helper else _in_slot_order(ix, op)):
            report(f"{describe(program, op)} reads slot array {b.name} out of slot order: the slot must be the "
                   f"position along a tile axis that one reduce folds, so that the partials always meet in the same "
                   f"order", op, gid)


def _in_slot_order(ix: ProgramIndex, load: P.Load) -> bool:
    copy = load.access.copy
    pos = ix.producer(copy) if copy is not None else None
    if not isinstance(pos, P.TileIndex) or copy is None or copy.type.lanes or len(copy.type.tile) != 1:
        return False
    axis = copy.type.tile[0]
    value = load.results[0]
    if axis not in value.type.tile:
        return False
    k = value.type.tile.index(axis)
    users = [pl.op for pl in ix.placed if any(v.id == value.id for v in pl.op.operands())]
    return len(users) == 1 and isinstance(users[0], P.Reduce) and users[0].axes == (k,)


def _helpers_only(ix: ProgramIndex, mask: PValue | None, helper: PValue) -> bool:
    """Whether `mask` implies `helper >= 0` (the program is a helper, not a block program)."""
    for c in ix.conjuncts(mask):
        op = ix.producer(c)
        if isinstance(op, P.Compare) and op.fn.value == "ge":
            lhs, rhs = ix.producer(op.lhs), ix.producer(op.rhs)
            zero = isinstance(rhs, P.Const) and rhs.value == 0
            if zero and (op.lhs.id == helper.id or isinstance(lhs, P.Cast) and lhs.x.id == helper.id):
                return True
    return False


def _in_fold_order(ix: ProgramIndex, load: P.Load) -> bool:
    """Whether a helper slot's read sits in the source of a region fold (which meets its positions in order)."""
    pl = ix.place.get(id(load))
    return pl is not None and any(isinstance(p, P.RegionFold) and any(o is load for o in p.source.walk())
                                  for p in pl.parents)


def _counter(program: Program, ix: ProgramIndex, b: Buffer, found: list[AccessSite], group_splits: dict[int, str],
             report: Reporter) -> None:
    drawn = [s for s in found if isinstance(s.op, P.Ticket)]
    resets = [s for s in found if isinstance(s.op, P.Store)]
    for site in found:
        if not isinstance(site.op, P.Ticket | P.Store):
            report(f"{describe(program, site.op)} touches ticket counter {b.name}: only tickets and the last holder's "
                   f"reset may", site.op, site.placed.group)
    for site in resets:
        store = site.op
        assert isinstance(store, P.Store)
        value = strip_casts(ix, store.value)[1]
        if not isinstance(value, P.Const) or value.value != 0:
            report(f"{describe(program, store)} stores a value other than 0 into ticket counter {b.name}", store,
                   site.placed.group)
    for site in drawn:
        t = site.op
        assert isinstance(t, P.Ticket)
        gid = site.placed.group
        ok = any(r.placed.group == gid and r.placed.order > site.placed.order and _same_coords(r.access, t.access)
                 and _last_conjunct(ix, r.access.mask, [t], group_splits.get(gid)) is t for r in resets)
        if not ok:
            report(f"ticket counter {b.name} is not reset by the program that draws the last ticket: the next launch "
                   f"would start from a stale count", t, gid)


__all__ = ["check_workspace_protocol"]
