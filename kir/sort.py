"""Sorting along one axis, and its first k elements (top-k): values with their i64 positions.

The order is a total one, the same in every backend: numbers by value with NaN after every number (of
either sign; `-0.0` and `0.0` are equal), equal values in index order (a stable sort). `descending`
reverses the order of values only: NaN comes first and equal values still keep index order, as
`torch.sort(..., stable=True)` and `torch.topk` do. With `k`, the result keeps the first `k` elements of
that order along the axis (`k` at most the axis' extent).
"""

from __future__ import annotations

from .core import STRUCTURED, Op, TensorType, Type, TypeContext, Value, op
from .dims import DConst, PCmp
from .dtypes import DType, DTypeVar, ElemType

SORT_INDEX_DTYPE = DType.i64


def sortable(dtype: ElemType) -> bool:
    """Dtypes a sort orders: every integer and float dtype (a pred is converted to an integer first)."""
    if isinstance(dtype, DTypeVar):
        return all(sortable(c) for c in dtype.choices)
    return not dtype.is_pred


@op("sort", STRUCTURED)
class Sort(Op):
    x: Value
    axis: int
    descending: bool = False
    k: int | None = None

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.x, "sort input")
        if t.rank == 0:
            raise ctx.fail("sort needs a value of rank 1 or more, got a scalar")
        if not 0 <= self.axis < t.rank:
            raise ctx.fail(f"sort axis {self.axis} out of range for rank {t.rank}")
        if not sortable(t.dtype):
            raise ctx.fail(f"sort of {t.dtype} values is not supported: it orders integers and floats (convert "
                           f"pred values to an integer first)")
        shape = t.shape
        if self.k is not None:
            if self.k < 1:
                raise ctx.fail(f"sort k = {self.k} must be at least 1")
            ctx.prove(PCmp("<=", DConst(self.k), shape[self.axis]), f"sort k = {self.k} within axis {self.axis}")
            shape = shape[:self.axis] + (DConst(self.k),) + shape[self.axis + 1:]
        return TensorType(t.dtype, shape), TensorType(SORT_INDEX_DTYPE, shape)
