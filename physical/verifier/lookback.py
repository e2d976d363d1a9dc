"""Look-back through an invocation workspace (`physical.ops.lookback`): types and the protocol rule.

* lookback-protocol: a group that publishes, folds or retires slots takes its instances from a ticket on
  its own self-resetting i32 sync buffer (one instance per program: block 1, unless S consecutive tickets
  share a block: then each lane has its own slot and the program one flag), publishes exactly once, at
  its top level, into the slot of its own instance (its ownership slice: tickets are distinct, so no two
  programs write one slot), folds only slots below its own ticket (it waits only for programs that have
  started: no deadlock, whatever order the launch runs programs in) and only slots it publishes under
  the same sync buffer's flags (visibility: every value read was written before the flag the fold waits
  for), and retires once, at its top level, after every other use of the workspace, counting exactly the
  programs of its segment (so the last one restores the flags and counters for the next launch). The
  workspaces hold a flag for every program and a slot for every lane of every program; no other op touches
  these buffers. Where helpers past the blocks balance region scans by the data, `helper_index` takes its
  position from the same ticket (so helpers follow the blocks), and a helper's own slot is
  `blocks * BLOCK + x`, past every lane of the blocks (`select(helper >= 0, blocks * BLOCK + x, own)`): x is
  proven by the affine engine, for every member that publishes in a helper, to lie in [0, HELPERS * BLOCK) (the
  slots the workspace holds past the blocks' lanes: it holds a slot per lane of every program, and the segment
  launches blocks + HELPERS programs) and to differ between any two helpers, and between two lanes of one helper,
  that both publish (the one-axis form's x is the helper's position, published by the one lane it joins). Over a
  (segments, columns) workset x is `column * n + position` (n = CHUNKS, the position the helper's among its part's,
  the column that of the lane it publishes in): proven in steps (`_column_range`) that the position lies in [0, n),
  that the column lies below BLOCK * (p + 1) for the helper's part p = helper // n (the lane lies in the p-th block
  of its segment) and that (p + 1) * n <= HELPERS, hence x < HELPERS * BLOCK; and that two helpers, or two lanes of
  one helper, that publish differ in column or position (the owner search gives a chunk one segment whatever the
  offsets hold: `Forms.function_facts`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kir.core import Kernel
from kir.dims import DConst, Dim, DSym, PAnd, PCmp, POr, dim_bin
from kir.dtypes import DType
from kir.pointwise import BinaryFn

from .. import ops as P
from ..launch_expr import LConstexpr, lmul
from ..model import BufferInit, BufferScope, Group, POp, Program, PValue, Trait
from .affine import Forms, forms_of
from .base import Reporter, rule
from .helpers import strip_casts
from .index import evaluate, index_of, product

slot_dtype = P.slot_dtype


@rule("lookback-protocol")
def check_lookback(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """programs that pass values through an invocation workspace take their positions from a ticket, write only their
    own slot, wait only for lower tickets, read only published slots and restore the workspace"""
    ix = index_of(program)
    used: dict[int, int] = {}  # lookback buffer -> group
    for g in program.groups:
        ops = [pl.op for pl in ix.group_ops(g.id)]
        if any(op.has(Trait.LOOKBACK) for op in ops):
            _group(program, ix, g, report, used)
    for site in ix.accesses:
        if site.access.buffer in used:
            report(f"{site.op.NAME} touches {ix.buffers[site.access.buffer].name}, which only the look-back ops "
                   f"may use", site.op, site.placed.group)


def _helper_side(ix, v: PValue, helper: P.HelperIndex | None, block: str) -> PValue | None:
    """Where `v` is `select(helper_index >= 0, blocks * BLOCK + x, own)` (a balanced region scan's slot: a helper's
    slots follow every lane of the blocks), `own`; else None."""
    parts = _helper_parts(ix, v, helper, block)
    return parts[1] if parts is not None else None


def _helper_parts(ix, v: PValue, helper: P.HelperIndex | None, block: str) -> tuple[PValue, PValue] | None:
    """(x, own) where `v` is `select(helper_index >= 0, blocks * BLOCK + x, own)`; else None."""
    sel = ix.producer(v)
    if helper is None or not isinstance(sel, P.Select):
        return None
    test = ix.producer(sel.cond)
    if not (isinstance(test, P.Compare) and test.fn.value == "ge" and strip_casts(ix, test.lhs)[0] == helper.result):
        return None
    add = ix.producer(sel.on_true)
    if not isinstance(add, P.Binary) or add.fn is not BinaryFn.add:
        return None
    want = ix.values(lmul(helper.blocks, LConstexpr(block)))
    for base, x in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        shape = strip_casts(ix, base)[1]
        if isinstance(shape, P.ShapeValue) and ix.values(shape.expr) == want:
            return x, strip_casts(ix, sel.on_false)[0]
    return None


def _helper_slots(ix, g: Group, op: P.PublishSlot, helper: P.HelperIndex, ticket: P.OwnedInstances,
                  report: Reporter) -> None:
    """A helper's own slot `blocks * BLOCK + x` (`_helper_parts`) is its ownership slice: proven, for every member
    that publishes (`op.active`) in a helper (`helper_index >= 0`), to lie in the helpers' slots past the blocks'
    lanes (0 <= x < HELPERS * BLOCK, the slots the workspace holds past `blocks * BLOCK`: see the size check) and to
    differ between two helpers, and between two lanes of one helper, that both publish (helpers do not draw apart
    on flags: two writing one slot would race, and a fold would read whichever came last).

    Over a (segments, columns) workset x is `column * n + position` (`_ColumnSlot`), and the proofs take the facts
    of `Forms.function_facts` (the instance's decode, the constexprs' definitions, quotients by a count that may be
    0, equal results of a search for equal inputs) in steps small enough for the solver (`_column_range`): the
    position lies in [0, n), so two members write one slot only where both the column and the position agree."""
    parts = _helper_parts(ix, op.slot, helper, ticket.block)
    if parts is None:
        return
    x = parts[0]
    forms = forms_of(ix, g)
    fx, hp = forms.form(x), forms.form(helper.result)
    forms.form(ticket.result)
    src = forms.sources.get(id(ticket))
    publishing = [forms.fact(op.active)] if op.active is not None else []
    where = [PCmp(">=", hp, DConst(0))] + [f for f in publishing if f is not None] if hp is not None else None
    lanes, helpers = ticket.block, helper.helpers
    slot = f"blocks * {lanes} + %{x.id}"
    size = dim_bin("*", forms.launch_dim(LConstexpr(helpers)), forms.launch_dim(LConstexpr(lanes)))
    columns = len(g.domain) > 1
    # the column form's queries chain equalities through products (`Prover.proves_solving`); the one-axis form's
    # are decided as they always were
    prove = forms.prover.proves_solving if columns else forms.prover.proves
    column = _column_slot(ix, forms, x) if columns and fx is not None else None
    mark = forms.prover.mark()  # a report resting on queries the budget left undecided says so
    facts = forms.base_facts() + (where or []) + (forms.function_facts() if columns else [])
    if column is not None and where is not None:
        in_range, column = _column_range(forms, facts, column, hp, helpers, lanes)  # type: ignore[arg-type]
    else:
        in_range = fx is not None and where is not None and prove(facts, PAnd((
            PCmp(">=", fx, DConst(0)), PCmp("<", fx, size))))
    if not in_range:
        report(f"group {g.id}: publish_slot writes a helper's slot {slot}, which may lie outside the helpers' slots "
               f"[blocks * {lanes}, blocks * {lanes} + {helpers} * {lanes}){forms.prover.note(mark)}", op, g.id)
    mark = forms.prover.mark()
    if fx is None or where is None or src is None or forms.program_atom is None:
        apart = False
    else:
        hyps, differ = forms.distinct(src)
        other = PCmp("!=", forms.rename(forms.program_atom, "A"), forms.rename(forms.program_atom, "B"))
        both = [forms.rename(f, t) for t in "AB" for f in where]
        # where the position lies in [0, n) in every member, two members' slots differ where their columns or
        # their positions do (n is one launch value)
        goal = PCmp("!=", forms.rename(fx, "A"), forms.rename(fx, "B")) if column is None else POr(tuple(
            PCmp("!=", forms.rename(d, "A"), forms.rename(d, "B")) for d in (column.column, column.position)))
        extra = forms.function_facts(("A", "B")) if columns else []
        apart = prove(forms.base_facts("A") + forms.base_facts("B") + forms.same_program() + hyps + both +  # type: ignore
                      extra + [POr((other, differ))], goal)  # type: ignore[arg-type]
    if not apart:
        report(f"group {g.id}: publish_slot may write one helper's slot {slot} for two helpers, or two lanes of one "
               f"helper, that both publish: one would overwrite the other's aggregate{forms.prover.note(mark)}", op,
               g.id)


@dataclass(frozen=True)
class _ColumnSlot:
    """A helper's slot over a (segments, columns) workset: `column * n + position`, n one launch value (the count
    of chunks: a column's helpers hold consecutive slots)."""

    column: Dim
    n: Dim
    position: Dim


