"""Cross-program scans: a long scan along a row is split over programs that cooperate in one launch.

A scan whose row outgrows one program (`out[:] = cumsum(x)` over millions of values) otherwise runs in one
program (the looped form walks the row in chunks, in order). This pass gives the row to `P = cdiv(N, T)`
programs, chunk `T` each (`T` from the persistent register budget, at most `SPLIT_TILE`):

1. a program takes its position from an acq_rel atomic ticket (`OwnedInstances.ticket`), not from its
   program id: the ticket order is the order programs started in, so waiting for lower tickets never
   waits for a program that has not started (no co-residency is assumed, and Triton's interpreter, which
   runs programs one at a time in order, never waits);
2. it loads its chunk once (one tile, coalesced), scans it and folds it (the chunk's aggregate);
3. it publishes the aggregate in its slot of the invocation workspace (`publish_slot`: values, barrier,
   release flag);
4. it waits for the flags of every lower ticket and folds their aggregates **in index order** (`fold_slots`:
   blocks of slots, each an element-order tree, blocks in sequence). The combine order depends on the
   ticket only, never on timing (no mix of aggregates and inclusive prefixes), so float results are
   identical from run to run;
5. it writes its chunk with that prefix combined in (the first chunk as it is), and
6. counts itself finished (`retire_ticket`); the last program restores the sync buffer to zero, so the
   launcher never clears the workspace before a launch.

Ticket t runs chunk t; a reverse scan's ticket t runs chunk P - 1 - t and folds the slots of the chunks
after its own (lower tickets) from the nearest to the farthest, which is their index order.
Folding all predecessors costs O(P) per program (P^2 / 2 slot reads in all, a few per cent of the traffic for
P of a few hundred); slots are read `SLOT_BLOCK` at a time.

Legality (`plan_split`): a single-instance group whose one row axis holds a persistent tile; the row's
ops are element-wise, loads, stores and scans along the row (no reduction along it, no scan of another
scan's result, one direction); nothing outside the row has effects; no buffer is both read and written.
Profitability: the row is not proven to fit one chunk.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kir.dims import DConst, Dim, PCmp, dim_bin
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from kir.solver import default_lower_bounds, linear_proves

from .. import ops as P
from ..builder import max_value_id
from ..launch_expr import (
    LaunchExpr,
    LBin,
    LConst,
    LNextPow2,
    LTileBlock,
    LWarps,
    lcdiv,
    ldim,
    lmax,
    lmul,
    lprod,
    lsum,
)
from ..model import (
    Fragment,
    Group,
    POp,
    PRegion,
    Program,
    PValue,
    Segment,
    TileAxis,
)
from ..workspace import LookbackBuffers, lookback_buffers
from . import GroupPass, PassContext
from .looped import BUDGET_VARIABLE, budget, combine_op, row_axis, row_op
from .rows import RowBuilder, chunk_scan, on_row, values_of

SPLIT_TILE = 8192  # chunk per program at most: P stays in the hundreds for 4M values (O(P) folds stay cheap)
SLOT_BLOCK = 1024  # slots one fold step reads
# A group of rows splits its rows only when its refinements prove the rows at most this many: fewer rows than
# an H200's multiprocessors, so the unsplit form (a program or a packed block per row) leaves most of it idle
FEW_ROWS = 128
ONE_PROGRAM = "runs in one program instance"  # construction's note on a whole-tensor statement it could not map


@dataclass
class SplitPlan:
    """How one group's row is split: the row axis, its extent, the chunk and the direction."""

    group: Group
    axis: TileAxis
    tile: int
    reverse: bool
    scans: list[P.Scan] = field(default_factory=list)

    @property
    def block(self) -> str:
        """The chunk's constexpr (the group's own: the row's persistent block may be another group's too)."""
        return f"{self.axis.block}_SPLIT{self.group.id}"

    def programs(self) -> Dim:
        """P = cdiv(N, T) as a domain extent: the programs of one row."""
        return dim_bin("//", dim_bin("+", self.axis.extent, self.tile - 1), self.tile)

    @property
    def rows(self) -> Dim | None:
        return rows_of(self.group)

    def domain(self) -> tuple[Dim, ...]:
        """The split group's program space: (P,) for one row, (rows, P) for a group of rows."""
        return (self.programs(),) if self.rows is None else (self.rows, self.programs())

    def count(self) -> LaunchExpr:
        """All the programs of the split (rows x P)."""
        per = lcdiv(ldim(self.axis.extent), LConst(self.tile))
        return per if self.rows is None else lmul(ldim(self.rows), per)


