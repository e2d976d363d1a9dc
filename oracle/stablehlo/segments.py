"""Region folds as segment reductions: one `stablehlo.scatter` of every element into its segment's slot.

This is the fast form of a built-in fold (sum, prod, max, min, any, all) over a 1-D source whose
subregions do not overlap (CSR rows, segments): each element finds the one subregion that contains
it and is scattered with the combine into an identity-filled result, so empty subregions give the
identity. Whether the subregions overlap is data, so it is tested at run time (every element is
covered at most once: a +1/-1 difference array and its prefix sum), and a `stablehlo.if` falls back
to the sequential walk of `region.py` when they do. Scatter-combining reorders float sums and
products (within tolerance); max/min/any/all and integer sums are exact.
"""

from __future__ import annotations

from collections.abc import Callable

from kir.core import Region
from kir.dtypes import DType
from kir.reduce import ReduceKind

from .combine import apply_region, builtin_op, identity
from .context import Ctx
from .memory import gather_points, scatter_points
from .scan import inclusive_scan
from .values import Val

SEGMENT_KINDS = (ReduceKind.sum, ReduceKind.prod, ReduceKind.max, ReduceKind.min, ReduceKind.any, ReduceKind.all)


def _add(ctx: Ctx) -> Callable[[Val, Val], Val]:
    return lambda a, b: ctx.ssa.binary("add", a, b)


def disjoint(ctx: Ctx, start: Val, length: Val, extent: int) -> tuple[Val, Val]:
    """(whether no source element is in two subregions, how many subregions cover each element)."""
    s = ctx.ssa
    delta = ctx.splat(0, DType.i32, (extent + 1,))
    some = s.compare("GT", length, ctx.splat_like(0, length))
    ones = ctx.splat(1, DType.i32, start.shape)
    delta = scatter_points(ctx, delta, [start], ones, _add(ctx), some)
    delta = scatter_points(ctx, delta, [s.binary("add", start, length)], s.unary("negate", ones), _add(ctx), some)
    (cover,) = inclusive_scan(ctx, [s.slice(delta, [0], [extent])], 0,
                              lambda a, b: [s.binary("add", a[0], b[0])])
    (most,) = s.reduce([cover], [ctx.splat(0, DType.i32)], [0], lambda a: [s.binary("maximum", a[0], a[1])], 0,
                       "most")
    return s.compare("LE", most, ctx.splat(1, DType.i32)), cover


def segment_fold(ctx: Ctx, kind: ReduceKind, source: Val, start: Val, length: Val, cover: Val,
                 acc_dtype: DType, map_region: Region | None) -> Val:
    """The fold of each lane's subregion [start, start + length) of the 1-D `source`, by one scatter.

    `start`/`length` are flat (one entry per lane); the subregions must not overlap.
    """
    s = ctx.ssa
    n_lanes = start.shape[0]
    extent = source.shape[0]
    some = s.compare("GT", length, ctx.splat_like(0, length))
    lanes = s.iota(DType.i64, (n_lanes,), 0)
    # Each element's subregion: the lane whose start is the last one at or before it, if it is covered.
    mark = ctx.splat(-1, DType.i64, (extent,))
    mark = scatter_points(ctx, mark, [start], lanes, lambda a, b: s.binary("maximum", a, b), some)
    pos = s.iota(DType.i64, (extent,), 0)
    marked_at = s.select(s.compare("GE", mark, ctx.splat_like(0, mark)), pos, ctx.splat_like(-1, pos))
    (last,) = inclusive_scan(ctx, [marked_at], 0, lambda a, b: [s.binary("maximum", a[0], b[0])])
    owner = gather_points(ctx, mark, [s.binary("maximum", last, ctx.splat_like(0, last))], (extent,), 0)
    covered = s.compare("EQ", cover, ctx.splat(1, DType.i32, (extent,)))
    owner = s.select(covered, owner, ctx.splat_like(n_lanes, owner))  # uncovered elements are dropped
    elems = apply_region(ctx, map_region, [source])[0] if map_region is not None else source
    elems = s.convert(elems, acc_dtype)
    init = ctx.splat(identity(kind, acc_dtype), acc_dtype, (n_lanes,))
    name = builtin_op(kind)
    return scatter_points(ctx, init, [owner], elems, lambda a, b: s.binary(name, a, b), None)