def _column_slot(ix, forms: Forms, x: PValue) -> _ColumnSlot | None:
    """`x` as `column * n + position` (the ops `add(mul(column, n), position)`, in any operand order), with n the
    same in every member; None where it is not."""
    add = strip_casts(ix, x)[1]
    if not isinstance(add, P.Binary) or add.fn is not BinaryFn.add:
        return None
    for term, position in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        mul = strip_casts(ix, term)[1]
        if not isinstance(mul, P.Binary) or mul.fn is not BinaryFn.mul:
            continue
        for column, n in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
            c, w, j = forms.form(column), forms.form(n), forms.form(position)
            if c is not None and w is not None and j is not None and not w.symbols() & forms.per_copy:
                return _ColumnSlot(c, w, j)
    return None


def _column_range(forms: Forms, facts: list, slot: _ColumnSlot, hp: Dim, helpers: str, lanes: str
                  ) -> tuple[bool, _ColumnSlot | None]:
    """Whether `column * n + position` lies in [0, HELPERS * BLOCK), in lemmas the solver decides apart (the whole
    goal at once is beyond its budget), and the slot where the position is proven in [0, n) (else None):

    * 0 <= position < n;
    * 0 <= column < BLOCK * (p + 1), for p the helper's part `helper_index // n` (a quotient of the group's: a lane
      that a helper of part p joins lies in the p-th block of its segment's);
    * (p + 1) * n <= HELPERS (the helpers are numbered part by part, n of each);
    and then, from these and the facts of the launch values alone, (column + 1) * n <= BLOCK * HELPERS."""
    zero, one = DConst(0), DConst(1)
    c, n, j = slot.column, slot.n, slot.position
    prove = forms.prover.proves_solving
    if not prove(facts, PAnd((PCmp(">=", j, zero), PCmp("<", j, n)))):
        return False, None
    block, count = forms.launch_dim(LConstexpr(lanes)), forms.launch_dim(LConstexpr(helpers))
    # the facts of the launch values alone (BLOCK >= 1) go with the lemmas
    launch = block.symbols() | count.symbols() | n.symbols()
    position = [PCmp(">=", j, zero), PCmp("<", j, n)] + [f for f in facts if f.symbols() and f.symbols() <= launch]
    for p in _parts(forms, hp, n):
        after = dim_bin("+", p, one)
        # p is the helper index's quotient: n * p <= helper_index < n * (p + 1) where n >= 1 (in a helper)
        part = POr((PCmp("<", n, one), PAnd((PCmp("<=", dim_bin("*", n, p), hp),
                                              PCmp("<", hp, dim_bin("*", n, after))))))
        below = PAnd((PCmp(">=", c, zero), PCmp("<", c, dim_bin("*", block, after))))
        if prove(facts, below) and prove(facts + [part], PCmp("<=", dim_bin("*", after, n), count)):
            lemmas = position + [PCmp(">=", c, zero), PCmp("<", c, dim_bin("*", block, after)),
                                 PCmp("<=", dim_bin("*", after, n), count)]
            whole = dim_bin("+", dim_bin("*", c, n), j)
            inside = PAnd((PCmp(">=", whole, zero), PCmp("<", whole, dim_bin("*", count, block))))
            return prove(lemmas, inside), slot
    return False, slot


