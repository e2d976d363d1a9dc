"""Histogram of a fragment's values into the bins tile (compare and count inside the instance)."""

from __future__ import annotations

from kir import histogram as KH
from kir.dtypes import DType

from .. import ops as P
from ..model import Fragment
from . import REFUSALS, rule
from .context import Lowerer


@rule(KH.Histogram)
def lower_histogram(lw: Lowerer, op: KH.Histogram) -> None:
    v = lw.get(op.values)
    if len(v.type.tile) > 1:
        raise lw.fail(f"histogram of a rank-{len(v.type.tile)} value inside a program instance is not supported; "
                      f"pass a rank-1 value")
    if not v.type.tile:
        raise lw.fail("histogram needs a rank-1 value inside a program instance, got a scalar")
    out = Fragment(DType.i32, v.type.lanes, lw.tile((op.bins,)))
    lw.bind(op.result, lw.add(P.Histogram, out, name=op.result.name, values=v, member=lw.tile_member(v.type.tile)))


REFUSALS[KH.Histogram] = "histogram of a non-rank-1 value"
