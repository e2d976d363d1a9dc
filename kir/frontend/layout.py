"""Layout: `intent.broadcast_to/reshape/permute/transpose/concat/expand_dims/squeeze` -> KIR layout ops."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dims import DConst, Dim, dim_bin
from ..layout import Concat, ExpandDims, Reshape, Squeeze, Transpose, product
from .buffers import static_shape
from .calls import CallArgs, spelling
from .coerce import broadcast_to, to_tval, unify
from .pointwise import static_dim
from .values import FValue, NoneLit, Num, TupleV, TVal, describe

if TYPE_CHECKING:
    from .lower import Lowerer


def _x(lw: Lowerer, call: CallArgs) -> TVal:
    return to_tval(lw, call.value("x"), call.arg_node("x"), f"intent.{call.name}")


def _ints(lw: Lowerer, call: CallArgs, pname: str) -> list[int]:
    fv = call.value(pname)
    parts = list(fv.items) if isinstance(fv, TupleV) else [fv]
    out = []
    for p in parts:
        if not (isinstance(p, Num) and isinstance(p.value, int) and not isinstance(p.value, bool)):
            raise lw.error(call.arg_node(pname), f"intent.{call.name}(): `{pname}` is a tuple of integer constants, "
                                                 f"got {describe(p)}")
        out.append(p.value)
    return out


def _axis(lw: Lowerer, call: CallArgs, ax: int, rank: int) -> int:
    if not -rank <= ax < rank:
        raise lw.error(call.node, f"intent.{call.name}(): axis {ax} is out of range for rank {rank}")
    return ax % rank


@spelling("broadcast_to")
def broadcast(lw: Lowerer, call: CallArgs) -> FValue:
    return broadcast_to(lw, _x(lw, call), static_shape(lw, call, "shape"), call.node, "intent.broadcast_to")


@spelling("reshape")
def reshape(lw: Lowerer, call: CallArgs) -> FValue:
    x = _x(lw, call)
    fv = call.value("shape")
    parts = list(fv.items) if isinstance(fv, TupleV) else [fv]
    dims: list[Dim | None] = []
    for p in parts:
        if isinstance(p, Num) and p.value == -1 and not isinstance(p.value, bool):
            dims.append(None)
            continue
        d = static_dim(p)
        if d is None or isinstance(d, DConst) and d.value < 0:
            raise lw.error(call.arg_node("shape"), f"intent.reshape(): a shape is a tuple of dims or integer "
                                                   f"constants (one may be -1), got {describe(p)}")
        dims.append(d)
    if dims.count(None) > 1:
        raise lw.error(call.arg_node("shape"), "intent.reshape(): only one axis may be -1")
    if None in dims:
        known = product(tuple(d for d in dims if d is not None))
        dims[dims.index(None)] = dim_bin("//", product(x.shape), known)
    return TVal(lw.add(Reshape, call.node, x=x.value, shape=tuple(d for d in dims if d is not None)), weak=x.weak)


def _transpose(lw: Lowerer, call: CallArgs, x: TVal, perm: list[int]) -> TVal:
    norm = [_axis(lw, call, p, x.rank) for p in perm]
    if sorted(norm) != list(range(x.rank)):
        raise lw.error(call.node, f"intent.{call.name}(): {perm} is not a permutation of the {x.rank} axes")
    return TVal(lw.add(Transpose, call.node, x=x.value, perm=tuple(norm)), weak=x.weak)


@spelling("permute")
def permute(lw: Lowerer, call: CallArgs) -> FValue:
    x = _x(lw, call)
    return _transpose(lw, call, x, _ints(lw, call, "dims"))


@spelling("transpose")
def transpose(lw: Lowerer, call: CallArgs) -> FValue:
    x = _x(lw, call)
    perm = list(range(x.rank))[::-1] if isinstance(call.value("axes"), NoneLit) else _ints(lw, call, "axes")
    return _transpose(lw, call, x, perm)


@spelling("concat")
def concat(lw: Lowerer, call: CallArgs) -> FValue:
    fv = call.value("values")
    if not isinstance(fv, TupleV) or not fv.items:
        raise lw.error(call.arg_node("values"), f"intent.concat() takes a tuple of tensors, got {describe(fv)}")
    nodes = [call.arg_node("values")] * len(fv.items)
    vals, weak = unify(lw, list(fv.items), nodes, call.node, "intent.concat")
    rank = vals[0].rank
    if rank == 0 or any(v.rank != rank for v in vals):
        raise lw.error(call.node, "intent.concat() joins tensors of one rank >= 1: "
                                  + ", ".join(str(v.type) for v in vals))
    axis = _axis(lw, call, call.static_int("axis"), rank)
    return TVal(lw.add(Concat, call.node, inputs=tuple(v.value for v in vals), axis=axis), weak=weak)


@spelling("expand_dims")
def expand_dims(lw: Lowerer, call: CallArgs) -> FValue:
    x = _x(lw, call)
    ax = call.static_int("axis")
    if not -(x.rank + 1) <= ax <= x.rank:
        raise lw.error(call.arg_node("axis"), f"intent.expand_dims(): axis {ax} is out of range for rank {x.rank}")
    ax %= x.rank + 1
    return TVal(lw.add(ExpandDims, call.node, x=x.value, axis=ax), weak=x.weak)


@spelling("squeeze")
def squeeze(lw: Lowerer, call: CallArgs) -> FValue:
    x = _x(lw, call)
    if isinstance(call.value("axis"), NoneLit):
        axes = [k for k, d in enumerate(x.shape) if d == DConst(1)]
    else:
        axes = [_axis(lw, call, a, x.rank) for a in _ints(lw, call, "axis")]
    for ax in sorted(set(axes), reverse=True):
        x = TVal(lw.add(Squeeze, call.node, x=x.value, axis=ax), weak=x.weak)
    return x
