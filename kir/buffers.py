"""Local buffers: `empty` (the author writes before reading) and `zeros`/`full` (initialised once)."""

from __future__ import annotations

from .core import NO_OP_TRAITS, Op, RefType, Role, Type, TypeContext, op
from .dims import Dim
from .dtypes import ElemType, SpelledEnum
from .pointwise import Literal, literal_fits


class InitMode(SpelledEnum):
    empty = "empty"
    full = "full"  # zeros is full with 0


@op("alloc", NO_OP_TRAITS)
class Alloc(Op):
    dtype: ElemType
    shape: tuple[Dim, ...]
    init: InitMode = InitMode.empty
    fill: Literal = 0

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        if self.init is InitMode.full and not literal_fits(self.fill, self.dtype):
            raise ctx.fail(f"buffer fill {self.fill!r} does not fit {self.dtype}")
        return (RefType(self.dtype, self.shape, Role.LOCAL),)