def split_tile(group: Group, axis: TileAxis, forced: int | None = None) -> int:
    """The chunk one program scans: the persistent budget (`looped.budget`, with `INTENT_LOOP_BUDGET`),
    at most `SPLIT_TILE`."""
    return min(SPLIT_TILE, budget(group, axis, forced))


def plan_split(program: Program, group: Group, forced: int | None = None,  # noqa: C901
               proven_few: bool = True) -> SplitPlan | str:
    """The split of `group`'s row over programs, or the reason it has none (`proven_few`: a group of rows
    splits only where its rows are proven few; without it the launch decides, passes/split_rows.py)."""
    if group.tiles or P.looped_rows(group.body) is not None or P.block_loop(group.body.ops) is not None:
        return "the group already has its own tiling"
    if group.serial:
        return "the group runs in order"
    # split-scans' domain (rows, P) names each instance axis by its loop, so it decodes one row axis; split-rows
    # keeps the group's domain and decodes the flattened instances
    if len(group.domain) > 1 and proven_few:
        return "the rows span more than one parallel axis"
    rows = rows_of(group)
    axis = row_axis(group)
    if axis is None:
        return "no single row axis"
    block = dict(program.constexprs).get(axis.block)
    if not isinstance(block, LTileBlock | LNextPow2):
        return f"{axis.block} is not a persistent tile of the row"
    scans: list[P.Scan] = []
    scanned: set[int] = set()  # values computed from a scan's result
    for op in group.body.ops:
        vals = values_of(op)
        touches = any(on_row(v.type, axis) for v in vals)
        if not touches:
            if op.has_effects() and not op.TERMINATOR:
                return f"{op.NAME} outside the row"
            continue
        if isinstance(op, P.Reduce):
            return "a reduction along the row"
        if not row_op(op) or (op.regions() and not isinstance(op, P.Scan)):
            return f"{op.NAME} on the row"
        if any(v.id in scanned for v in op.operands()):
            if isinstance(op, P.Scan):
                return "a scan of another scan's result"
            scanned.update(v.id for v in op.results)
        if isinstance(op, P.Scan):
            if op.axis != 0:
                return "scan along another axis"
            if not all(combine_op(o) for o in op.combine.walk()):
                return "the scan combine holds more than element-wise work"
            scans.append(op)
            scanned.update(v.id for v in op.results)
    if not scans:
        return "no scan along the row"
    if len({op.reverse for op in scans}) > 1:
        return "forward and reverse scans of one row"
    writes = [a.buffer for op in group.body.ops if isinstance(op, P.Store) for a in (op.access,)]
    reads = {op.access.buffer for op in group.body.ops if isinstance(op, P.Load)}
    if set(writes) & reads:
        return "a buffer is both read and written"
    tile = split_tile(group, axis, forced)
    facts = list(default_lower_bounds(program.symbols, program.requires)) + list(program.requires)  # type: ignore
    if linear_proves(facts, PCmp("<=", axis.extent, DConst(tile))):
        return f"the row {axis.extent} always fits one program's chunk of {tile}"
    if proven_few and rows is not None and not linear_proves(facts, PCmp("<=", rows, DConst(FEW_ROWS))):
        return f"the rows ({rows}) are not proven at most {FEW_ROWS} (many rows keep the device busy unsplit)"
    return SplitPlan(group, axis, tile, scans[0].reverse, scans)


def rows_of(group: Group) -> Dim | None:
    """The rows of a group of one parallel axis, or None for a single-instance group."""
    return None if group.single_instance else group.domain[0]


# ---------------------------------------------------------------------------------------------- building


