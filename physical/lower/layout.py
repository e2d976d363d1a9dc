"""Layout ops on fragments held in registers: broadcast, permute, expand/squeeze.

Slices, concatenations and general reshapes of a value already held in a tile would need a
register gather; whole-tensor writes compose them into coordinates instead (physical/worksets.py),
and inside an instance they are refused with a located diagnostic.
"""

from __future__ import annotations

from kir import layout as KL
from kir.dims import DConst

from .. import ops as P
from . import REFUSALS, rule
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
    if src != dst:
        raise lw.fail(f"cannot reshape {op.x.type} to {op.result.type} inside a program instance: the tile "
                      f"would need a register gather; reshape the data where it is loaded or stored instead")
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
    raise lw.fail("cannot slice a value held in registers inside a program instance; slice the tensor "
                  "where it is loaded (x[a:b]) instead")


@rule(KL.Concat)
def lower_concat(lw: Lowerer, op: KL.Concat) -> None:
    raise lw.fail("cannot concatenate values held in registers inside a program instance; store the parts "
                  "to their slices of the output instead")


REFUSALS[KL.SliceOp] = "slice of a register value"
REFUSALS[KL.Concat] = "concat of register values"
REFUSALS[KL.Reshape] = "reshape that regroups axes"
