"""Operation counts of a physical program: global-memory bytes and floating-point operations per launch,
as launch expressions in the shape symbols (seed 004: "operation-count expressions become profiler code").

Every memory access is an explicit access relation, so the bytes a launch moves are the sum over
accesses of (how many times the access runs) x (its active elements) x (element size):

* an op whose values vary across a group's instances (a *lanes* fragment) runs once per instance,
  `prod(domain)` times; a uniform op runs once per program (once per block of a persistent group);
* its elements are the product of its fragment's tile extents (logical extents: padding past an
  extent is never a member);
* inside a `for` with bounds the program knows (constants, shape values, integer scalars) the count
  is multiplied by the trip count; the forms of a `looped_rows` body (the row whole, or walked in
  chunks) are counted each, and the count selects between the two with the op's constexpr flag;
* atomics read and write their elements (twice the bytes);
* programs that pass values on through slots (`physical.ops.lookback`) count their ticket, their slot and
  flag, the flags and slots of every lower ticket (P (P - 1) / 2 of each) and the last one's reset;
* a group balanced by the data (a `helper_index` at the top of its body: HELPERS_g helper programs past its
  blocks; balance_segments.py, balance_region_scan.py) runs its per-instance work in the blocks' lanes and in
  each helper's (a helper's lanes are those of the block it joins). Where the helpers scan
  (balance_region_scan.py: SPLITS_g is 1) the held tiles hold the first BLOCK_HELD_g positions of each
  instance's subregion and BLOCK_g * BLOCK_HELD_g of each helper's chunk (`Helpers.held`: a helper holds its
  range across the lanes of the block it joins), every value is read once by the scan that writes it and a
  helper's chunk past its held tiles once more, by the fold of its aggregate (the blocks' rest
  folds are empty); only the helpers publish slots (one each, or one per column of the segment they join),
  and a helper folds the slots of its subregion's earlier helpers: at most H (H - 1) / 2 of them (every
  helper in one subregion).

FLOPs count float arithmetic only: one per element of a float unary or binary op, of a reduction's
or scan's float input, and two per multiply-add of a contraction. Index arithmetic, comparisons,
selects and casts are not counted.

A count is *exact* only where every trip count is known; `while` loops, `if` branches (both are
counted), data-dependent `for` bounds and region folds over data-dependent ranges make it an
estimate (`Counts.exact` is False): the loop body counted once, both branches counted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kir.core import registrar
from kir.dtypes import DType

from .launch_expr import LaunchExpr, LBin, LConst, LConstexpr, LMinMax, LScalar, ladd, ldim, lmul, lprod, lselect, lsum
from .model import AccessRelation, Fragment, Group, POp, PRegion, Program, PValue, TileAxis
from .ops import access as A
from .ops import atomic as T
from .ops import buffers as B
from .ops import contract as C
from .ops import control as F
from .ops import histogram as H
from .ops import lanes as LN
from .ops import layout as L
from .ops import lookback as K
from .ops import pointwise as P
from .ops import program as G
from .ops import reduce as R
from .ops import region as RG
from .ops import rng as RN
from .ops import scan as S
from .ops import sort as SO
from .ops import workspace as W


@dataclass(frozen=True)
class Counts:
    bytes: LaunchExpr
    flops: LaunchExpr
    exact: bool


@dataclass
class _Walk:
    program: Program
    instances: LaunchExpr
    programs: LaunchExpr
    defs: dict[int, POp]
    exact: bool = True
    splits: str | None = None  # the constexpr of the programs that share each block (split-reductions)
    # a look-back group of rows (domain (rows..., programs of a row)): its rows and the programs of each
    rows: tuple[LaunchExpr, LaunchExpr] | None = None
    # inside a fold or scan over data-dependent subregions: the positions all instances' subregions hold
    subregions: LaunchExpr | None = None
    # folds already counted, by (origin, folded buffer): the head and tail pieces of one fold (balanced
    # segments) together hold the subregions' positions once
    folded: set = dataclasses.field(default_factory=set)
    # a split region scan's held tiles: the positions all programs hold (each program's tile, at most)
    held: LaunchExpr | None = None
    # balanced by the data: the group's helpers (None where it has none)
    helpers: Helpers | None = None


@dataclass(frozen=True)
class Helpers:
    """The helper programs of a group balanced by the data, past its blocks."""

    count: LaunchExpr  # HELPERS_g
    lanes: LaunchExpr  # the lanes of each: those of the block it joins
    instances: LaunchExpr  # the blocks' lanes (the group's instances)
    held: LaunchExpr | None  # helpers that scan (balance_region_scan.py): the positions each holds on chip


def _helpers(g: Group, instances: LaunchExpr, held: TileAxis | None) -> Helpers | None:
    """The helpers of group `g`, where a `helper_index` at the top of its body says it has them. A helper that
    scans holds its range across the lanes of the block it joins, the first BLOCK_HELD_g positions of each lane's
    run: BLOCK_g * BLOCK_HELD_g of its chunk (all of it where the chunk fits)."""
    helper = next((op for op in g.body.ops if isinstance(op, W.HelperIndex)), None)
    if helper is None:
        return None
    return Helpers(LConstexpr(helper.helpers), LConstexpr(g.block), instances,
                   None if held is None else lmul(LConstexpr(held.block), LConstexpr(g.block)))


def operation_counts(program: Program) -> Counts:
    """Bytes moved and FLOPs of one launch of `program` (see the module doc)."""
    total_bytes: list[LaunchExpr] = []
    total_flops: list[LaunchExpr] = []
    exact = True
    lengths = {s.group: s.length for s in program.segments}
    for g in program.groups:
        instances = lprod(tuple(ldim(d) for d in g.domain))
        loop = next((lp for lp in (G.block_loop(f.ops) for f in G.forms(g.body)) if lp is not None), None)
        # a persistent group runs its body once per block, not per program
        programs = loop.blocks if loop is not None else lengths.get(g.id, LConst(1))
        held = next((t for op in g.body.ops for v in op.results for t in v.type.tile if RG.is_held(t.block)), None)
        helpers = _helpers(g, instances, held)
        if held is None:
            holds = None
        elif helpers is not None and helpers.held is not None:  # each instance's tile, each helper's
            holds = ladd(lmul(instances, LConstexpr(held.block)), lmul(helpers.count, helpers.held))
        else:
            holds = lmul(programs, lmul(LConstexpr(held.block), LConstexpr(g.block)))
        w = _Walk(program, instances, programs, {v.id: op for op in g.body.walk() for v in op.results},
                  rows=(lprod(tuple(ldim(d) for d in g.domain[:-1])), ldim(g.domain[-1]))
                  if len(g.domain) > 1 else None, held=holds, helpers=helpers)
        inner = _in_form(w, g.body)
        moved, flops = _region(inner, g.body, LConst(1))  # a looped_rows op counts each form (`_forms`)
        exact &= w.exact and inner.exact
        total_bytes.append(moved)
        total_flops.append(flops)
    return Counts(lsum(tuple(total_bytes)), lsum(tuple(total_flops)), exact)


def _region(w: _Walk, region: PRegion, trips: LaunchExpr) -> tuple[LaunchExpr, LaunchExpr]:
    moved: list[LaunchExpr] = []
    flops: list[LaunchExpr] = []
    for op in region.ops:
        b, f = _op(w, op, trips)
        moved.append(b)
        flops.append(f)
    return lsum(tuple(moved)), lsum(tuple(flops))


def _elements(frag: Fragment) -> LaunchExpr:
    return lprod(tuple(ldim(t.extent) for t in frag.tile))


def _runs(w: _Walk, frags: Iterable[Fragment], trips: LaunchExpr) -> LaunchExpr:
    """How many element-operations an op over these fragments performs: per instance or per program."""
    frags = list(frags)
    widest = max(frags, key=lambda f: len(f.tile))
    if w.subregions is not None and widest.tile:  # a chunk of the subregions: together they hold each position once
        return w.subregions
    per = w.instances if any(f.lanes for f in frags) else w.programs
    return lmul(lmul(trips, per), _elements(widest))


def _subregion_positions(w: _Walk, op: RG.RegionFold | RG.RegionScan) -> LaunchExpr | None:
    """The positions the subregions of every execution of the fold hold together, in every instance and every
    trip of the loops around it: the elements of the tensor the fold slices (the first load of its source),
    taken to be covered once (segments, CSR rows). A chunk's lanes x block elements per trip are no measure of
    them: short subregions leave most of a chunk masked off (no memory touched), long ones take many chunks.
    Where the programs hold a tile of their pieces (`w.held`), the fold or scan covers what the tiles leave."""
    load = next((o for o in op.source.ops if isinstance(o, A.Load)), None)
    if load is None:
        return None
    size = lprod(tuple(ldim(d) for d in w.program.buffer(load.access.buffer).shape))
    h = w.helpers
    if h is not None and h.held is not None and isinstance(op, RG.RegionFold):
        # the rest folds of a group whose helpers scan: only a helper's, over its chunk past its held tile
        return LMinMax("max", (LConst(0), LBin("-", size, lmul(h.count, h.held))))
    return _past_held(w, size)


def _past_held(w: _Walk, positions: LaunchExpr) -> LaunchExpr:
    """The positions the held tiles leave of `positions` (all of them without held tiles)."""
    if w.held is None:
        return positions
    return LMinMax("max", (LConst(0), LBin("-", positions, w.held)))


def _bytes(w: _Walk, access: AccessRelation, extra: Iterable[PValue], trips: LaunchExpr, times: int = 1
           ) -> LaunchExpr:
    dtype = w.program.buffer(access.buffer).dtype
    runs = _runs(w, [v.type for v in (*access.coords, *extra)], trips)
    if w.held is not None and any(RG.is_held(t.block) for v in (*access.coords, *extra) for t in v.type.tile):
        # a held tile: each program's tile of its piece, at most the positions of the tensor it slices
        size = lprod(tuple(ldim(d) for d in w.program.buffer(access.buffer).shape))
        runs = LMinMax("min", (size, lmul(trips, w.held)))
    if dtype is DType.i4:  # two elements a byte
        return LBin("cdiv", lmul(LConst(times), runs), LConst(2))
    return lmul(LConst(dtype.bits // 8 * times), runs)


# ---------------------------------------------------------------------------------------------- per op class
#
# Every op class has an entry (tests/test_physical_counts.py checks it): what one execution of the op moves and
# computes, given the trips of the loops around it. An op class without one would be counted as nothing,
# silently; `costs_nothing` says so explicitly for the ops that touch no memory and do no float arithmetic.

Cost = tuple[LaunchExpr, LaunchExpr]  # (bytes moved, float operations)
COST: dict[type[POp], Callable[[_Walk, Any, LaunchExpr], Cost]] = {}
counts = registrar(COST, "operation count for {key}")
_ZERO = LConst(0)


def _op(w: _Walk, op: POp, trips: LaunchExpr) -> Cost:
    return COST[type(op)](w, op, trips)


def _nothing(w: _Walk, op: POp, trips: LaunchExpr) -> Cost:
    return _ZERO, _ZERO


def costs_nothing(*classes: type[POp]) -> None:
    counts(*classes)(_nothing)


costs_nothing(G.OwnedTile, G.ChunkLanes, G.ShapeValue, G.TileIndex, G.ScalarParam, G.Barrier, W.SplitIndex,
              W.HelperIndex, A.Check, P.Const, P.Compare, P.Select, P.Cast, P.Bitcast, F.Yield, B.AllocBuffer,
              H.Histogram, H.BinCount, L.Broadcast, L.Permute, L.ExpandDims, L.Squeeze, L.TileSlice, L.TileConcat,
              L.TileReshape, RN.Random, SO.Sort)


@counts(A.Load)
def _load(w: _Walk, op: A.Load, trips: LaunchExpr) -> Cost:
    if w.splits is not None and op.access.copy is not None and op.access.copy.type.tile:
        # every slot of a block, read by the one program that draws its last ticket
        return LBin("//", _bytes(w, op.access, op.results, trips), LConstexpr(w.splits)), _ZERO
    return _bytes(w, op.access, op.results, trips), _ZERO


@counts(A.Store)
def _store(w: _Walk, op: A.Store, trips: LaunchExpr) -> Cost:
    return _bytes(w, op.access, (op.value,), trips), _ZERO


@counts(T.AtomicRMW, T.AtomicCAS, W.Ticket)
def _read_modify_write(w: _Walk, op: POp, trips: LaunchExpr) -> Cost:
    """Atomics and tickets read and write each element (twice the bytes)."""
    return _bytes(w, op.access, op.operands() + op.results, trips, times=2), _ZERO  # type: ignore[attr-defined]


@counts(G.OwnedInstances)
def _owned(w: _Walk, op: G.OwnedInstances, trips: LaunchExpr) -> Cost:
    if op.ticket is None:
        return _ZERO, _ZERO
    return lmul(LConst(8), lmul(trips, w.programs)), _ZERO  # the ticket: an atomic on one i32


@counts(K.PublishSlot)
def _publish(w: _Walk, op: K.PublishSlot, trips: LaunchExpr) -> Cost:
    """Each program: its values (one per instance it holds, where the pieces of a block share a ticket each),
    then its flag (an atomic exchange)."""
    size = sum(w.program.buffer(b).dtype.bits // 8 for b in op.slots)
    if w.helpers is not None:  # a flag per program; only the helpers write slots: one (the lane that holds its
        # chunk across the lanes of the block it joins: a lane scan) or one per column it joins (at most a block)
        one = any(isinstance(o, LN.LaneScan) for o in w.defs.values())
        slots = w.helpers.count if one else lmul(w.helpers.count, w.helpers.lanes)
        return ladd(lmul(LConst(size), lmul(trips, slots)), lmul(LConst(8), lmul(trips, w.programs))), _ZERO
    if w.splits is not None:  # split-region-scans: a slot per lane and piece, a flag per program
        return ladd(lmul(LConst(size), lmul(trips, w.instances)), lmul(LConst(8), lmul(trips, w.programs))), _ZERO
    return lmul(LConst(size + 8), lmul(trips, w.programs)), _ZERO


@counts(K.FoldSlots)
def _fold_slots(w: _Walk, op: K.FoldSlots, trips: LaunchExpr) -> Cost:
    """Program t reads the flag and the values of the slots before it in its row (split-region-scans: the
    flags of its block's lower pieces, and each lane's values of them)."""
    size = 4 + sum(w.program.buffer(b).dtype.bits // 8 for b in op.slots)
    if w.helpers is not None:  # the blocks fold nothing; a helper its subregion's earlier helpers (H (H - 1) / 2)
        h = w.helpers.count
        return lmul(LConst(size), lmul(trips, LBin("//", lmul(h, LBin("-", h, LConst(1))), LConst(2)))), _ZERO
    if w.splits is not None and w.rows is None:
        per = LConstexpr(w.splits)
        pairs = LBin("//", lmul(per, LBin("-", per, LConst(1))), LConst(2))
        blocks, lanes = LBin("//", w.programs, per), LBin("//", w.instances, per)
        return lmul(trips, lmul(pairs, ladd(lmul(LConst(4), blocks), lmul(LConst(size - 4), lanes)))), _ZERO
    rows, per = w.rows if w.rows is not None else (LConst(1), w.programs) if w.splits is None else \
        (LBin("//", w.programs, LConstexpr(w.splits)), LConstexpr(w.splits))  # pieces of an instance
    pairs = lmul(rows, LBin("//", lmul(per, LBin("-", per, LConst(1))), LConst(2)))
    return lmul(LConst(size), lmul(trips, pairs)), _ZERO


@counts(K.RetireTicket)
def _retire(w: _Walk, op: K.RetireTicket, trips: LaunchExpr) -> Cost:
    """Each program's finished count; the last restores the flags and counters."""
    return ladd(lmul(LConst(8), lmul(trips, w.programs)), lmul(LConst(4), ladd(w.programs, LConst(2)))), _ZERO


