"""Invocation workspaces for programs that cooperate within one launch: slot arrays and ticket counters.

A pass that splits the work of a block of instances over S programs (cross-program reductions, scans
with look-back, balanced segments) asks for workspace memory here and writes the protocol with the
helpers below; the verifier rule `workspace-protocol` (physical/verifier/workspace.py) checks it. No
launch fills anything: slot arrays need no initial value, and ticket counters are self-resetting (the
launcher allocates them zeroed once per plan, stream and thread; the program that draws the last ticket
sets the counter back to zero).

How a pass uses it::

    program, slots = add_slot_array(program, group, "partial", DType.f32, splits)    # one copy per split
    program, counter = add_ticket_counter(program, group, "arrivals")
    b = Builder.after(program)
    s = b.add(P.SplitIndex, INDEX, origin, group=gid, splits=SPLITS)      # this program's split (0 <= s < S)
    write_slot(b, slots, s, inst, partial, lane_ok, origin)                 # 1. publish the partial
    t = draw_ticket(b, counter, inst, lane_ok, origin)                      # 2. acq_rel ticket, after it
    last = last_ticket(b, t, SPLITS, lane_ok, origin)                       # 3. ticket S - 1: all slots ready
    parts = read_slots(b, slots, inst, SPLITS, BLOCK_S, last, lane_ok, fill, origin)  # 4. every slot, in slot order
    ...  fold `parts` along their last tile axis (a reduce in element order), store under `last` ...
    reset_counter(b, counter, inst, last, lane_ok, origin)                  # 5. leave the counter at zero

`inst` is the flattened instance coordinate (a lanes vector from `owned_instances`, or the constant 0 for a
single-instance group; the buffers then have one element per instance), `lane_ok` the lane-validity mask
(None for a single-instance group). The group's programs decode `owned_instances` with `splits=SPLITS`
and its segment holds `cdiv(instances, BLOCK_I) * SPLITS` programs. `SPLITS` is a constexpr (the split
count, at least 1) and `BLOCK_S` a power-of-two constexpr at least it.
"""

from __future__ import annotations

import dataclasses

from kir.dims import DConst, Dim, DSym, dim_bin
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn

from . import model as M
from . import ops as P
from .builder import Builder
from .launch_expr import LaunchExpr, LBin, LConst, LConstexpr, ladd, ldim, lmul, lprod
from .model import AccessRelation, Buffer, Fragment, Literal, Origin, Program, PValue, TileAxis, Workspace

INDEX = Fragment(DType.i64, index=True)
TICKET_DTYPE = DType.i32


def conjoin(b: Builder, x: PValue | None, y: PValue | None, origin: Origin | None) -> PValue | None:
    """`x and y` (None stands for "every member")."""
    if x is None or y is None:
        return x if y is None else y
    t = Fragment(DType.pred, x.type.lanes or y.type.lanes, x.type.tile or y.type.tile)
    return b.add(P.Binary, t, origin, fn=BinaryFn.and_, lhs=x, rhs=y)


# ---------------------------------------------------------------------------------------------- buffers


