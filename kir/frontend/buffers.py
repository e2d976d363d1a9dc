"""Creation: `intent.arange` -> iota; `intent.zeros/ones/full/empty(shape, dtype)` and the `*_like` forms ->
a local buffer (`alloc`) when the name they are assigned to is written into, else a broadcast constant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..buffers import Alloc, InitMode
from ..dims import DConst, Dim, dim_bin
from ..dtypes import DType, ElemType
from ..pointwise import BinaryFn, Iota
from .calls import CallArgs, spelling
from .coerce import WEAK_INT, _weak_kind, broadcast_to, cast, default_dtype, is_int_like, is_pred, to_tval, weak_to
from .pointwise import binary, is_float_like, static_dim
from .values import DimExpr, FValue, Num, RefV, TupleV, TVal, a_type, describe

if TYPE_CHECKING:
    from .lower import Lowerer


def static_shape(lw: Lowerer, call: CallArgs, pname: str) -> tuple[Dim, ...]:
    fv = call.value(pname)
    parts = list(fv.items) if isinstance(fv, TupleV) else [fv]
    out = []
    for p in parts:
        d = static_dim(p)
        if d is None or isinstance(d, DConst) and d.value < 0:
            raise lw.error(call.arg_node(pname), f"intent.{call.name}(): a shape is a tuple of dims or non-negative "
                                                 f"integer constants, got {describe(p)}")
        out.append(d)
    return tuple(out)


def _is_buffer(lw: Lowerer, call: CallArgs) -> str | None:
    target = lw.alloc_target
    if target is not None and target[1] == id(call.node):
        return target[0]
    return None


def _create(lw: Lowerer, call: CallArgs, shape: tuple[Dim, ...], dtype: ElemType | None, fill: FValue | None
            ) -> FValue:
    name = _is_buffer(lw, call)
    if name is not None:
        if fill is not None and not isinstance(fill, Num):
            raise lw.error(call.node, f"intent.{call.name}(): a buffer's fill value must be a number constant, got "
                                      f"{describe(fill)}; fill it with a store instead")
        dt = dtype or (default_dtype(_weak_kind(fill)) if isinstance(fill, Num) and call.name.startswith("full")
                       else DType.f32)
        init = InitMode.empty if fill is None else InitMode.full
        value = 0 if fill is None else fill.value  # type: ignore[union-attr]
        if init is InitMode.full:
            value = bool(value) if is_pred(dt) else float(value) if is_float_like(dt) else value
            if isinstance(value, float) and is_int_like(dt):
                raise lw.error(call.node, f"intent.{call.name}(): the fill {value!r} does not fit {dt}")
        v = lw.add(Alloc, call.node, name=name, dtype=dt, shape=shape, init=init, fill=value)
        return RefV(v, name)
    if fill is None:
        raise lw.error(call.node, f"intent.{call.name}(...) is uninitialised memory and is only useful as a buffer "
                                  f"you write before reading (`buf = intent.{call.name}(...)`, then `buf[i] = ...`); "
                                  f"for a value use intent.zeros or intent.full")
    if dtype is not None:
        tv = weak_to(lw, fill, dtype, call.node, f"intent.{call.name}") if isinstance(fill, Num | DimExpr) or \
            isinstance(fill, TVal) and fill.weak else to_tval(lw, fill, call.node, f"intent.{call.name}")
        if tv.dtype != dtype:
            tv = cast(lw, tv, dtype, call.node)
        tv = TVal(tv.value, weak=False)
    else:
        tv = to_tval(lw, fill, call.node, f"intent.{call.name}")
    if tv.shape:
        raise lw.error(call.node, f"intent.{call.name}(): the fill value must be a scalar, got {a_type(tv.type)}")
    return broadcast_to(lw, tv, shape, call.node, f"intent.{call.name}")


@spelling("zeros", "ones", "empty")
def filled(lw: Lowerer, call: CallArgs) -> FValue:
    dtype = call.optional_dtype("dtype")
    one = 1.0 if dtype is None else 1  # without a dtype the fill is a weak float, as NumPy's default
    fill = {"zeros": Num(one * 0), "ones": Num(one), "empty": None}[call.name]
    return _create(lw, call, static_shape(lw, call, "shape"), dtype, fill)


@spelling("full")
def full(lw: Lowerer, call: CallArgs) -> FValue:
    return _create(lw, call, static_shape(lw, call, "shape"), call.optional_dtype("dtype"), call.value("value"))


@spelling("zeros_like", "ones_like", "full_like", "empty_like")
def like(lw: Lowerer, call: CallArgs) -> FValue:
    x = call.value("x")
    if not isinstance(x, TVal | RefV):
        raise lw.error(call.arg_node("x"), f"intent.{call.name}() needs a tensor, got {describe(x)}")
    dtype = call.optional_dtype("dtype") or x.type.dtype
    fill = {"zeros_like": Num(0), "ones_like": Num(1), "empty_like": None}.get(call.name) \
        if call.name != "full_like" else call.value("value")
    return _create(lw, call, x.type.shape, dtype, fill)


@spelling("arange")
def arange(lw: Lowerer, call: CallArgs) -> FValue:
    first = static_dim(call.value("start"))
    if first is None:
        raise lw.error(call.arg_node("start"), f"intent.arange() extents are dims or integer constants, got "
                                               f"{describe(call.value('start'))}")
    if call.is_none("stop"):
        start, extent = DConst(0), first
    else:
        stop = static_dim(call.value("stop"))
        if stop is None:
            raise lw.error(call.arg_node("stop"), f"intent.arange() extents are dims or integer constants, got "
                                                  f"{describe(call.value('stop'))}")
        start, extent = first, dim_bin("-", stop, first)
    dtype = call.optional_dtype("dtype")
    iota_dt = dtype if dtype is not None and is_int_like(dtype) and isinstance(dtype, DType) else WEAK_INT
    tv: FValue = TVal(lw.add(Iota, call.node, extent=extent, dtype=iota_dt), weak=dtype is None)
    if start != DConst(0):
        tv = binary(lw, "+", BinaryFn.add, tv, DimExpr(start), call.node, call.node, call.node)
    assert isinstance(tv, TVal)
    if dtype is not None and tv.dtype != dtype:
        tv = cast(lw, tv, dtype, call.node)
    return TVal(tv.value, weak=dtype is None)
