"""Few long rows decided at launch: a group of row scans gets a third form that spreads each row over programs.

Split-scans (split_scan.py) spreads a group's rows over cooperating programs only where the refinements prove the
rows few (at most `FEW_ROWS`): with the rows symbolic (`for r in parallel(R): out[r, :] = cumsum(x[r, :])`),
R = 2 rows of 4M values would otherwise run in two programs, walking their rows in chunks (the looped form), while
the rest of the device idles. This pass, after looped-rows, gives such a group (a `looped_rows` body whose whole
form split-scans' legality admits, its rows over one parallel axis or several: the flattened instances) a third
form, `split`, which the launch selects with the constexpr `SPLIT_g`:

* `SPLIT_g` is 1 where the row does not fit one program (the looped flag is set) and the rows are fewer than the
  programs the device keeps resident (`resident_programs` of the split form's warps): the unsplit forms would leave
  programs idle. Under Triton's interpreter (one program at a time) it is 0: each program walks its rows;
* `SPLITS_g` = `cdiv(N, T)` programs share each row where the split runs (1 otherwise), each one chunk of T
  elements (split-scans' chunk: the persistent budget, at most `SPLIT_TILE`), and `BLOCK_g` (the rows of a
  program) is 1 there: the segment has `R * SPLITS_g` programs;
* a program takes its position from an acq_rel ticket on the group's self-resetting sync buffer
  (`owned_instances` with `ticket` and `splits`): ticket t runs chunk `t % SPLITS_g` of row `t // SPLITS_g` (a
  reverse scan's chunk `SPLITS_g - 1 - t % SPLITS_g`), so the chunks of a row hold consecutive tickets and a
  program waits only for lower tickets (no co-residency; the interpreter never waits);
* it loads and scans its chunk, publishes the chunk's aggregate in slot `row * SPLITS_g + chunk position`, folds
  the slots of its row's lower tickets in index order (`fold_slots`: the order depends on the ticket only, so
  float results are the same bits every run), writes its chunk with that prefix combined in, and retires its
  ticket; the last program restores the workspace, which the launcher never clears.

The whole and looped forms are the body as it was; only the split form touches the workspace. The decision is
a set of launch expressions of the physical program (the emitter prints them) and `kirc explain` shows which
form a launch takes.
"""

from __future__ import annotations

import dataclasses

from kir.dims import DConst, DSym, dim_bin
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn

from .. import ops as P
from ..builder import Builder
from ..launch_expr import (
    LaunchExpr,
    LBin,
    LConst,
    LConstexpr,
    LResidentPrograms,
    LWarps,
    as_launch,
    lcdiv,
    ldim,
    lmin,
    lmul,
    lprod,
    lselect,
    lsum,
)
from ..model import Fragment, Group, PRegion, Program, PValue, TileAxis
from ..workspace import INDEX, LookbackBuffers, lookback_buffers
from . import GroupPass
from .partials import split_flag
from .rows import RowBuilder, chunk_scan
from .split_scan import SLOT_BLOCK, SplitPlan, plan_split


@dataclasses.dataclass(frozen=True)
class RowsPlan:
    """The split of a group of rows decided at launch: split-scans' plan of its whole form."""

    group: Group
    choice: P.LoopedRows
    split: SplitPlan


def plan_rows(program: Program, group: Group, forced: int | None = None) -> RowsPlan | str:
    """The launch-decided split of `group`'s rows, or why it has none."""
    choice = P.looped_rows(group.body)
    if choice is None:
        return "its row fits one program (no looped form)"
    if choice.split is not None:
        return "it already has a split form"
    if group.single_instance:
        return "a single row (split-scans splits it)"
    if any(P.block_loop(f.ops) is not None for f in P.forms(group.body)):
        return "it loops over blocks of rows"
    plan = plan_split(program, dataclasses.replace(group, body=choice.whole), forced, proven_few=False)
    if isinstance(plan, str):
        return plan
    return RowsPlan(group, choice, plan)


class SplitRowsAtLaunch(GroupPass):
    """Give groups of long row scans a split form that the launch selects where the rows are few."""

    name = "split-rows"

    def __init__(self, tile: int | None = None) -> None:
        self.tile = tile

    def plan_group(self, program: Program, group: Group) -> RowsPlan | str:
        return plan_rows(program, group, self.tile)

    def apply(self, program: Program, plan: RowsPlan) -> Program:  # type: ignore[override]
        return _split(program, plan)


