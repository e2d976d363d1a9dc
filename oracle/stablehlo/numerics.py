"""The oracle's numeric choices where KIR or StableHLO leave room (see `oracle/numerics.py`), made explicit.

StableHLO leaves these implementation-defined, so they are spelled out with selects rather than
left to the consumer:

* an integer `floordiv`/`mod` by zero gives 0 (quotients truncate toward zero, as `divide` does);
* an integer `pow` with a negative exponent gives `1 / a**-b` truncated toward zero;
* a float `pow` of a negative finite base and a non-integer exponent is NaN (C's `pow`), spelled out so that
  XLA's algebraic simplifier cannot rewrite `log(pow(a, b))` as `b * log(abs(a))`, which is a number there;
* a shift by an amount outside [0, bits) gives 0, or the sign fill for `shr` of a signed value;
* float -> integer casts truncate toward zero, saturate at the target's range, and map NaN to 0;
* casts to bf16 round through f32 (as torch and the oracle do).
"""

from __future__ import annotations

from kir.dtypes import DType

from .context import Ctx
from .values import Val


def int_divide(ctx: Ctx, name: str, a: Val, b: Val) -> Val:
    """`divide` or `remainder` of integers with a zero divisor giving 0."""
    s = ctx.ssa
    zero = s.compare("EQ", b, ctx.splat_like(0, b))
    safe = s.select(zero, ctx.splat_like(1, b), b)
    return s.select(zero, ctx.splat_like(0, a), s.binary(name, a, safe))


# Signed integer `abs`, products and powers wrap (`abs(-2**31) == -2**31`, `50000 * 50000 < 0` in i32), but
# XLA's algebraic simplifier takes `abs(x)`, `x * x` and `x ** 2k` of signed integers to be non-negative: it
# folds `abs(x * x)` to `x * x` and `x * x < 0` to false, also through reductions over an axis of extent one.
# So the exit never hands it those ops on signed values: products and powers are computed on the unsigned bit
# patterns (two's complement makes them the same bits) and `abs` as `(x ^ m) - m` with `m = x >> (bits - 1)`.
# (An `optimization_barrier` would hide them too, but XLA's CPU compiler crashes on some modules holding one.)
_UNSIGNED = {DType.i8: DType.u8, DType.i16: DType.u16, DType.i32: DType.u32, DType.i64: DType.u64}


def _on_bits(ctx: Ctx, name: str, a: Val, b: Val) -> Val:
    """`a <name> b` of signed integers (`multiply`, `power` with b >= 0) on their unsigned bit patterns."""
    s = ctx.ssa
    dt = a.dtype
    wide = DType.i8 if dt is DType.i4 else dt  # i4 computes in i8: the low four bits are the same
    a, b = s.convert(a, wide), s.convert(b, wide)
    u = _UNSIGNED[wide]
    result = s.bitcast(s.binary(name, s.bitcast(a, u), s.bitcast(b, u)), wide)
    return s.convert(result, dt)


def int_multiply(ctx: Ctx, a: Val, b: Val) -> Val:
    """Wrapping integer `a * b`."""
    return _on_bits(ctx, "multiply", a, b) if a.dtype.is_signed else ctx.ssa.binary("multiply", a, b)


def int_abs(ctx: Ctx, x: Val) -> Val:
    """Wrapping `abs` of a signed integer: `(x ^ m) - m` with `m = x >> (bits - 1)` (all ones where x < 0)."""
    s = ctx.ssa
    dt = x.dtype
    wide = DType.i8 if dt is DType.i4 else dt
    x = s.convert(x, wide)
    m = s.binary("shift_right_arithmetic", x, ctx.splat_like(wide.bits - 1, x))
    return s.convert(s.binary("subtract", s.binary("xor", x, m), m), dt)


