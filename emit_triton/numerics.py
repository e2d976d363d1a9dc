"""KIR's numeric rules in Triton: register dtypes, bf16, casts and integer powers.

bf16 values live in f32 registers holding values exactly representable in bf16 (as in the oracle):
every op with a bf16 result computes in f32 and rounds to the nearest bf16 (ties to even) with
integer operations on the f32 bit pattern. Loads and stores move the 16-bit pattern with shifts, so
that the generated code gives the same bits on a GPU and under Triton's interpreter (which computes on
bf16 bit patterns as if they were integers and truncates, rather than rounds, f32 -> bf16). For the
other floats, double rounding through f32 is innocuous (24 >= 2p + 2 for f16 and bf16), so f16 ops
also compute in f32.

Float -> integer casts truncate toward zero and saturate at the target's range, NaN -> 0 (PTX
`cvt.rzi.sat`), as the oracle defines them; Triton's own cast leaves out-of-range values undefined.
"""

from __future__ import annotations

import numpy as np

from kir import float_rules
from kir.dtypes import FP8, DType, bf16_rounded_bits

from .emit import DEVICE_FLAG, REGISTER_DTYPE, Emitter

_LIBRARY = {
    "round_bf16": '''@triton.jit
def _intent_round_bf16(x):
    # nearest bf16 (ties to even) held in f32; NaN stays NaN
    bits = x.to(tl.uint32, bitcast=True)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) & 0xFFFF0000
    return tl.where(x != x, float("nan"), rounded.to(tl.float32, bitcast=True))
''',
    "load_bf16": '''@triton.jit
def _intent_load_bf16(x):
    # a bf16 tensor from memory -> its exact f32 value
    return (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)
''',
    "store_bf16": '''@triton.jit
def _intent_store_bf16(x):
    # an f32 holding a bf16 value -> the bf16 tensor to store (its high half)
    return (x.to(tl.uint32, bitcast=True) >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
''',
    "merge_i4": '''@triton.jit
def _intent_merge_i4(a, v, q, m):
    # nibble q & 1 of the byte at address a set to v (0..15), every other bit of memory left as it is: atomic and/or
    # on the byte's aligned 32-bit word, so that a program writing the other nibble at the same time is not clobbered
    word = (a & -4).to(tl.pointer_type(tl.int32))
    shift = ((a & 3) * 8 + (q & 1) * 4).to(tl.int32)
    tl.atomic_and(word, ~(15 << shift), mask=m)
    tl.atomic_or(word, v << shift, mask=m)
''',
    "store_i4": '''@triton.jit
def _intent_store_i4(ptr, v, q, m):
    # i4 values v at last-axis positions q into the bytes at ptr (kir.dtypes.I4_PACKING), members m. Consecutive
    # members that hold both nibbles of one byte (positions 2j, 2j + 1, both written) store the byte whole; any other
    # member merges its nibble into memory (_intent_merge_i4): no store touches a nibble it does not own
    n: tl.constexpr = ptr.numel
    a = ptr.to(tl.int64)
    v = v.to(tl.int32) & 15
    if n == 1:
        _intent_merge_i4(a, v, q, m)
    else:
        p0, p1 = tl.split(tl.reshape(ptr, (n // 2, 2)))
        a0, a1 = tl.split(tl.reshape(a, (n // 2, 2)))
        v0, v1 = tl.split(tl.reshape(v, (n // 2, 2)))
        q0, q1 = tl.split(tl.reshape(q, (n // 2, 2)))
        m0, m1 = tl.split(tl.reshape(m, (n // 2, 2)))
        pair = (a0 == a1) & (q1 == q0 + 1) & ((q0 & 1) == 0) & m0 & m1
        tl.store(p0, (v0 | (v1 << 4)).to(p0.dtype.element_ty), mask=pair)
        _intent_merge_i4(a0, v0, q0, m0 & (pair == 0))
        _intent_merge_i4(a1, v1, q1, m1 & (pair == 0))
''',
    "ipow": '''@triton.jit
def _intent_ipow(a, b, BITS: tl.constexpr, SIGNED: tl.constexpr):
    # exact repeated squaring wrapping at the width; a negative exponent truncates 1 / a**-b toward 0
    zero = a * 0 + b * 0
    result = zero + 1
    base = a + zero
    e = b + zero
    neg = e < 0
    e = tl.where(neg, zero, e)
    for _ in tl.static_range(BITS):
        result = tl.where((e & 1) != 0, result * base, result)
        base = base * base
        e = e >> 1
    if SIGNED:
        inverse = tl.where(a + zero == 1, zero + 1, zero)
        inverse = tl.where(a + zero == -1, tl.where((b & 1) != 0, zero - 1, zero + 1), inverse)
        result = tl.where(neg, inverse, result)
    return result
''',
}