@counts(P.Unary, P.Binary)
def _arithmetic(w: _Walk, op: P.Unary | P.Binary, trips: LaunchExpr) -> Cost:
    frag = op.result.type
    if frag.dtype.is_float and not frag.index:
        return _ZERO, _runs(w, [frag], trips)
    return _ZERO, _ZERO


@counts(R.Reduce, S.Scan, LN.LaneFold, LN.LaneScan)
def _combines(w: _Walk, op: R.Reduce | S.Scan | LN.LaneFold | LN.LaneScan, trips: LaunchExpr) -> Cost:
    inputs = [v.type for v in op.inputs if v.type.dtype.is_float]
    return _ZERO, _runs(w, inputs, lmul(trips, LConst(len(inputs)))) if inputs else _ZERO


@counts(C.Contract)
def _contract(w: _Walk, op: C.Contract, trips: LaunchExpr) -> Cost:
    return _ZERO, lmul(LConst(2), _runs(w, [op.lhs.type], trips))


@counts(C.MatMul)
def _matmul(w: _Walk, op: C.MatMul, trips: LaunchExpr) -> Cost:
    cols = op.rhs.type.tile[-1].extent if op.rhs.type.tile else 1
    return _ZERO, lmul(LConst(2), lmul(ldim(cols), _runs(w, [op.lhs.type], trips)))


