"""Pointwise physical ops; operands are broadcast mechanically (lanes and tile) to the result."""

from __future__ import annotations

from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn, UnaryFn

from ..model import Literal, POp, PValue
from ._base import ARITH, INVARIANT, PURE, UNIFORM, pop


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
