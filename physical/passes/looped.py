"""Persistent vs looped rows: a row axis that may not fit one program's registers is walked in chunks.

Construction keeps a reduced or scanned row axis whole in one tile (`BLOCK_N = next_pow2(N)`): the row is
read once and stays on chip for every stage that uses it (softmax reads `x` once). That is the
*persistent* form, right while the tile fits the program's registers: up to `budget()` elements (an
analytic model of the values a program keeps live per row element: 32768 for softmax's f32 rows, fewer
for more loaded rows, wider dtypes, tuple reductions and element-order folds; num_warps grows with the
tile). Beyond it this pass gives the group a second, *looped* form: its body becomes one `looped_rows`
op holding the body as it was and the looped body, which the launch selects with a constexpr flag, so one
source holds both and each specialisation compiles one:

* every value on the row axis is recomputed chunk by chunk (`chunk_size()` elements per step);
* a reduction over the row accumulates across chunks: built-in kinds that commute (sum, prod, max, min,
  any, all) elementwise into a chunk-wide accumulator reduced once after the loop; other combines (custom
  tuples, argmax/argmin) fold each chunk in element order into a per-lane carry, so the elements still
  meet in order;
* a scan carries the running prefix across chunks (reverse scans walk the chunks from the end);
* work that needs a reduction's result runs in a later pass over the row, which reads its inputs
  again (softmax: max, then sum of exponentials, then the normalised store; three reads of `x`). No
  arithmetic is reassociated beyond the reduction order, which is unspecified; an online-softmax
  rewrite is not made.

Legality (`plan_group`): the group's row values all have the one tile axis, the ops on them are
element-wise, loads, stores, reductions and scans along it, no buffer is both read and written, and no
atomics, local buffers or nested control touch the row. Profitability: the row's extent is not proven
to stay within the persistent budget. `LoopRows(budget=n)` or the `INTENT_LOOP_BUDGET` environment
variable (read when the pass runs) lowers the budget, so that tests can force the looped form on small
rows. The chunk sizes, lanes and warps of the looped form come from the same model (`chunk_size`,
`chunk_weight`).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from kir.dims import DConst, PCmp
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from kir.reduce import ReduceKind
from kir.solver import default_lower_bounds, linear_proves

from .. import ops as P
from ..builder import max_value_id
from ..launch_expr import LaunchExpr, LBin, LConst, LNextPow2, LSelect, LTileBlock, lmin, lselect
from ..model import (
    AccessRelation,
    BufferScope,
    Fragment,
    Group,
    Origin,
    POp,
    PRegion,
    Program,
    PValue,
    TileAxis,
    Trait,
)
from ..workspace import restate_workspaces
from . import GroupPass, PassContext
from .enlarge import TILE_BUDGET
from .rows import RowBuilder, chunk_scan, on_row, values_of

# Calibrated with `ptxas -v` on sm_90 (no spills at these sizes with num_warps from the tile, up to 16).
REGISTER_VALUES = 65536    # four-byte row values a program keeps live with native reductions
TREE_VALUES = 12288        # ... with element-order folds and scans (their halving steps need room)
CHUNK_VALUES = 4096        # four-byte values of one component per chunk step
TREE_CHUNK_VALUES = 1024   # ... when each chunk is folded in element order
BUDGET_VARIABLE = "INTENT_LOOP_BUDGET"

ELEMENTWISE_KINDS = (ReduceKind.sum, ReduceKind.prod, ReduceKind.max, ReduceKind.min, ReduceKind.any,
                     ReduceKind.all)


def row_op(op: POp) -> bool:
    """Whether `op` may touch the row: it works position by position (recomputed chunk by chunk), or it
    reduces or scans along the row (accumulated across chunks)."""
    return op.has(Trait.POSITIONWISE) or isinstance(op, P.Reduce | P.Scan)


def combine_op(op: POp) -> bool:
    """Whether a combine region's op is element-wise work (a combine applied to a chunk at once)."""
    return op.TERMINATOR or bool(op.TRAITS & (Trait.ELEMENTWISE | Trait.UNIFORM))


