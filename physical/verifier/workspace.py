"""The protocol of invocation workspaces shared by the programs of one launch (physical/workspace.py).

* workspace-protocol: a slot array (uninitialised, one copy per split) is written only at the writing
  program's own slot (its `split_index`), before the program draws its ticket (the acquire-release ticket
  releases only earlier writes); it is read only after a ticket, by the program that drew the last one
  (ticket = splits - 1: every slot is written), and in slot order (the slot coordinate is the position
  along a tile axis that one reduce folds in element order). A ticket counter (self-resetting) is touched
  only by tickets and by the reset: every ticket's last holder stores 0 back at the same element, after it,
  so the next launch starts from zero with nothing filled before it.
"""

from __future__ import annotations

from kir.core import Kernel

from .. import ops as P
from ..model import Access, AccessRelation, Buffer, BufferInit, BufferScope, POp, Program, PValue
from .base import Reporter, describe, rule
from .index import AccessSite, ProgramIndex, evaluate, index_of


def _split_values(ix: ProgramIndex) -> dict[int, tuple[int, str]]:
    """Value id of every split_index result -> (group, splits constexpr)."""
    return {op.results[0].id: (pl.group, op.splits) for pl in ix.placed
            if isinstance(op := pl.op, P.SplitIndex) and op.results}


def _strip_casts(ix: ProgramIndex, v: PValue) -> POp | None:
    op = ix.producer(v)
    while isinstance(op, P.Cast):
        op = ix.producer(op.x)
    return op


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
    src = _strip_casts(ix, other)
    if not isinstance(src, P.ShapeValue) or splits is None:
        return False
    pairs = [(evaluate(src.expr, env), env.get(splits)) for env in ix.envs]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    return bool(pairs) and all(a == b - 1 for a, b in pairs)


def _last_conjunct(ix: ProgramIndex, mask: PValue | None, tickets: list[P.Ticket], splits: str | None
                   ) -> P.Ticket | None:
    """The ticket whose last holder `mask` restricts to, if any. A conjunct may be the result of an `if` that the
    constexpr `flag` = (splits > 1) selects: where it is set, the then-branch's value (the last holder), where it
    is not, the program is the only one of its block (splits = 1)."""
    for c in ix.conjuncts(mask):
        for t in tickets:
            if _is_last(ix, c, t.results[0], splits):
                return t
        branch = ix.producer(c)
        if isinstance(branch, P.If) and branch.flag is not None and splits is not None and _selects_split(
                ix, branch.flag, splits):
            inner = branch.then_.yielded[[r.id for r in branch.results].index(c.id)]
            drawn = [o for o in branch.then_.walk() if isinstance(o, P.Ticket)]
            found = _last_conjunct(ix, inner, drawn, splits)
            if found is not None:
                return found
    return None


def _selects_split(ix: ProgramIndex, flag: str, splits: str) -> bool:
    """Whether the constexpr `flag` is 1 exactly where `splits` > 1 (on every sample launch)."""
    pairs = [(env.get(flag), env.get(splits)) for env in ix.envs]
    pairs = [(f, n) for f, n in pairs if f is not None and n is not None]
    return bool(pairs) and all(f == int(n > 1) for f, n in pairs)


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
    tickets: dict[int, list[tuple[int, P.Ticket]]] = {}  # group -> (order, ticket)
    for pl in ix.placed:
        if isinstance(pl.op, P.Ticket):
            tickets.setdefault(pl.group, []).append((pl.order, pl.op))
    sites: dict[int, list[AccessSite]] = {}
    for site in ix.accesses:
        sites.setdefault(site.access.buffer, []).append(site)
    for b in ix.buffers.values():
        if b.scope is not BufferScope.INVOCATION_WORKSPACE:
            continue
        if b.init is BufferInit.SELF_RESETTING:
            _counter(program, ix, b, sites.get(b.id, []), group_splits, report)
        else:
            _slots(program, ix, b, sites.get(b.id, []), splits_of, tickets, group_splits, report)
    for gid, found in tickets.items():
        for _, t in found:
            b = ix.buffers.get(t.access.buffer)
            if b is None or b.init is not BufferInit.SELF_RESETTING:
                report(f"{describe(program, t)} draws from {b.name if b else 'an unknown buffer'}, which is no "
                       f"self-resetting ticket counter", t, gid)


def _slots(program: Program, ix: ProgramIndex, b: Buffer, found: list[AccessSite],
           splits_of: dict[int, tuple[int, str]], tickets: dict[int, list[tuple[int, P.Ticket]]],
           group_splits: dict[int, str], report: Reporter) -> None:
    for site in found:
        op, gid, order = site.op, site.placed.group, site.placed.order
        drawn = tickets.get(gid, [])
        if site.kind is Access.WRITE:
            copy = site.access.copy
            if copy is None or copy.id not in splits_of or splits_of[copy.id][0] != gid:
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
        if not _in_slot_order(ix, op):
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
        value = _strip_casts(ix, store.value)
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