# The fp8 helpers, generated from each format's parameters (`kir.dtypes.FP8`). Beyond those, the formats differ only
# in their special values: f8e4m3 has no infinities and one NaN pattern (0x7F, either sign), f8e5m2 has IEEE
# infinities and NaNs.
_FP8_SPECIALS = {
    DType.f8e4m3: {
        "load": 'mag = tl.where((i & 0x7F) == 0x7F, float("nan"), mag)',
        "overflow": 'float("nan")',
        "store": ['mag = tl.where(x != x, 0x7F, mag)', "return (((bits >> 24) & 0x80) | mag).to(tl.uint8)"],
        "store_doc": "NaN -> 0x7F",
    },
    DType.f8e5m2: {
        "load": 'mag = tl.where(e == 0x1F, tl.where(m == 0.0, float("inf"), float("nan")), mag)',
        "overflow": 'tl.where(x < 0, float("-inf"), float("inf"))',
        "store": ['mag = tl.where(a == float("inf"), 0x7C, mag)', "mag = tl.where(x != x, 0x7E, mag)",
                  "sign = tl.where(x != x, 0, (bits >> 24) & 0x80)", "return (sign | mag).to(tl.uint8)"],
        "store_doc": "+-inf -> 0x7C/0xFC, NaN -> 0x7E",
    },
}


def _fp8_helpers(dtype: DType) -> dict[str, str]:
    """`load_<fmt>` (uint8 bits -> the exact f32 value), `round_<fmt>` (f32 -> the nearest value of the format,
    ties to even, held in f32, without saturation: past the largest finite value, the format's overflow) and
    `store_<fmt>` (an f32 holding a value of the format -> its uint8 bits)."""
    largest, bias, mant, emin = FP8[dtype]
    special = _FP8_SPECIALS[dtype]
    exp_mask, mant_mask = (1 << (7 - mant)) - 1, (1 << mant) - 1
    store = "\n    ".join(special["store"])
    load = f"""@triton.jit
def _intent_load_{dtype}(b):
    # {dtype} bits (uint8) -> the exact f32 value: 1 sign, {7 - mant} exponent (bias {bias}), {mant} mantissa bits
    i = b.to(tl.int32)
    e = (i >> {mant}) & 0x{exp_mask:X}
    m = (i & {mant_mask}).to(tl.float32)
    scale = ((tl.maximum(e, 1) + {127 - bias - mant}) << 23).to(tl.float32, bitcast=True)  # 2**(max(e,1)-{bias}-{mant})
    mag = tl.where(e == 0, m, m + {float(1 << mant)}) * scale
    {special["load"]}
    return tl.where((i & 0x80) != 0, -mag, mag)
"""
    rounded = f"""@triton.jit
def _intent_round_{dtype}(x):
    # the nearest {dtype} (ties to even) held in f32: x / 2**(E - {mant}) is exact (E at least the smallest normal
    # exponent), and (q + 1.5 * 2**23) - 1.5 * 2**23 rounds it to an integer, ties to even, in IEEE f32 additions
    bits = x.to(tl.int32, bitcast=True)
    e = tl.maximum(((bits >> 23) & 0xFF) - 127, {emin})
    scale = ((e + {127 - mant}) << 23).to(tl.float32, bitcast=True)
    inverse = (({127 + mant} - e) << 23).to(tl.float32, bitcast=True)
    r = (x * inverse + 12582912.0) - 12582912.0
    y = tl.where(r == 0.0, x * 0.0, r * scale)
    y = tl.where(tl.abs(y) > {largest}, {special["overflow"]}, y)
    return tl.where(x != x, x, y)
"""
    stored = f"""@triton.jit
def _intent_store_{dtype}(x):
    # an f32 holding an {dtype} value -> its bits (uint8); {special["store_doc"]}
    bits = x.to(tl.int32, bitcast=True)
    a = tl.abs(x)
    normal = (((((bits >> 23) & 0xFF) - {127 - bias}) << {mant}) | ((bits >> {23 - mant}) & {mant_mask}))
    sub = (a * {2.0 ** (bias - 1 + mant)}).to(tl.int32)
    mag = tl.where(a >= {2.0 ** emin!r}, normal, sub)
    {store}
"""
    return {f"load_{dtype}": load, f"round_{dtype}": rounded, f"store_{dtype}": stored}


