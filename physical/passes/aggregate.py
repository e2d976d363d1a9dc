"""Atomic aggregation: combine a program's atomic adds to the same address before issuing them.

An integer `atomic_add(dst, index, value)` whose old value is unused, with a uniform `value`, adds
`value` once per member whose index is b, for every bin b of the destination. A program that owns
many instances can therefore count its members per bin first (`bincount`, tl.histogram) and issue
one atomic per bin that was hit, adding `count * value`: integer addition is associative and
commutative (wrapping alike), so the destination ends up exactly the same, and no observer can see
the intermediate values because the old value is never read. Members whose index lies outside the
destination are dropped either way.

    if B <= BLOCK_I:                       (few bins for the instances a program owns)
        for b0 in range(0, B, BLOCK_BINS):
            counts = bincount(index - b0 over the members)           [BLOCK_BINS]
            atomic_add(dst[b0 + bins], counts * value, mask=(b0 + bins < B) & (counts != 0))
    else:
        atomic_add(dst[index], value, mask)  (the original, one per member)

Legality: integer add, unused old value, uniform value, a rank-1 external destination, at the top of
a group whose programs own several instances. Profitability: the group owns instances in blocks
(each program can meet the same bin many times).

A program then issues up to one atomic per bin, a 32-byte transaction each, however few values it
counted: with the 1024 instances `enlarge-ownership` gives a scalar body, a 256-bin histogram spends
as much on its atomics as on reading its values. A light body (loads, index arithmetic and the
atomic: no random numbers, transcendental functions or structured ops) therefore owns
`AGGREGATE_LANES` (16384) instances per program, so the atomics cost about an eighth of the reads.
"""

from __future__ import annotations

import dataclasses

from kir.atomic import AtomicKind
from kir.dims import DConst
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn

from .. import ops as P
from ..builder import Builder
from ..construct import segments_for
from ..launch_expr import LaunchExpr, LConst, LConstexpr, LNextPow2, ldim, lmin, lprod
from ..model import AccessRelation, Fragment, Group, POp, PRegion, Program, Proven, PValue, TileAxis, Trait
from . import Pass, PassContext
from .looped import substitute

BLOCK_BINS = 256
AGGREGATE_LANES = 16384


def _light_op(op: POp) -> bool:
    # Unary functions are the transcendental ones; a bitcast reads float bits, no index arithmetic.
    arithmetic = op.has(Trait.ELEMENTWISE) and not isinstance(op, P.Unary | P.Bitcast)
    return arithmetic or op.has(Trait.UNIFORM) or op.TERMINATOR or isinstance(op, P.OwnedInstances | P.Load |
                                                                             P.AtomicRMW)


def light(group: Group) -> bool:
    """Whether the body holds only index arithmetic, loads and atomics on scalars (no tiles)."""
    return all(_light_op(op) and not any(r.type.tile for r in op.results) for op in group.body.walk())


def _used(group: Group) -> set[int]:
    return {v.id for op in group.body.walk() for v in op.operands()}


def candidates(program: Program, group: Group) -> list[P.AtomicRMW]:
    """The atomics of `group` that may be aggregated per program."""
    if group.ownership.tiled or group.serial or not any(isinstance(op, P.OwnedInstances) for op in group.body.ops):
        return []
    used = _used(group)
    out = []
    for op in group.body.ops:
        if not isinstance(op, P.AtomicRMW) or op.kind is not AtomicKind.add or op.result.id in used:
            continue
        buf = program.buffer(op.access.buffer)
        if not buf.dtype.is_int or buf.param is None or len(op.access.coords) != 1 or op.access.copy is not None:
            continue
        if not op.value.type.is_scalar or not op.access.coords[0].type.dtype.is_int:
            continue
        out.append(op)
    return out


