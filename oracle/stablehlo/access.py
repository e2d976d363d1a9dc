"""Memory access ops: load, store, gather, scatter.

Loads and stores of `x[i, :]`-style blocks (one parallel index per axis plus a constant, uniform
scalars, static slices) become slices and dynamic update slices of the ref's contents; a store
that replaces the whole tensor replaces its value outright, so an `Out` parameter written that way
is not a function input. Other affine accesses use explicit coordinates. Stores on masked lanes,
and writes whose coordinates may repeat, resolve as the sequential program does: the last writer
in row-major instance order wins.
"""

from __future__ import annotations

from kir.access import Gather, Load, Scatter, Store
from kir.core import Op

from .checks import first_bad_axis, has_site, index_message, report
from .context import Ctx, RefState
from .memory import (
    access_coords,
    block_plan,
    gather_points,
    in_range,
    lane_iota,
    lanes_mask,
    read_block,
    scatter_last_wins,
    write_block,
)
from .registry import emits
from .values import Val


@emits(Load)
def _load(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Load)
    ref = ctx.ref(op.src)
    plans = block_plan(ctx, ref, op.index)
    if plans is not None:
        ctx.set(op.result, read_block(ctx, ref, plans))
        return
    coords, depth = access_coords(ctx, ref, op.index)
    shape = coords[0].shape if coords else ()
    ctx.set(op.result, gather_points(ctx, ref.val, coords, shape, depth))


@emits(Store)
def _store(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Store)
    ref = ctx.ref(op.dst)
    value = ctx.get(op.value)
    if ctx.mask is None:
        plans = block_plan(ctx, ref, op.index)
        if plans is not None:
            new = write_block(ctx, ref, plans, value)
            if new is not None:
                ref.val = new
                return
    # Every instance writes: where several write one element, the last one in instance order stays.
    coords, depth = access_coords(ctx, ref, op.index, ctx.depth)
    shape = coords[0].shape if coords else ctx.batch
    value = ctx.expand(ctx.lift(value, depth), shape[depth:], list(range(len(value.logical))))
    ref.val = scatter_last_wins(ctx, ref.val, coords, value, lanes_mask(ctx, depth, shape))


def point_coords(ctx: Ctx, ref_depth: int, indices: list[Val], values: list[Val], lanes: int | None = None
                 ) -> tuple[list[Val], tuple[int, ...], int]:
    """Coordinates for data-dependent accesses: the ref's own lanes, then each index broadcast together.

    `lanes` forces the lane depth (effects: every instance performs its write)."""
    vals = indices + values
    depth = max([ref_depth] + [v.depth for v in vals] + ([lanes] if lanes is not None else []))
    logical = max((v.logical for v in vals), key=len)
    shape = ctx.batch[:depth] + logical
    coords = [lane_iota(ctx, shape, k, depth) for k in range(ref_depth)]
    for v in indices:
        coords.append(broadcast_to(ctx, ctx.to_i64(v), shape, depth))
    return coords, shape, depth


def broadcast_to(ctx: Ctx, v: Val, shape: tuple[int, ...], depth: int) -> Val:
    v = ctx.lift(v, depth)
    return ctx.ssa.broadcast_in_dim(v, shape, list(range(v.rank)), depth)


def check_indices(ctx: Ctx, op: Op, what: str, ref: RefState, coords: list[Val]) -> None:
    """With checks on, an out-of-range element is an error (the oracle's message), not a fill or a drop."""
    if not has_site(ctx, op, "index"):
        return
    extents = ref.val.logical
    found = first_bad_axis(ctx, coords[ref.val.depth:], extents)
    if found is not None:
        bad, axis, index = found
        report(ctx, op, "index", bad, (axis, index), index_message(what, op, ref.name, extents))


@emits(Gather)
def _gather(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Gather)
    ref = ctx.ref(op.src)
    indices = [ctx.get(v) for v in op.indices]
    coords, shape, depth = point_coords(ctx, ref.val.depth, indices, [])
    check_indices(ctx, op, "gather", ref, coords)
    got = gather_points(ctx, ref.val, coords, shape, depth)
    ok = in_range(ctx, coords[ref.val.depth:], ref.val.logical)
    if ok is not None:
        got = ctx.ssa.select(ok, got, ctx.splat_like(op.fill, got))
    ctx.set(op.result, got)


@emits(Scatter)
def _scatter(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Scatter)
    if op.unique:
        raise ctx.refuse("a `unique` data-dependent store lets instances race when its indices repeat; the "
                         "winner is unspecified, so no exact equivalent exists")
    ref = ctx.ref(op.dst)
    indices = [ctx.get(v) for v in op.indices]
    value = ctx.get(op.value)
    coords, shape, depth = point_coords(ctx, ref.val.depth, indices, [value], ctx.depth)
    check_indices(ctx, op, "scatter", ref, coords)
    updates = broadcast_to(ctx, value, shape, depth)
    ref.val = scatter_last_wins(ctx, ref.val, coords, updates, lanes_mask(ctx, depth, shape))