def _parts(forms: Forms, hp: Dim, n: Dim) -> list[DSym]:
    """The group's quotients of the helper index by `n`: of `helper_index` itself, or of `maximum(helper_index,
    0)` (the same value in a helper)."""
    clamped = {c.result for c in forms.calls if c.kind == ("maximum",) and set(c.args) == {hp, DConst(0)}}
    return [c.result for c in forms.calls if c.kind == ("div",) and c.args[1] == n and (
        c.args[0] == hp or c.args[0] in clamped)]


def _own_slot(ix, ticket: P.OwnedInstances, slot: PValue, top: list, helper: P.HelperIndex | None = None
              ) -> PValue | None:
    """The first slot of the program's instance if `slot` is the program's own, else None. The own slot is its
    ticket, or, where S = `ticket.splits` consecutive tickets share an instance, `instance * S + split_index`
    (ticket t holds slot t: the instance's S pieces hold consecutive slots and tickets alike); in a group with
    helpers that take their tickets after the blocks, a helper's own slot follows the blocks' lanes."""
    own = _helper_side(ix, slot, helper, ticket.block)
    if own is not None:
        return _own_slot(ix, ticket, own, top)
    if slot == ticket.result:
        return ticket.result
    if ticket.splits is None:
        return None
    if isinstance(ix.producer(slot), P.SplitIndex) and ix.producer(slot).splits == ticket.splits and \
            ix.program.group(ticket.group).single_instance:
        return slot  # one instance (a top-level scan): ticket t holds piece t, slot t; its first slot is 0
    add = ix.producer(slot)
    if not isinstance(add, P.Binary) or add.fn is not BinaryFn.add:
        return None
    splits = {op.results[0].id for op in top if isinstance(op, P.SplitIndex) and op.splits == ticket.splits}
    for base, split in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        mul = ix.producer(base)
        if split.id not in splits or not isinstance(mul, P.Binary) or mul.fn is not BinaryFn.mul:
            continue
        factors = [ix.producer(x) for x in (mul.lhs, mul.rhs)]
        if ticket.result in (mul.lhs, mul.rhs) and any(
                isinstance(f, P.ShapeValue) and f.expr == LConstexpr(ticket.splits) for f in factors):
            return base
    return None