def _workspace_buffers(program: Program, plan: SplitPlan) -> LookbackBuffers:
    slots_dim = plan.programs() if plan.rows is None else dim_bin("*", plan.rows, plan.programs())
    return lookback_buffers(program, plan.group.id, slots_dim, plan.count(), [op.acc_dtypes for op in plan.scans])


def build_split(program: Program, plan: SplitPlan, sync: LookbackBuffers, first_id: int) -> tuple[PRegion, int]:
    """The group body of the split: ticket, chunk, local scans, publish, ordered fold, prefixed writes."""
    # row values are one program's chunk, and vary with the program's instance (its ticket's row)
    b = RowBuilder(plan.axis, TileAxis(DConst(plan.tile), plan.block), first_id, lanes=True)
    g = plan.group
    ops = [op for op in g.body.ops if not op.TERMINATOR]
    origin = next((op.origin for op in ops if op.origin is not None), None)
    index = Fragment(DType.i64, True, (), True)
    ticket = b.add(P.OwnedInstances, index, None, "ticket", group=g.id, block=g.block, ticket=sync.sync.id)
    count = plan.count()
    tile = b.add(P.Const, Fragment(DType.i64), origin, value=plan.tile, dtype=DType.i64)
    zero = b.add(P.Const, Fragment(DType.i64, index=True), origin, value=0, dtype=DType.i64)
    position, row_first = ticket, zero  # the chunk's place in its row; the row's first ticket
    if plan.rows is not None:  # ticket t runs chunk t % P of row t // P (the tickets of a row are consecutive)
        per = b.index(ldim(plan.programs()), origin, "row_programs")
        row = b.add(P.Binary, index, origin, "row", fn=BinaryFn.floordiv, lhs=ticket, rhs=per)
        position = b.add(P.Binary, index, origin, "row_chunk", fn=BinaryFn.mod, lhs=ticket, rhs=per)
        row_first = b.add(P.Binary, index, origin, "row_first", fn=BinaryFn.mul, lhs=row, rhs=per)
        owned = next(op for op in g.body.ops if isinstance(op, P.OwnedInstances))
        b.row[owned.result.id] = row  # the group's instance is the row
    chunk = position
    if plan.reverse:  # ticket t scans chunk P - 1 - t: the chunks after it have the lower tickets
        last = b.index(ldim(dim_bin("-", plan.programs(), 1)), origin, "last_chunk")
        chunk = b.add(P.Binary, index, origin, "chunk", fn=BinaryFn.sub, lhs=last, rhs=position)
    start = b.add(P.Binary, index, origin, "chunk_start", fn=BinaryFn.mul, lhs=chunk, rhs=tile)

    # values computed from a scan's result wait for the fold of the predecessors' aggregates
    after: set[int] = set()
    for op in ops:
        if any(v.id in after for v in op.operands()) or isinstance(op, P.Store) or \
                any(op is s for s in plan.scans):
            after.update(v.id for v in op.results)
    pending: list[tuple[P.Scan, list[PValue], list[PValue]]] = []
    for op in ops:
        if any(op is s for s in plan.scans):
            pending.append((op, *chunk_scan(b, op)))
        elif not (isinstance(op, P.Store) or any(v.id in after for v in op.operands())):
            _copy(b, op, start)
    aggs = [v for _, _, agg in pending for v in agg]
    b.put(P.PublishSlot(origin=origin, sync=sync.sync.id, slots=tuple(x.id for row in sync.slots for x in row),
                        slot=ticket, values=tuple(aggs)))
    first = b.add(P.Compare, Fragment(DType.pred, True), origin, "first_chunk", fn=CmpFn.eq, lhs=ticket,
                  rhs=row_first)
    for (op, local, _), slots in zip(pending, sync.slots):
        lanes = Fragment(DType.i64, True)
        prefix = [b.fresh(lanes.with_dtype(dt), "prefix") for dt in op.acc_dtypes]
        b.put(P.FoldSlots(results=tuple(prefix), origin=op.origin, sync=sync.sync.id, slots=tuple(x.id for x in slots),
                          first=row_first, upto=ticket, reverse=op.reverse, identity=op.identity,
                          acc_dtypes=op.acc_dtypes, block=SLOT_BLOCK, combine=b.copy_region(op.combine)))
        # element order: the predecessors' prefix precedes the chunk (follows it in a reverse scan)
        lhs, rhs = (local, prefix) if op.reverse else (prefix, local)
        joined = b.combine(op.combine, lhs, rhs, [v.type for v in local], op.origin)
        for r, own, j in zip(op.results, local, joined):
            out = b.add(P.Select, j.type, op.origin, cond=first, on_true=own, on_false=j)
            b.row[r.id] = b.cast(out, r.type.dtype, op.origin) if r.type.dtype != out.type.dtype else out
    for op in ops:
        if isinstance(op, P.Store) or (any(v.id in after for v in op.operands()) and
                                        not any(op is s for s in plan.scans)):
            _copy(b, op, start)
    b.put(P.RetireTicket(origin=origin, sync=sync.sync.id, programs=count))
    b.put(P.Yield(values=()))
    return PRegion(g.body.args, tuple(b.frames[0].ops)), b.next_id