for _fp8 in FP8:
    _LIBRARY.update(_fp8_helpers(_fp8))


class _TritonOps:
    """`kir.float_rules` written out as the lines of a `@triton.jit` helper over one float dtype."""

    def __init__(self, f64: bool) -> None:
        self.f64 = f64
        self.lines: list[str] = []

    def _let(self, expr: str) -> str:
        name = f"t{len(self.lines)}"
        self.lines.append(f"    {name} = {expr}")
        return name

    def const(self, value: float, like: str) -> str:
        return repr(value)

    def add(self, a: str, b: str) -> str:
        return self._let(f"{a} + {b}")

    def sub(self, a: str, b: str) -> str:
        return self._let(f"{a} - {b}")

    def div(self, a: str, b: str) -> str:
        if a == "1.0":
            a = f"tl.full((), 1.0, {'tl.float64' if self.f64 else 'tl.float32'})"
        return self._let(f"{a} / {b}" if self.f64 else f"tl.div_rn({a}, {b})")  # IEEE (f64 `/` is)

    def fmod(self, a: str, b: str) -> str:
        # the exact remainder: the device's `%` is a - trunc(a / b) * b, wrong when a / b rounds to an integer.
        # f32 takes libdevice's f64 fmod (exact, so exact in f32 too): its f32 one flushes subnormals.
        device = f"tl.extra.cuda.libdevice.fmod({a}, {b})" if self.f64 else \
            f"tl.extra.cuda.libdevice.fmod({a}.to(tl.float64), {b}.to(tl.float64)).to(tl.float32)"
        self.lines += [f"    if {DEVICE_FLAG}:", f"        r = {device}", "    else:",
                       f"        r = {a} % {b}  # NumPy's fmod under the interpreter"]
        return "r"

    def floor(self, a: str) -> str:
        return self._let(f"tl.floor({a})")

    def _cmp(self, op: str, a: str, b: str) -> str:
        return f"{a} {op} {b}"  # used only as a select's condition

    def lt(self, a: str, b: str) -> str:
        return self._cmp("<", a, b)

    def gt(self, a: str, b: str) -> str:
        return self._cmp(">", a, b)

    def ne(self, a: str, b: str) -> str:
        return self._cmp("!=", a, b)

    def eq(self, a: str, b: str) -> str:
        return self._cmp("==", a, b)

    def where(self, cond: str, a: str, b: str) -> str:
        return self._let(f"tl.where({cond}, {a}, {b})")


def float_rule(em: Emitter, rule: str, a: str, b: str, compute: str) -> str:
    """A call of the helper evaluating `kir.float_rules.<rule>` (floordiv, mod) on `compute` operands."""
    f64 = compute == "tl.float64"
    key = f"rule:{rule}:{compute}"
    if key not in em.helper_keys:
        name = f"_intent_{rule}_{'f64' if f64 else 'f32'}"
        em.helper_keys[key] = name
        ops = _TritonOps(f64)
        result = getattr(float_rules, rule)(ops, "a", "b")
        doc = f"    # kir.float_rules.{rule} (torch's and Python's float {'//' if rule == 'floordiv' else '%'})"
        em.helpers.append("\n".join(["@triton.jit", f"def {name}(a, b, {DEVICE_FLAG}: tl.constexpr):", doc]
                                    + ops.lines + [f"    return {result}"]) + "\n")
    em.uses_device_flag = True
    return f"{em.helper_keys[key]}({a}, {b}, {DEVICE_FLAG})"


