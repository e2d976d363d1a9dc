"""Constants, index values and pointwise ops.

Semantics checked against XLA: integer `divide`/`remainder` truncate toward zero (C), float
`remainder` is fmod (float `floordiv`/`mod` evaluate `kir.float_rules` over it, f16/bf16/fp8 in f32),
`maximum`/`minimum` propagate NaN; the oracle's choices for division by
zero, negative integer exponents, wide shifts and float -> integer casts are in `numerics.py`.
StableHLO has no erf (it is CHLO), so erf is a rational approximation evaluated in f64 (error
< 1e-7) for f16/bf16/f32, and its everywhere convergent positive series for f64.
"""

from __future__ import annotations

import math

from kir import float_rules
from kir import pointwise as kp
from kir.affine import binary_form, cast_form, constant_form
from kir.core import Op
from kir.dims import DConst, Dim
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn, UnaryFn

from .context import Ctx
from .numerics import cast, float_power, int_abs, int_divide, int_multiply, int_power, shift
from .registry import emits
from .values import Val


def concrete(ctx: Ctx, dtype: object) -> DType:
    if not isinstance(dtype, DType):
        raise ctx.refuse(f"dtype variable {dtype} is not specialised")
    return dtype


@emits(kp.Constant)
def _constant(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, kp.Constant)
    dt = concrete(ctx, op.dtype)
    value = op.value
    ctx.set_lazy(op.result, lambda: ctx.splat(value, dt))
    form = constant_form(op.value) if dt.is_int else None
    if form is not None:
        ctx.affine[op.result.id] = form


@emits(kp.DimValue)
def _dim_value(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, kp.DimValue)
    value = ctx.dim(op.dim)
    dt = concrete(ctx, op.dtype)
    ctx.set_lazy(op.result, lambda: ctx.splat(value, dt))
    if dt.is_int:
        ctx.affine[op.result.id] = DConst(value)


@emits(kp.Iota)
def _iota(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, kp.Iota)
    ctx.set(op.result, ctx.ssa.iota(concrete(ctx, op.dtype), (ctx.dim(op.extent),), 0))


# ---------------------------------------------------------------------------------------------- unary

_SIMPLE_UNARY = {
    UnaryFn.neg: "negate", UnaryFn.abs: "abs", UnaryFn.exp: "exponential", UnaryFn.log: "log",
    UnaryFn.log1p: "log_plus_one", UnaryFn.sqrt: "sqrt", UnaryFn.rsqrt: "rsqrt", UnaryFn.sin: "sine",
    UnaryFn.cos: "cosine", UnaryFn.tanh: "tanh", UnaryFn.sigmoid: "logistic", UnaryFn.floor: "floor",
    UnaryFn.ceil: "ceil", UnaryFn.round: "round_nearest_even", UnaryFn.not_: "not",
}


# XLA's algebraic simplifier rewrites these float identities, which hold for real numbers but not in IEEE
# arithmetic at overflow or signed zeros (each checked against jaxlib; the IEEE result first):
#   log(exp(a))     -> a                exp(100.0) overflows to inf in f32; XLA gives 100
#   log(pow(2, a))  -> a * log(2)       exp2(200.0) is inf; XLA gives 138.6 (`log(pow(a, b))` of a KIR pow
#                                       sees `numerics.float_power`'s select, not a power)
#   log(rsqrt(a))   -> -0.5 * log(a)    rsqrt(-0.0) is -inf, its log NaN; XLA gives inf
#   exp(a) * exp(b) -> exp(a + b)       inf * 0 for a = 100, b = -110 is NaN; XLA gives 4.5e-5
#   pow(exp(a), b)  -> exp(a * b)       pow(inf, 0.01) for a = 100 is inf; XLA gives 2.718
#   sqrt(a * a)     -> abs(a)           a * a overflows for a = 1e30; XLA gives 1e30
# The exit computes what KIR means, so the producers of those patterns (exp, exp2, rsqrt results) and sqrt's
# operand sit behind an optimization barrier, which the simplifier does not look through.
_REWRITTEN_PRODUCERS = frozenset({UnaryFn.exp, UnaryFn.exp2, UnaryFn.rsqrt})