class AggregateAtomics(Pass):
    name = "aggregate-atomics"

    def make_plan(self, program: Program) -> tuple[list[P.AtomicRMW], ...]:
        """Per group: the atomics it aggregates."""
        return tuple(candidates(program, g) for g in program.groups)

    def legal(self, program: Program, ctx: PassContext | None = None) -> bool | str:
        if any(self.plan(program, ctx)):  # type: ignore[arg-type]
            return True
        return "no integer atomic add with an unused old value and a uniform value in a multi-instance group"

    def profitable(self, program: Program, ctx: PassContext | None = None) -> bool:
        consts = dict(program.constexprs)
        return any(found and consts.get(g.block) != LConst(1)
                   for g, found in zip(program.groups, self.plan(program, ctx)))  # type: ignore[call-overload]

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        builder = Builder.after(program)
        consts = dict(program.constexprs)
        groups = []
        widest: list[tuple[LaunchExpr, LaunchExpr]] = []  # (lanes before, lanes now) per widened group
        for g, chosen in zip(program.groups, self.plan(program, ctx)):  # type: ignore[call-overload]
            found = {id(op) for op in chosen}
            if not found:
                groups.append(g)
                continue
            block = f"BLOCK_BINS{g.id}"
            while block in consts:
                block += "_"
            consts[block] = LConst(BLOCK_BINS)
            ops: list[POp] = []
            for op in g.body.ops:
                if id(op) in found:
                    ops += _aggregated(program, builder, g, op, TileAxis(DConst(BLOCK_BINS), block))
                else:
                    ops.append(op)
            if g.domain and not g.ownership.tiled and light(g):
                lanes = lmin(LConst(AGGREGATE_LANES), LNextPow2(lprod(tuple(ldim(d) for d in g.domain))))
                widest.append((consts[g.block], lanes))
                consts[g.block] = lanes
            groups.append(dataclasses.replace(g, body=PRegion(g.body.args, tuple(ops))))
        if not widest:
            return dataclasses.replace(program, groups=tuple(groups), constexprs=tuple(consts.items()))
        segments, grid = segments_for(groups, consts)
        warps = program.num_warps
        for old, lanes in widest:  # the warps follow the wider block
            warps = substitute(warps, old, lanes)
        return dataclasses.replace(program, groups=tuple(groups), constexprs=tuple(consts.items()), segments=segments,
                                   grid=grid, num_warps=warps)


def _aggregated(program: Program, b: Builder, g: Group, op: P.AtomicRMW, bins: TileAxis) -> list[POp]:
    """The ops that replace `op`: the bins test, then `if` (the bins loop) `else` (`op` itself)."""
    buf = program.buffer(op.access.buffer)
    o = op.origin
    b.begin()
    index = Fragment(DType.i64, False, (), True)
    extent = b.add(P.ShapeValue, index, o, "bins", expr=ldim(buf.shape[0]))
    lanes = b.add(P.ShapeValue, index, o, "lanes", expr=LConstexpr(g.block))
    few = b.add(P.Compare, Fragment(DType.pred), o, "few_bins", fn=CmpFn.le, lhs=extent, rhs=lanes)
    start = b.add(P.ShapeValue, index, o, expr=ldim(DConst(0)))
    step = b.add(P.ShapeValue, index, o, expr=LConstexpr(bins.block))
    b.begin()
    base = b.fresh(index, "bin0")
    tile = (bins,)
    counts = b.add(P.BinCount, Fragment(DType.i32, False, tile), o, "counts", values=op.access.coords[0], base=base,
                   member=op.access.mask)
    pos = b.add(P.TileIndex, Fragment(DType.i64, False, tile, True), o, axis=0)
    at = b.add(P.Binary, pos.type, o, "bin", fn=BinaryFn.add, lhs=base, rhs=pos)
    inside = b.add(P.Compare, Fragment(DType.pred, False, tile), o, fn=CmpFn.lt, lhs=at, rhs=extent)
    zero = b.add(P.Const, Fragment(DType.i32), o, value=0, dtype=DType.i32)
    hit = b.add(P.Compare, Fragment(DType.pred, False, tile), o, fn=CmpFn.ne, lhs=counts, rhs=zero)
    mask = b.add(P.Binary, Fragment(DType.pred, False, tile), o, fn=BinaryFn.and_, lhs=inside, rhs=hit)
    amount: PValue = counts if buf.dtype == DType.i32 else \
        b.add(P.Cast, Fragment(buf.dtype, False, tile), o, x=counts, dtype=buf.dtype)
    if not _is_one(program, g, op.value):
        amount = b.add(P.Binary, Fragment(buf.dtype, False, tile), o, fn=BinaryFn.mul, lhs=amount, rhs=op.value)
    access = AccessRelation(buf.id, (at,), mask, Proven(f"0 <= bin < {buf.shape[0]} for the hit bins"), 0, None)
    b.put(P.AtomicRMW(results=(b.fresh(Fragment(buf.dtype, False, tile), "old"),), origin=o, kind=op.kind,
                      access=access, value=amount, order=op.order, sharing=op.sharing, scope=op.scope))
    b.put(P.Yield(origin=o, values=()))
    loop_body = PRegion((base,), tuple(b.end()))
    b.begin()
    b.put(P.For(results=(), origin=o, start=start, stop=extent, step=step, inits=(), body=loop_body))
    b.put(P.Yield(origin=o, values=()))
    then = PRegion((), tuple(b.end()))
    otherwise = PRegion((), (op, P.Yield(origin=o, values=())))
    return [*b.end(), P.If(results=(), origin=o, cond=few, then_=then, else_=otherwise)]


def _is_one(program: Program, g: Group, v: PValue) -> bool:
    for op in g.body.walk():
        if isinstance(op, P.Const) and op.results and op.result.id == v.id:
            return op.value == 1 and not isinstance(op.value, bool)
    return False


__all__ = ["AggregateAtomics", "candidates", "BLOCK_BINS", "AGGREGATE_LANES", "light"]
