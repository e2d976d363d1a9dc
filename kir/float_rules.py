"""KIR's float `floordiv` and `mod`, written once over an abstract set of element operations.

The oracle (NumPy arrays), the emitter (Triton source text) and the StableHLO exit (SSA values) each
supply a `FloatOps` and evaluate these same rules, so the three cannot drift apart.

The rule is torch's and Python's, built on the exact remainder `fmod(a, b)` rather than on the rounded
quotient `a / b` (which rounds `1.0 / 0.1` up to 10.0, where `1.0 // 0.1 == 9.0`):

* `a // b`: `mod = fmod(a, b)`, `div = (a - mod) / b`, minus one where `mod != 0` and `mod` and `b`
  differ in sign; then `floor(div)`, plus one where `div - floor(div) > 0.5`; a zero `div` takes the
  sign of `a / b`, and `b == 0` gives `a / b` (inf or NaN).
* `a % b`: `fmod(a, b)`, plus `b` where it is non-zero and differs in sign from `b` (the result has the
  sign of the divisor; `-0.0 % 3.0 == -0.0`, as torch; `x % 0 == NaN`).

f16 and bf16 compute in f32 and round the result once (every step of the rule is exact or correctly
rounded in f32, and double rounding through f32 is innocuous for them).
"""

from __future__ import annotations

import math
from typing import Generic, Protocol, TypeVar

V = TypeVar("V")


class FloatOps(Protocol, Generic[V]):
    """Element operations on one float dtype; comparisons return whatever `where` takes as a condition."""

    def const(self, value: float, like: V) -> V: ...
    def add(self, a: V, b: V) -> V: ...
    def sub(self, a: V, b: V) -> V: ...
    def div(self, a: V, b: V) -> V: ...   # IEEE division, correctly rounded
    def fmod(self, a: V, b: V) -> V: ...  # the exact remainder, the sign of the dividend
    def floor(self, a: V) -> V: ...
    def lt(self, a: V, b: V) -> V: ...
    def gt(self, a: V, b: V) -> V: ...
    def ne(self, a: V, b: V) -> V: ...
    def eq(self, a: V, b: V) -> V: ...
    def where(self, cond: V, a: V, b: V) -> V: ...


def _differs_in_sign(o: FloatOps[V], m: V, b: V, then: V, otherwise: V) -> V:
    """`then` where `m` is non-zero and its sign differs from `b`'s, else `otherwise` (nested selects: no
    `&` of predicates, which a 0-d one does not survive under Triton's interpreter)."""
    zero = o.const(0.0, m)
    return o.where(o.ne(m, zero), o.where(o.lt(b, o.const(0.0, b)), o.where(o.gt(m, zero), then, otherwise),
                                          o.where(o.lt(m, zero), then, otherwise)), otherwise)


def floordiv(o: FloatOps[V], a: V, b: V) -> V:
    """torch's and Python's float floor division (see the module docstring)."""
    one = o.const(1.0, a)
    mod = o.fmod(a, b)
    div = o.div(o.sub(a, mod), b)
    div = _differs_in_sign(o, mod, b, o.sub(div, one), div)
    low = o.floor(div)
    rounded = o.where(o.gt(o.sub(div, low), o.const(0.5, a)), o.add(low, one), low)
    q = o.div(a, b)
    # |a| < |b| here, so q is finite: 1 / q has q's sign, also for -0.0 and subnormal q
    signed_zero = o.where(o.lt(o.div(one, q), o.const(0.0, a)), o.const(-0.0, a), o.const(0.0, a))
    result = o.where(o.ne(div, o.const(0.0, a)), rounded, signed_zero)
    return o.where(o.eq(b, o.const(0.0, b)), q, result)


def mod(o: FloatOps[V], a: V, b: V) -> V:
    """torch's and Python's float remainder: the sign of the divisor (see the module docstring)."""
    m = o.fmod(a, b)
    return _differs_in_sign(o, m, b, o.add(m, b), m)


class PythonOps:
    """The rules on Python floats (f64), for constant folding."""

    def const(self, value: float, like: float) -> float:
        return value

    def add(self, a: float, b: float) -> float:
        return a + b

    def sub(self, a: float, b: float) -> float:
        return a - b

    def div(self, a: float, b: float) -> float:
        if b == 0:  # IEEE, where Python raises
            return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b

    def fmod(self, a: float, b: float) -> float:
        return math.nan if math.isinf(a) or b == 0 or math.isnan(a) or math.isnan(b) else math.fmod(a, b)

    def floor(self, a: float) -> float:
        return a if math.isinf(a) or math.isnan(a) else float(math.floor(a))

    def lt(self, a: float, b: float) -> bool:
        return a < b

    def gt(self, a: float, b: float) -> bool:
        return a > b

    def ne(self, a: float, b: float) -> bool:
        return a != b

    def eq(self, a: float, b: float) -> bool:
        return a == b

    def where(self, cond: bool, a: float, b: float) -> float:
        return a if cond else b


__all__ = ["FloatOps", "PythonOps", "floordiv", "mod"]