@counts(F.For)
def _for(w: _Walk, op: F.For, trips: LaunchExpr) -> Cost:
    inner = _trip_count(w, op)
    if inner is None:
        w.exact = False
        inner = LConst(1)
    return _region(w, op.body, lmul(trips, inner))


def _in_form(w: _Walk, body: PRegion) -> _Walk:
    """The walk of a form of a group's body: programs that share a block (a `split_index` at its top, SPLITS_g
    not fixed at 1) each run its per-instance work, on their own share of the row; a group's helpers (a
    `helper_index` at its top) run it in the lanes of the block each joins."""
    split = next((op for op in body.ops if isinstance(op, W.SplitIndex)), None)
    if split is not None:
        one = dict(w.program.constexprs).get(split.splits) == LConst(1)  # balanced region scans: no pieces
        w = dataclasses.replace(w, instances=w.instances if one else lmul(w.instances, LConstexpr(split.splits)),
                                splits=split.splits)
    if w.helpers is not None and any(isinstance(op, W.HelperIndex) for op in body.ops):
        h = dataclasses.replace(w.helpers, instances=w.instances)
        w = dataclasses.replace(w, instances=ladd(w.instances, lmul(h.count, h.lanes)), helpers=h)
    return w


@counts(G.LoopedRows)
def _forms(w: _Walk, op: G.LoopedRows, trips: LaunchExpr) -> Cost:
    """Each form of a group's body counted; the launch's flag picks one."""
    counted = []
    for r in (op.whole, op.looped):
        inner = _in_form(w, r)
        counted.append(_region(inner, r, trips))
        w.exact &= inner.exact
    (b0, f0), (b1, f1) = counted
    flag = LConstexpr(op.flag)
    moved, flops = lselect(flag, b1, b0), lselect(flag, f1, f0)
    if op.split is not None and op.split_flag is not None:  # the split form runs while its flag is set
        inner = _in_form(w, op.split)
        b2, f2 = _region(inner, op.split, trips)
        w.exact &= inner.exact
        split = LConstexpr(op.split_flag)
        moved, flops = lselect(split, b2, moved), lselect(split, f2, flops)
    return moved, flops


