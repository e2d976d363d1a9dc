"""Constants, index values and pointwise ops (unary, binary, compare, select, cast, bitcast)."""

from __future__ import annotations

import math

from .core import NO_OP_TRAITS, Op, TensorType, Type, TypeContext, Value, op, scalar
from .dims import Dim
from .dtypes import DType, DTypeVar, ElemType, SpelledEnum

Literal = int | float | bool


def literal_fits(value: Literal, dtype: ElemType) -> bool:
    if isinstance(dtype, DTypeVar):
        return not isinstance(value, bool)
    if dtype.is_pred:
        return isinstance(value, bool) or value in (0, 1)
    if dtype.is_int:
        if isinstance(value, float):
            return False
        lo, hi = dtype.int_range
        return lo <= int(value) <= hi
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value) and False)


@op("constant", NO_OP_TRAITS)
class Constant(Op):
    value: Literal
    dtype: ElemType

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        if not literal_fits(self.value, self.dtype):
            raise ctx.fail(f"constant {self.value!r} does not fit {self.dtype}")
        return (scalar(self.dtype),)


@op("iota", NO_OP_TRAITS)
class Iota(Op):
    """`arange(extent)`: 0, 1, ..., extent-1."""

    extent: Dim
    dtype: ElemType = DType.i64

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        if not (isinstance(self.dtype, DType) and self.dtype.is_int):
            raise ctx.fail(f"iota needs an integer dtype, got {self.dtype}")
        return (TensorType(self.dtype, (self.extent,)),)


@op("dim", NO_OP_TRAITS)
class DimValue(Op):
    """The runtime value of a shape expression (`N` used as a number)."""

    dim: Dim
    dtype: ElemType = DType.i64

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        return (scalar(self.dtype),)


class UnaryFn(SpelledEnum):
    neg = "neg"
    abs = "abs"
    exp = "exp"
    exp2 = "exp2"
    log = "log"
    log2 = "log2"
    log1p = "log1p"
    sqrt = "sqrt"
    rsqrt = "rsqrt"
    sin = "sin"
    cos = "cos"
    tanh = "tanh"
    sigmoid = "sigmoid"
    erf = "erf"
    floor = "floor"
    ceil = "ceil"
    round = "round"  # half to even, as torch.round
    not_ = "not"     # logical on pred, bitwise on integers
    isnan = "isnan"
    isinf = "isinf"


FLOAT_ONLY_UNARY = {UnaryFn.exp, UnaryFn.exp2, UnaryFn.log, UnaryFn.log2, UnaryFn.log1p, UnaryFn.sqrt,
                    UnaryFn.rsqrt, UnaryFn.sin, UnaryFn.cos, UnaryFn.tanh, UnaryFn.sigmoid, UnaryFn.erf,
                    UnaryFn.floor, UnaryFn.ceil, UnaryFn.round, UnaryFn.isnan, UnaryFn.isinf}


def is_float_like(dtype: ElemType) -> bool:
    return isinstance(dtype, DTypeVar) and all(c.is_float for c in dtype.choices) or \
        isinstance(dtype, DType) and dtype.is_float


def is_int_like(dtype: ElemType) -> bool:
    return isinstance(dtype, DType) and dtype.is_int


@op("unary", NO_OP_TRAITS)
class Unary(Op):
    fn: UnaryFn
    x: Value

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.x, "operand")
        if self.fn in FLOAT_ONLY_UNARY and not is_float_like(t.dtype):
            raise ctx.fail(f"{self.fn} needs a floating-point operand, got {t.dtype}")
        if self.fn is UnaryFn.not_ and is_float_like(t.dtype):
            raise ctx.fail(f"not needs a pred or integer operand, got {t.dtype}")
        if self.fn in (UnaryFn.neg, UnaryFn.abs) and t.dtype == DType.pred:
            raise ctx.fail(f"{self.fn} is not defined on pred")
        if self.fn in (UnaryFn.isnan, UnaryFn.isinf):
            return (t.with_dtype(DType.pred),)
        return (t,)