def opaque(ctx: Ctx, x: Val) -> Val:
    """`x` behind an optimization barrier: a float value XLA's simplifier must not fold into its consumer."""
    return ctx.ssa.optimization_barrier(x)


def unary(ctx: Ctx, fn: UnaryFn, x: Val) -> Val:
    s = ctx.ssa
    if fn is UnaryFn.abs and x.dtype.is_int and not x.dtype.is_signed:
        return x  # StableHLO's abs takes signless integers only; |x| of an unsigned value is x
    if fn is UnaryFn.abs and x.dtype.is_int:
        return int_abs(ctx, x)
    if fn is UnaryFn.sqrt:
        return s.unary("sqrt", opaque(ctx, x))
    if fn in _REWRITTEN_PRODUCERS:
        return opaque(ctx, _unary_value(ctx, fn, x))
    return _unary_value(ctx, fn, x)


def _unary_value(ctx: Ctx, fn: UnaryFn, x: Val) -> Val:
    s = ctx.ssa
    if fn in _SIMPLE_UNARY:
        return s.unary(_SIMPLE_UNARY[fn], x)
    if fn is UnaryFn.exp2:
        return s.binary("power", ctx.splat_like(2.0, x), x)
    if fn is UnaryFn.log2:
        return float_divide(ctx, s.unary("log", x), ctx.splat_like(math.log(2.0), x))
    if fn is UnaryFn.isnan:
        return s.compare("NE", x, x)
    if fn is UnaryFn.isinf:
        return s.compare("EQ", s.unary("abs", x), ctx.splat_like(math.inf, x))
    if fn is UnaryFn.erf:
        return erf(ctx, x)
    raise AssertionError(fn)


# Rational approximation of erf on [-4, 4] (Eigen's generic_fast_erf_float), evaluated in f64.
_ERF_NUM = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
            -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_DEN = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
            -1.42647390514189e-02)
_ERF_SERIES_TERMS = 120  # enough for |x| <= 6, beyond which erf is +-1 in f64


def _horner(ctx: Ctx, x2: Val, coeffs: tuple[float, ...]) -> Val:
    acc = ctx.splat_like(coeffs[0], x2)
    for c in coeffs[1:]:
        acc = ctx.ssa.binary("add", ctx.ssa.binary("multiply", acc, x2), ctx.splat_like(c, x2))
    return acc


def erf(ctx: Ctx, x: Val) -> Val:
    s = ctx.ssa
    if x.dtype != DType.f64:
        w = s.convert(x, DType.f64)
        w = s.binary("maximum", s.binary("minimum", w, ctx.splat_like(4.0, w)), ctx.splat_like(-4.0, w))
        x2 = s.binary("multiply", w, w)
        num = s.binary("multiply", _horner(ctx, x2, _ERF_NUM), w)
        return s.convert(s.binary("divide", num, _horner(ctx, x2, _ERF_DEN)), x.dtype, "erf")
    # erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n x (2x^2)^n / (2n+1)!!  (all terms positive: no cancellation)
    a = s.binary("minimum", s.unary("abs", x), ctx.splat_like(6.0, x))
    two_a2 = s.binary("multiply", ctx.splat_like(2.0, a), s.binary("multiply", a, a))
    n0 = ctx.splat(0.0, DType.f64)

    def cond(args: list[Val]) -> list[Val]:
        return [s.compare("LT", args[0], ctx.splat(float(_ERF_SERIES_TERMS), DType.f64))]

    def body(args: list[Val]) -> list[Val]:
        n, term, total = args
        n1 = s.binary("add", n, ctx.splat(1.0, DType.f64))
        denom = s.binary("add", s.binary("multiply", ctx.splat(2.0, DType.f64), n1), ctx.splat(1.0, DType.f64))
        dn = s.broadcast_in_dim(denom, term.shape, [], term.depth)
        nterm = s.binary("divide", s.binary("multiply", term, two_a2), dn)
        return [n1, nterm, s.binary("add", total, nterm)]

    _, _, total = s.while_([n0, a, a], cond, body, "erf_series")
    scale = s.binary("multiply", ctx.splat_like(2.0 / math.sqrt(math.pi), a),
                     s.unary("exponential", s.unary("negate", s.binary("multiply", a, a))))
    mag = s.binary("minimum", s.binary("multiply", scale, total), ctx.splat_like(1.0, a))
    return s.binary("multiply", s.unary("sign", x), mag)


