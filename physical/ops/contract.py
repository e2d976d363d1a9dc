"""Contractions: multiply and sum over paired tile axes in the accumulator dtype."""

from __future__ import annotations

from kir.contract import Precision
from kir.dtypes import DType

from ..model import POp, PValue
from ._base import PURE, pop, results_problem, typed_elsewhere, typing_rule


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


# ---------------------------------------------------------------------------------------------- typing


typing_rule(Contract)(typed_elsewhere)


@typing_rule(MatMul)
def _matmul(op: MatMul) -> list[str]:
    out = results_problem(op, 1)
    a, b, c = op.lhs.type, op.rhs.type, op.acc.type
    if any(t.lanes for t in (a, b, c)) or min(len(a.tile), len(b.tile), len(c.tile)) < 2:
        return out + [f"matmul takes lane-free tiles of rank >= 2, got {a}, {b}, {c}"]
    if a.dtype != b.dtype and not (a.dtype.is_fp8 and b.dtype.is_fp8):
        out.append(f"matmul operands are {a.dtype} and {b.dtype}")
    want_acc = DType.i32 if a.dtype.is_int else DType.f32
    if c.dtype != want_acc and not (a.dtype == DType.f64 and c.dtype == DType.f64):
        out.append(f"matmul of {a.dtype} accumulates in {want_acc}, not {c.dtype}")
    if a.tile[-1].extent != b.tile[-2].extent or a.tile[-1].block != b.tile[-2].block:
        out.append(f"matmul contracted axes differ: {a.tile[-1]} and {b.tile[-2]}")
    if a.tile[:-1] != c.tile[:-1] or b.tile[:-2] + b.tile[-1:] != c.tile[:-2] + c.tile[-1:]:
        out.append(f"matmul accumulator {c} is not shaped [.., M, N] for {a} @ {b}")
    if op.results and op.results[0].type != c:
        out.append(f"result {op.results[0].type} is not the accumulator's type {c}")
    return out
