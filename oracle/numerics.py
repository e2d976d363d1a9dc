"""Element numerics of the oracle: the one place where KIR's numeric rules meet NumPy.

The rules (SPEC §3.3) and the choices made where KIR leaves room:

* Storage: every dtype is held in its NumPy dtype; bf16 (which NumPy lacks) is held in float32
  arrays whose values are exactly representable in bf16. Every op with a bf16 result rounds its
  float32 result to bf16 (round to nearest even on the f32 bit pattern; NaN stays NaN).
* Integers wrap at their declared width (NumPy arithmetic on same-dtype arrays does).
* Integer `floordiv` and `mod` truncate toward zero (C): `-7 // 2 == -3`, `-7 % 2 == -1`. A zero
  divisor is undefined in KIR; the oracle gives 0 so that a lane discarded by a `select` cannot
  fail the kernel. Float `floordiv` and `mod` are torch's and Python's (`kir.float_rules`: from the exact
  remainder, `1.0 // 0.1 == 9.0`; `%` has the sign of the divisor), f16 computed in f32 and rounded once.
* Integer `pow` is exact repeated multiplication wrapping at the width; a negative exponent gives
  `1 / a**-b` truncated toward zero (1 for a == 1, +-1 for a == -1, else 0). Float `pow` is C's
  (`pow(-inf, 0.5) == inf`, `pow(-0.0, 0.5) == +0.0`), also where NumPy would take `sqrt`.
* Shifts by an amount outside [0, bits) give 0 (`shl`, `shr` of unsigned) or the sign fill (`shr`
  of signed), as PTX's clamping shifts do.
* `maximum`/`minimum` and the `max`/`min` reductions and scans propagate NaN; `argmax`/`argmin`
  give the first index of the extreme with NaN counted as the extreme; an empty argmax gives -1.
* Casts: float -> integer truncates toward zero and saturates at the target's range, NaN -> 0
  (PTX `cvt.rzi` semantics); to pred is `!= 0`; integer -> integer wraps; f64 -> bf16 rounds
  through f32 (as torch does).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kir import float_rules
from kir.dtypes import DType, ElemType, bf16_rounded_bits, fp8_rounded, i4_wrapped
from kir.errors import IntentError
from kir.pointwise import BinaryFn
from kir.reduce import COMBINE, EMPTY_ARG_INDEX, ReduceKind, identity

_STORAGE = {d: d.np for d in DType}


def np_dtype(dtype: ElemType) -> np.dtype:
    """The NumPy storage dtype of a KIR dtype (bf16 is stored in float32)."""
    found = _STORAGE.get(dtype)  # type: ignore[call-overload]
    if found is None:
        raise IntentError(f"the oracle runs specialised kernels only; dtype variable {dtype} is unassigned")
    return found


# ---------------------------------------------------------------------------------------------- bf16


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float values to the nearest bf16 (ties to even), returned as float32; NaN stays NaN."""
    return bf16_rounded_bits(x).view(np.float32)


def to_storage(x: np.ndarray, dtype: DType) -> np.ndarray:
    """Hold `x` in the storage of `dtype` (the final step of every cast and every bf16 or fp8 result)."""
    if dtype is DType.bf16:
        return round_bf16(x)
    if dtype.is_fp8:
        return fp8_rounded(x, dtype)
    if dtype is DType.i4:
        return i4_wrapped(x)
    return np.asarray(x).astype(np_dtype(dtype), copy=False)


# ---------------------------------------------------------------------------------------------- casts


def cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """KIR `cast` (value conversion)."""
    if dst is DType.pred:
        return np.asarray(x != 0)
    if src.is_float and dst.is_int:
        return _float_to_int(x, dst)
    if dst.is_float:
        # Ints and floats convert with round to nearest even; bf16 then rounds the f32 value.
        wide = x.astype(np.float32) if dst.in_f32 else x
        return to_storage(wide, dst)
    if dst is DType.i4:
        return i4_wrapped(x)
    return x.astype(np_dtype(dst))  # integer/pred -> integer: wraps at the target width


def _float_to_int(x: np.ndarray, dst: DType) -> np.ndarray:
    lo, hi = dst.int_range
    t = np.trunc(np.asarray(x, dtype=np.float64))
    nan = np.isnan(t)
    over = t >= float(hi)
    under = t <= float(lo)
    inside = np.where(nan | over | under, 0.0, t).astype(np_dtype(dst))
    return np.where(over, np.array(hi, np_dtype(dst)), np.where(under, np.array(lo, np_dtype(dst)), inside))


