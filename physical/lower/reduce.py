"""Reductions: built-in kinds get a synthesised combine region; custom combines are lowered from KIR."""

from __future__ import annotations

from kir import core as K
from kir import reduce as KR
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn, UnaryFn

from .. import ops as P
from ..model import Fragment, Literal, PRegion, PValue
from . import lower_ops, rule
from .context import Lowerer

INT64_MAX = (1 << 63) - 1


def builtin_combine(lw: Lowerer, kind: KR.ReduceKind, dtypes: tuple[DType, ...]) -> PRegion:
    """The combine region of a built-in kind over scalars (argmax/argmin: over (value, index) pairs)."""
    types = tuple(Fragment(d) for d in dtypes)
    with lw.scalar_context():
        args = lw.begin(types * 2, tuple(f"{s}{k}" for s in "ab" for k in range(len(dtypes))), isolated=True)
        if kind in KR.COMBINE:
            r = lw.add(P.Binary, types[0], fn=KR.COMBINE[kind], lhs=args[0], rhs=args[1])
            return lw.finish((r,))
        va, ia, vb, ib = args
        better = CmpFn.gt if kind is KR.ReduceKind.argmax else CmpFn.lt
        strictly = lw.compare(better, va, vb)
        tie = lw.and_(lw.compare(CmpFn.eq, va, vb), lw.compare(CmpFn.lt, ia, ib))
        take_a = lw.binary(BinaryFn.or_, strictly, tie)
        if dtypes[0].is_float:  # NaN is the extreme; among NaNs the first index wins
            a_nan = lw.add(P.Unary, Fragment(DType.pred), fn=UnaryFn.isnan, x=va)
            b_nan = lw.add(P.Unary, Fragment(DType.pred), fn=UnaryFn.isnan, x=vb)
            b_ok = lw.add(P.Unary, Fragment(DType.pred), fn=UnaryFn.not_, x=b_nan)
            nan_first = lw.and_(a_nan, lw.binary(BinaryFn.or_, b_ok, lw.compare(CmpFn.lt, ia, ib)))
            a_ok = lw.add(P.Unary, Fragment(DType.pred), fn=UnaryFn.not_, x=a_nan)
            take_a = lw.binary(BinaryFn.or_, lw.and_(lw.and_(take_a, a_ok), b_ok), nan_first)
        v = lw.add(P.Select, types[0], cond=take_a, on_true=va, on_false=vb)
        i = lw.add(P.Select, types[1], cond=take_a, on_true=ia, on_false=ib)
        return lw.finish((v, i))


def seeded(lw: Lowerer, kind: KR.ReduceKind, acc: DType, identity: Literal, v: PValue) -> PValue:
    """`identity (+) v` in the accumulator dtype: an identity given for a built-in kind is the accumulator's
    initial value (padding and masked members still fold the kind's own neutral element)."""
    if KR.same_literal(identity, KR.identity(kind, acc)):
        return v
    dt = v.type.dtype
    if acc.is_int and isinstance(identity, int) and not isinstance(identity, bool):
        # an identity written for the element type (u64's 2**64 - 1) wraps into a signed accumulator
        lo, hi = acc.int_range
        identity = (identity - lo) % (hi - lo + 1) + lo
    folded = lw.binary(KR.COMBINE[kind], lw.broadcast_to(lw.const(identity, acc), v.type.with_dtype(acc)),
                       lw.cast(v, acc))
    return lw.cast(folded, dt)


def lower_combine(lw: Lowerer, region: K.Region, dtypes: tuple[DType, ...]) -> PRegion:
    """Lower a KIR combine region (scalars (a..., b...) -> k scalars) into a physical region."""
    with lw.scalar_context():
        args = lw.begin(tuple(Fragment(d) for d in dtypes) * 2, tuple(a.name for a in region.args), isolated=True)
        for ka, pa in zip(region.args, args):
            lw.bind(ka, pa)
        lower_ops(lw, region.ops)
        ys = tuple(lw.cast(lw.get(v), d) for v, d in zip(region.yielded, dtypes))
        return lw.finish(ys)


def arg_index(lw: Lowerer, x: PValue, axes: tuple[int, ...]) -> PValue:
    """Row-major position over the reduced tile axes, as an i64 fragment shaped like `x`."""
    tile = x.type.tile
    idx: PValue | None = None
    for ax in axes:
        pos = lw.tile_index(tile, ax)
        if idx is None:
            idx = pos
        else:
            idx = lw.binary(BinaryFn.add, lw.binary(BinaryFn.mul, idx, lw.shape_value(tile[ax].extent)), pos)
    assert idx is not None
    return lw.broadcast_to(lw.cast(idx, DType.i64), Fragment(DType.i64, x.type.lanes, tile))


@rule(KR.Reduce)
def lower_reduce(lw: Lowerer, op: KR.Reduce) -> None:
    xs = tuple(lw.get(v) for v in op.inputs)
    tile = xs[0].type.tile
    lanes = any(x.type.lanes for x in xs)
    kept = tuple(t for a, t in enumerate(tile) if a not in op.axes)
    member = lw.tile_member(tile)
    if op.kind is KR.ReduceKind.custom:
        dtypes = tuple(x.type.dtype for x in xs)
        assert op.combine is not None and op.identity is not None
        combine, identity, accs = lower_combine(lw, op.combine, dtypes), op.identity, dtypes
        inputs, out_types = xs, tuple(Fragment(d, lanes, kept) for d in dtypes)
    elif op.kind in (KR.ReduceKind.argmax, KR.ReduceKind.argmin):
        dt = xs[0].type.dtype
        inputs = (xs[0], arg_index(lw, xs[0], tuple(sorted(op.axes))))
        accs = (dt, DType.i64)
        combine, identity = builtin_combine(lw, op.kind, accs), (KR.identity(op.kind, dt), INT64_MAX)
        out_types = (Fragment(dt, lanes, kept), Fragment(DType.i64, lanes, kept))
    else:
        dt = xs[0].type.dtype
        acc = op.effective_acc()
        assert isinstance(acc, DType)
        combine, identity, accs = builtin_combine(lw, op.kind, (acc,)), (KR.identity(op.kind, acc),), (acc,)
        inputs, out_types = xs, (Fragment(dt, lanes, kept),)
    r = lw.emit(P.Reduce, out_types, names=(op.results[0].name,) * len(out_types), inputs=inputs,
                axes=tuple(sorted(op.axes)), kind=op.kind, identity=identity, acc_dtypes=accs, member=member,
                combine=combine)
    results = r.results[1:] if op.kind in (KR.ReduceKind.argmax, KR.ReduceKind.argmin) else r.results
    if op.kind in KR.COMBINE and op.identity is not None:
        results = (seeded(lw, op.kind, accs[0], op.identity[0], results[0]),)
    for kv, pv in zip(op.results, results):
        if op.keepdims:
            for ax in sorted(op.axes):
                tile_now = pv.type.tile
                pv = lw.add(P.ExpandDims, pv.type.with_tile(tile_now[:ax] + lw.tile((kv.type.shape[ax],))
                                                            + tile_now[ax:]), x=pv, axis=ax)
        lw.bind(kv, pv)
