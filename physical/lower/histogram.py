"""Histogram of a fragment's values into the bins tile (compare and count inside the instance)."""

from __future__ import annotations

from kir import histogram as KH
from kir.dims import DConst
from kir.dtypes import DType

from .. import ops as P
from ..model import Fragment
from . import rule
from .context import Lowerer


@rule(KH.Histogram)
def lower_histogram(lw: Lowerer, op: KH.Histogram) -> None:
    v = lw.get(op.values)
    if not v.type.tile:  # one value: the histogram of a one-element tile
        v = lw.add(P.ExpandDims, v.type.with_tile(lw.tile((DConst(1),))), x=v, axis=0)
    out = Fragment(DType.i32, v.type.lanes, lw.tile((op.bins,)))
    lw.bind(op.result, lw.add(P.Histogram, out, name=op.result.name, values=v, member=lw.tile_member(v.type.tile)))