_POW = f'''@triton.jit
def _intent_pow_magnitude(x, b):
    # |x| ** b for finite x > 0 in f64 under the interpreter, within 2 ulp: log2 x = e + log2 m in
    # double-double (m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s) with s = (m - 1) / (m + 1)), y = b * log2 x
    # in double-double (products split exactly by fma), then exp2(y_hi) * (1 + y_lo * ln 2)
    one = tl.full((), 1.0, tl.float64)
    bits = x.to(tl.int64, bitcast=True)
    sub = ((bits >> 52) & 0x7FF) == 0
    xs = tl.where(sub, x * 18014398509481984.0, x)  # subnormals scaled by 2**54
    bits = xs.to(tl.int64, bitcast=True)
    e = ((bits >> 52) & 0x7FF) - tl.where(sub, 1077, 1023)
    m = ((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000).to(tl.float64, bitcast=True)
    big = m > tl.full((), 1.4142135623730951, tl.float64)
    m = tl.where(big, m * 0.5, m)
    ef = tl.where(big, e + 1, e).to(tl.float64)
    num = m - 1.0  # exact (Sterbenz)
    den = m + 1.0
    t = den - m
    den_lo = (m - (den - t)) + (1.0 - t)
    s = num / den
    s_lo = (tl.fma(-s, den, num) - s * den_lo) / den
    s2 = s * s
    poly = one / 27.0
    for k in tl.static_range(12, 0, -1):
        poly = poly * s2 + one / (2 * k + 1)
    ln_hi = 2.0 * s
    ln_lo = 2.0 * s_lo + 2.0 * s * s2 * poly
    inv_hi = tl.full((), 1.4426950408889634, tl.float64)
    inv_lo = tl.full((), 2.0355273740931033e-17, tl.float64)
    l_hi = ln_hi * inv_hi
    l_lo = tl.fma(ln_hi, inv_hi, -l_hi) + (ln_hi * inv_lo + ln_lo * inv_hi)
    p1 = b * ef
    p1_lo = tl.fma(b, ef, -p1)
    p2 = b * l_hi
    p2_lo = tl.fma(b, l_hi, -p2)
    y = p1 + p2
    z = y - p1
    y_lo = ((p1 - (y - z)) + (p2 - z)) + p1_lo + p2_lo + b * l_lo
    y_hi = y + y_lo
    y_lo = y_lo - (y_hi - y)
    r = tl.exp2(y_hi)
    return r + r * (y_lo * tl.full((), 0.6931471805599453, tl.float64))


@triton.jit
def _intent_pow(a, b, {DEVICE_FLAG}: tl.constexpr):
    # f64 operands. The device: libdevice's pow (C99's special cases, within 2 ulp in f64). The
    # interpreter (no libdevice): `_intent_pow_magnitude` with C's special cases.
    if {DEVICE_FLAG}:
        r = tl.extra.cuda.libdevice.pow(a, b)
    else:
        x = tl.abs(a)
        simple = tl.exp2(b * tl.log2(x))  # right for 0, inf and NaN, and where b * log2 x overflows
        finite = tl.where(x > 0.0, tl.where(x < float("inf"), True, False), False)
        careful = _intent_pow_magnitude(tl.where(finite, x, 1.0), b)
        m = tl.where(finite, tl.where(tl.abs(b * tl.log2(x)) < 2000.0, careful, simple), simple)
        integral = tl.floor(b) == b
        odd = tl.floor(b * 0.5) * 2.0 != b
        # a negative base needs an integral exponent; -0.0 keeps its sign for odd ones (nested selects,
        # no `&` of predicates: a 0-d one does not mix under the interpreter)
        signed = tl.where(odd, -m, m)
        zero = tl.where(1.0 / a < 0.0, tl.where(integral, signed, m), m)
        negative = tl.where(integral, signed, tl.where(a == float("-inf"), m, float("nan")))
        pw = tl.where(a < 0, negative, tl.where(a == 0.0, zero, m))
        # pow(x, 0) == pow(1, y) == pow(-1, +-inf) == 1, even for NaN operands
        r = tl.where(b == 0.0, 1.0, tl.where(a == 1.0, 1.0, tl.where(tl.abs(b) == float("inf"),
                                                                      tl.where(a == -1.0, 1.0, pw), pw)))
    return r
'''


def float_pow(em: Emitter, a: str, b: str, compute: str) -> str:
    """KIR float `pow` of two `compute` (f64) operands (see `_POW`)."""
    assert compute == "tl.float64"
    if "library:pow" not in em.helper_keys:
        em.helper_keys["library:pow"] = "_intent_pow"
        em.helpers.append(_POW)
    em.uses_device_flag = True
    return f"_intent_pow({a}, {b}, {DEVICE_FLAG})"


def library(em: Emitter, name: str) -> str:
    """The name of a fixed helper, added to the module on first use."""
    key = f"library:{name}"
    if key not in em.helper_keys:
        em.helper_keys[key] = f"_intent_{name}"
        em.helpers.append(_LIBRARY[name])
    return em.helper_keys[key]


