"""Numeric decompositions: KIR functions the target has no exact instruction for, written as ordinary
physical ops, so that the emitter only maps ops to text.

* Narrow floats (f16, bf16, fp8) compute transcendental and rounding functions in f32 and round the
  result once to their dtype (double rounding through f32 is innocuous: 24 >= 2p + 2 for each of them).
  Sign and class functions (neg, abs, isnan, isinf) are exact at the narrow dtype and stay there.
* tanh: the odd Taylor series for |x| < 0.1, where 1 - exp(-2|x|) would cancel (it keeps -0.0 and
  subnormals), else sign(x) (1 - q) / (1 + q) with q = exp(-2|x|).
* log1p: log(u) * x / (u - 1) with u = 1 + x corrects the rounding of 1 + x (x itself where u == 1).
* round: half to even (torch.round) from floor and the fraction.
* Binary float ops: bf16 and fp8 compute every rounding op in f32 and round once; f16 division, floor
  division and remainder in f32 (Triton's f16 division is approximate); pow in f64 for every float dtype
  (one rounding to the result: within one ulp of the correctly rounded value). maximum and minimum are
  exact and stay at the operands' dtype.
"""

from __future__ import annotations

from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn, UnaryFn

from .. import ops as P
from ..model import Fragment, PValue
from .context import Lowerer

# exact at any float width: computed at the value's own dtype
_EXACT = (UnaryFn.neg, UnaryFn.abs, UnaryFn.not_, UnaryFn.isnan, UnaryFn.isinf)

# The Taylor coefficients of tanh(x) / x in x**2: 1, -1/3, 2/15, -17/315, 62/2835, ...
TANH_SERIES = (1.0, -1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075, -929569 / 638512875)
# to x**7 in f32 (relative error < 1e-9), to x**15 in f64 (< 1e-19: f64's own rounding dominates)
TANH_TERMS = {DType.f32: 4, DType.f64: 8}
TANH_SERIES_BELOW = 0.1  # |x| where the series replaces (1 - q) / (1 + q)


def unary(lw: Lowerer, fn: UnaryFn, x: PValue, name: str | None = None) -> PValue:
    """`fn(x)` as physical ops (the last one named `name`)."""
    dt = x.type.dtype
    if fn in (UnaryFn.isnan, UnaryFn.isinf):
        return lw.add(P.Unary, x.type.with_dtype(DType.pred), name=name, fn=fn, x=x)
    if fn in _EXACT or not dt.is_float:
        return lw.add(P.Unary, x.type, name=name, fn=fn, x=x)
    if dt not in (DType.f32, DType.f64):  # f16, bf16, fp8: in f32, rounded once
        wide = unary(lw, fn, lw.cast(x, DType.f32))
        return lw.add(P.Cast, wide.type.with_dtype(dt), name=name, x=wide, dtype=dt)
    if fn is UnaryFn.tanh:
        return _tanh(lw, x, name)
    if fn is UnaryFn.log1p:
        return _log1p(lw, x, name)
    if fn is UnaryFn.round:
        return _round(lw, x, name)
    return lw.add(P.Unary, x.type, name=name, fn=fn, x=x)


_F16_IN_F32 = (BinaryFn.div, BinaryFn.floordiv, BinaryFn.mod)


def binary(lw: Lowerer, fn: BinaryFn, a: PValue, b: PValue, name: str | None = None) -> PValue:
    """KIR's `a fn b` as physical ops (the last one named `name`)."""
    dt = a.type.dtype
    compute = dt
    if dt.is_float and fn not in (BinaryFn.maximum, BinaryFn.minimum):
        compute = DType.f64 if fn is BinaryFn.pow else \
            DType.f32 if dt.in_f32 or (dt is DType.f16 and fn in _F16_IN_F32) else dt
    if compute == dt:
        return lw.binary(fn, a, b, name=name, user=True)
    wide = lw.binary(fn, lw.cast(a, compute), lw.cast(b, compute), user=True)
    return lw.add(P.Cast, wide.type.with_dtype(dt), name=name, x=wide, dtype=dt)


