"""Local buffers: a fresh value per allocation instance (inside `parallel`, one per instance)."""

from __future__ import annotations

from kir.buffers import Alloc, InitMode
from kir.core import Op

from .context import Ctx, RefState
from .pointwise import concrete
from .registry import emits


@emits(Alloc)
def _alloc(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Alloc)
    dtype = concrete(ctx, op.dtype)
    # `empty` leaves the contents to the author's write-before-read obligation; zeros are as good as any.
    fill = op.fill if op.init is InitMode.full else 0
    shape = ctx.batch + ctx.dims(op.shape)
    val = ctx.splat(fill, dtype, shape, ctx.depth)
    ctx.refs[op.result.id] = RefState(val, op.result.name or f"buffer{op.result.id}")
