"""Sorts along one tile axis; top-k results get a tile axis of extent k."""

from __future__ import annotations

from kir import sort as KSo
from kir.dims import DConst
from kir.dtypes import DType

from .. import ops as P
from ..model import Fragment
from . import rule
from .context import Lowerer


@rule(KSo.Sort)
def lower_sort(lw: Lowerer, op: KSo.Sort) -> None:
    x = lw.get(op.x)
    tile = x.type.tile
    out_tile = tile
    if op.k is not None:
        out_tile = tile[:op.axis] + lw.tile((DConst(op.k),)) + tile[op.axis + 1:]
    outs = (Fragment(x.type.dtype, x.type.lanes, out_tile), Fragment(DType.i64, x.type.lanes, out_tile))
    r = lw.emit(P.Sort, outs, names=tuple(v.name for v in op.results), x=x, axis=op.axis, descending=op.descending,
                k=op.k, member=lw.tile_member(tile))
    for kv, pv in zip(op.results, r.results):
        lw.bind(kv, pv)