def _split(program: Program, plan: RowsPlan) -> Program:
    g, sp = plan.group, plan.split
    gid = g.id
    consts = dict(program.constexprs)
    order = [n for n, _ in program.constexprs]
    splits, flag, chunk_block = f"SPLITS_{gid}", split_flag(gid), sp.block
    rows = lprod(tuple(ldim(d) for d in g.domain))
    per_row = lcdiv(ldim(sp.axis.extent), LConst(sp.tile))
    warps = LWarps(LConst(sp.tile))
    # the split runs where the row is walked in chunks (it outgrows a program) and the rows leave resident programs
    # idle; resident_programs is 1 under the interpreter, so there the rows keep their own programs
    looped = consts[plan.choice.flag]
    few = lmin(LConst(1), LBin("//", LResidentPrograms(warps), LBin("+", rows, LConst(1))))
    runs = lmin(looped, few)
    count = lselect(runs, per_row, LConst(1))
    block = lselect(runs, LConst(1), consts[g.block])
    consts.update({g.block: block, chunk_block: LConst(sp.tile), splits: count, flag: runs})
    order += [n for n in (chunk_block, splits, flag) if n not in order]
    # the constexprs sized by the whole or looped form keep their values; the launch's warps follow the form it runs
    num_warps = lselect(runs, warps, as_launch(program.num_warps))
    blocks = lcdiv(rows, block)
    programs = lmul(blocks, count)
    old = {s.group: as_launch(s.length) for s in program.segments}
    lengths = [programs if s.group == gid else old[s.group] for s in program.segments]
    segments = tuple(dataclasses.replace(s, length=n, offset=lsum(tuple(lengths[:k])))
                     for k, (s, n) in enumerate(zip(program.segments, lengths)))
    program = dataclasses.replace(program, constexprs=tuple((n, consts[n]) for n in order), num_warps=num_warps,
                                  segments=segments, grid=lsum(tuple(lengths)))
    # a flag per program and a slot per lane: BLOCK_g lanes a program (1 where the split runs; the other forms never
    # touch the workspace, but the sizes hold for every launch)
    lanes = DSym(g.block)
    flat = g.domain[0]
    for d in g.domain[1:]:  # rows over several parallel axes: the flattened instances
        flat = dim_bin("*", flat, d)
    blocks_dim = dim_bin("//", dim_bin("+", flat, dim_bin("-", lanes, 1)), lanes)
    flags_dim = dim_bin("*", blocks_dim, DSym(splits))
    values = (dim_bin("*", dim_bin("*", blocks_dim, lanes), DSym(splits)), lmul(lmul(blocks, block), count))
    sync = lookback_buffers(program, gid, flags_dim, programs, [op.acc_dtypes for op in sp.scans], values)
    program = dataclasses.replace(program, buffers=program.buffers + (sync.sync,) + tuple(b for r in sync.slots
                                                                                          for b in r),
                                  workspaces=program.workspaces + tuple(sync.workspaces))
    body = _build(program, plan, sync, splits, programs)
    choice = dataclasses.replace(plan.choice, split_flag=flag, split=body)
    group = dataclasses.replace(g, body=PRegion(g.body.args, tuple(choice if op is plan.choice else op
                                                                   for op in g.body.ops)))
    return dataclasses.replace(program, groups=tuple(group if x.id == gid else x for x in program.groups))


