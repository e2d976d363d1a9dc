"""Pointwise ops and random numbers."""

from __future__ import annotations

from kir.dtypes import DType, fp8_rounded
from kir.pointwise import BinaryFn, CmpFn, UnaryFn
from kir.rng import RngKind
from physical import ops as P
from physical.model import Fragment, PValue

from .emit import REGISTER_DTYPE, TL_DTYPE, Emitter, emits, literal
from .numerics import as_int1, convert, float_pow, float_rule, library, narrow_result, round_bf16_value, wrap_i4

_LITERAL_DTYPES = (DType.f32, DType.i32, DType.pred)


@emits(P.Const)
def emit_const(em: Emitter, op: P.Const) -> None:
    n = em.define(op.result, "c")
    if op.dtype is DType.bf16:  # held in f32 registers: the nearest bf16, as a Python float
        em.literals.add(op.result.id)
        em.line(f"{n} = {literal(round_bf16_value(float(op.value)), DType.f32)}")  # type: ignore[arg-type]
    elif op.dtype.is_fp8:  # held in f32 registers: the nearest fp8 value
        em.literals.add(op.result.id)
        em.line(f"{n} = {literal(float(fp8_rounded(float(op.value), op.dtype)), DType.f32)}")  # type: ignore
    elif op.dtype in _LITERAL_DTYPES or (op.dtype == DType.i64 and -(1 << 31) <= int(op.value) < (1 << 31)):
        em.literals.add(op.result.id)
        em.line(f"{n} = {literal(op.value, op.dtype)}")
    else:
        em.line(f"{n} = tl.full((), {literal(op.value, op.dtype)}, {TL_DTYPE[op.dtype]})")


_SIMPLE_UNARY = {UnaryFn.exp: "tl.exp({x})", UnaryFn.exp2: "tl.exp2({x})", UnaryFn.log: "tl.log({x})",
                 UnaryFn.log2: "tl.log2({x})", UnaryFn.sqrt: "tl.sqrt_rn({x})", UnaryFn.rsqrt: "tl.rsqrt({x})",
                 UnaryFn.sin: "tl.sin({x})", UnaryFn.cos: "tl.cos({x})", UnaryFn.sigmoid: "tl.sigmoid({x})",
                 UnaryFn.erf: "tl.erf({x})", UnaryFn.floor: "tl.floor({x})", UnaryFn.ceil: "tl.ceil({x})"}


@emits(P.Unary)
def emit_unary(em: Emitter, op: P.Unary) -> None:
    t = op.result.type
    x = em.arg(op.x, op.x.type, value_of=True)
    dt = op.x.type.dtype
    narrow = dt in (DType.f16, DType.bf16) or dt.is_fp8
    xf = f"{x}.to(tl.float32)" if dt is DType.f16 else x  # bf16 and fp8 are already held in f32
    fn = op.fn
    if fn is UnaryFn.neg:
        e = f"-{x}"
    elif fn is UnaryFn.abs:
        e = f"tl.abs({x})"
    elif fn is UnaryFn.not_:
        e = f"~{x}" if dt != DType.pred else _predicate(t, f"{x} == 0")
    elif fn is UnaryFn.isnan:
        e = _predicate(t, f"{x} != {x}")
    elif fn is UnaryFn.isinf:
        e = _predicate(t, f"tl.abs({xf}) == float(\"inf\")")
    elif fn is UnaryFn.sqrt and dt is DType.f64:
        e = f"tl.sqrt({xf})"  # IEEE in f64 (sqrt_rn is f32 only)
    elif fn in _SIMPLE_UNARY:
        e = _SIMPLE_UNARY[fn].format(x=xf)
    elif fn is UnaryFn.log1p:
        u = em.fresh("u")
        em.line(f"{u} = 1.0 + {xf}")
        # log(u) * x / (u - 1) corrects the rounding of 1 + x (exact where u == 1)
        e = (f"tl.where({u} == 1.0, {xf}, tl.where({u} == float(\"inf\"), {u}, "
             f"tl.log({u}) * ({xf} / ({u} - 1.0))))")
    elif fn is UnaryFn.tanh:
        q = em.fresh("q")
        em.line(f"{q} = tl.exp(-2.0 * tl.abs({xf}))")
        x2 = em.fresh("x2")
        em.line(f"{x2} = {xf} * {xf}")
        # small |x|: the odd series (keeps -0.0 and subnormals), where 1 - q cancels; to x**7 in f32
        # (relative error < 1e-9), to x**15 in f64 (< 1e-19: f64's own rounding dominates)
        coefficients = _TANH_SERIES_F64 if dt is DType.f64 else _TANH_SERIES_F64[:4]
        poly = repr(coefficients[-1])
        for c in reversed(coefficients[:-1]):
            poly = f"{c!r} + {x2} * ({poly})"
        series = f"{xf} * ({poly})"
        e = f"tl.where(tl.abs({xf}) < 0.1, {series}, tl.where({xf} < 0, -1.0, 1.0) * ((1.0 - {q}) / (1.0 + {q})))"
    elif fn is UnaryFn.round:
        f, d = em.fresh("fl"), em.fresh("frac")
        em.line(f"{f} = tl.floor({xf})")
        em.line(f"{d} = {xf} - {f}")
        e = (f"tl.where({d} > 0.5, {f} + 1.0, tl.where({d} < 0.5, {f}, "
             f"tl.where({f} % 2.0 == 0.0, {f}, {f} + 1.0)))")
    else:
        raise AssertionError(f"no emission for unary {fn}")
    if narrow and fn not in (UnaryFn.neg, UnaryFn.abs, UnaryFn.isnan, UnaryFn.isinf, UnaryFn.not_):
        e = narrow_result(em, e, t.dtype)
    if t.dtype is DType.i4:  # -(-8) and abs(-8) wrap to -8
        e = wrap_i4(e)
    em.line(f"{em.define(op.result)} = {e}")


