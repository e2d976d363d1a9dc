"""Constants, index values and pointwise ops: one physical op each, fragments from the operands."""

from __future__ import annotations

from kir import pointwise as KP
from kir.affine import cast_form, neg_form
from kir.dims import DConst
from kir.dtypes import DType

from .. import ops as P
from ..model import Fragment
from . import decompose, rule
from .context import Lowerer


@rule(KP.Constant)
def lower_constant(lw: Lowerer, op: KP.Constant) -> None:
    lw.bind(op.result, lw.const(op.value, _dtype(lw, op.dtype)))


@rule(KP.Iota)
def lower_iota(lw: Lowerer, op: KP.Iota) -> None:
    tile = lw.tile((op.extent,))
    pos = lw.tile_index(tile, 0)
    lw.bind(op.result, pos if op.dtype == DType.i64 else lw.cast(pos, _dtype(lw, op.dtype)))


@rule(KP.DimValue)
def lower_dim(lw: Lowerer, op: KP.DimValue) -> None:
    v = lw.shape_value(op.dim, name=op.result.name or str(op.dim))
    lw.bind(op.result, v if op.dtype == DType.i64 else lw.cast(v, _dtype(lw, op.dtype)))


@rule(KP.Unary)
def lower_unary(lw: Lowerer, op: KP.Unary) -> None:
    x = lw.get(op.x)
    v = decompose.unary(lw, op.fn, x, name=op.result.name)
    if op.fn is KP.UnaryFn.neg:
        lw.set_form(v, neg_form(lw.affine_of(x)))
    lw.bind(op.result, v)


@rule(KP.Binary)
def lower_binary(lw: Lowerer, op: KP.Binary) -> None:
    lw.bind(op.result, decompose.binary(lw, op.fn, lw.get(op.lhs), lw.get(op.rhs), name=op.result.name))


@rule(KP.Compare)
def lower_compare(lw: Lowerer, op: KP.Compare) -> None:
    v = lw.compare(op.fn, lw.get(op.lhs), lw.get(op.rhs))
    lw.bind(op.result, v)


@rule(KP.Select)
def lower_select(lw: Lowerer, op: KP.Select) -> None:
    c, a, b = lw.get(op.cond), lw.get(op.on_true), lw.get(op.on_false)
    t = lw.join(c, a, b)
    t = Fragment(a.type.dtype, t.lanes, t.tile, a.type.index and b.type.index)
    lw.bind(op.result, lw.add(P.Select, t, name=op.result.name, cond=c, on_true=a, on_false=b))


@rule(KP.Cast)
def lower_cast(lw: Lowerer, op: KP.Cast) -> None:
    x = lw.get(op.x)
    dt = _dtype(lw, op.dtype)
    v = lw.add(P.Cast, x.type.with_dtype(dt), name=op.result.name, x=x, dtype=dt)
    lw.set_form(v, cast_form(lw.affine_of(x), dt.is_int and x.type.dtype.is_int))
    lw.bind(op.result, v)


@rule(KP.Bitcast)
def lower_bitcast(lw: Lowerer, op: KP.Bitcast) -> None:
    x = lw.get(op.x)
    dt = _dtype(lw, op.dtype)
    lw.bind(op.result, lw.add(P.Bitcast, x.type.with_dtype(dt), name=op.result.name, x=x, dtype=dt))


def _dtype(lw: Lowerer, dt: object) -> DType:
    if not isinstance(dt, DType):
        raise lw.fail(f"dtype variable {dt} reached physical construction; specialise the kernel first")
    return dt


__all__ = ["DConst"]
