"""Reductions and scans over tile axes (the lanes axis is axis 0)."""

from __future__ import annotations

from kir.dtypes import DType
from kir.reduce import ReduceKind
from physical import ops as P
from physical.model import Fragment, PValue

from .emit import TL_DTYPE, Emitter, emits, literal


def masked(em: Emitter, x: PValue, member: PValue | None, acc: DType, identity: object, shape: Fragment) -> str:
    s = em.arg(x, shape, value_of=True)
    if x.type.dtype != acc or x.type.index:
        s = f"{s}.to({TL_DTYPE[acc]})"
    if x.type.rank < shape.rank:
        s = f"tl.broadcast_to({s}, {em.shape(shape)})"
    if member is None:
        return s
    return f"tl.where({em.arg(member, shape)}, {s}, {literal(identity, acc)})"


def _shape_of(xs: tuple[PValue, ...]) -> Fragment:
    lanes = any(x.type.lanes for x in xs)
    tiles = [x.type.tile for x in xs if x.type.tile]
    return Fragment(xs[0].type.dtype, lanes, tiles[0] if tiles else ())


def reduce_axis(em: Emitter, cur: list[str], kind: ReduceKind, accs: tuple[DType, ...], axis: int,
                fn: str | None, index_name: str | None = None) -> None:
    """Fold `axis` of the (already masked) components `cur` in place.

    Built-in kinds use Triton's native reductions (also the interpreter's fast paths); float max/min
    then restore NaN propagation, and argmax/argmin pick the first NaN when there is one.
    """
    x = cur[0]
    if kind is ReduceKind.sum:
        em.line(f"{x} = tl.sum({x}, axis={axis})")
    elif kind in (ReduceKind.max, ReduceKind.min):
        em.line(f"{x} = tl.{kind}({x}, axis={axis})" if not accs[0].is_float else
                f"{x} = tl.where(tl.max(({x} != {x}).to(tl.int8), axis={axis}) > 0, float(\"nan\"), "
                f"tl.{kind}({x}, axis={axis}))")
    elif kind in (ReduceKind.any, ReduceKind.all):
        red = "max" if kind is ReduceKind.any else "min"
        em.line(f"{x} = tl.{red}({x}.to(tl.int8), axis={axis}) != 0")
    elif kind in (ReduceKind.argmax, ReduceKind.argmin) and len(cur) == 2:
        v, i = cur
        nan = em.fresh("nan_at")
        big = (1 << 63) - 1
        if accs[0].is_float:
            em.line(f"{nan} = tl.min(tl.where({v} != {v}, {i}, {big}), axis={axis})")
        em.line(f"{i} = tl.{'argmax' if kind is ReduceKind.argmax else 'argmin'}({v}, axis={axis}, "
                f"tie_break_left=True).to(tl.int64)")
        em.line(f"{v} = tl.{'max' if kind is ReduceKind.argmax else 'min'}({v}, axis={axis})")
        if accs[0].is_float:
            em.line(f"{i} = tl.where({nan} < {big}, {nan}, {i})")
            em.line(f"{v} = tl.where({nan} < {big}, float(\"nan\"), {v})")
    elif len(cur) == 1:
        em.line(f"{x} = tl.reduce({x}, {axis}, {fn})")
    else:
        em.line(f"{', '.join(cur)} = tl.reduce(({', '.join(cur)}), {axis}, {fn})")


@emits(P.Reduce)
def emit_reduce(em: Emitter, op: P.Reduce) -> None:
    shape = _shape_of(op.inputs)
    lanes = int(shape.lanes)
    cur = []
    for x, acc, ident in zip(op.inputs, op.acc_dtypes, op.identity):
        v = em.fresh("acc_in")
        em.line(f"{v} = {masked(em, x, op.member, acc, ident, shape)}")
        cur.append(v)
    axes = sorted(op.axes, reverse=True)
    kind = op.kind
    if kind in (ReduceKind.argmax, ReduceKind.argmin) and len(axes) > 1:
        kind = ReduceKind.custom  # several axes: fold (value, position) pairs with the combine region
    fn = None if kind in NATIVE else em.helper(op.combine, f"combine_{op.kind}")
    for ax in axes:
        reduce_axis(em, cur, kind, op.acc_dtypes, ax + lanes, fn)
    for r, c, acc in zip(op.results, cur, op.acc_dtypes):
        n = em.define(r)
        em.line(f"{n} = {c}" if r.type.dtype == acc else f"{n} = {c}.to({TL_DTYPE[r.type.dtype]})")


NATIVE = (ReduceKind.sum, ReduceKind.max, ReduceKind.min, ReduceKind.any, ReduceKind.all, ReduceKind.argmax,
          ReduceKind.argmin)


@emits(P.Scan)
def emit_scan(em: Emitter, op: P.Scan) -> None:
    shape = _shape_of(op.inputs)
    axis = op.axis + int(shape.lanes)
    fn = em.helper(op.combine, f"combine_{op.kind}")
    xs = []
    for x, acc, ident in zip(op.inputs, op.acc_dtypes, op.identity):
        v = em.fresh("scan_in")
        em.line(f"{v} = {masked(em, x, op.member, acc, ident, shape)}")
        xs.append(v)
    rev = ", reverse=True" if op.reverse else ""
    outs = [em.fresh("scanned") for _ in xs]
    native = {"sum": "tl.cumsum", "prod": "tl.cumprod"}.get(str(op.kind))
    exact_inverse = op.acc_dtypes[0].is_int and str(op.kind) == "sum"
    if native and len(xs) == 1 and (not op.exclusive or exact_inverse):
        em.line(f"{outs[0]} = {native}({xs[0]}, axis={axis}{rev})")
        if op.exclusive:  # integer sums wrap exactly: the exclusive prefix is inclusive minus own
            em.line(f"{outs[0]} = {outs[0]} - {xs[0]}")
    elif op.exclusive:
        ex = em.exclusive_helper(fn, len(xs))
        ids = [f"tl.full({em.shape(shape)}, {literal(i, a)}, {TL_DTYPE[a]})" for i, a in zip(op.identity,
                                                                                          op.acc_dtypes)]
        incl = [em.fresh("inclusive") for _ in xs]
        em.line(f"{', '.join(outs + incl)} = tl.associative_scan(({', '.join(ids + xs)}), {axis}, {ex}{rev})")
    elif len(xs) == 1:
        em.line(f"{outs[0]} = tl.associative_scan({xs[0]}, {axis}, {fn}{rev})")
    else:
        em.line(f"{', '.join(outs)} = tl.associative_scan(({', '.join(xs)}), {axis}, {fn}{rev})")
    for r, o, acc in zip(op.results, outs, op.acc_dtypes):
        n = em.define(r)
        em.line(f"{n} = {o}" if r.type.dtype == acc else f"{n} = {o}.to({TL_DTYPE[r.type.dtype]})")