@emits(kp.Unary)
def _unary(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, kp.Unary)
    ctx.set(op.result, unary(ctx, op.fn, ctx.get(op.x)))


# ---------------------------------------------------------------------------------------------- binary

_SIMPLE_BINARY = {
    BinaryFn.add: "add", BinaryFn.sub: "subtract", BinaryFn.mul: "multiply", BinaryFn.div: "divide",
    BinaryFn.mod: "remainder", BinaryFn.pow: "power", BinaryFn.maximum: "maximum",
    BinaryFn.minimum: "minimum", BinaryFn.and_: "and", BinaryFn.or_: "or", BinaryFn.xor: "xor",
}


def binary_op_name(fn: BinaryFn) -> str:
    """The StableHLO op of a binary function that maps to one op (reductions combine with these)."""
    return _SIMPLE_BINARY[fn]


def float_divide(ctx: Ctx, a: Val, b: Val) -> Val:
    """IEEE division. The barrier keeps XLA from rewriting `a / broadcast(b)`, `a / sqrt(b)` and the like
    into multiplications by a reciprocal, which round differently."""
    return ctx.ssa.binary("divide", a, ctx.ssa.optimization_barrier(b))


class _SsaOps:
    """`kir.float_rules` as StableHLO ops on values of one float dtype."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx, self.s = ctx, ctx.ssa

    def const(self, value: float, like: Val) -> Val:
        return self.ctx.splat_like(value, like)

    def add(self, a: Val, b: Val) -> Val:
        return self.s.binary("add", a, b)

    def sub(self, a: Val, b: Val) -> Val:
        return self.s.binary("subtract", a, b)

    def div(self, a: Val, b: Val) -> Val:
        return float_divide(self.ctx, a, b)

    def fmod(self, a: Val, b: Val) -> Val:
        return self.s.binary("remainder", a, b)

    def floor(self, a: Val) -> Val:
        return self.s.unary("floor", a)

    def lt(self, a: Val, b: Val) -> Val:
        return self.s.compare("LT", a, b)

    def gt(self, a: Val, b: Val) -> Val:
        return self.s.compare("GT", a, b)

    def ne(self, a: Val, b: Val) -> Val:
        return self.s.compare("NE", a, b)

    def eq(self, a: Val, b: Val) -> Val:
        return self.s.compare("EQ", a, b)

    def where(self, cond: Val, a: Val, b: Val) -> Val:
        return self.s.select(cond, a, b)


def float_rule(ctx: Ctx, fn: BinaryFn, a: Val, b: Val) -> Val:
    """Float floordiv/mod by `kir.float_rules`; f16, bf16 and fp8 compute in f32 and round once (as the
    oracle and the generated code do: the rule's intermediate steps are not exact at fp8 precision)."""
    dt = a.dtype
    narrow = dt in (DType.f16, DType.bf16) or dt.is_fp8
    if narrow:
        a, b = ctx.ssa.convert(a, DType.f32), ctx.ssa.convert(b, DType.f32)
    rule = float_rules.floordiv if fn is BinaryFn.floordiv else float_rules.mod
    result = rule(_SsaOps(ctx), a, b)
    return ctx.ssa.convert(result, dt) if narrow else result


def binary(ctx: Ctx, fn: BinaryFn, a: Val, b: Val) -> Val:
    a, b = ctx.lift_all(a, b)
    s = ctx.ssa
    dt = a.dtype
    if dt.is_pred and fn in (BinaryFn.maximum, BinaryFn.minimum):
        return s.binary("or" if fn is BinaryFn.maximum else "and", a, b)
    if fn is BinaryFn.div and dt.is_float:
        return float_divide(ctx, a, b)
    if fn in (BinaryFn.floordiv, BinaryFn.mod) and dt.is_float:
        return float_rule(ctx, fn, a, b)
    if fn in (BinaryFn.floordiv, BinaryFn.mod) and not dt.is_float:
        return int_divide(ctx, "divide" if fn is BinaryFn.floordiv else "remainder", a, b)
    if fn is BinaryFn.pow and dt.is_int:
        return int_power(ctx, a, b)
    if fn is BinaryFn.pow and dt.is_float:
        return float_power(ctx, a, b)
    if fn is BinaryFn.mul and dt.is_int:
        return int_multiply(ctx, a, b)
    if fn is BinaryFn.shl:
        return shift(ctx, "shift_left", a, b)
    if fn is BinaryFn.shr:
        return shift(ctx, "shift_right_arithmetic" if dt.is_signed else "shift_right_logical", a, b)
    return s.binary(_SIMPLE_BINARY[fn], a, b)


def _known_nonnegative(d: Dim) -> bool:
    return isinstance(d, DConst) and d.value >= 0  # shapes are concrete here: a quotient folds to a constant


def _affine_binary(ctx: Ctx, op: kp.Binary) -> Dim | None:
    """`kir.affine`'s rules over the batch indices (a quotient of a negative constant is computed instead)."""
    return binary_form(op.fn, ctx.affine.get(op.lhs.id), ctx.affine.get(op.rhs.id), _known_nonnegative)


@emits(kp.Binary)
def _binary(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, kp.Binary)
    aff = _affine_binary(ctx, op)
    if aff is None:
        ctx.set(op.result, binary(ctx, op.fn, ctx.get(op.lhs), ctx.get(op.rhs)))
        return
    # Index arithmetic is often used only as coordinates: emit it where it is used as a value.
    ctx.affine[op.result.id] = aff
    fn, lhs, rhs = op.fn, op.lhs, op.rhs
    ctx.set_lazy(op.result, lambda: binary(ctx, fn, ctx.get(lhs), ctx.get(rhs)))


_DIRECTION = {CmpFn.eq: "EQ", CmpFn.ne: "NE", CmpFn.lt: "LT", CmpFn.le: "LE", CmpFn.gt: "GT", CmpFn.ge: "GE"}


@emits(kp.Compare)
def _compare(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, kp.Compare)
    a, b = ctx.lift_all(ctx.get(op.lhs), ctx.get(op.rhs))
    ctx.set(op.result, ctx.ssa.compare(_DIRECTION[op.fn], a, b))


@emits(kp.Select)
def _select(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, kp.Select)
    c, a, b = ctx.lift_all(ctx.get(op.cond), ctx.get(op.on_true), ctx.get(op.on_false))
    ctx.set(op.result, ctx.ssa.select(c, a, b))


@emits(kp.Cast)
def _cast(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, kp.Cast)
    dt = concrete(ctx, op.dtype)
    src = cast_form(ctx.affine.get(op.x.id), dt.is_int)
    if src is None:
        ctx.set(op.result, cast(ctx, ctx.get(op.x), dt))
        return
    ctx.affine[op.result.id] = src
    x = op.x
    ctx.set_lazy(op.result, lambda: cast(ctx, ctx.get(x), dt))


@emits(kp.Bitcast)
def _bitcast(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, kp.Bitcast)
    ctx.set(op.result, ctx.ssa.bitcast(ctx.get(op.x), concrete(ctx, op.dtype)))
