"""Contractions as `stablehlo.dot_general`.

Operands are converted to the accumulator dtype first: f16/bf16 products are exact in f32 and i8
products in i32, so this is "multiply, accumulate in acc". f32 `ieee` asks for HIGHEST precision
(no TF32); `tf32` rounds the operands to tf32 (10 mantissa bits, nearest even, with
`reduce_precision`) and then multiplies exactly, as the oracle does. Inside `parallel`, the batch
axes join the dot's batch dimensions (or stay free axes of the only batched operand).
"""

from __future__ import annotations

from kir.contract import Dot, Precision
from kir.core import Op

from .context import Ctx
from .pointwise import concrete
from .registry import emits
from .values import Val


def _to_acc(ctx: Ctx, x: Val, acc) -> Val:
    return ctx.ssa.convert(x, acc) if acc.bits >= x.dtype.bits else x


@emits(Dot)
def _dot(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Dot)
    acc = concrete(ctx, op.acc_dtype)
    lhs, rhs = _to_acc(ctx, ctx.get(op.lhs), acc), _to_acc(ctx, ctx.get(op.rhs), acc)
    if op.precision is Precision.tf32:
        lhs, rhs = (ctx.ssa.reduce_precision(x, 8, 10, "tf32") for x in (lhs, rhs))
    precision = "HIGHEST"
    s = ctx.ssa
    lb, rb, lc, rc = op.lhs_batch, op.rhs_batch, op.lhs_contract, op.rhs_contract
    if lhs.depth and not rhs.depth and not lb:
        # The batch axes are leading free axes of lhs: the result is already [batch, lhs free, rhs free].
        d = lhs.depth
        out = s.dot_general(lhs, rhs, [], [], [d + a for a in lc], list(rc), precision, d)
    elif rhs.depth and not lhs.depth and not lb:
        d = rhs.depth
        raw = s.dot_general(lhs, rhs, [], [], list(lc), [d + a for a in rc], precision, 0)
        n_lhs_free = lhs.rank - len(lc)
        perm = list(range(n_lhs_free, n_lhs_free + d)) + list(range(n_lhs_free)) + \
            list(range(n_lhs_free + d, raw.rank))
        out = s.transpose(raw, perm, d)
    else:
        lhs, rhs = ctx.lift_all(lhs, rhs)
        d = lhs.depth
        batch = list(range(d))
        out = s.dot_general(lhs, rhs, batch + [d + a for a in lb], batch + [d + a for a in rb],
                            [d + a for a in lc], [d + a for a in rc], precision, d)
    ctx.set(op.result, s.convert(out, acc))