def int_power(ctx: Ctx, a: Val, b: Val) -> Val:
    s = ctx.ssa
    if not a.dtype.is_signed:
        return s.binary("power", a, b)
    negative = s.compare("LT", b, ctx.splat_like(0, b))
    raised = _on_bits(ctx, "power", a, s.select(negative, ctx.splat_like(0, b), b))
    one, minus = ctx.splat_like(1, a), ctx.splat_like(-1, a)
    odd = s.compare("NE", s.binary("and", b, ctx.splat_like(1, b)), ctx.splat_like(0, b))
    inverse = s.select(s.compare("EQ", a, one), one,
                       s.select(s.compare("EQ", a, minus), s.select(odd, minus, one), ctx.splat_like(0, a)))
    return s.select(negative, inverse, raised)


def float_power(ctx: Ctx, a: Val, b: Val) -> Val:
    """C's `pow` of floats: NaN for a negative finite base and a non-integer (or NaN) exponent.

    The select is also what keeps XLA's algebraic simplifier from rewriting `log(power(a, b))` into
    `b * log(abs(a))` (`select(b == 0, 0, ...)`): that is a number where `a ** b` is negative (`(-2.0) ** 3`)
    or NaN (`(-1.5) ** -1.5`), whose logarithm is NaN. The rewrite matches a `log` of a `power` only."""
    s = ctx.ssa
    negative = s.binary("and", s.compare("LT", a, ctx.splat_like(0.0, a)),
                        s.compare("GT", a, ctx.splat_like(float("-inf"), a)))
    fractional = s.compare("NE", s.unary("floor", b), b)
    return s.select(s.binary("and", negative, fractional), ctx.splat_like(float("nan"), a), s.binary("power", a, b))


def shift(ctx: Ctx, name: str, a: Val, b: Val) -> Val:
    s = ctx.ssa
    bits = a.dtype.bits
    outside = s.compare("GE", b, ctx.splat_like(bits, b))
    if a.dtype.is_signed:
        outside = s.binary("or", outside, s.compare("LT", b, ctx.splat_like(0, b)))
    shifted = s.binary(name, a, s.select(outside, ctx.splat_like(0, b), b))
    fill = ctx.splat_like(0, a)
    if name == "shift_right_arithmetic":
        fill = s.select(s.compare("LT", a, ctx.splat_like(0, a)), ctx.splat_like(-1, a), fill)
    return s.select(outside, fill, shifted)


def float_to_int(ctx: Ctx, x: Val, dtype: DType) -> Val:
    s = ctx.ssa
    lo, hi = dtype.int_range
    w = s.convert(x, DType.f64)
    converted = s.convert(w, dtype)
    inside = s.select(s.compare("NE", w, w), ctx.splat_like(0, converted), converted)
    under = s.select(s.compare("LE", w, ctx.splat_like(float(lo), w)), ctx.splat_like(lo, converted), inside)
    return s.select(s.compare("GE", w, ctx.splat_like(float(hi), w)), ctx.splat_like(hi, converted), under)


def cast(ctx: Ctx, x: Val, dtype: DType) -> Val:
    """KIR `cast` (value conversion)."""
    if x.dtype == dtype:
        return x
    if dtype.is_pred and x.dtype.is_float:
        # on the bits without the sign: XLA's CPU runtime treats subnormals as zero in float compares
        unsigned = {8: DType.u8, 16: DType.u16, 32: DType.u32, 64: DType.u64}[x.dtype.bits]
        bits = ctx.ssa.bitcast(x, unsigned)
        magnitude = ctx.ssa.binary("and", bits, ctx.splat_like((1 << (x.dtype.bits - 1)) - 1, bits))
        return ctx.ssa.compare("NE", magnitude, ctx.splat_like(0, magnitude))
    if dtype.is_pred:
        return ctx.ssa.compare("NE", x, ctx.splat_like(0, x))
    if x.dtype.is_float and dtype.is_int:
        return float_to_int(ctx, x, dtype)
    if dtype.in_f32 and x.dtype not in (DType.f32, DType.f16):
        x = ctx.ssa.convert(x, DType.f32)  # f64 and integers round through f32, as the oracle's casts do
    return ctx.ssa.convert(x, dtype)