def _group(program: Program, ix, g: Group, report: Reporter, used: dict[int, int]) -> None:  # noqa: C901
    # the forms that pass values on (a split form beside the row's whole and looped forms: only it draws tickets)
    top = [op for form in P.forms(g.body) if any(o.has(Trait.LOOKBACK) for o in form.walk())
           for op in P.instance_ops(form)]
    nested = [pl.op for pl in ix.group_ops(g.id) if pl.nested and pl.op.has(Trait.LOOKBACK)]
    for op in nested:
        report(f"group {g.id}: {op.NAME} runs inside a nested region; every program must run it exactly once, "
               f"at the group's top level", op, g.id)
    tickets = [op for op in top if isinstance(op, P.OwnedInstances) and op.ticket is not None]
    publishes = [op for op in top if isinstance(op, P.PublishSlot)]
    folds = [op for op in top if isinstance(op, P.FoldSlots)]
    retires = [op for op in top if isinstance(op, P.RetireTicket)]
    if len(tickets) != 1 or any(isinstance(op, P.OwnedInstances) and op.ticket is None for op in top):
        report(f"group {g.id}: look-back needs the group's instances from one ticket (owned_instances with a "
               f"ticket), found {len(tickets)}", None, g.id)
        return
    ticket = tickets[0]
    sync = ix.buffers.get(ticket.ticket)  # type: ignore[arg-type]
    helper = next((op for op in top if isinstance(op, P.HelperIndex)), None)
    if helper is not None and helper.ticket != ticket.ticket:
        report(f"group {g.id}: helper_index takes its position from buffer {helper.ticket}, not from the ticket "
               f"of owned_instances (buffer {ticket.ticket}): helpers would not follow the blocks", helper, g.id)
    block = dict(program.constexprs).get(ticket.block)
    # S pieces of a block (`splits`): each lane publishes its own slot (instance * S + piece) under the program's
    # one flag, so a block may hold several instances; otherwise the slot and the flag are the ticket
    if block is None or (ticket.splits is None and any(v != 1 for v in ix.values(block))):
        report(f"group {g.id}: a ticket program owns one instance, but {ticket.block} = {block}", ticket, g.id)
    if sync is None or sync.scope is not BufferScope.INVOCATION_WORKSPACE or \
            sync.init is not BufferInit.SELF_RESETTING or sync.dtype is not DType.i32 or sync.owner_group != g.id:
        what = "no buffer" if sync is None else f"{sync.name} ({sync.scope}, {sync.init}, {sync.dtype})"
        report(f"group {g.id}: the ticket's sync buffer must be a self-resetting i32 invocation workspace of the "
               f"group, got {what}", ticket, g.id)
        return
    used[sync.id] = g.id
    if len(publishes) != 1:
        report(f"group {g.id}: every program publishes its slot exactly once, found {len(publishes)} publish_slot",
               None, g.id)
    published: set[int] = set()
    for op in publishes:
        _slot_op(ix, g, op, op.values, (sync, ticket, top, helper), report, used, published)
        if helper is not None:
            _helper_slots(ix, g, op, helper, ticket, report)
    for op in folds:
        _slot_op(ix, g, op, op.acc_dtypes, (sync, ticket, top, helper), report, used, published)
    length = next((s.length for s in program.segments if s.group == g.id), None)
    if len(retires) != 1:
        report(f"group {g.id}: every program retires its ticket exactly once, found {len(retires)} retire_ticket "
               f"(the last one restores {sync.name})", None, g.id)
    for op in retires:
        _slot_op(ix, g, op, (), (sync, ticket, top, helper), report, used, published)
        # on the launches that run the retiring form (a split form's count need not hold where the launch runs
        # the whole or looped form, persistent programs included)
        form = ix.place[id(op)].form
        runs = [ix.runs_form(g, form, env) for env in ix.envs]
        if length is None or any(a != b for a, b, r in zip(ix.values(op.programs), ix.values(length), runs) if r):
            report(f"group {g.id}: retire_ticket counts {op.programs} programs, but the segment launches {length}",
                   op, g.id)
        last_use = max((k for k, o in enumerate(top) if isinstance(o, P.PublishSlot | P.FoldSlots)), default=-1)
        if top.index(op) < last_use:
            report(f"group {g.id}: retire_ticket runs before {top[last_use].NAME}: the last program would restore "
                   f"the flags while others still use them", op, g.id)
    workspaces = {w.name: w for w in program.workspaces}
    # this group's buffers only: `used` holds the earlier groups' too, sized for their own programs and blocks
    for bid in [b for b, owner in used.items() if owner == g.id]:
        b = ix.buffers[bid]
        w = workspaces.get(b.storage or "")
        need = product(b.shape)
        for env in ix.envs:
            have, n, programs = evaluate(w.count, env) if w else None, evaluate(need, env), \
                evaluate(length, env) if length is not None else None
            extra = P.SYNC_FLAGS if bid == sync.id else 0
            if programs is not None and n is not None and n < programs + extra:
                report(f"group {g.id}: {b.name} holds {n} elements, fewer than the {programs} programs need",
                       None, g.id)
                break
            lanes = evaluate(block, env) if block is not None and bid != sync.id else 1
            if programs is not None and n is not None and lanes is not None and lanes > 1 and n < programs * lanes:
                report(f"group {g.id}: {b.name} holds {n} elements, fewer than the {programs} programs of {lanes} "
                       f"lanes need (a slot per lane)", None, g.id)
                break
            if have is not None and n is not None and have < n:
                report(f"group {g.id}: workspace {w.name} holds {have} elements, fewer than {b.name} needs ({n})",  # type: ignore
                       None, g.id)
                break