def instance_shape(domain: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """One element per flattened instance (one for a single-instance group)."""
    if not domain:
        return (DConst(1),)
    total: Dim = domain[0]
    for d in domain[1:]:
        total = dim_bin("*", total, d)
    return (total,)


def _fresh_buffer_id(program: Program) -> int:
    return max((b.id for b in program.buffers), default=0) + 1


def _add(program: Program, buf: Buffer, ws: Workspace) -> Program:
    return dataclasses.replace(program, buffers=program.buffers + (buf,), workspaces=program.workspaces + (ws,))


def restate_workspaces(program: Program, old: LaunchExpr, new: LaunchExpr) -> Program:
    """`program` with `old` replaced by `new` in its workspace sizes and copy counts, for a pass that rewrites
    the constexprs alike (a looped form's block, a split's flag). They state a constexpr's value in its terms
    (the launcher sizes workspaces from shape symbols, not constexprs), so they must keep its terms: a
    workspace sized for the split count before the rewrite would serve the count after it."""
    from .passes.looped import substitute  # the passes import this module

    def sub(e: LaunchExpr) -> LaunchExpr:
        out = substitute(e, old, new)
        assert isinstance(out, LaunchExpr)
        return out

    buffers = tuple(b if b.copies is None else dataclasses.replace(b, copies=sub(b.copies)) for b in program.buffers)
    workspaces = tuple(dataclasses.replace(w, count=sub(w.count)) for w in program.workspaces)
    return dataclasses.replace(program, buffers=buffers, workspaces=workspaces)


def add_slot_array(program: Program, group: int, name: str, dtype: DType, splits: str,
                   domain: tuple[Dim, ...] | None = None) -> tuple[Program, Buffer]:
    """A slot array of `group`: one copy (an ownership slice) per split (`splits`, a constexpr of the program),
    one element per instance of the group's domain in each. Uninitialised: each program writes its own slot
    before anyone reads it."""
    dom = program.group(group).domain if domain is None else domain
    count = program.constexpr(splits)  # the launcher sizes workspaces from shape symbols, not constexprs
    bid = _fresh_buffer_id(program)
    storage = f"ws_{name}_{bid}"
    shape = instance_shape(dom)
    buf = Buffer(bid, name, dtype, shape, M.BufferScope.INVOCATION_WORKSPACE, M.BufferInit.UNINITIALISED,
                 M.Lifetime.INVOCATION, M.Access.READ_WRITE, storage=storage, copies=count,
                 owner_group=group)
    return _add(program, buf, Workspace(storage, dtype, lmul(count, lprod(tuple(ldim(d) for d in shape))), None,
                                        bid)), buf


@dataclasses.dataclass
class LookbackBuffers:
    """The invocation workspace of a look-back (`physical.ops.lookback`): the sync buffer and the slots."""

    sync: Buffer
    slots: list[list[Buffer]]  # per scan, one buffer per accumulator
    workspaces: list[Workspace]


def lookback_buffers(program: Program, group: int, slots: Dim, count: LaunchExpr,
                     accs: list[tuple[DType, ...]], values: tuple[Dim, LaunchExpr] | None = None,
                     labels: list[str] | None = None) -> LookbackBuffers:
    """The look-back workspace of `group` (not yet added to `program`): a self-resetting i32 sync buffer of
    `slots` flags after the two counters and, per scan, a slot buffer per accumulator (`accs`), `slots`
    elements each; `count` is the flags' count as the launcher evaluates it (shape symbols). `values`: the slot
    buffers' elements instead (as a dim and as the launcher evaluates it), where a program publishes one value
    per lane of its block under one flag. `labels`: each row's name (`scan<n>` by default; a region fold's
    partials published beside the scans' aggregates are `fold<n>`)."""
    next_bid = _fresh_buffer_id(program)
    taken = {w.name for w in program.workspaces}

    def name(base: str) -> str:
        n, k = base, 1
        while n in taken:
            k += 1
            n = f"{base}{k}"
        taken.add(n)
        return n

    def buffer(label: str, dtype: DType, shape: Dim, elements: LaunchExpr, init: M.BufferInit
               ) -> tuple[Buffer, Workspace]:
        nonlocal next_bid
        storage = name(f"ws_g{group}_{label}")
        resets = init is M.BufferInit.SELF_RESETTING
        b = Buffer(next_bid, f"{label}_g{group}", dtype, (shape,), M.BufferScope.INVOCATION_WORKSPACE, init,
                   M.Lifetime.INVOCATION, M.Access.READ_WRITE, fill=0 if resets else None, storage=storage,
                   copies=LConst(1), owner_group=group)
        next_bid += 1
        return b, Workspace(storage, dtype, elements, 0 if resets else None, b.id, resets=resets)

    sync, wsync = buffer("scan_sync", DType.i32, dim_bin("+", slots, P.SYNC_FLAGS), ladd(count, LConst(P.SYNC_FLAGS)),
                         M.BufferInit.SELF_RESETTING)
    bufs, wss = [], [wsync]
    for n, dts in enumerate(accs):
        row = []
        for k, dt in enumerate(dts):
            label = labels[n] if labels else f"scan{n}"
            b, ws = buffer(f"{label}_slot{k}", P.slot_dtype(dt), *((slots, count) if values is None else values),
                           M.BufferInit.UNINITIALISED)
            row.append(b)
            wss.append(ws)
        bufs.append(row)
    return LookbackBuffers(sync, bufs, wss)


def add_ticket_counter(program: Program, group: int, name: str,
                       domain: tuple[Dim, ...] | None = None) -> tuple[Program, Buffer]:
    """A ticket counter of `group` (i32, one per instance): zero when allocated, and self-resetting."""
    dom = program.group(group).domain if domain is None else domain
    bid = _fresh_buffer_id(program)
    storage = f"ws_{name}_{bid}"
    shape = instance_shape(dom)
    buf = Buffer(bid, name, TICKET_DTYPE, shape, M.BufferScope.INVOCATION_WORKSPACE, M.BufferInit.SELF_RESETTING,
                 M.Lifetime.INVOCATION, M.Access.READ_WRITE, fill=0, storage=storage, copies=LConst(1),
                 owner_group=group)
    count = lprod(tuple(ldim(d) for d in shape))
    return _add(program, buf, Workspace(storage, TICKET_DTYPE, count, 0, bid, resets=True)), buf


# ---------------------------------------------------------------------------------------------- protocol ops


def _access(buf: Buffer, inst: PValue, mask: PValue | None, lane_ok: PValue | None, copy: PValue | None = None,
            fill: Literal | None = None) -> AccessRelation:
    # The instance coordinate is in range exactly where the lane-validity test `flat < instances` holds (a
    # guard, a conjunct of the mask); the constant 0 of a single-instance group is in range by construction.
    bounds = M.Guard(lane_ok) if lane_ok is not None else M.Proven("0 <= 0 < 1")
    return AccessRelation(buf.id, (inst,), mask, bounds, fill, copy)


def write_slot(b: Builder, slots: Buffer, split: PValue, inst: PValue, value: PValue, lane_ok: PValue | None,
               origin: Origin | None, mask: PValue | None = None) -> None:
    """This program's partial `value` into its own slot (copy `split`) of every instance it holds (those in
    `mask`, a conjunction with `lane_ok`, where only some take part)."""
    b.put(P.Store(access=_access(slots, inst, mask or lane_ok, lane_ok, split), value=value, origin=origin))


def draw_ticket(b: Builder, counter: Buffer, inst: PValue, lane_ok: PValue | None,
                origin: Origin | None, mask: PValue | None = None) -> PValue:
    """The arrival order of this program among the splits of each instance it holds (i32, per lane; only
    the instances in `mask`, a conjunction with `lane_ok`, where only some take part).

    Barriers on both sides: the program's threads' slot writes precede the ticket (whose release then
    publishes them device-wide), and its reads of other slots follow the ticket's acquire."""
    b.put(P.Barrier(origin=origin))
    t = Fragment(TICKET_DTYPE, inst.type.lanes)
    ticket = b.add(P.Ticket, t, origin, "ticket", access=_access(counter, inst, mask or lane_ok, lane_ok, fill=0))
    b.put(P.Barrier(origin=origin))
    return ticket


def last_ticket(b: Builder, ticket: PValue, splits: str, lane_ok: PValue | None, origin: Origin | None) -> PValue:
    """Whether this program drew ticket `splits - 1` (it arrived last: every slot is written)."""
    n = b.add(P.ShapeValue, INDEX, origin, "last_ticket", expr=LBin("-", LConstexpr(splits), LConst(1)))
    n32 = b.add(P.Cast, Fragment(TICKET_DTYPE), origin, x=n, dtype=TICKET_DTYPE)
    last = b.add(P.Compare, Fragment(DType.pred, ticket.type.lanes), origin, "last", fn=CmpFn.eq, lhs=ticket,
                 rhs=n32)
    return conjoin(b, last, lane_ok, origin)  # type: ignore[return-value]


def slot_axis(splits: str, block: str) -> TileAxis:
    """The tile axis along which a program reads every slot (extent: the split count, a constexpr)."""
    return TileAxis(DSym(splits), block)


def read_slots(b: Builder, slots: Buffer, inst: PValue, splits: str, block: str, last: PValue,
               lane_ok: PValue | None, fill: Literal, origin: Origin | None) -> PValue:
    """Every slot of each instance, in slot order along a trailing tile axis (members: the last holder's
    lanes and the positions below the split count; others read `fill`, the combine's identity)."""
    axis = slot_axis(splits, block)
    pos = b.add(P.TileIndex, Fragment(DType.i64, False, (axis,), True), origin, "slot", axis=0)
    n = b.add(P.ShapeValue, INDEX, origin, "splits", expr=LConstexpr(splits))
    inside = b.add(P.Compare, Fragment(DType.pred, False, (axis,)), origin, fn=CmpFn.lt, lhs=pos, rhs=n)
    mask = conjoin(b, last, inside, origin)
    t = Fragment(slots.dtype, inst.type.lanes, (axis,))
    # The slot coordinate (`copy`) is the position along the axis: slot k sits at position k.
    return b.add(P.Load, t, origin, "slots", access=_access(slots, inst, mask, lane_ok, pos, fill))



def reset_counter(b: Builder, counter: Buffer, inst: PValue, last: PValue, lane_ok: PValue | None,
                  origin: Origin | None) -> None:
    """The last holder sets the counter back to zero for the next launch (no launch fills it)."""
    zero = b.add(P.Const, Fragment(TICKET_DTYPE), origin, value=0, dtype=TICKET_DTYPE)
    b.put(P.Store(access=_access(counter, inst, last, lane_ok), value=zero, origin=origin))


__all__ = ["LookbackBuffers", "lookback_buffers",
           "conjoin", "INDEX", "TICKET_DTYPE", "instance_shape", "add_slot_array", "add_ticket_counter",
           "write_slot", "draw_ticket", "last_ticket", "slot_axis", "read_slots", "reset_counter"]
