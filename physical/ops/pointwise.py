"""Pointwise physical ops; operands are broadcast mechanically (lanes and tile) to the result."""

from __future__ import annotations

from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn, UnaryFn, literal_fits

from ..model import Fragment, Literal, POp, PValue
from ._base import (
    ARITH,
    INVARIANT,
    PURE,
    UNIFORM,
    broadcast_problem,
    ints_agree,
    pop,
    typing_rule,
)


@pop("const", PURE | UNIFORM | INVARIANT)
class Const(POp):
    value: Literal
    dtype: DType


@pop("unary", ARITH)
class Unary(POp):
    fn: UnaryFn
    x: PValue


@pop("binary", ARITH)
class Binary(POp):
    """Integer floordiv/mod truncate toward zero (C); float floordiv/mod are torch's and Python's
    (`kir.float_rules`); maximum/minimum propagate NaN."""

    fn: BinaryFn
    lhs: PValue
    rhs: PValue


@pop("compare", ARITH)
class Compare(POp):
    fn: CmpFn
    lhs: PValue
    rhs: PValue


@pop("select", ARITH)
class Select(POp):
    cond: PValue
    on_true: PValue
    on_false: PValue


@pop("cast", ARITH)
class Cast(POp):
    """Value conversion (float->int truncates toward zero; to pred is != 0; ints wrap); also moves a
    value between index width and its KIR dtype."""

    x: PValue
    dtype: DType


@pop("bitcast", ARITH)
class Bitcast(POp):
    x: PValue
    dtype: DType


# ---------------------------------------------------------------------------------------------- typing


@typing_rule(Const, one_result=True)
def _const(op: Const, r: Fragment) -> list[str]:
    out = []
    if not r.is_scalar:
        out.append(f"a constant is a uniform scalar, got {r}")
    if r.dtype != op.dtype:
        out.append(f"result is {r.dtype} but the constant is {op.dtype}")
    if not literal_fits(op.value, op.dtype):
        out.append(f"value {op.value!r} does not fit {op.dtype}")
    return out


@typing_rule(Unary, one_result=True)
def _unary(op: Unary, r: Fragment) -> list[str]:
    want = DType.pred if op.fn.value in ("isnan", "isinf") else op.x.type.dtype
    out = [] if r.dtype == want else [f"result is {r.dtype}, expected {want}"]
    p = broadcast_problem((op.x,), r)
    return out + ([p] if p else [])


@typing_rule(Binary, one_result=True)
def _binary(op: Binary, r: Fragment) -> list[str]:
    out = []
    if not ints_agree(op.lhs.type, op.rhs.type):
        out.append(f"operands are {op.lhs.type.dtype} and {op.rhs.type.dtype}; no implicit promotion")
    if r.dtype != op.lhs.type.dtype and not ints_agree(r, op.lhs.type):
        out.append(f"result is {r.dtype} but the operands are {op.lhs.type.dtype}")
    p = broadcast_problem((op.lhs, op.rhs), r)
    return out + ([p] if p else [])


@typing_rule(Compare, one_result=True)
def _compare(op: Compare, r: Fragment) -> list[str]:
    out = [] if r.dtype.is_pred else [f"a comparison gives pred, not {r.dtype}"]
    if not ints_agree(op.lhs.type, op.rhs.type):
        out.append(f"compares {op.lhs.type.dtype} with {op.rhs.type.dtype}")
    p = broadcast_problem((op.lhs, op.rhs), r)
    return out + ([p] if p else [])


@typing_rule(Select, one_result=True)
def _select(op: Select, r: Fragment) -> list[str]:
    out = [] if op.cond.type.dtype.is_pred else [f"condition is {op.cond.type.dtype}, not pred"]
    if not ints_agree(op.on_true.type, op.on_false.type):
        out.append(f"branches are {op.on_true.type.dtype} and {op.on_false.type.dtype}")
    if r.dtype != op.on_true.type.dtype and not ints_agree(r, op.on_true.type):
        out.append(f"result is {r.dtype} but the branches are {op.on_true.type.dtype}")
    p = broadcast_problem((op.cond, op.on_true, op.on_false), r)
    return out + ([p] if p else [])


@typing_rule(Cast, Bitcast, one_result=True)
def _cast(op: Cast | Bitcast, r: Fragment) -> list[str]:
    out = [] if r.dtype == op.dtype else [f"result is {r.dtype} but the op converts to {op.dtype}"]
    if isinstance(op, Bitcast) and op.x.type.dtype.bits != op.dtype.bits:
        out.append(f"bitcast from {op.x.type.dtype} to {op.dtype} changes the width")
    if (r.lanes, r.tile) != (op.x.type.lanes, op.x.type.tile):
        out.append(f"result {r} is not shaped like its operand {op.x.type}")
    return out
