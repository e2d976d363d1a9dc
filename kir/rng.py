"""Counter-based random numbers: Philox 4x32-10, bit-exact with Triton's tl.rand/randn/randint."""

from __future__ import annotations

from .core import NO_OP_TRAITS, Op, Type, TypeContext, Value, op
from .dtypes import DType, SpelledEnum


class RngKind(SpelledEnum):
    rand = "rand"        # uniform f32 in [0, 1)
    randn = "randn"      # standard normal f32
    randint = "randint"  # raw 32-bit Philox output


RNG_DTYPE = {RngKind.rand: DType.f32, RngKind.randn: DType.f32, RngKind.randint: DType.u32}


@op("random", NO_OP_TRAITS)
class Random(Op):
    kind: RngKind
    seed: Value
    offset: Value

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        ctx.scalar_int(self.seed, "random seed")
        t = ctx.tensor(self.offset, "random offset")
        if not (isinstance(t.dtype, DType) and t.dtype.is_int):
            raise ctx.fail(f"random offset must be integer, got {t.dtype}")
        return (t.with_dtype(RNG_DTYPE[self.kind]),)