def _copy(b: RowBuilder, op: POp, start: PValue) -> None:
    if not isinstance(op, P.OwnedInstances):  # the ticket gives the instance
        b.copy_op(op, start)


# ---------------------------------------------------------------------------------------------- the pass


class SplitScans(GroupPass):
    """Split every long whole-row scan over cooperating programs (`tile`: a smaller chunk, for tests)."""

    name = "split-scans"

    def __init__(self, tile: int | None = None) -> None:
        self.tile = tile

    def plan_group(self, program: Program, group: Group) -> SplitPlan | str:
        return plan_split(program, group, self.tile)

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        consts = dict(program.constexprs)
        order = [n for n, _ in program.constexprs]
        groups = {g.id: g for g in program.groups}
        next_id = max_value_id(program)
        buffers, workspaces = list(program.buffers), list(program.workspaces)
        warps = program.num_warps if isinstance(program.num_warps, LBin | LWarps) or \
            not isinstance(program.num_warps, int) else LConst(program.num_warps)
        plans = self.plans(program, ctx)
        if len(plans) == len(program.groups):  # the old warps sized the whole rows no group holds any more
            warps = LConst(1)
        for plan in plans:
            sync = _workspace_buffers(program.replace(buffers=tuple(buffers), workspaces=tuple(workspaces)), plan)
            body, next_id = build_split(program, plan, sync, next_id)
            buffers += [sync.sync] + [x for row in sync.slots for x in row]
            workspaces += sync.workspaces
            consts[plan.block] = LConst(plan.tile)
            order.append(plan.block)
            consts[plan.group.block] = LConst(1)
            groups[plan.group.id] = dataclasses.replace(plan.group, domain=plan.domain(), body=body)
            warps = lmax(warps, LWarps(LConst(plan.tile)))  # type: ignore[arg-type]
        # a row block no group holds any more is no constexpr of the launch (it would size a tile of the row)
        held = {t.block for g in groups.values() for op in g.body.walk() for v in values_of(op) for t in v.type.tile}
        order = [n for n in order if n in held or not isinstance(consts[n], LTileBlock | LNextPow2)]
        lengths, segments = [], []
        for seg in program.segments:
            g = groups[seg.group]
            length = seg.length if g is program.group(seg.group) else \
                lprod(tuple(ldim(d) for d in g.domain))
            segments.append(Segment(seg.group, length, lsum(tuple(lengths))))
            lengths.append(length)
        # the one-program cliff construction noted for these statements is gone
        split = {plan.group.loc for plan in self.plans(program, ctx) if plan.group.loc is not None}
        notes = tuple(n for n in program.notes if not (n.loc in split and ONE_PROGRAM in n.message))
        return dataclasses.replace(program, groups=tuple(groups[g.id] for g in program.groups), notes=notes,
                                   constexprs=tuple((n, consts[n]) for n in order),
                                   buffers=tuple(sorted(buffers, key=lambda x: x.id)), workspaces=tuple(workspaces),
                                   segments=tuple(segments), grid=lsum(tuple(lengths)), num_warps=warps)


__all__ = ["SplitScans", "SplitPlan", "plan_split", "build_split", "split_tile", "SPLIT_TILE", "SLOT_BLOCK",
           "BUDGET_VARIABLE"]
