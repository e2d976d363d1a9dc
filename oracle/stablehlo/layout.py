"""Layout ops: every logical axis is shifted past the value's batch axes, which stay in front."""

from __future__ import annotations

from kir.core import Op
from kir.layout import Broadcast, Concat, ExpandDims, Reshape, SliceOp, Squeeze, Transpose

from .context import Ctx
from .registry import emits


@emits(Broadcast)
def _broadcast(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Broadcast)
    x = ctx.get(op.x)
    ctx.set(op.result, ctx.expand(x, ctx.dims(op.shape), list(op.dims)))


@emits(Reshape)
def _reshape(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Reshape)
    x = ctx.get(op.x)
    ctx.set(op.result, ctx.ssa.reshape(x, x.batch + ctx.dims(op.shape), x.depth))


@emits(ExpandDims)
def _expand_dims(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, ExpandDims)
    x = ctx.get(op.x)
    shape = list(x.logical)
    shape.insert(op.axis, 1)
    ctx.set(op.result, ctx.ssa.reshape(x, x.batch + tuple(shape), x.depth))


@emits(Squeeze)
def _squeeze(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Squeeze)
    x = ctx.get(op.x)
    shape = x.logical[:op.axis] + x.logical[op.axis + 1:]
    ctx.set(op.result, ctx.ssa.reshape(x, x.batch + shape, x.depth))


@emits(Transpose)
def _transpose(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Transpose)
    x = ctx.get(op.x)
    perm = list(range(x.depth)) + [x.depth + p for p in op.perm]
    ctx.set(op.result, ctx.ssa.transpose(x, perm, x.depth))


@emits(SliceOp)
def _slice(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, SliceOp)
    x = ctx.get(op.x)
    d = x.depth
    starts = [0] * d + list(ctx.dims(op.starts))
    limits = list(x.batch) + list(ctx.dims(op.stops))
    ctx.set(op.result, ctx.ssa.slice(x, starts, limits, [1] * d + list(op.steps)))


@emits(Concat)
def _concat(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Concat)
    xs = ctx.lift_all(*(ctx.get(v) for v in op.inputs))
    d = xs[0].depth
    ctx.set(op.result, ctx.ssa.concatenate(xs, d + op.axis, d))