def _build(program: Program, plan: RowsPlan, sync: LookbackBuffers, splits: str, programs: LaunchExpr) -> PRegion:
    """The split form: ticket, the chunk's scan, publish, the ordered fold of the row's lower tickets, the
    prefixed writes, retire."""
    sp = plan.split
    # the whole form under fresh values (each form defines its own), then rebuilt over one chunk
    cb = Builder.after(program)
    clone = cb.copy_region(plan.choice.whole)
    b = RowBuilder(sp.axis, TileAxis(DConst(sp.tile), sp.block), cb.next_id)
    ops = [op for op in clone.ops if not op.TERMINATOR]
    origin = next((op.origin for op in ops if op.origin is not None), None)
    scans = [op for op in ops if isinstance(op, P.Scan) and any(on_axis(v, sp.axis) for v in op.results)]
    owned = next(op for op in ops if isinstance(op, P.OwnedInstances))
    flat: PValue = owned.results[0]
    # values computed from a scan's result, and every store, wait for the fold of the predecessors' aggregates
    after: set[int] = set()
    for op in ops:
        if any(v.id in after for v in op.operands()) or isinstance(op, P.Store) or any(op is s for s in scans):
            after.update(v.id for v in op.results)
    # the ticket first (it reads nothing the body computes): every op of the chunk may need the chunk's start
    b.put(dataclasses.replace(owned, splits=splits, ticket=sync.sync.id))
    start = _chunk_start(b, sp, splits, origin)
    pending: list[tuple[P.Scan, list[PValue], list[PValue]]] = []
    for op in ops:
        if op is owned:
            continue
        if any(op is s for s in scans):
            pending.append((op, *chunk_scan(b, op)))  # type: ignore[arg-type]
        elif not (isinstance(op, P.Store) or any(v.id in after for v in op.operands())):
            b.copy_op(op, start)
    s = next(op.results[0] for op in b.frames[0].ops if isinstance(op, P.SplitIndex))
    per = b.add(P.ShapeValue, INDEX, origin, "splits", expr=LConstexpr(splits))
    first = b.add(P.Binary, flat.type, origin, "row_first", fn=BinaryFn.mul, lhs=flat, rhs=per)
    slot = b.add(P.Binary, flat.type, origin, "slot", fn=BinaryFn.add, lhs=first, rhs=s)
    lane_ok = _lane_ok(b, flat)
    aggs = [v for _, _, agg in pending for v in agg]
    b.put(P.PublishSlot(origin=origin, sync=sync.sync.id, slots=tuple(x.id for r in sync.slots for x in r),
                        slot=slot, values=tuple(aggs), active=lane_ok))
    zero = b.add(P.Const, INDEX, origin, value=0, dtype=DType.i64)
    leading = b.add(P.Compare, Fragment(DType.pred), origin, "first_chunk", fn=CmpFn.eq, lhs=s, rhs=zero)
    for (op, local, _), slots in zip(pending, sync.slots):
        prefix = [b.fresh(Fragment(dt, True), "prefix") for dt in op.acc_dtypes]
        b.put(P.FoldSlots(results=tuple(prefix), origin=op.origin, sync=sync.sync.id, slots=tuple(x.id for x in slots),
                          first=first, upto=slot, reverse=op.reverse, identity=op.identity, acc_dtypes=op.acc_dtypes,
                          block=SLOT_BLOCK, combine=b.copy_region(op.combine), active=lane_ok))
        # element order: the predecessors' prefix precedes the chunk (follows it in a reverse scan)
        lhs, rhs = (local, prefix) if op.reverse else (prefix, local)
        joined = b.combine(op.combine, lhs, rhs, [v.type for v in local], op.origin)
        for r, own, j in zip(op.results, local, joined):
            out = b.add(P.Select, j.type, op.origin, cond=leading, on_true=own, on_false=j)
            b.row[r.id] = b.cast(out, r.type.dtype, op.origin) if r.type.dtype != out.type.dtype else out
    for op in ops:
        if isinstance(op, P.Store) or (any(v.id in after for v in op.operands()) and not any(op is x for x in scans)):
            b.copy_op(op, start)
    b.put(P.RetireTicket(origin=origin, sync=sync.sync.id, programs=programs))
    b.put(P.Yield(values=()))
    return PRegion(plan.choice.whole.args, tuple(b.frames[0].ops))


def _chunk_start(b: RowBuilder, sp: SplitPlan, splits: str, origin) -> PValue:
    """The first position of this program's chunk: chunk `t % S` of its row (`S - 1 - t % S` in a reverse scan)."""
    s = b.add(P.SplitIndex, INDEX, origin, "split", group=sp.group.id, splits=splits)
    chunk = s
    if sp.reverse:  # the chunks after it (nearer the row's end) hold the lower tickets
        last = b.add(P.ShapeValue, INDEX, origin, "last_chunk", expr=LBin("-", LConstexpr(splits), LConst(1)))
        chunk = b.add(P.Binary, INDEX, origin, "chunk", fn=BinaryFn.sub, lhs=last, rhs=s)
    tile = b.add(P.ShapeValue, INDEX, origin, "chunk_size", expr=LConstexpr(sp.block))
    return b.add(P.Binary, INDEX, origin, "chunk_start", fn=BinaryFn.mul, lhs=chunk, rhs=tile)


def _lane_ok(b: RowBuilder, flat: PValue) -> PValue | None:
    """The lanes' validity test (`flat < instances`) the body computed from the ticket's instances."""
    for op in b.frames[0].ops:
        if isinstance(op, P.Compare) and op.fn is CmpFn.lt and op.lhs.id == flat.id:
            return op.results[0]
    return None


def on_axis(v: PValue, axis: TileAxis) -> bool:
    return any(t == axis for t in v.type.tile)


__all__ = ["SplitRowsAtLaunch", "RowsPlan", "plan_rows"]