# The Taylor coefficients of tanh(x) / x in x**2: 1, -1/3, 2/15, -17/315, 62/2835, ...
_TANH_SERIES_F64 = (1.0, -1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075,
                    -929569 / 638512875)

_OPS = {BinaryFn.add: "+", BinaryFn.sub: "-", BinaryFn.mul: "*", BinaryFn.and_: "&", BinaryFn.or_: "|",
        BinaryFn.xor: "^", BinaryFn.shl: "<<", BinaryFn.shr: ">>"}


# f16 ops that Triton does not compute exactly in f16 (division is approximate, pow needs f32)
_F16_IN_F32 = (BinaryFn.div, BinaryFn.floordiv, BinaryFn.mod, BinaryFn.pow)


def _float_operand(em: Emitter, v: PValue, t: Fragment, compute: str) -> str:
    """`v` as an operand computed in `compute` (a literal becomes a typed 0-d tensor)."""
    s = em.arg(v, t)
    if v.id in em.literals:
        return f"tl.full((), {s}, {compute})"
    return s if em.dtype(v.type) == compute else f"{s}.to({compute})"


@emits(P.Binary)
def emit_binary(em: Emitter, op: P.Binary) -> None:
    t = op.result.type
    dt = t.dtype
    if not dt.is_float:
        _emit_int_binary(em, op)
        return
    fn = op.fn
    wide = dt.in_f32 or (dt is DType.f16 and fn in _F16_IN_F32) or (fn is BinaryFn.pow and dt is DType.f32)
    # pow computes in f64 (rounded once to the result: within one ulp of the correctly rounded value)
    compute = "tl.float64" if fn is BinaryFn.pow else "tl.float32" if wide else em.dtype(t)
    if wide or fn in (BinaryFn.div, BinaryFn.floordiv, BinaryFn.mod, BinaryFn.pow, BinaryFn.maximum,
                      BinaryFn.minimum):
        a, b = _float_operand(em, op.lhs, t, compute), _float_operand(em, op.rhs, t, compute)
    else:
        a, b = em.arg(op.lhs, t), em.arg(op.rhs, t)
    exact = dt is DType.f64 or compute == "tl.float64"
    if fn in _OPS:
        e = f"{a} {_OPS[fn]} {b}"
    elif fn is BinaryFn.div:
        e = f"{a} / {b}" if exact else f"tl.div_rn({a}, {b})"  # IEEE division (f64 `/` is already)
    elif fn in (BinaryFn.floordiv, BinaryFn.mod):  # torch's and Python's rule (kir.float_rules)
        e = float_rule(em, fn.value, a, b, compute)
    elif fn is BinaryFn.pow:
        e = float_pow(em, a, b, compute)
    elif fn in (BinaryFn.maximum, BinaryFn.minimum):
        cmp = ">" if fn is BinaryFn.maximum else "<"
        # NaN propagates from either side (no `|` of predicates: a 0-d one does not mix under the interpreter)
        e = f"tl.where({a} != {a}, {a}, tl.where({a} {cmp} {b}, {a}, {b}))"
    else:
        raise AssertionError(f"no emission for binary {fn}")
    if fn is BinaryFn.pow and dt is not DType.f64:  # one rounding from f64 (bf16 through f32, innocuous)
        e = f"({e}).to(tl.float32)" if dt is DType.f32 or dt.in_f32 else f"({e}).to(tl.float16)"
        if dt.in_f32:
            e = narrow_result(em, e, dt)
    elif wide and fn not in (BinaryFn.maximum, BinaryFn.minimum):
        e = narrow_result(em, e, dt)
    em.line(f"{em.define(op.result)} = {e}")