@counts(G.BlockLoop)
def _block_loop(w: _Walk, op: G.BlockLoop, trips: LaunchExpr) -> Cost:
    return _region(w, op.body, trips)  # the body once per block (`programs` counts blocks)


@counts(RG.RegionFold, RG.RegionScan)
def _subregions(w: _Walk, op: RG.RegionFold | RG.RegionScan, trips: LaunchExpr) -> Cost:
    positions = _subregion_positions(w, op) if w.subregions is None else None
    if positions is not None and isinstance(op, RG.RegionFold):
        load = next(o for o in op.source.ops if isinstance(o, A.Load))
        if (op.origin, load.access.buffer) in w.folded:
            positions = LConst(0)  # another piece of a fold already counted: its positions are counted there
        w.folded.add((op.origin, load.access.buffer))
    if positions is None:
        return _regions(w, op, trips)
    inner = dataclasses.replace(w, subregions=positions)
    cost = _regions(inner, op, trips)
    w.exact = False
    return cost


@counts(F.While, F.If)
def _regions(w: _Walk, op: POp, trips: LaunchExpr) -> Cost:
    """While and if (both branches), and region folds: each region counted once, so the count is an estimate.
    An if that a constexpr selects counts the branch the launch takes."""
    if isinstance(op, F.If) and op.flag is not None:
        folded = set(w.folded)  # each branch counts its own pieces of a fold: the launch runs one of them
        counted = []
        for r in (op.then_, op.else_):
            w.folded = set(folded)
            counted.append(_region(w, r, trips))
        (b1, f1), (b0, f0) = counted
        flag = LConstexpr(op.flag)
        return lselect(flag, b1, b0), lselect(flag, f1, f0)
    w.exact = False
    counted = [_region(w, r, trips) for r in op.regions()]
    return lsum(tuple(b for b, _ in counted)), lsum(tuple(f for _, f in counted))


