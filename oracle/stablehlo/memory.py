"""Reading and writing memory values: rectangular blocks, point gathers and exact scatters.

A ref's contents are one tensor (its batch axes, then its shape). Accesses whose coordinates are
`batch index + constant`, uniform scalars or static slices read and write a rectangular block
(`slice`/`dynamic_slice`/`dynamic_update_slice`). Everything else goes through explicit per-element
coordinates (`gather`/`scatter`).

Out-of-range semantics never rely on the consumer: a gather reads clamped coordinates and selects
the fill value where any coordinate is out of range; a scatter sends dropped elements (out of
range or inactive lanes) to one extra padding row that is sliced off afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kir.core import Index, Slice, Value
from kir.dtypes import DType
from kir.errors import IntentError

from .context import Ctx, RefState, constant_value, single_axis
from .values import Val

Combine = Callable[[Val, Val], Val]


# ---------------------------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class AxisPlan:
    """How one axis of a ref is accessed: along batch axis `axis`, at one point, or by a static slice."""

    kind: str  # "batch" | "point" | "slice"
    start: int | Val
    size: int
    axis: int = -1


def block_plan(ctx: Ctx, ref: RefState, index: Index) -> list[AxisPlan] | None:
    """The rectangular block an access touches, or None when it is not one."""
    d_r = ref.val.depth
    plans = [AxisPlan("batch", 0, ctx.batch[k], k) for k in range(d_r)]
    for ax, it in enumerate(index):
        extent = ref.val.shape[d_r + ax]
        if isinstance(it, Slice):
            lo, hi = ctx.dim(it.start), ctx.dim(it.stop)
            plans.append(AxisPlan("slice", lo if hi > lo else 0, hi - lo))
            continue
        if not isinstance(it, Value):
            return None
        aff = ctx.affine.get(it.id)
        const = constant_value(aff)
        if const is not None:
            plans.append(AxisPlan("point", const, 1))
            continue
        one = single_axis(aff) if aff is not None else None
        if one is not None and one[0] >= d_r:
            k, const = one
            size = ctx.batch[k]
            plans.append(AxisPlan("batch", const if size else 0, size, k))
            continue
        v = ctx.get(it)
        if v.depth != 0:
            return None
        plans.append(AxisPlan("point", ctx.to_i64(v), 1))
    axes = [p.axis for p in plans if p.kind == "batch"]
    if len(set(axes)) != len(axes):
        return None
    for p, extent in zip(plans, ref.val.shape):
        if isinstance(p.start, int) and not (0 <= p.start and p.start + p.size <= extent):
            raise IntentError(f"StableHLO exit: access [{p.start}, {p.start + p.size}) outside extent {extent} "
                              f"of {ref.name}")
    return plans


def _starts(ctx: Ctx, plans: list[AxisPlan]) -> list[Val]:
    return [p.start if isinstance(p.start, Val) else ctx.splat(p.start, DType.i64) for p in plans]


def read_block(ctx: Ctx, ref: RefState, plans: list[AxisPlan]) -> Val:
    """The block as a value: batch axes first (in context order), then the slice axes."""
    s = ctx.ssa
    sizes = [p.size for p in plans]
    if all(isinstance(p.start, int) for p in plans):
        starts = [int(p.start) for p in plans]  # type: ignore[arg-type]
        block = s.slice(ref.val, starts, [a + b for a, b in zip(starts, sizes)], depth=0)
    else:
        block = s.dynamic_slice(ref.val, _starts(ctx, plans), sizes, 0)
    batch = sorted((p.axis, i) for i, p in enumerate(plans) if p.kind == "batch")
    slices = [i for i, p in enumerate(plans) if p.kind == "slice"]
    points = [i for i, p in enumerate(plans) if p.kind == "point"]
    t = s.transpose(block, [i for _, i in batch] + slices + points, 0)
    used = [k for k, _ in batch]
    logical = tuple(plans[i].size for i in slices)
    flat = s.reshape(t, tuple(ctx.batch[k] for k in used) + logical, len(used))
    depth = max(used) + 1 if used else 0
    if used == list(range(depth)):
        return flat
    shape = ctx.batch[:depth] + logical
    return s.broadcast_in_dim(flat, shape, used + [depth + j for j in range(len(logical))], depth)


def write_block(ctx: Ctx, ref: RefState, plans: list[AxisPlan], value: Val) -> Val | None:
    """The ref's new contents with `value` written into the block, or None when the block path does not apply."""
    used = sorted(p.axis for p in plans if p.kind == "batch")
    m = len(used)
    if used != list(range(m)) or value.depth > m:
        return None
    value = ctx.lift(value, m)
    order: list[int] = []
    j = 0
    for p in plans:
        if p.kind == "batch":
            order.append(p.axis)
        elif p.kind == "slice":
            order.append(m + j)
            j += 1
    s = ctx.ssa
    sizes = tuple(p.size for p in plans)
    block = s.reshape(s.transpose(value, order, 0), sizes, 0)
    block = Val(block.name, block.dtype, block.shape, 0)
    if all(p.start == 0 for p in plans if isinstance(p.start, int)) and \
            not any(isinstance(p.start, Val) for p in plans) and sizes == ref.val.shape:
        return Val(block.name, block.dtype, block.shape, ref.val.depth)
    if 0 in sizes:
        return ref.val
    return s.dynamic_update_slice(ref.val, block, _starts(ctx, plans))


# ---------------------------------------------------------------------------------------------- points


def lane_iota(ctx: Ctx, shape: tuple[int, ...], dim: int, depth: int) -> Val:
    return ctx.ssa.iota(DType.i64, shape, dim, depth)