# what each look-back op does with the sync buffer, and which of its operands must be the program's own ticket
_USES_FLAGS = {P.PublishSlot: "raises flags", P.FoldSlots: "waits for flags", P.RetireTicket: "counts"}
_OWN_TICKET = {
    P.PublishSlot: ("slot", "writes a slot other than the program's own instance (its ownership slice)"),
    P.FoldSlots: ("upto", "must stop at the program's own ticket (it may wait only for lower tickets, which have "
                          "started)")}


def _slot_op(ix, g: Group, op: POp, held: tuple, protocol: tuple, report: Reporter, used: dict[int, int],
             published: set[int]) -> None:
    """One look-back op of group `g` against the group's ticket and sync buffer (`protocol`): it uses that
    buffer's flags, its position is the program's own ticket, and its slot buffers (one per value or dtype in
    `held`) are the group's workspaces holding the slot form of what it publishes, or published ones it reads
    back as such."""
    sync, ticket, top, helper = protocol
    if op.sync != sync.id:  # type: ignore[attr-defined]
        report(f"group {g.id}: {op.NAME} {_USES_FLAGS[type(op)]} in buffer {op.sync}, not the ticket's "  # type: ignore
               f"{sync.name}", op, g.id)
    own = _OWN_TICKET.get(type(op))
    first = _own_slot(ix, ticket, getattr(op, own[0]), top, helper) if own is not None else None
    if own is not None and first is None:
        report(f"group {g.id}: {op.NAME} {own[1]}", op, g.id)
    elif isinstance(op, P.FoldSlots) and g.single_instance and first is not None and first is not ticket.result:
        start = ix.producer(op.first)
        if not (isinstance(start, P.Const) and start.value == 0):
            report(f"group {g.id}: fold_slots of a single instance's pieces must start at slot 0", op, g.id)
    elif isinstance(op, P.FoldSlots) and first is not ticket.result and op.first != first and \
            _helper_side(ix, op.first, helper, ticket.block) != first:
        report(f"group {g.id}: fold_slots must start at the first slot of the program's instance (the slots "
               f"below it hold other instances' pieces, whose tickets may be higher)", op, g.id)
    publishes = isinstance(op, P.PublishSlot)
    for bid, x in zip(getattr(op, "slots", ()), held):
        b = ix.buffers.get(bid)
        dt = x.type.dtype if publishes else x
        if publishes:
            if b is None or b.scope is not BufferScope.INVOCATION_WORKSPACE or b.owner_group != g.id:
                report(f"group {g.id}: slot buffer {bid} is not an invocation workspace of the group", op, g.id)
                continue
            if b.dtype != slot_dtype(dt):
                report(f"group {g.id}: {b.name} holds {b.dtype}, but the published value is {dt}", op, g.id)
            used[bid] = g.id
            published.add(bid)
        elif bid not in published:
            report(f"group {g.id}: {op.NAME} reads {b.name if b else bid}, which no publish_slot of the group "
                   f"writes before its flag", op, g.id)
        elif b is not None and b.dtype != slot_dtype(dt):
            report(f"group {g.id}: {op.NAME} reads {b.name} ({b.dtype}) as {dt}", op, g.id)


__all__ = ["check_lookback"]
