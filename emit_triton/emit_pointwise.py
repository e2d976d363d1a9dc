"""Pointwise ops and random numbers."""

from __future__ import annotations

from kir.dtypes import DType, fp8_rounded
from kir.pointwise import BinaryFn, CmpFn, UnaryFn
from kir.rng import RngKind
from physical import ops as P
from physical.model import Fragment, PValue

from .emit import REGISTER_DTYPE, TL_DTYPE, Emitter, emits, literal
from .numerics import as_int1, convert, float_pow, float_rule, library, round_bf16_value, wrap_i4

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
    """One Triton function per op: lowering (`physical.lower.decompose`) has written tanh, log1p and round
    as other ops and computes narrow floats' transcendentals in f32."""
    t = op.result.type
    x = em.arg(op.x, op.x.type, value_of=True)
    dt = op.x.type.dtype
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
        e = _predicate(t, f"tl.abs({x}) == float(\"inf\")")
    elif fn is UnaryFn.sqrt and dt is DType.f64:
        e = f"tl.sqrt({x})"  # IEEE in f64 (sqrt_rn is f32 only)
    elif fn in _SIMPLE_UNARY and dt in (DType.f32, DType.f64):
        e = _SIMPLE_UNARY[fn].format(x=x)
    else:
        raise AssertionError(f"no Triton function for {fn} of {dt} (physical lowering decomposes it)")
    if t.dtype is DType.i4:  # -(-8) and abs(-8) wrap to -8
        e = wrap_i4(e)
    em.line(f"{em.define(op.result)} = {e}")


_OPS = {BinaryFn.add: "+", BinaryFn.sub: "-", BinaryFn.mul: "*", BinaryFn.and_: "&", BinaryFn.or_: "|",
        BinaryFn.xor: "^", BinaryFn.shl: "<<", BinaryFn.shr: ">>"}


def _float_operand(em: Emitter, v: PValue, t: Fragment) -> str:
    """`v` as an operand of a float op computed at `t`'s register dtype (a literal becomes a typed 0-d tensor)."""
    s = em.arg(v, t)
    return f"tl.full((), {s}, {em.dtype(t)})" if v.id in em.literals else s


@emits(P.Binary)
def emit_binary(em: Emitter, op: P.Binary) -> None:
    """Float ops at their own dtype: lowering (`physical.lower.decompose`) has widened what must compute
    wider (bf16 and fp8 in f32, f16 division in f32, pow in f64)."""
    t = op.result.type
    dt = t.dtype
    if not dt.is_float:
        _emit_int_binary(em, op)
        return
    fn = op.fn
    if fn in (BinaryFn.div, BinaryFn.floordiv, BinaryFn.mod, BinaryFn.pow, BinaryFn.maximum, BinaryFn.minimum):
        a, b = _float_operand(em, op.lhs, t), _float_operand(em, op.rhs, t)
    else:
        a, b = em.arg(op.lhs, t), em.arg(op.rhs, t)
    if fn in _OPS:
        e = f"{a} {_OPS[fn]} {b}"
    elif fn is BinaryFn.div:
        e = f"{a} / {b}" if dt is DType.f64 else f"tl.div_rn({a}, {b})"  # IEEE division (f64 `/` is already)
    elif fn in (BinaryFn.floordiv, BinaryFn.mod):  # torch's and Python's rule (kir.float_rules)
        e = float_rule(em, fn.value, a, b, em.dtype(t))
    elif fn is BinaryFn.pow and dt is DType.f64:
        e = float_pow(em, a, b, em.dtype(t))
    elif fn in (BinaryFn.maximum, BinaryFn.minimum):
        cmp = ">" if fn is BinaryFn.maximum else "<"
        # NaN propagates from either side (no `|` of predicates: a 0-d one does not mix under the interpreter)
        e = f"tl.where({a} != {a}, {a}, tl.where({a} {cmp} {b}, {a}, {b}))"
    else:
        raise AssertionError(f"no Triton function for {fn} of {dt} (physical lowering widens it)")
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
    # a result at its KIR width takes index operands at that width (a select from an if over indices); a
    # select of two literals (an `if` yielding integer constants) takes typed ones: Triton would type the
    # result int32, its default for Python ints, not the KIR dtype (an i64 loop carry then bitcast to f64
    # met 32 bits; an i8 would not wrap)
    literals = op.on_true.id in em.literals and op.on_false.id in em.literals

    def value(v: PValue) -> str:
        return em.tensor(v) if literals else em.arg(v, t, not t.index)

    em.line(f"{em.define(op.result)} = tl.where({em.arg(op.cond, t)}, {value(op.on_true)}, {value(op.on_false)})")


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
