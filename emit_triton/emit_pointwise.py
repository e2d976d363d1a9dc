"""Pointwise ops and random numbers."""

from __future__ import annotations

from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn, UnaryFn
from kir.rng import RngKind
from physical import ops as P

from .emit import TL_DTYPE, Emitter, emits, literal

_LITERAL_DTYPES = (DType.f32, DType.i32, DType.pred)


@emits(P.Const)
def emit_const(em: Emitter, op: P.Const) -> None:
    n = em.define(op.result, "c")
    if op.dtype in _LITERAL_DTYPES or (op.dtype == DType.i64 and -(1 << 31) <= int(op.value) < (1 << 31)):
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
    narrow = dt in (DType.f16, DType.bf16)
    xf = f"{x}.to(tl.float32)" if narrow else x
    fn = op.fn
    if fn is UnaryFn.neg:
        e = f"-{x}"
    elif fn is UnaryFn.abs:
        e = f"tl.abs({x})"
    elif fn is UnaryFn.not_:
        e = f"~{x}" if dt != DType.pred else f"{x} == 0"
    elif fn is UnaryFn.isnan:
        e = f"{x} != {x}"
    elif fn is UnaryFn.isinf:
        e = f"tl.abs({xf}) == float(\"inf\")"
    elif fn in _SIMPLE_UNARY:
        e = _SIMPLE_UNARY[fn].format(x=xf)
    elif fn is UnaryFn.log1p:
        u = em.fresh("u")
        em.line(f"{u} = 1.0 + {xf}")
        # log(u) * x / (u - 1) corrects the rounding of 1 + x (exact where u == 1)
        e = f"tl.where({u} == 1.0, {xf}, tl.log({u}) * ({xf} / ({u} - 1.0)))"
    elif fn is UnaryFn.tanh:
        q = em.fresh("q")
        em.line(f"{q} = tl.exp(-2.0 * tl.abs({xf}))")
        e = f"tl.where({xf} < 0, -1.0, 1.0) * ((1.0 - {q}) / (1.0 + {q}))"
    elif fn is UnaryFn.round:
        f, d = em.fresh("fl"), em.fresh("frac")
        em.line(f"{f} = tl.floor({xf})")
        em.line(f"{d} = {xf} - {f}")
        e = (f"tl.where({d} > 0.5, {f} + 1.0, tl.where({d} < 0.5, {f}, "
             f"tl.where({f} % 2.0 == 0.0, {f}, {f} + 1.0)))")
    else:
        raise AssertionError(f"no emission for unary {fn}")
    if narrow and fn not in (UnaryFn.neg, UnaryFn.abs, UnaryFn.isnan, UnaryFn.isinf, UnaryFn.not_):
        e = f"({e}).to({TL_DTYPE[t.dtype]})"
    em.line(f"{em.define(op.result)} = {e}")


_OPS = {BinaryFn.add: "+", BinaryFn.sub: "-", BinaryFn.mul: "*", BinaryFn.and_: "&", BinaryFn.or_: "|",
        BinaryFn.xor: "^", BinaryFn.shl: "<<", BinaryFn.shr: ">>"}


@emits(P.Binary)
def emit_binary(em: Emitter, op: P.Binary) -> None:
    t = op.result.type
    a, b = em.arg(op.lhs, t), em.arg(op.rhs, t)
    dt = t.dtype
    fn = op.fn
    if fn in _OPS:
        e = f"{a} {_OPS[fn]} {b}"
    elif fn is BinaryFn.div:
        e = f"tl.div_rn({em.tensor(op.lhs) if op.lhs.id in em.literals else a}, {b})" \
            if dt in (DType.f32, DType.f64) else f"{a} / {b}"
    elif fn is BinaryFn.floordiv:
        e = f"tl.floor({a} / {b})" if dt.is_float else f"{a} // {b}"  # integers: C truncation, as KIR
    elif fn is BinaryFn.mod:
        e = f"{a} % {b}"  # floats: fmod; integers: sign of the dividend (C), as KIR
    elif fn is BinaryFn.pow:
        m = em.fresh("mag")
        em.line(f"{m} = tl.exp2({b} * tl.log2(tl.abs({a})))")
        integral = f"(tl.floor({b}) == {b})"
        odd = f"(tl.floor({b} * 0.5) * 2.0 != {b})"
        e = (f"tl.where({b} == 0.0, 1.0, tl.where({a} < 0, tl.where({integral}, tl.where({odd}, -{m}, {m}), "
             f"float(\"nan\")), {m}))")
    elif fn in (BinaryFn.maximum, BinaryFn.minimum):
        cmp = ">" if fn is BinaryFn.maximum else "<"
        if dt.is_float:  # NaN propagates from either side
            e = f"tl.where(({a} {cmp} {b}) | ({a} != {a}), {a}, {b})"
        else:
            e = f"tl.{'maximum' if fn is BinaryFn.maximum else 'minimum'}({a}, {b})"
    else:
        raise AssertionError(f"no emission for binary {fn}")
    em.line(f"{em.define(op.result)} = {e}")


_CMP = {CmpFn.eq: "==", CmpFn.ne: "!=", CmpFn.lt: "<", CmpFn.le: "<=", CmpFn.gt: ">", CmpFn.ge: ">="}


@emits(P.Compare)
def emit_compare(em: Emitter, op: P.Compare) -> None:
    t = op.result.type
    em.line(f"{em.define(op.result, 'm')} = {em.arg(op.lhs, t)} {_CMP[op.fn]} {em.arg(op.rhs, t)}")


@emits(P.Select)
def emit_select(em: Emitter, op: P.Select) -> None:
    t = op.result.type
    em.line(f"{em.define(op.result)} = tl.where({em.arg(op.cond, t)}, {em.arg(op.on_true, t)}, "
            f"{em.arg(op.on_false, t)})")


@emits(P.Cast)
def emit_cast(em: Emitter, op: P.Cast) -> None:
    src = op.x
    x = em.name(src)
    if op.dtype == DType.pred and not src.type.dtype.is_pred:
        e = f"{x} != 0"
    else:
        e = f"tl.cast({x}, {TL_DTYPE[op.dtype]})"
    em.line(f"{em.define(op.result)} = {e}")


@emits(P.Bitcast)
def emit_bitcast(em: Emitter, op: P.Bitcast) -> None:
    em.line(f"{em.define(op.result)} = {em.tensor(op.x)}.to({TL_DTYPE[op.dtype]}, bitcast=True)")


_RNG = {RngKind.rand: "tl.rand", RngKind.randn: "tl.randn", RngKind.randint: "tl.randint"}


@emits(P.Random)
def emit_random(em: Emitter, op: P.Random) -> None:
    off = op.offset
    # The counter's high word comes from the offset's dtype width: keep the KIR dtype.
    o = f"tl.cast({em.name(off)}, {TL_DTYPE[off.type.dtype]})"
    seed = em.name(op.seed)
    em.line(f"{em.define(op.result, 'r')} = {_RNG[op.kind]}({seed}, {o})")