class BinaryFn(SpelledEnum):
    add = "add"
    sub = "sub"
    mul = "mul"
    div = "div"            # true division; floats only
    floordiv = "floordiv"  # integers: truncates toward zero (C); floats: torch's and Python's (kir.float_rules)
    mod = "mod"            # integers: sign of the dividend (C); floats: sign of the divisor (kir.float_rules)
    pow = "pow"
    maximum = "maximum"    # NaN-propagating
    minimum = "minimum"    # NaN-propagating
    and_ = "and"
    or_ = "or"
    xor = "xor"
    shl = "shl"
    shr = "shr"            # arithmetic for signed, logical for unsigned


BITWISE = {BinaryFn.and_, BinaryFn.or_, BinaryFn.xor, BinaryFn.shl, BinaryFn.shr}


def same_operands(ctx: TypeContext, a: Value, b: Value, what: str) -> TensorType:
    ta, tb = ctx.tensor(a, f"{what} lhs"), ctx.tensor(b, f"{what} rhs")
    if ta.dtype != tb.dtype:
        raise ctx.fail(f"{what}: operand dtypes differ ({ta.dtype} vs {tb.dtype}); KIR never promotes, "
                       f"insert a cast")
    ctx.same_shape(ta.shape, tb.shape, f"{what} operands")
    return ta


@op("binary", NO_OP_TRAITS)
class Binary(Op):
    fn: BinaryFn
    lhs: Value
    rhs: Value

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = same_operands(ctx, self.lhs, self.rhs, str(self.fn))
        if self.fn is BinaryFn.div and not is_float_like(t.dtype):
            raise ctx.fail(f"div needs floating-point operands, got {t.dtype}; use floordiv for integers")
        if self.fn in BITWISE and is_float_like(t.dtype):
            raise ctx.fail(f"{self.fn} needs pred or integer operands, got {t.dtype}")
        if self.fn in (BinaryFn.shl, BinaryFn.shr) and t.dtype == DType.pred:
            raise ctx.fail(f"{self.fn} needs integer operands, got pred")
        if t.dtype == DType.pred and self.fn not in BITWISE | {BinaryFn.maximum, BinaryFn.minimum}:
            raise ctx.fail(f"{self.fn} is not defined on pred")
        return (t,)


class CmpFn(SpelledEnum):
    eq = "eq"
    ne = "ne"
    lt = "lt"
    le = "le"
    gt = "gt"
    ge = "ge"


@op("compare", NO_OP_TRAITS)
class Compare(Op):
    fn: CmpFn
    lhs: Value
    rhs: Value

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = same_operands(ctx, self.lhs, self.rhs, f"compare {self.fn}")
        return (t.with_dtype(DType.pred),)


@op("select", NO_OP_TRAITS)
class Select(Op):
    cond: Value
    on_true: Value
    on_false: Value

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        tc = ctx.tensor(self.cond, "select condition")
        if tc.dtype != DType.pred:
            raise ctx.fail(f"select condition must be pred, got {tc.dtype}")
        t = same_operands(ctx, self.on_true, self.on_false, "select")
        ctx.same_shape(tc.shape, t.shape, "select condition and values")
        return (t,)


@op("cast", NO_OP_TRAITS)
class Cast(Op):
    """Value conversion: float->int truncates toward zero; to pred is `!= 0`; ints wrap."""

    x: Value
    dtype: ElemType

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        return (ctx.tensor(self.x, "cast operand").with_dtype(self.dtype),)


@op("bitcast", NO_OP_TRAITS)
class Bitcast(Op):
    x: Value
    dtype: ElemType

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.x, "bitcast operand")
        if not (isinstance(t.dtype, DType) and isinstance(self.dtype, DType)):
            raise ctx.fail("bitcast needs concrete dtypes")
        if t.dtype.bits != self.dtype.bits or DType.pred in (t.dtype, self.dtype):
            raise ctx.fail(f"bitcast between different widths: {t.dtype} ({t.dtype.bits} bits) to "
                           f"{self.dtype} ({self.dtype.bits} bits)")
        return (t.with_dtype(self.dtype),)
