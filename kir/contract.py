"""Contractions: dot_general with batch and contracting dims, accumulator dtype and precision."""

from __future__ import annotations

from .core import STRUCTURED, Op, TensorType, Type, TypeContext, Value, op
from .dtypes import DType, DTypeVar, ElemType, SpelledEnum


class Precision(SpelledEnum):
    ieee = "ieee"
    tf32 = "tf32"


def default_dot_acc(dtype: ElemType) -> ElemType:
    if isinstance(dtype, DTypeVar):
        return DType.f32 if all(c.is_float and c.bits <= 32 for c in dtype.choices) else dtype
    if dtype in (DType.f16, DType.bf16, DType.f32) or isinstance(dtype, DType) and dtype.is_fp8:
        return DType.f32
    if dtype in (DType.i8, DType.u8):
        return DType.i32
    return dtype


def mixed_fp8(a: ElemType, b: ElemType) -> bool:
    """Whether a dot multiplies the two fp8 formats (f8e4m3 x f8e5m2, either way round): their products are
    exact in f32, where they accumulate (fp8 tensor cores on sm_90 take the two formats in one instruction)."""
    return isinstance(a, DType) and isinstance(b, DType) and a.is_fp8 and b.is_fp8 and a != b


@op("dot", STRUCTURED)
class Dot(Op):
    """Result axes: batch, then lhs free axes, then rhs free axes (StableHLO dot_general order)."""

    lhs: Value
    rhs: Value
    lhs_batch: tuple[int, ...]
    rhs_batch: tuple[int, ...]
    lhs_contract: tuple[int, ...]
    rhs_contract: tuple[int, ...]
    acc_dtype: ElemType
    precision: Precision = Precision.ieee

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        a, b = ctx.tensor(self.lhs, "dot lhs"), ctx.tensor(self.rhs, "dot rhs")
        if a.dtype != b.dtype and not mixed_fp8(a.dtype, b.dtype):
            raise ctx.fail(f"dot operand dtypes differ ({a.dtype} vs {b.dtype}); insert a cast")
        if mixed_fp8(a.dtype, b.dtype) and self.acc_dtype != DType.f32:
            raise ctx.fail(f"a dot of {a.dtype} and {b.dtype} accumulates in f32, not {self.acc_dtype}")
        if a.dtype == DType.pred:
            raise ctx.fail("dot is not defined on pred")
        if len(self.lhs_batch) != len(self.rhs_batch) or len(self.lhs_contract) != len(self.rhs_contract):
            raise ctx.fail("dot needs as many lhs as rhs batch dims and contracting dims")
        for dims, t, side in ((self.lhs_batch + self.lhs_contract, a, "lhs"),
                              (self.rhs_batch + self.rhs_contract, b, "rhs")):
            if len(set(dims)) != len(dims) or any(not 0 <= d < t.rank for d in dims):
                raise ctx.fail(f"dot {side} dims {list(dims)} are not distinct axes of rank {t.rank}")
        for x, y in zip(self.lhs_batch, self.rhs_batch):
            ctx.same_dim(a.shape[x], b.shape[y], f"dot batch dims lhs {x} / rhs {y}")
        for x, y in zip(self.lhs_contract, self.rhs_contract):
            ctx.same_dim(a.shape[x], b.shape[y], f"contraction dims lhs {x} / rhs {y}")
        if self.precision is Precision.tf32 and a.dtype != DType.f32:
            raise ctx.fail("precision tf32 applies to f32 operands only")
        shape = tuple(a.shape[d] for d in self.lhs_batch)
        shape += tuple(d for i, d in enumerate(a.shape) if i not in self.lhs_batch + self.lhs_contract)
        shape += tuple(d for i, d in enumerate(b.shape) if i not in self.rhs_batch + self.rhs_contract)
        return (TensorType(self.acc_dtype, shape),)