def access_coords(ctx: Ctx, ref: RefState, index: Index, lanes: int = 0) -> tuple[list[Val], int]:
    """Per-element i64 coordinates (all of one shape: lanes + slice extents) of `ref[index]`, and the lane depth
    (at least `lanes`)."""
    d_r = ref.val.depth
    points = [ctx.get(it) for it in index if isinstance(it, Value)]
    depth = max([d_r, lanes] + [p.depth for p in points])
    extents = tuple(ctx.dim(it.stop) - ctx.dim(it.start) for it in index if isinstance(it, Slice))
    shape = ctx.batch[:depth] + extents
    coords = [lane_iota(ctx, shape, k, depth) for k in range(d_r)]
    j = 0
    for it in index:
        if isinstance(it, Slice):
            c = lane_iota(ctx, shape, depth + j, depth)
            start = ctx.dim(it.start)
            coords.append(ctx.ssa.binary("add", c, ctx.splat_like(start, c)) if start else c)
            j += 1
        else:
            v = ctx.to_i64(ctx.lift(ctx.get(it), depth))  # type: ignore[arg-type]
            coords.append(ctx.ssa.broadcast_in_dim(v, shape, list(range(depth)), depth))
    return coords, depth


def index_tensor(ctx: Ctx, coords: list[Val]) -> Val:
    shape = coords[0].shape
    depth = coords[0].depth
    cols = [ctx.ssa.reshape(c, shape + (1,), depth) for c in coords]
    return ctx.ssa.concatenate(cols, len(shape), depth)


def in_range(ctx: Ctx, coords: list[Val], extents: tuple[int, ...]) -> Val | None:
    ok: Val | None = None
    for c, n in zip(coords, extents):
        lo = ctx.ssa.compare("GE", c, ctx.splat_like(0, c))
        hi = ctx.ssa.compare("LT", c, ctx.splat_like(n, c))
        ok = ctx.and_(ok, ctx.ssa.binary("and", lo, hi))
    return ok


def gather_points(ctx: Ctx, operand: Val, coords: list[Val], shape: tuple[int, ...], depth: int) -> Val:
    """`operand[coords]` elementwise (coordinates clamped into range); result has `shape`."""
    if operand.rank == 0:
        return ctx.ssa.broadcast_in_dim(operand, shape, [], depth)
    if 0 in operand.shape:  # nothing to read: every coordinate is out of range (callers fill or discard)
        return ctx.splat(0, operand.dtype, shape, depth)
    return ctx.ssa.gather_points(operand, index_tensor(ctx, coords), depth)


def _flat_scalar_target(ctx: Ctx, operand: Val, coords: list[Val], shape: tuple[int, ...]
                        ) -> tuple[Val, list[Val], bool]:
    if operand.rank:
        return operand, coords, False
    zero = ctx.splat(0, DType.i64, shape, len(shape))
    return ctx.ssa.reshape(operand, (1,), 0), [zero], True


def scatter_points(ctx: Ctx, operand: Val, coords: list[Val], updates: Val, combine: Combine | None,
                   keep: Val | None) -> Val:
    """Scatter `updates` at `coords`; elements where `keep` is false (or out of range) are dropped.

    With `combine=None` the write replaces; the caller guarantees distinct coordinates.
    """
    s = ctx.ssa
    shape = updates.shape
    if 0 in operand.shape or 0 in shape:  # nothing to write, or nowhere to write it
        return operand
    target, coords, was_scalar = _flat_scalar_target(ctx, operand, coords, shape)
    keep = ctx.and_(keep, in_range(ctx, coords, target.shape))
    padded = target
    if keep is not None:
        zero = ctx.splat(0, target.dtype)
        padded = s.pad(target, zero, [0] * target.rank, [1] + [0] * (target.rank - 1))
        dump = [ctx.splat_like(target.shape[0], coords[0])] + [ctx.splat_like(0, c) for c in coords[1:]]
        coords = [s.select(keep, c, d) for c, d in zip(coords, dump)]
    out = s.scatter_points(padded, index_tensor(ctx, coords), updates, combine)
    if keep is not None:
        out = s.slice(out, [0] * target.rank, list(target.shape))
    out = Val(out.name, out.dtype, out.shape, operand.depth)
    return s.reshape(out, (), operand.depth) if was_scalar else out


def scatter_last_wins(ctx: Ctx, operand: Val, coords: list[Val], updates: Val, keep: Val | None) -> Val:
    """Replace at `coords` where, among elements writing one location, the last (row-major) one wins.

    This is the sequential meaning of a write whose coordinates may repeat: one scatter finds each
    location's winning element (max of element ids), a second writes only the winners.
    """
    s = ctx.ssa
    shape = updates.shape
    n = 1
    for d in shape:
        n *= d
    ids = s.reshape(s.iota(DType.i64, (n,), 0), shape, updates.depth)
    target, tcoords, _ = _flat_scalar_target(ctx, operand, coords, shape)
    owner = ctx.splat(-1, DType.i64, target.shape)
    owner = scatter_points(ctx, owner, tcoords, ids, lambda a, b: s.binary("maximum", a, b), keep)
    winner = gather_points(ctx, owner, tcoords, shape, updates.depth)
    mine = s.compare("EQ", winner, ids)
    return scatter_points(ctx, operand, coords, updates, None, ctx.and_(keep, mine))


def lanes_mask(ctx: Ctx, depth: int, shape: tuple[int, ...]) -> Val | None:
    """The context's active-lane mask as a pred of `shape` (whose first `depth` axes are the lanes)."""
    m = ctx.mask
    if m is None:
        return None
    if m.depth > depth:
        raise IntentError("StableHLO exit: an effect's lanes must include every masked instance")
    m = ctx.lift(m, depth)
    return ctx.ssa.broadcast_in_dim(m, shape, list(range(m.rank)), depth)