def round_bf16_value(value: float) -> float:
    """A Python float rounded to the nearest bf16 (ties to even), as `_intent_round_bf16` does."""
    if value != value:
        return value
    with np.errstate(over="ignore"):
        return float(bf16_rounded_bits(value).view(np.float32))


def wrap_i4(expr: str) -> str:
    """An integer register value wrapped to i4 (two's complement at 4 bits), held in int8."""
    return f"((({expr}).to(tl.int32) << 28) >> 28).to(tl.int8)"


def fp8_bits(value: float, dtype: DType) -> str:
    """The uint8 bits of `value` rounded to the fp8 `dtype` (a local buffer's fill), as a literal."""
    from kir.dtypes import fp8_ml_dtype, fp8_rounded

    return str(int(fp8_rounded(value, dtype).astype(fp8_ml_dtype(dtype)).view(np.uint8)))


def from_storage(em: Emitter, expr: str, dtype: DType) -> str:
    """A tensor loaded from a buffer of `dtype` -> its register value (fp8 buffers are read as uint8 bits)."""
    if dtype.is_fp8:
        return f"{library(em, 'load_' + dtype.value)}({expr})"
    return f"{library(em, 'load_bf16')}({expr})" if dtype is DType.bf16 else expr


def to_storage(em: Emitter, expr: str, dtype: DType) -> str:
    """A register value -> the tensor stored into a buffer of `dtype` (fp8: its uint8 bits)."""
    if dtype.is_fp8:
        return f"{library(em, 'store_' + dtype.value)}({expr})"
    return f"{library(em, 'store_bf16')}({expr})" if dtype is DType.bf16 else expr


def narrow_result(em: Emitter, expr: str, dtype: DType) -> str:
    """An f32 result of an op computed in f32 for a narrower float `dtype`."""
    if dtype is DType.bf16:
        return f"{library(em, 'round_bf16')}({expr})"
    if dtype.is_fp8:
        return f"{library(em, 'round_' + dtype.value)}({expr})"
    if dtype is DType.f16:
        return f"({expr}).to(tl.float16)"
    return expr


def as_int1(predicate: str) -> str:
    """A comparison re-typed as int1 by a select (free on the device: select(c, 1, 0) is c). Triton's
    interpreter records a 0-d comparison with its operands' dtype, and a later broadcast then makes
    floats of it."""
    return f"tl.where({predicate}, True, False)"


def convert(em: Emitter, expr: str, src: DType, dst: DType) -> str:
    """KIR `cast` of a register value of `src` to `dst` (also accumulators to results)."""
    if src is DType.i4:
        # an i4 accumulator is held in int8 (Triton has no 4-bit integers): its sums and products agree with
        # i4's in the low four bits only, so an accumulator becomes a value here, wrapped
        expr = wrap_i4(expr)
    if src == dst:
        return expr
    if dst is DType.pred:
        return as_int1(f"{expr} != 0")
    if src.is_float and dst.is_int:
        return _float_to_int(em, expr, src, dst)
    if dst.in_f32:
        # ints and f64 reach f32 first (f64 -> bf16 rounds through f32, as torch does; innocuous for fp8)
        wide = expr if src is DType.f32 or src.in_f32 else f"{expr}.to(tl.float32)"
        return narrow_result(em, wide, dst)
    if src.is_fp8 and dst is DType.f32:
        return expr
    if dst is DType.i4:
        return wrap_i4(expr)
    return f"{expr}.to({REGISTER_DTYPE[dst]})"


def _float_to_int(em: Emitter, expr: str, src: DType, dst: DType) -> str:
    lo, hi = dst.int_range
    x = em.fresh("f")
    em.line(f"{x} = {expr}" + (".to(tl.float32)" if src is DType.f16 else ""))
    t = REGISTER_DTYPE[dst]
    inside = f"tl.where({x} != {x}, 0.0, {x}).to({t})"
    return (f"tl.where({x} >= {float(hi)!r}, tl.full((), {hi}, {t}), tl.where({x} <= {float(lo)!r}, "
            f"tl.full((), {lo}, {t}), {inside}))")


__all__ = ["REGISTER_DTYPE", "library", "float_rule", "float_pow",
           "as_int1", "convert", "from_storage", "to_storage", "narrow_result",
           "round_bf16_value"]
