"""Counter-based RNG: Philox 4x32-10 in integer ops, bit-exact with Triton's `tl.randint`/`tl.rand`.

Mirrors `oracle/philox.py`: the seed is taken modulo 2**64 (low word k0, high word k1); an offset
wider than 32 bits gives counter words (low, high), a narrower one is extended by its own
signedness to c0 with c1 = 0. Each round multiplies 32-bit words in 64 bits. `rand` maps the first
word to [0, 1) with IEEE f32 operations only (exact everywhere). `randn` needs log/cos/sin, whose
last bits differ between XLA and Triton, so it is refused.
"""

from __future__ import annotations

from kir.core import Op
from kir.dtypes import DType
from kir.rng import Random, RngKind

from .context import Ctx
from .registry import emits
from .values import Val

_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
_ROUNDS = 10
_UNIFORM_SCALE = 4.6566127342e-10  # rounded to f32 by the literal, as Triton does


def _bits64(ctx: Ctx, x: Val) -> Val:
    """The two's-complement bits of an integer value as ui64 (signed values sign-extend)."""
    s = ctx.ssa
    if x.dtype.is_signed:
        return s.bitcast(s.convert(x, DType.i64), DType.u64)
    return s.convert(x, DType.u64)


def _low_high(ctx: Ctx, bits: Val) -> tuple[Val, Val]:
    s = ctx.ssa
    low = s.convert(s.binary("and", bits, ctx.splat_like(0xFFFFFFFF, bits)), DType.u32)
    high = s.convert(s.binary("shift_right_logical", bits, ctx.splat_like(32, bits)), DType.u32)
    return low, high


def _mulhilo(ctx: Ctx, factor: int, x: Val) -> tuple[Val, Val]:
    prod = ctx.ssa.binary("multiply", ctx.ssa.convert(x, DType.u64), ctx.splat_like(factor, x, DType.u64))
    lo, hi = _low_high(ctx, prod)
    return hi, lo


def philox_first_word(ctx: Ctx, seed: Val, offset: Val) -> Val:
    s = ctx.ssa
    k0, k1 = _low_high(ctx, _bits64(ctx, seed))
    if offset.dtype.bits > 32:
        c0, c1 = _low_high(ctx, _bits64(ctx, offset))
    else:
        wide = s.convert(offset, DType.i32 if offset.dtype.is_signed else DType.u32)
        c0 = s.bitcast(wide, DType.u32)
        c1 = ctx.splat_like(0, c0)
    c2 = ctx.splat_like(0, c0)
    c3 = ctx.splat_like(0, c0)
    for _ in range(_ROUNDS):
        kb0 = ctx.expand(ctx.lift(k0, c0.depth), c0.logical, [])
        kb1 = ctx.expand(ctx.lift(k1, c0.depth), c0.logical, [])
        hi_b, lo_b = _mulhilo(ctx, _ROUND_B, c2)
        hi_a, lo_a = _mulhilo(ctx, _ROUND_A, c0)
        c0, c1, c2, c3 = (s.binary("xor", s.binary("xor", hi_b, c1), kb0), lo_b,
                          s.binary("xor", s.binary("xor", hi_a, c3), kb1), lo_a)
        k0 = s.binary("add", k0, ctx.splat_like(_KEY_A, k0))
        k1 = s.binary("add", k1, ctx.splat_like(_KEY_B, k1))
    return c0


def uniform(ctx: Ctx, word: Val) -> Val:
    s = ctx.ssa
    x = s.bitcast(word, DType.i32)
    x = s.select(s.compare("LT", x, ctx.splat_like(0, x)), s.unary("not", x), x)
    f = s.convert(x, DType.f32)
    return s.binary("multiply", f, ctx.splat_like(_UNIFORM_SCALE, f))


@emits(Random)
def _random(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Random)
    if op.kind is RngKind.randn:
        raise ctx.refuse("randn uses log, cos and sin, whose last bits differ between XLA and Triton, so it "
                         "cannot be bit-exact")
    seed = ctx.get(op.seed)
    offset = ctx.get(op.offset)
    offset = ctx.lift(offset, seed.depth)
    word = philox_first_word(ctx, seed, offset)
    ctx.set(op.result, uniform(ctx, word) if op.kind is RngKind.rand else word)