def bitcast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """Reinterpret the bits of `x` (same width); bf16 travels through its 16-bit pattern."""
    if src is dst:
        return np.asarray(x)
    if src.is_fp8 or dst.is_fp8:
        from kir.dtypes import fp8_ml_dtype

        if src.is_fp8:
            return np.ascontiguousarray(x, dtype=np.float32).astype(fp8_ml_dtype(src)).view(np.uint8).view(
                np_dtype(dst))
        return np.ascontiguousarray(x).view(fp8_ml_dtype(dst)).astype(np.float32)
    if src is DType.bf16:
        bits16 = (np.ascontiguousarray(x, dtype=np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        return bits16.view(np_dtype(dst))
    if dst is DType.bf16:
        bits32 = np.ascontiguousarray(x).view(np.uint16).astype(np.uint32) << np.uint32(16)
        return bits32.view(np.float32)
    return np.ascontiguousarray(x).view(np_dtype(dst))


# ---------------------------------------------------------------------------------------------- integer arithmetic


def int_floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C division: the quotient truncates toward zero; a zero divisor gives 0."""
    zero = b == 0
    safe = np.where(zero, np.ones((), b.dtype), b)
    rem = np.fmod(a, safe)
    return np.where(zero, np.zeros((), a.dtype), (a - rem) // safe)


def int_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C remainder: the sign of the dividend; a zero divisor gives 0."""
    zero = b == 0
    safe = np.where(zero, np.ones((), b.dtype), b)
    return np.where(zero, np.zeros((), a.dtype), np.fmod(a, safe))


class _NumpyOps:
    """`kir.float_rules` on NumPy arrays of one float dtype."""

    def const(self, value: float, like: np.ndarray) -> np.ndarray:
        return np.array(value, like.dtype)

    add, sub, div, fmod, floor = (staticmethod(f) for f in (np.add, np.subtract, np.true_divide, np.fmod, np.floor))
    lt, gt, ne, eq, where = (staticmethod(f) for f in (np.less, np.greater, np.not_equal, np.equal, np.where))


def _float_rule(rule, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    narrow = a.dtype == np.float16  # computes in f32, rounded once (bf16 is already held in f32)
    if narrow:
        a, b = a.astype(np.float32), b.astype(np.float32)
    a, b = np.broadcast_arrays(a, b)
    with np.errstate(all="ignore"):
        result = rule(_NumpyOps(), a, b)
    return result.astype(np.float16) if narrow else result


def float_floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch's and Python's float floor division (`kir.float_rules.floordiv`)."""
    return _float_rule(float_rules.floordiv, a, b)


def float_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch's and Python's float remainder, the sign of the divisor (`kir.float_rules.mod`)."""
    return _float_rule(float_rules.mod, a, b)


def float_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's `pow`. NumPy computes a constant exponent of 0.5 as `sqrt`, which gives NaN for -inf and -0.0
    for -0.0, where `pow` gives +inf and +0.0 (every other exponent follows the C library)."""
    result = np.power(a, b)
    at_half = (b == 0.5) & ((a == -np.inf) | ((a == 0) & np.signbit(a)))
    if not np.any(at_half):
        return result
    return np.where(at_half, np.where(a == 0, np.zeros((), result.dtype), np.array(np.inf, result.dtype)), result)


def int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    dt = a.dtype
    result = np.ones(a.shape, dt)
    base = a.copy()
    neg = b < 0 if dt.kind == "i" else np.zeros(b.shape, bool)
    e = np.where(neg, np.zeros((), b.dtype), b).astype(np.uint64)
    while e.any():
        odd = (e & np.uint64(1)).astype(bool)
        result = np.where(odd, result * base, result)
        base = base * base
        e = e >> np.uint64(1)
    if neg.any():
        one, minus = np.ones((), dt), np.array(-1, dt)
        odd_b = (b & 1).astype(bool)
        inv = np.where(a == one, one, np.where(a == minus, np.where(odd_b, minus, one), np.zeros((), dt)))
        result = np.where(neg, inv, result)
    return result


# The elementwise binary functions that are plain ufuncs (integer and float division, modulo and pow have
# their own rules above); built-in reductions fold with these.
BINARY: dict[BinaryFn, np.ufunc] = {
    BinaryFn.add: np.add,
    BinaryFn.sub: np.subtract,
    BinaryFn.mul: np.multiply,
    BinaryFn.maximum: np.maximum,  # NaN-propagating
    BinaryFn.minimum: np.minimum,
    BinaryFn.and_: np.bitwise_and,
    BinaryFn.or_: np.bitwise_or,
    BinaryFn.xor: np.bitwise_xor,
    # NumPy's shifts clamp like PTX's: amounts outside [0, bits) give 0 or the sign fill.
    BinaryFn.shl: np.left_shift,
    BinaryFn.shr: np.right_shift,  # arithmetic for signed dtypes, logical for unsigned
}


# ---------------------------------------------------------------------------------------------- reductions


def reduce_identity(kind: ReduceKind, dtype: DType) -> int | float | bool:
    """The value an empty built-in reduction (and an exclusive scan's first element) gives: the kind's
    identity from kir.reduce's table (argmax/argmin: the empty index, -1)."""
    if kind in (ReduceKind.argmax, ReduceKind.argmin):
        return EMPTY_ARG_INDEX
    try:
        return identity(kind, dtype)
    except ValueError as e:
        raise IntentError(str(e)) from None


def reduce_ufunc(kind: ReduceKind) -> np.ufunc:
    """The NumPy ufunc of a built-in kind's combine (kir.reduce.COMBINE)."""
    try:
        fn = COMBINE[kind]
    except KeyError:
        raise IntentError(f"reduce {kind} is not an elementwise fold") from None
    return BINARY[fn]


def accumulate_dtype(kind: ReduceKind, value: DType, acc: ElemType | None) -> np.dtype:
    """The NumPy dtype a fold accumulates in: f32 for f16/bf16 sums and products, else the value's."""
    if kind not in (ReduceKind.sum, ReduceKind.prod):
        return np_dtype(value)
    return np_dtype(acc if acc is not None else value)


def argextreme(x: np.ndarray, kind: ReduceKind) -> np.ndarray:
    """First index of the max/min along the last axis, NaN counted as the extreme; -1 when empty."""
    if x.shape[-1] == 0:
        return np.full(x.shape[:-1], -1, np.int64)
    fn: Callable[..., np.ndarray] = np.argmax if kind is ReduceKind.argmax else np.argmin
    # NumPy's argmax/argmin already return the first NaN, and the first of equal extremes.
    return fn(x, axis=-1).astype(np.int64)