def _c(lw: Lowerer, value: float, x: PValue) -> PValue:
    return lw.const(value, x.type.dtype)


def _bin(lw: Lowerer, fn: BinaryFn, a: PValue, b: PValue, name: str | None = None) -> PValue:
    return lw.binary(fn, a, b, name=name, user=True)


def _select(lw: Lowerer, cond: PValue, a: PValue, b: PValue, name: str | None = None) -> PValue:
    t = lw.join(cond, a, b)
    return lw.add(P.Select, Fragment(a.type.dtype, t.lanes, t.tile), name=name, cond=cond, on_true=a, on_false=b)


def _tanh(lw: Lowerer, x: PValue, name: str | None) -> PValue:
    ax = lw.add(P.Unary, x.type, fn=UnaryFn.abs, x=x)
    q = lw.add(P.Unary, x.type, fn=UnaryFn.exp, x=_bin(lw, BinaryFn.mul, _c(lw, -2.0, x), ax))
    x2 = _bin(lw, BinaryFn.mul, x, x)
    coefficients = TANH_SERIES[:TANH_TERMS[x.type.dtype]]
    poly = _c(lw, coefficients[-1], x)
    for c in reversed(coefficients[:-1]):
        poly = _bin(lw, BinaryFn.add, _c(lw, c, x), _bin(lw, BinaryFn.mul, x2, poly))
    series = _bin(lw, BinaryFn.mul, x, poly)
    one = _c(lw, 1.0, x)
    sign = _select(lw, lw.compare(CmpFn.lt, x, _c(lw, 0.0, x)), _c(lw, -1.0, x), one)
    ratio = _bin(lw, BinaryFn.div, _bin(lw, BinaryFn.sub, one, q), _bin(lw, BinaryFn.add, one, q))
    large = _bin(lw, BinaryFn.mul, sign, ratio)
    return _select(lw, lw.compare(CmpFn.lt, ax, _c(lw, TANH_SERIES_BELOW, x)), series, large, name)


def _log1p(lw: Lowerer, x: PValue, name: str | None) -> PValue:
    one = _c(lw, 1.0, x)
    u = _bin(lw, BinaryFn.add, one, x)
    corrected = _bin(lw, BinaryFn.mul, lw.add(P.Unary, u.type, fn=UnaryFn.log, x=u),
                     _bin(lw, BinaryFn.div, x, _bin(lw, BinaryFn.sub, u, one)))
    finite = _select(lw, lw.compare(CmpFn.eq, u, _c(lw, float("inf"), x)), u, corrected)
    return _select(lw, lw.compare(CmpFn.eq, u, one), x, finite, name)


def _round(lw: Lowerer, x: PValue, name: str | None) -> PValue:
    f = lw.add(P.Unary, x.type, fn=UnaryFn.floor, x=x)
    frac = _bin(lw, BinaryFn.sub, x, f)
    half, one = _c(lw, 0.5, x), _c(lw, 1.0, x)
    up = _bin(lw, BinaryFn.add, f, one)
    # f is even when floor(f / 2) * 2 == f (exact for every integral f; inf -> inf either way)
    even = lw.compare(CmpFn.eq, _bin(lw, BinaryFn.mul, lw.add(P.Unary, x.type, fn=UnaryFn.floor,
                                                              x=_bin(lw, BinaryFn.mul, f, half)), _c(lw, 2.0, x)), f)
    tie = _select(lw, even, f, up)
    below = _select(lw, lw.compare(CmpFn.lt, frac, half), f, tie)
    return _select(lw, lw.compare(CmpFn.gt, frac, half), up, below, name)


__all__ = ["unary", "binary", "TANH_SERIES", "TANH_TERMS", "TANH_SERIES_BELOW"]
