"""Histogram: counts of integer values into `bins` bins; values outside [0, bins) are ignored."""

from __future__ import annotations

from .core import STRUCTURED, Op, TensorType, Type, TypeContext, Value, op
from .dims import Dim
from .dtypes import DType


@op("histogram", STRUCTURED)
class Histogram(Op):
    values: Value
    bins: Dim

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.values, "histogram values")
        if not (isinstance(t.dtype, DType) and t.dtype.is_int):
            raise ctx.fail(f"histogram needs integer values, got {t.dtype}")
        return (TensorType(DType.i32, (self.bins,)),)