def _trip_count(w: _Walk, op: F.For) -> LaunchExpr | None:
    share = _split_share(w, op)
    if share is not None:
        w.exact = False  # the last program's share may be shorter
        return share
    bounds = [_known(w, v) for v in (op.start, op.stop, op.step)]
    if any(b is None for b in bounds):
        return None
    start, stop, step = bounds
    assert start is not None and stop is not None and step is not None
    return LMinMax("max", (LConst(0), LBin("cdiv", LBin("-", stop, start), step)))


def _split_share(w: _Walk, op: F.For) -> LaunchExpr | None:
    """A loop over one program's share of a split row, `range(s * per, min(s * per + per, n))`: `per` trips
    (at most)."""
    start, stop = w.defs.get(op.start.id), w.defs.get(op.stop.id)
    if not (isinstance(start, P.Binary) and start.fn.value == "mul" and isinstance(stop, P.Binary)
            and stop.fn.value == "minimum" and isinstance(w.defs.get(start.lhs.id), W.SplitIndex)):
        return None
    return _known(w, start.rhs)


def _known(w: _Walk, v: PValue) -> LaunchExpr | None:
    """`v` as a launch expression, when it is a uniform constant, shape value or integer scalar."""
    if v.type.lanes or v.type.tile:
        return None
    op = w.defs.get(v.id)
    if isinstance(op, P.Const) and isinstance(op.value, int) and not isinstance(op.value, bool):
        return LConst(op.value)
    if isinstance(op, G.ShapeValue):
        return op.expr
    if isinstance(op, G.ScalarParam):
        return LScalar(op.param)
    if isinstance(op, P.Cast):
        return _known(w, op.x)
    return None
