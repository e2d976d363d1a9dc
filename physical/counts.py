"""Operation counts of a physical program: global-memory bytes and floating-point operations per launch,
as launch expressions in the shape symbols (seed 004: "operation-count expressions become profiler code").

Every memory access is an explicit access relation, so the bytes a launch moves are the sum over
accesses of (how many times the access runs) x (its active elements) x (element size):

* an op whose values vary across a group's instances (a *lanes* fragment) runs once per instance,
  `prod(domain)` times; a uniform op runs once per program (once per block of a persistent group);
* its elements are the product of its fragment's tile extents (logical extents: padding past an
  extent is never a member);
* inside a `for` with bounds the program knows (constants, shape values, integer scalars) the count
  is multiplied by the trip count; a looped body (a row walked in chunks) replaces the group body
  when its constexpr flag is set, so the count selects between the two with that flag;
* atomics read and write their elements (twice the bytes);
* programs that pass values on through slots (`physical.ops.lookback`) count their ticket, their slot and
  flag, the flags and slots of every lower ticket (P (P - 1) / 2 of each) and the last one's reset.

FLOPs count float arithmetic only: one per element of a float unary or binary op, of a reduction's
or scan's float input, and two per multiply-add of a contraction. Index arithmetic, comparisons,
selects and casts are not counted.

A count is *exact* only where every trip count is known; `while` loops, `if` branches (both are
counted), data-dependent `for` bounds and region folds over data-dependent ranges make it an
estimate (`Counts.exact` is False): the loop body counted once, both branches counted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from kir.dtypes import DType

from .launch_expr import LaunchExpr, LBin, LConst, LConstexpr, LMinMax, LScalar, ladd, ldim, lmul, lprod, lsum
from .model import AccessRelation, Fragment, POp, PRegion, Program, PValue, Trait
from .ops import access as A
from .ops import contract as C
from .ops import control as F
from .ops import lookback as K
from .ops import pointwise as P
from .ops import program as G
from .ops import reduce as R
from .ops import region as RG
from .ops import scan as S
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


def operation_counts(program: Program) -> Counts:
    """Bytes moved and FLOPs of one launch of `program` (see the module doc)."""
    total_bytes: list[LaunchExpr] = []
    total_flops: list[LaunchExpr] = []
    exact = True
    lengths = {s.group: s.length for s in program.segments}
    for g in program.groups:
        instances = lprod(tuple(ldim(d) for d in g.domain))
        loop = G.block_loop(g.body.ops)  # a persistent group runs its body once per block, not per program
        programs = loop.blocks if loop is not None else lengths.get(g.id, LConst(1))
        bodies = [g.body] + ([g.looped.body] if g.looped is not None else [])
        counted = []
        for body in bodies:
            split = next((op for op in body.ops if isinstance(op, W.SplitIndex)), None)
            # programs that share a block each run its per-instance work (on their own share of the row)
            each = lmul(instances, LConstexpr(split.splits)) if split is not None else instances
            w = _Walk(program, each, programs, {v.id: op for op in body.walk() for v in op.results},
                      splits=split.splits if split is not None else None,
                      rows=(lprod(tuple(ldim(d) for d in g.domain[:-1])), ldim(g.domain[-1]))
                      if len(g.domain) > 1 else None)
            counted.append(_region(w, body, LConst(1)))
            exact &= w.exact
        if g.looped is not None:
            flag = LConstexpr(g.looped.flag)
            (b0, f0), (b1, f1) = counted
            counted = [(_choose(flag, b1, b0), _choose(flag, f1, f0))]
        total_bytes.append(counted[0][0])
        total_flops.append(counted[0][1])
    return Counts(lsum(tuple(total_bytes)), lsum(tuple(total_flops)), exact)


def _choose(flag: LaunchExpr, when_set: LaunchExpr, otherwise: LaunchExpr) -> LaunchExpr:
    return ladd(lmul(flag, when_set), lmul(LBin("-", LConst(1), flag), otherwise))


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
    if w.subregions is not None and widest.lanes and widest.tile:  # a chunk of every lane's subregion
        return lmul(trips, w.subregions)
    per = w.instances if any(f.lanes for f in frags) else w.programs
    return lmul(lmul(trips, per), _elements(widest))


def _subregion_positions(w: _Walk, op: RG.RegionFold | RG.RegionScan) -> LaunchExpr | None:
    """The positions the subregions of every instance hold together: the elements of the tensor the fold
    slices (the first load of its source), taken to be covered once (segments, CSR rows). A chunk's lanes x
    block elements are no measure of them: short subregions leave most of a chunk masked off (no memory
    touched), long ones take many chunks."""
    load = next((o for o in op.source.ops if isinstance(o, A.Load)), None)
    if load is None:
        return None
    return lprod(tuple(ldim(d) for d in w.program.buffer(load.access.buffer).shape))


def _bytes(w: _Walk, access: AccessRelation, extra: Iterable[PValue], trips: LaunchExpr, times: int = 1
           ) -> LaunchExpr:
    dtype = w.program.buffer(access.buffer).dtype
    runs = _runs(w, [v.type for v in (*access.coords, *extra)], trips)
    if dtype is DType.i4:  # two elements a byte
        return LBin("cdiv", lmul(LConst(times), runs), LConst(2))
    return lmul(LConst(dtype.bits // 8 * times), runs)


def _op(w: _Walk, op: POp, trips: LaunchExpr) -> tuple[LaunchExpr, LaunchExpr]:
    zero = LConst(0)
    if isinstance(op, A.Load):
        if w.splits is not None and op.access.copy is not None and op.access.copy.type.tile:
            # every slot of a block, read by the one program that draws its last ticket
            return LBin("//", _bytes(w, op.access, op.results, trips), LConstexpr(w.splits)), zero
        return _bytes(w, op.access, op.results, trips), zero
    if isinstance(op, A.Store):
        return _bytes(w, op.access, (op.value,), trips), zero
    if op.has(Trait.READS | Trait.WRITES):  # read-modify-write (atomics, tickets): each element read and written
        return _bytes(w, op.access, op.operands() + op.results, trips, times=2), zero  # type: ignore[attr-defined]
    if isinstance(op, G.OwnedInstances) and op.ticket is not None:  # the ticket: an atomic on one i32
        return lmul(LConst(8), lmul(trips, w.programs)), zero
    if isinstance(op, K.PublishSlot):  # each program: its values, then its flag (an atomic exchange)
        size = sum(w.program.buffer(b).dtype.bits // 8 for b in op.slots)
        return lmul(LConst(size + 8), lmul(trips, w.programs)), zero
    if isinstance(op, K.FoldSlots):  # program t reads the flag and the values of the slots before it in its row
        size = 4 + sum(w.program.buffer(b).dtype.bits // 8 for b in op.slots)
        rows, per = w.rows if w.rows is not None else (LConst(1), w.programs)
        pairs = lmul(rows, LBin("//", lmul(per, LBin("-", per, LConst(1))), LConst(2)))
        return lmul(LConst(size), lmul(trips, pairs)), zero
    if isinstance(op, K.RetireTicket):  # each program's finished count; the last restores the flags and counters
        return ladd(lmul(LConst(8), lmul(trips, w.programs)), lmul(LConst(4), ladd(w.programs, LConst(2)))), zero
    if isinstance(op, (P.Unary, P.Binary)):
        frag = op.result.type
        if frag.dtype.is_float and not frag.index:
            return zero, _runs(w, [frag], trips)
        return zero, zero
    if isinstance(op, (R.Reduce, S.Scan)):
        inputs = [v.type for v in op.inputs if v.type.dtype.is_float]
        return zero, _runs(w, inputs, lmul(trips, LConst(len(inputs)))) if inputs else zero
    if isinstance(op, C.Contract):
        return zero, lmul(LConst(2), _runs(w, [op.lhs.type], trips))
    if isinstance(op, C.MatMul):
        cols = op.rhs.type.tile[-1].extent if op.rhs.type.tile else 1
        return zero, lmul(LConst(2), lmul(ldim(cols), _runs(w, [op.lhs.type], trips)))
    if isinstance(op, F.For):
        inner = _trip_count(w, op)
        if inner is None:
            w.exact = False
            inner = LConst(1)
        return _region(w, op.body, lmul(trips, inner))
    if isinstance(op, G.BlockLoop):  # the body once per block (`programs` counts blocks)
        return _region(w, op.body, trips)
    if isinstance(op, RG.RegionFold | RG.RegionScan) and w.subregions is None:
        positions = _subregion_positions(w, op)
        if positions is not None:
            w.exact = False
            inner = dataclasses.replace(w, subregions=positions)
            counted = [_region(inner, r, trips) for r in op.regions()]
            return lsum(tuple(b for b, _ in counted)), lsum(tuple(f for _, f in counted))
    if op.regions():  # while, if (both branches), region folds: each region counted once
        w.exact = False
        counted = [_region(w, r, trips) for r in op.regions()]
        return lsum(tuple(b for b, _ in counted)), lsum(tuple(f for _, f in counted))
    return zero, zero


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