# ---------------------------------------------------------------------------------------------- the plan


@dataclass
class Plan:
    """How one group's row axis is walked: the stage of every top-level value and the passes it needs."""

    group: Group
    axis: TileAxis
    extent: LaunchExpr
    budget: int
    chunk: int
    weight: int  # what one chunk counts for when lanes are sized (`chunk_weight`)
    stage: dict[int, int] = field(default_factory=dict)  # value id -> stage (reduction results: pass + 1)
    loop_of: dict[int, int] = field(default_factory=dict)  # id(op) of a row reduction/effect -> its pass
    loops: int = 0
    reverse: dict[int, bool] = field(default_factory=dict)  # pass -> walks chunks from the end


def row_axis(group: Group) -> TileAxis | None:
    """The group's one tile axis, when every tiled value of the group has exactly that tile (in the form of its
    body that holds the row whole, for these models of the row)."""
    tiles = {v.type.tile for op in P.whole_form(group.body).walk() for v in values_of(op) if v.type.tile}
    if len(tiles) != 1:
        return None
    (tile,) = tiles
    return tile[0] if len(tile) == 1 else None


def budget(group: Group, axis: TileAxis, forced: int | None = None) -> int:
    """Row elements one program keeps on chip, from the values it holds per row element.

    Native reductions and scans keep every loaded row and each reduction's components live:
    `REGISTER_VALUES` four-byte values over them (32768 for softmax's one row and one component).
    Element-order folds and scans (custom combines, cummax, ...) hold their halving steps too:
    `TREE_VALUES` over the components. `forced` (or `INTENT_LOOP_BUDGET`) lowers the result."""
    width, size, loads, native = 1, 4, 0, True
    for op in P.whole_form(group.body).walk():
        if isinstance(op, P.Reduce | P.Scan) and any(on_row(x.type, axis) for x in op.inputs):
            width = max(width, len(op.inputs))
            size = max([size] + [d.bits // 8 for d in op.acc_dtypes])
            native = native and op.native
        elif isinstance(op, P.Load) and on_row(op.result.type, axis):
            size = max(size, op.result.type.dtype.bits // 8)
            loads += 1
    values = REGISTER_VALUES // (loads + width) if native else TREE_VALUES // width
    limit = values * 4 // size
    if forced is None and os.environ.get(BUDGET_VARIABLE, "").strip().isdigit():
        forced = int(os.environ[BUDGET_VARIABLE])
    if forced:
        limit = min(limit, forced)
    return max(1, 1 << (limit.bit_length() - 1))


def chunk_size(group: Group, axis: TileAxis, limit: int) -> int:
    """Row elements per step of the looped form: `CHUNK_VALUES` four-byte values over the components;
    `TREE_CHUNK_VALUES` when chunks are folded in element order (over the components of element-order
    scans); at most the persistent budget."""
    width, native, scans = 1, True, 1
    for op in P.whole_form(group.body).walk():
        if isinstance(op, P.Reduce | P.Scan) and any(on_row(x.type, axis) for x in op.inputs):
            width = max(width, len(op.inputs))
            native = native and op.native
            if isinstance(op, P.Scan) and not op.native:
                scans = max(scans, len(op.inputs))
    values = CHUNK_VALUES // (1 << (width - 1).bit_length()) if native else \
        TREE_CHUNK_VALUES // (1 << (scans - 1).bit_length())
    return max(1, min(limit, values))


def chunk_weight(group: Group, axis: TileAxis, chunk: int) -> int:
    """The row elements one chunk counts for when sizing lanes: an element-order scan holds every
    component's halving steps, its prefixes and the chunk's total at once, so its programs own one row
    (calibrated with `ptxas -v`: more rows per program spill with vectorised loads)."""
    scans = [op for op in P.whole_form(group.body).walk() if isinstance(op, P.Scan) and not op.native
             and any(on_row(x.type, axis) for x in op.inputs)]
    return max(chunk, TILE_BUDGET) if scans else chunk


SECTOR_BYTES = 32  # one global-memory transaction


def strided_lanes(program: Program, group: Group, axis: TileAxis) -> int:
    """Lanes a program needs so that each row of a strided walk fills a 32-byte sector (1: no strided walk).

    A load whose row coordinate (the tile axis) indexes a leading buffer axis while the lanes' own
    coordinate indexes the last (unit-stride) one walks the row along a strided axis: column sums
    `sum(x[:, k])`. With one lane per program each row element costs a whole sector; with a sector's
    worth of contiguous lanes (8 f32 columns) every sector a load moves is used."""
    need = 1
    for op in P.whole_form(group.body).walk():
        if not isinstance(op, P.Load) or not on_row(op.result.type, axis) or not op.result.type.lanes:
            continue
        coords = op.access.coords
        if program.buffer(op.access.buffer).scope is not BufferScope.EXTERNAL_VIEW or len(coords) < 2:
            continue
        last = coords[-1].type
        if last.lanes and not last.tile and any(on_row(c.type, axis) for c in coords[:-1]):
            need = max(need, SECTOR_BYTES // max(1, op.result.type.dtype.bits // 8))
    return need


def plan_group(program: Program, group: Group, forced: int | None = None) -> Plan | str:
    """The looped form's plan for `group`, or the reason it has none."""
    if group.tiles or P.looped_rows(group.body) is not None:
        return "the group already has its own tiling"
    axis = row_axis(group)
    if axis is None:
        return "no single row axis"
    consts = dict(program.constexprs)
    block = consts.get(axis.block)
    if not isinstance(block, LTileBlock | LNextPow2):
        return f"{axis.block} is not a persistent tile of the row"
    extent = block.extent if isinstance(block, LTileBlock) else block.x
    if any(axis.block in _blocks(g) for g in program.groups if g.id != group.id):
        return f"{axis.block} is shared with another group"
    limit = budget(group, axis, forced)
    lanes = strided_lanes(program, group, axis)
    if lanes > 1:  # a strided row: the row shares the tile budget with a sector's worth of lanes
        limit = min(limit, max(1, TILE_BUDGET // lanes))
    facts = list(default_lower_bounds(program.symbols, program.requires)) + list(program.requires)  # type: ignore
    if linear_proves(facts, PCmp("<=", axis.extent, DConst(limit))):
        return f"the row {axis.extent} always fits the persistent budget of {limit}"
    writes = [a.buffer for op in group.body.walk() for a in _accesses(op) if isinstance(op, P.Store)]
    read = {a.buffer for op in group.body.walk() for a in _accesses(op) if isinstance(op, P.Load)}
    if set(writes) & read:
        return "a buffer is both read and written"
    if len(set(writes)) != len(writes):  # passes reorder writes: the last writer must stay last
        return "a buffer is written twice"
    chunk = chunk_size(group, axis, limit)
    plan = Plan(group, axis, extent, limit, chunk, chunk_weight(group, axis, chunk))
    problem = _stages(plan)
    return problem if problem is not None else plan


def _blocks(g: Group) -> list[str]:
    return [t.block for op in g.body.walk() for v in values_of(op) for t in v.type.tile]


def _accesses(op: POp) -> list[AccessRelation]:
    return [getattr(op, f.name) for f in op.fields() if isinstance(getattr(op, f.name), AccessRelation)]


def _stages(plan: Plan) -> str | None:  # noqa: C901 (one case per kind of op)
    axis = plan.axis
    for op in plan.group.body.ops:
        vals = values_of(op)
        touches = any(on_row(v.type, axis) for v in vals)
        # values used inside nested regions count too: a loop body may read a reduction's result
        before = max((plan.stage.get(v.id, 0) for v in vals), default=0)
        if not touches:
            if isinstance(op, P.AtomicRMW | P.AtomicCAS | P.AllocBuffer | P.Barrier):
                return f"{op.NAME} in the group"
            for v in op.results:
                plan.stage[v.id] = before
            continue
        if not row_op(op) or (op.regions() and not isinstance(op, P.Reduce | P.Scan)):
            return f"{op.NAME} on the row"
        if isinstance(op, P.Reduce | P.Scan):
            if not all(combine_op(o) for o in op.combine.walk()):
                return f"the {op.NAME} combine holds more than element-wise work"
            if tuple(op.axes if isinstance(op, P.Reduce) else (op.axis,)) != (0,):
                return f"{op.NAME} along another axis"
        if isinstance(op, P.Reduce):
            plan.loop_of[id(op)] = before
            for v in op.results:
                plan.stage[v.id] = before + 1
            plan.loops = max(plan.loops, before + 1)
            continue
        if isinstance(op, P.Store):
            plan.loop_of[id(op)] = before
            plan.loops = max(plan.loops, before + 1)
        for v in op.results:
            plan.stage[v.id] = before
    if plan.loops == 0:
        return "nothing on the row is reduced or written"
    row_ops = [op for op in plan.group.body.ops if any(on_row(v.type, axis) for v in values_of(op))]
    for k in range(plan.loops):  # a pass walks its chunks one way: every scan it runs must agree
        need = _needed(plan, [op for op in row_ops if plan.loop_of.get(id(op)) == k])
        directions = {op.reverse for op in row_ops if isinstance(op, P.Scan) and id(op) in need}
        if len(directions) > 1:
            return "forward and reverse scans in one pass over the row"
        plan.reverse[k] = directions == {True}
    return None


# ---------------------------------------------------------------------------------------------- building


def _needed(plan: Plan, roots: list[POp]) -> set[int]:
    """ids of the row ops the roots depend on (through row values), including the roots."""
    producer = {v.id: op for op in plan.group.body.ops for v in op.results}
    need: set[int] = set()
    work = list(roots)
    while work:
        op = work.pop()
        if id(op) in need:
            continue
        need.add(id(op))
        for v in op.operands():
            p = producer.get(v.id)
            if p is not None and on_row(v.type, plan.axis):
                work.append(p)
    return need


@dataclass
class _Accumulation:
    op: P.Reduce | P.Scan
    args: list[PValue]       # carried values inside the loop
    inits: list[PValue]
    results: list[PValue]    # the loop's results for them
    elementwise: bool = False


def build_looped(plan: Plan, first_id: int, chunk_block: str) -> tuple[PRegion, int]:
    """The looped body of `plan.group` (a region of its own: every value it defines is new, those it
    recomputes from the body as it stands included) and the last value id used."""
    b = RowBuilder(plan.axis, TileAxis(DConst(plan.chunk), chunk_block), first_id)
    body = plan.group.body
    row_ops = [op for op in body.ops if any(on_row(v.type, plan.axis) for v in values_of(op))]
    flat = [op for op in body.ops if not any(on_row(v.type, plan.axis) for v in values_of(op))]
    origin = next((op.origin for op in row_ops if op.origin is not None), None)
    placed: set[int] = set()

    def place_flat(upto: int) -> None:
        for op in flat:
            if id(op) not in placed and not op.TERMINATOR and \
                    max((plan.stage.get(v.id, 0) for v in values_of(op)), default=0) <= upto:
                placed.add(id(op))
                b.put(op)

    step, zero, one = (b.add(P.Const, Fragment(DType.i64), origin, value=v, dtype=DType.i64)
                       for v in (plan.chunk, 0, 1))
    chunks = b.index(LBin("cdiv", plan.extent, LConst(plan.chunk)), origin, "chunks")
    for k in range(plan.loops):
        place_flat(k)
        roots = [op for op in row_ops if plan.loop_of.get(id(op)) == k]
        need = _needed(plan, roots)
        _one_pass(b, plan, k, [op for op in row_ops if id(op) in need], (zero, chunks, one, step), origin)
    place_flat(plan.loops)
    b.put(P.Yield(values=()))
    return b.copy_region(PRegion((), tuple(b.ops))), b.next_id


def _one_pass(b: RowBuilder, plan: Plan, k: int, ops: list[POp], bounds: tuple[PValue, ...],
              origin: Origin | None) -> None:
    zero, chunks, one, step = bounds
    reverse = plan.reverse.get(k, False)
    accs: list[_Accumulation] = []
    for op in ops:
        if isinstance(op, P.Reduce) and plan.loop_of.get(id(op)) == k:
            accs.append(_accumulation(b, op))
        elif isinstance(op, P.Scan):
            accs.append(_accumulation(b, op))
    iv = b.fresh(Fragment(DType.i64, index=True), "chunk_index")
    args = [a for acc in accs for a in acc.args]
    b.begin()
    b.row = {}
    at = iv
    if reverse:  # chunks from the last: start = (chunks - 1 - i) * chunk
        last = b.add(P.Binary, iv.type, origin, fn=BinaryFn.sub, lhs=chunks, rhs=one)
        at = b.add(P.Binary, iv.type, origin, fn=BinaryFn.sub, lhs=last, rhs=iv)
    start = b.add(P.Binary, iv.type, origin, "chunk_start", fn=BinaryFn.mul, lhs=at, rhs=step)
    # the first chunk starts the carries as it is (an identity need not be exactly neutral: inf, NaN)
    first = b.add(P.Compare, Fragment(DType.pred), origin, "first_chunk", fn=CmpFn.eq, lhs=iv, rhs=zero) \
        if any(not acc.elementwise for acc in accs) else None
    yields: list[PValue] = []
    by_op = {id(acc.op): acc for acc in accs}
    for op in ops:
        acc = by_op.get(id(op))
        if acc is None:
            b.row_op(op, start)
        elif isinstance(op, P.Reduce):
            yields += _reduce_step(b, acc, reverse, first)
        else:
            yields += _scan_step(b, acc, reverse, first)
    b.put(P.Yield(values=tuple(yields)))
    loop_ops = b.end()
    results = [r for acc in accs for r in acc.results]
    loop = P.For(results=tuple(results), origin=origin, start=zero, stop=chunks, step=one,
                 inits=tuple(i for acc in accs for i in acc.inits), body=PRegion((iv, *args), tuple(loop_ops)))
    b.put(loop)
    for acc in accs:
        if isinstance(acc.op, P.Reduce):
            _finish_reduce(b, acc, acc.results)


def _accumulation(b: RowBuilder, op: P.Reduce | P.Scan) -> _Accumulation:
    lanes = any(x.type.lanes for x in op.inputs)
    elementwise = isinstance(op, P.Reduce) and op.kind in ELEMENTWISE_KINDS
    tile = (b.chunk,) if elementwise else ()
    args, inits = [], []
    for dt, ident in zip(op.acc_dtypes, op.identity):
        t = Fragment(dt, lanes, tile)
        c = b.add(P.Const, Fragment(dt), op.origin, value=ident, dtype=dt)
        inits.append(b.fit(c, t, op.origin))
        args.append(b.fresh(t, "carry"))
    # a fold carried per lane ends as the reduction's own result
    results = [r if isinstance(op, P.Reduce) and not elementwise and r.type == a.type else b.fresh(a.type, a.name)
               for r, a in zip(op.results, args)]
    return _Accumulation(op, args, inits, results, elementwise)


def _member(b: RowBuilder, op: P.Reduce | P.Scan) -> PValue | None:
    return None if op.member is None else b.get(op.member)


def _started(b: RowBuilder, first: PValue | None, own: list[PValue], joined: list[PValue], origin: Origin | None
             ) -> list[PValue]:
    """`own` in the first chunk, `joined` (the carry combined with it) in the others."""
    if first is None:
        return joined
    return [b.add(P.Select, j.type, origin, cond=first, on_true=b.fit(o, j.type, origin), on_false=j)
            for o, j in zip(own, joined)]


def _reduce_step(b: RowBuilder, acc: _Accumulation, reverse: bool, first: PValue | None) -> list[PValue]:
    op = acc.op
    assert isinstance(op, P.Reduce)
    xs = [b.cast(b.get(x), dt, op.origin) for x, dt in zip(op.inputs, op.acc_dtypes)]
    member = _member(b, op)
    if acc.elementwise:
        parts = []
        for x, dt, ident in zip(xs, op.acc_dtypes, op.identity):
            if member is not None:
                c = b.add(P.Const, Fragment(dt), op.origin, value=ident, dtype=dt)
                x = b.add(P.Select, Fragment(dt, x.type.lanes, x.type.tile), op.origin, cond=member, on_true=x,
                          on_false=c)
            parts.append(b.fit(x, acc.args[0].type.with_dtype(dt), op.origin))
        return b.combine(op.combine, acc.args, parts, [a.type for a in acc.args], op.origin)
    lanes = any(x.type.lanes for x in xs)
    chunk = [b.fresh(Fragment(dt, lanes), "chunk_fold") for dt in op.acc_dtypes]
    b.put(P.Reduce(results=tuple(chunk), origin=op.origin, inputs=tuple(xs), axes=(0,), kind=ReduceKind.custom,
                   identity=op.identity, acc_dtypes=op.acc_dtypes, member=member, combine=b.copy_region(op.combine)))
    # chunks meet in element order: the carry precedes the chunk (follows it when walking from the end)
    lhs, rhs = (chunk, acc.args) if reverse else (acc.args, chunk)
    return _started(b, first, chunk, b.combine(op.combine, lhs, rhs, [a.type for a in acc.args], op.origin),
                    op.origin)


def _finish_reduce(b: RowBuilder, acc: _Accumulation, outs: list[PValue]) -> None:
    op = acc.op
    assert isinstance(op, P.Reduce)
    if not acc.elementwise:
        for r, v in zip(op.results, outs):
            if r is not v:
                b.put(P.Cast(results=(r,), origin=op.origin, x=v, dtype=r.type.dtype))
        return
    lanes = outs[0].type.lanes
    folded = [r if r.type.dtype == dt else b.fresh(Fragment(dt, lanes), r.name) for r, dt in
              zip(op.results, op.acc_dtypes)]
    b.put(P.Reduce(results=tuple(folded), origin=op.origin, inputs=tuple(outs), axes=(0,), kind=op.kind,
                   identity=op.identity, acc_dtypes=op.acc_dtypes, member=None, combine=b.copy_region(op.combine)))
    for r, f in zip(op.results, folded):
        if r is not f:
            b.put(P.Cast(results=(r,), origin=op.origin, x=f, dtype=r.type.dtype))


def _scan_step(b: RowBuilder, acc: _Accumulation, reverse: bool, first: PValue | None) -> list[PValue]:
    op = acc.op
    assert isinstance(op, P.Scan)
    local, total = chunk_scan(b, op)
    # a reverse scan keeps index order: the chunks after this one (the carry) are the right operand
    pair = (lambda prefix, elem: (elem, prefix)) if reverse else (lambda prefix, elem: (prefix, elem))
    out = _started(b, first, local, b.combine(op.combine, *pair(acc.args, local), [v.type for v in local],
                                              op.origin), op.origin)
    for r, o in zip(op.results, out):
        b.row[r.id] = b.cast(o, r.type.dtype, op.origin) if r.type.dtype != o.type.dtype else o
    return _started(b, first, total, b.combine(op.combine, *pair(acc.args, total), [a.type for a in acc.args],
                                               op.origin), op.origin)


# ---------------------------------------------------------------------------------------------- the pass


class LoopRows(GroupPass):
    """Give every group whose row may outgrow the persistent budget its looped body (`budget`: a lower
    budget than the model's, for tests)."""

    name = "looped-rows"

    def __init__(self, budget: int | None = None) -> None:
        self.budget = budget

    def plan_group(self, program: Program, group: Group) -> Plan | str:
        return plan_group(program, group, self.budget)

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        consts = dict(program.constexprs)
        order = [n for n, _ in program.constexprs]
        groups = {g.id: g for g in program.groups}
        next_id = max_value_id(program)
        warps, grid, segments = program.num_warps, program.grid, program.segments
        restated = program  # workspaces sized in the constexprs' terms (earlier split scans) follow them
        for plan in self.plans(program, ctx):
            block = plan.axis.block
            flag, chunk = f"{block}_LOOPED", f"{block}_CHUNK"
            body, next_id = build_looped(plan, next_id, chunk)
            # Persistent up to the budget; beyond it the looped body runs and the persistent block (still
            # at least the row, as its tile axis requires) is not used: no launch is refused for its size,
            # and the warps follow the chunked work.
            old, whole = consts[block], LNextPow2(plan.extent)
            looped_now = lmin(LConst(1), LBin("//", whole, LConst(2 * plan.budget)))
            # Lanes were sized by the whole row; the looped form holds one chunk per row instead, so a
            # program owns as many rows as that chunk allows (the flag picks one count or the other).
            lanes = consts[plan.group.block]
            if _mentions(lanes, old):
                persistent, looped_lanes = substitute(lanes, old, whole), substitute(lanes, old, LConst(plan.weight))
                chosen = lselect(looped_now, looped_lanes, persistent)
                warps, grid = substitute(warps, lanes, chosen), substitute(grid, lanes, chosen)
                segments = tuple(dataclasses.replace(seg, length=substitute(seg.length, lanes, chosen),
                                                     offset=substitute(seg.offset, lanes, chosen))
                                 for seg in segments)
                consts[plan.group.block] = chosen
            warps = substitute(warps, old, lselect(looped_now, LConst(plan.chunk), whole))
            consts = {n: substitute(e, old, whole) for n, e in consts.items()}
            restated = restate_workspaces(restated, old, whole)
            grid = substitute(grid, old, whole)
            segments = tuple(dataclasses.replace(seg, length=substitute(seg.length, old, whole),
                                                 offset=substitute(seg.offset, old, whole)) for seg in segments)
            consts[flag] = looped_now
            consts[chunk] = LConst(plan.chunk)
            order += [flag, chunk]
            groups[plan.group.id] = dataclasses.replace(plan.group, body=_with_looped(plan, flag, chunk, body))
        return dataclasses.replace(restated, groups=tuple(groups[g.id] for g in program.groups),
                                   constexprs=tuple((n, consts[n]) for n in order), num_warps=warps, grid=grid,
                                   segments=segments)


def _with_looped(plan: Plan, flag: str, chunk: str, looped: PRegion) -> PRegion:
    """The group's body as one `looped_rows` op: the body as it stands (flag 0) or `looped` (flag 1)."""
    body = plan.group.body
    end = body.terminator
    whole = PRegion((), tuple(op for op in body.ops if op is not end) + (P.Yield(),))
    choice = P.LoopedRows(flag=flag, axis=plan.axis, chunk=TileAxis(DConst(plan.chunk), chunk), loops=plan.loops,
                          whole=whole, looped=looped)
    return PRegion(body.args, (choice,) + ((end,) if end is not None else ()))


def _mentions(e: LaunchExpr | int, part: LaunchExpr) -> bool:
    return not isinstance(e, int) and (e == part or any(_mentions(c, part) for c in e.children()))


def substitute(e: LaunchExpr | int, old: LaunchExpr, new: LaunchExpr) -> LaunchExpr | int:
    """`e` with every occurrence of `old` replaced by `new` (the warps of a looped row follow its capped block)."""
    if isinstance(e, int):
        return e
    if e == old:
        return new
    if not e.children():
        return e
    changes = {}
    for f in dataclasses.fields(e):  # type: ignore[arg-type]
        x = getattr(e, f.name)
        if isinstance(x, LaunchExpr):
            changes[f.name] = substitute(x, old, new)
        elif isinstance(x, tuple) and all(isinstance(y, LaunchExpr) for y in x):
            changes[f.name] = tuple(substitute(y, old, new) for y in x)
    out = dataclasses.replace(e, **changes)  # type: ignore[type-var]
    # a choice whose condition became a constant (a flag fixed by the substitution) is that side
    return lselect(out.cond, out.when_set, out.otherwise) if isinstance(out, LSelect) else out


__all__ = ["LoopRows", "Plan", "row_op", "combine_op", "row_axis",
           "plan_group", "build_looped", "budget", "chunk_size", "chunk_weight", "BUDGET_VARIABLE",
           "REGISTER_VALUES", "TREE_VALUES", "CHUNK_VALUES", "TREE_CHUNK_VALUES"]
