"""Contractions: multiply and sum over paired tile axes in the accumulator dtype."""

from __future__ import annotations

from kir.contract import Precision
from kir.dtypes import DType

from ..model import POp, PValue
from ._base import PURE, pop


@pop("contract", PURE)
class Contract(POp):
    """sum over tile axes `axes` of acc(lhs) * acc(rhs); `lhs` and `rhs` share one fragment shape.

    Members outside `member` contribute nothing. f32 operands multiply in IEEE f32 unless
    `precision` is tf32; f16/bf16 operands are widened to the accumulator first.
    """

    lhs: PValue
    rhs: PValue
    axes: tuple[int, ...]
    acc_dtype: DType
    precision: Precision
    member: PValue | None


@pop("matmul", PURE)
class MatMul(POp):
    """`acc + lhs @ rhs` over the last two tile axes: lhs [.., M, K], rhs [.., K, N], acc and the result
    [.., M, N] in the accumulator dtype (no lanes). Every position of K is summed: operands hold zero
    where the contraction has no member. f32 operands multiply in IEEE f32 unless `precision` is tf32;
    f16/bf16 (i8) operands accumulate in f32 (i32).
    """

    lhs: PValue
    rhs: PValue
    acc: PValue
    precision: Precision
