"""Layout ops on fragments held in registers: broadcast, permute, expand/squeeze, slice, concat, reshape.

Whole-tensor writes compose slices, concatenations and reshapes into coordinates instead
(physical/worksets.py); inside an instance a value already held in a tile is rearranged in registers
(`tile_slice`, `tile_concat`, `tile_reshape`: register gathers at computed positions).
"""

from __future__ import annotations

from kir import layout as KL
from kir.dims import DConst

from .. import ops as P
from . import rule
from .context import Lowerer


@rule(KL.Broadcast)
def lower_broadcast(lw: Lowerer, op: KL.Broadcast) -> None:
    x = lw.get(op.x)
    t = lw.natural(op.result.type, x.type.lanes)
    if t.tile == x.type.tile:
        lw.bind(op.result, x)
        return
    lw.bind(op.result, lw.add(P.Broadcast, t.with_dtype(x.type.dtype, x.type.index), name=op.result.name, x=x,
                              dims=op.dims))


@rule(KL.Transpose)
def lower_transpose(lw: Lowerer, op: KL.Transpose) -> None:
    x = lw.get(op.x)
    if list(op.perm) == sorted(op.perm):
        lw.bind(op.result, x)
        return
    t = lw.natural(op.result.type, x.type.lanes)
    lw.bind(op.result, lw.add(P.Permute, t, name=op.result.name, x=x, perm=op.perm))


@rule(KL.ExpandDims)
def lower_expand(lw: Lowerer, op: KL.ExpandDims) -> None:
    x = lw.get(op.x)
    t = lw.natural(op.result.type, x.type.lanes)
    lw.bind(op.result, lw.add(P.ExpandDims, t.with_dtype(x.type.dtype, x.type.index), x=x, axis=op.axis))


@rule(KL.Squeeze)
def lower_squeeze(lw: Lowerer, op: KL.Squeeze) -> None:
    x = lw.get(op.x)
    t = lw.natural(op.result.type, x.type.lanes)
    lw.bind(op.result, lw.add(P.Squeeze, t.with_dtype(x.type.dtype, x.type.index), x=x, axis=op.axis))


@rule(KL.Reshape)
def lower_reshape(lw: Lowerer, op: KL.Reshape) -> None:
    x = lw.get(op.x)
    src = [d for d in op.x.type.shape if d != DConst(1)]
    dst = [d for d in op.result.type.shape if d != DConst(1)]
    if src != dst:  # axes regroup: a register gather in row-major order
        t = lw.natural(op.result.type, x.type.lanes).with_dtype(x.type.dtype, x.type.index)
        if not x.type.tile:
            x = lw.add(P.ExpandDims, x.type.with_tile(lw.tile((DConst(1),))), x=x, axis=0)
        if not t.tile:
            one = lw.add(P.TileReshape, t.with_tile(lw.tile((DConst(1),))), x=x)
            lw.bind(op.result, lw.add(P.Squeeze, t, name=op.result.name, x=one, axis=0))
            return
        lw.bind(op.result, lw.add(P.TileReshape, t, name=op.result.name, x=x))
        return
    v = x
    for ax in reversed([a for a, d in enumerate(op.x.type.shape) if d == DConst(1)]):
        shape = v.type.tile[:ax] + v.type.tile[ax + 1:]
        v = lw.add(P.Squeeze, v.type.with_tile(shape), x=v, axis=ax)
    for ax, d in enumerate(op.result.type.shape):
        if d == DConst(1):
            tile = v.type.tile[:ax] + lw.tile((DConst(1),)) + v.type.tile[ax:]
            v = lw.add(P.ExpandDims, v.type.with_tile(tile), x=v, axis=ax)
    lw.bind(op.result, v)


@rule(KL.SliceOp)
def lower_slice(lw: Lowerer, op: KL.SliceOp) -> None:
    x = lw.get(op.x)
    shape = op.x.type.shape
    if all(a == DConst(0) and b == d and s == 1 for a, b, s, d in zip(op.starts, op.stops, op.steps, shape)):
        lw.bind(op.result, x)
        return
    starts = tuple(lw.shape_value(a) for a in op.starts)
    t = lw.natural(op.result.type, x.type.lanes).with_dtype(x.type.dtype, x.type.index)
    lw.bind(op.result, lw.add(P.TileSlice, t, name=op.result.name, x=x, starts=starts, steps=op.steps))


@rule(KL.Concat)
def lower_concat(lw: Lowerer, op: KL.Concat) -> None:
    parts = tuple(lw.get(v) for v in op.inputs)
    if len(parts) == 1:
        lw.bind(op.result, parts[0])
        return
    lanes = any(p.type.lanes for p in parts)
    if len({p.type.index for p in parts}) > 1:  # index arithmetic and KIR integers: one dtype for all
        parts = tuple(lw.cast(p, p.type.dtype) for p in parts)
    parts = tuple(lw.broadcast_to(p, p.type.with_lanes(lanes)) for p in parts)
    t = lw.natural(op.result.type, lanes).with_dtype(parts[0].type.dtype, parts[0].type.index)
    lw.bind(op.result, lw.add(P.TileConcat, t, name=op.result.name, parts=parts, axis=op.axis))
