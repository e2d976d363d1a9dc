"""Histogram as `stablehlo.scatter` of ones with add; values outside [0, bins) are dropped."""

from __future__ import annotations

from kir.core import Op
from kir.dtypes import DType
from kir.histogram import Histogram

from .context import Ctx
from .memory import lane_iota, scatter_points
from .registry import emits


@emits(Histogram)
def _histogram(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Histogram)
    s = ctx.ssa
    x = ctx.get(op.values)
    bins = ctx.dim(op.bins)
    d = x.depth
    counts = ctx.splat(0, DType.i32, x.batch + (bins,), d)
    coords = [lane_iota(ctx, x.shape, k, d) for k in range(d)] + [ctx.to_i64(x)]
    ones = ctx.splat(1, DType.i32, x.shape, d)
    ctx.set(op.result, scatter_points(ctx, counts, coords, ones, lambda a, b: s.binary("add", a, b), None))
