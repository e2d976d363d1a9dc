"""Sorts along one tile axis; top-k results get a tile axis of extent k."""

from __future__ import annotations

from kir import sort as KSo
from kir.dims import DConst, PCmp
from kir.dtypes import DType

from .. import ops as P
from ..model import Fragment
from . import rule
from .context import Lowerer

# The sorted axis past which construction notes the cost: the network holds three components per element
# (key, position, value bits) in one program, and 16384 of them at 32 bits are 192 KiB, most of a
# multiprocessor's 256 KiB register file; the unrolled network also grows as log2(n)**2.
SORT_REGISTER_ROW = 16384


@rule(KSo.Sort)
def lower_sort(lw: Lowerer, op: KSo.Sort) -> None:
    x = lw.get(op.x)
    tile = x.type.tile
    extent = tile[op.axis].extent
    if not lw.prove(PCmp("<=", extent, DConst(SORT_REGISTER_ROW))):
        lw.state.note(f"the sort along an axis of {extent} elements holds the whole axis in one program's "
                      f"registers (a bitonic network); beyond {SORT_REGISTER_ROW} elements it spills to local memory "
                      f"and compiles slowly: state requires=[{extent} <= {SORT_REGISTER_ROW}] where that holds",
                      op.loc)
    out_tile = tile
    if op.k is not None:
        out_tile = tile[:op.axis] + lw.tile((DConst(op.k),)) + tile[op.axis + 1:]
    outs = (Fragment(x.type.dtype, x.type.lanes, out_tile), Fragment(DType.i64, x.type.lanes, out_tile))
    r = lw.emit(P.Sort, outs, names=tuple(v.name for v in op.results), x=x, axis=op.axis, descending=op.descending,
                k=op.k, member=lw.tile_member(tile))
    for kv, pv in zip(op.results, r.results):
        lw.bind(kv, pv)