def _emit_int_binary(em: Emitter, op: P.Binary) -> None:
    t = op.result.type
    # a result at its KIR width takes index operands at that width too (no 32-bit intermediate)
    a, b = em.arg(op.lhs, t, value_of=not t.index), em.arg(op.rhs, t, value_of=not t.index)
    if op.lhs.id in em.literals and op.rhs.id in em.literals and not t.dtype.is_pred:
        # two Python ints would compute as Python does (no wrapping, floor division): type the left one
        a = f"tl.full((), {a}, {em.dtype(t)})"
    fn = op.fn
    if fn in _OPS and t.dtype.is_pred:
        e = f"{a} {_OPS[fn]} {b}"
        if op.lhs.id not in em.literals or op.rhs.id not in em.literals:
            e = _predicate(t, e)  # a 0-d operand may hold its comparison's operand dtype under the interpreter
    elif fn in _OPS:
        e = f"{a} {_OPS[fn]} {b}"
    elif fn is BinaryFn.div or fn is BinaryFn.floordiv:
        e = f"{a} // {b}"  # C truncation, as KIR
    elif fn is BinaryFn.mod:
        e = f"{a} % {b}"  # the sign of the dividend (C), as KIR
    elif fn is BinaryFn.pow:
        dt = em.dtype(t)
        x, y = (f"tl.full((), {em.arg(v, t)}, {dt})" if v.id in em.literals else em.arg(v, t, value_of=not t.index)
                for v in (op.lhs, op.rhs))
        e = f"{library(em, 'ipow')}({x}, {y}, {t.dtype.bits}, {t.dtype.is_signed})"
    elif fn in (BinaryFn.maximum, BinaryFn.minimum):
        e = f"tl.{'maximum' if fn is BinaryFn.maximum else 'minimum'}({a}, {b})"
    else:
        raise AssertionError(f"no emission for binary {fn}")
    if t.dtype is DType.i4 and not t.index:
        e = wrap_i4(e)
    em.line(f"{em.define(op.result)} = {e}")


_CMP = {CmpFn.eq: "==", CmpFn.ne: "!=", CmpFn.lt: "<", CmpFn.le: "<=", CmpFn.gt: ">", CmpFn.ge: ">="}


def _predicate(t: Fragment, e: str) -> str:
    return as_int1(e) if t.rank == 0 else e  # only a 0-d comparison is mis-typed by the interpreter


@emits(P.Compare)
def emit_compare(em: Emitter, op: P.Compare) -> None:
    t = op.result.type
    e = f"{em.arg(op.lhs, t)} {_CMP[op.fn]} {em.arg(op.rhs, t)}"
    em.line(f"{em.define(op.result, 'm')} = {_predicate(t, e)}")


@emits(P.Select)
def emit_select(em: Emitter, op: P.Select) -> None:
    t = op.result.type
    # a result at its KIR width takes index operands at that width (a select from an if over indices)
    em.line(f"{em.define(op.result)} = tl.where({em.arg(op.cond, t)}, {em.arg(op.on_true, t, not t.index)}, "
            f"{em.arg(op.on_false, t, not t.index)})")


@emits(P.Cast)
def emit_cast(em: Emitter, op: P.Cast) -> None:
    src = op.x
    dt = src.type.dtype
    x = em.name(src)
    if src.id in em.literals:
        x = f"tl.full((), {x}, {em.dtype(src.type)})"
    if src.type.index:
        x = f"{x}.to({REGISTER_DTYPE[dt]})"
    em.line(f"{em.define(op.result)} = {convert(em, x, dt, op.dtype)}")


@emits(P.Bitcast)
def emit_bitcast(em: Emitter, op: P.Bitcast) -> None:
    src = op.x
    x = em.tensor(src)
    if src.type.index:  # the KIR value's own width (an index may be held at the program's index width)
        x = f"{x}.to({REGISTER_DTYPE[src.type.dtype]})"
    if src.type.dtype.is_fp8:  # the 8-bit pattern of the f32 register value
        x = f"{library(em, 'store_' + src.type.dtype.value)}({x})"
    elif src.type.dtype.bits < 32 and src.type.dtype is not DType.bf16 and not src.type.dtype.is_pred:
        # through 32 bits and back (exact): the interpreter may hold a reduced 8/16-bit value in 32-bit storage
        wide = "tl.float32" if src.type.dtype.is_float else "tl.int32" if src.type.dtype.is_signed else "tl.uint32"
        x = f"({x}).to({wide}).to({TL_DTYPE[src.type.dtype]})"
    if src.type.dtype is DType.bf16:  # the 16-bit pattern of the f32 register value
        x = f"(({x}).to(tl.uint32, bitcast=True) >> 16).to(tl.uint16)"
    if op.dtype.is_fp8:
        x = f"{library(em, 'load_' + op.dtype.value)}(({x}).to(tl.uint8, bitcast=True))"
    elif op.dtype is DType.bf16:
        x = f"(({x}).to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)"
    else:
        x = f"({x}).to({TL_DTYPE[op.dtype]}, bitcast=True)"
    em.line(f"{em.define(op.result)} = {x}")


_RNG = {RngKind.rand: "tl.rand", RngKind.randn: "tl.randn", RngKind.randint: "tl.randint"}


@emits(P.Random)
def emit_random(em: Emitter, op: P.Random) -> None:
    off = op.offset
    # The counter's high word comes from the offset's dtype width: keep the KIR dtype.
    o = f"tl.cast({em.name(off)}, {TL_DTYPE[off.type.dtype]})"
    seed = em.name(op.seed)
    em.line(f"{em.define(op.result, 'r')} = {_RNG[op.kind]}({seed}, {o})")
