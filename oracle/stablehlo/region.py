"""Region folds and region scans over data-dependent subregions `[begin, end)`, one per instance.

Every instance walks its own subregion in order, all instances at once: a `stablehlo.while` runs
for the longest subregion, gathering element `begin + k` on each lane and combining it into the
lane's accumulator while `k` is inside the lane's subregion (shorter and inactive lanes keep
theirs). The order is sequential, so any combine keeps its meaning, and overlapping or unsorted
subregions need nothing special. The oracle's rules hold (see `oracle/region.py`): a fold's
subregion is clipped to the source (an out-of-range point makes it empty), an empty fold gives the
identity, argmax/argmin index from `begin` (-1 when empty); a scan reads elements outside the source
as the identity, drops writes outside the target, and requires equal source and target lengths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kir.core import DynSlice, Index, Op, RefType, Value
from kir.dtypes import DType
from kir.reduce import ReduceKind, default_acc
from kir.region import RegionFold, RegionScan
from kir.scan import ScanKind

from .checks import at, first_bad_axis, has_site, index_message, report
from .combine import apply_builtin, apply_region, captured_depth, identity
from .context import Ctx, RefState
from .control import loop
from .memory import gather_points, in_range, lane_iota, scatter_last_wins
from .pointwise import concrete
from .registry import captured, emits, run_region
from .segments import SEGMENT_KINDS, disjoint, segment_fold
from .values import Val


@dataclass
class Walk:
    """Lanes that each walk one subregion of a ref: element k of a lane is at `start + k` (or from the end)."""

    ref: RefState
    index: Index
    axis: int      # the subregion's axis within the index
    begin: Val     # b as written (i64, lane depth)
    start: Val     # the first position walked (i64)
    length: Val    # elements walked (i64, >= 0; 0 on inactive lanes)
    points: list[Val]  # i64 point coordinates, one per other axis of the index
    depth: int

    @property
    def extent(self) -> int:
        return self.ref.val.logical[self.axis]


def lane_depth(ctx: Ctx, refs: list[RefState], indices: list[Index], regions: list) -> int:
    vals: list[Val] = []
    for index in indices:
        for it in index:
            if isinstance(it, Value):
                vals.append(ctx.get(it))
            elif isinstance(it, DynSlice):
                vals += [ctx.get(it.begin), ctx.get(it.end)]
    depth = max([r.val.depth for r in refs] + [v.depth for v in vals] + [captured_depth(ctx, r) for r in regions])
    return max(depth, ctx.mask.depth if ctx.mask is not None else 0)


def walk(ctx: Ctx, op: Op, ref: RefState, index: Index, depth: int, clip: bool, what: str, tag: str) -> Walk:
    """The lanes' subregions; with `clip` (folds) they are cut to the source and empty at a bad point."""
    s = ctx.ssa
    axis = next(ax for ax, it in enumerate(index) if isinstance(it, DynSlice))
    dyn = index[axis]
    assert isinstance(dyn, DynSlice)
    b = ctx.to_i64(ctx.lift(ctx.get(dyn.begin), depth))
    e = ctx.to_i64(ctx.lift(ctx.get(dyn.end), depth))
    point_axes = [ax for ax, it in enumerate(index) if isinstance(it, Value)]
    points = [ctx.to_i64(ctx.lift(ctx.get(index[ax]), depth)) for ax in point_axes]  # type: ignore[arg-type]
    logical = ref.val.logical
    extent = logical[axis]
    if has_site(ctx, op, f"{tag}point"):
        found = first_bad_axis(ctx, points, tuple(logical[ax] for ax in point_axes))
        if found is not None:
            bad, k, value = found
            axis_of = ctx.splat_like(0, k)
            for n, ax in enumerate(point_axes):  # position among the points -> axis of the index
                axis_of = s.select(s.compare("EQ", k, ctx.splat_like(n, k)), ctx.splat_like(ax, k), axis_of)
            report(ctx, op, f"{tag}point", bad, (axis_of, value), index_message(what, op, ref.name, logical))
    wanted = s.binary("maximum", s.binary("subtract", e, b), ctx.splat_like(0, b))
    if has_site(ctx, op, f"{tag}subregion"):
        outside = s.binary("or", s.compare("LT", b, ctx.splat_like(0, b)),
                           s.compare("GT", e, ctx.splat_like(extent, e)))
        bad = s.binary("and", s.compare("GT", wanted, ctx.splat_like(0, wanted)), outside)

        def message(lo: int, hi: int, name: str = ref.name) -> str:
            return f"{what} out of range{at(op)}: subregion [{lo}, {hi}) on axis {axis} of {name} with extent {extent}"

        report(ctx, op, f"{tag}subregion", bad, (b, e), message)
    start, length = b, wanted
    if clip:
        def clamp(x: Val) -> Val:
            return s.binary("minimum", s.binary("maximum", x, ctx.splat_like(0, x)), ctx.splat_like(extent, x))

        start = clamp(b)
        length = s.binary("maximum", s.binary("subtract", clamp(e), start), ctx.splat_like(0, b))
        ok = in_range(ctx, points, tuple(logical[ax] for ax in point_axes))
        if ok is not None:
            length = s.select(ok, length, ctx.splat_like(0, length))
    if ctx.mask is not None:
        length = s.select(ctx.lift(ctx.mask, depth), length, ctx.splat_like(0, length))
    return Walk(ref, index, axis, b, start, length, points, depth)


def element(ctx: Ctx, w: Walk, k: Val, reverse: bool = False) -> tuple[Val, Val, list[Val]]:
    """(whether lane has an element k, its position, its coordinates) for loop step k."""
    s = ctx.ssa
    kb = s.broadcast_in_dim(k, w.start.shape, [], w.depth)
    has = s.compare("LT", kb, w.length)
    pos = s.binary("add", w.start, kb)
    if reverse:
        last = s.binary("subtract", s.binary("add", w.start, w.length), ctx.splat_like(1, w.start))
        pos = s.binary("subtract", last, kb)
    coords = [lane_iota(ctx, ctx.batch[:w.depth], a, w.depth) for a in range(w.ref.val.depth)]
    points = iter(w.points)
    for it in w.index:
        coords.append(pos if isinstance(it, DynSlice) else next(points))
    return has, pos, coords


def longest(ctx: Ctx, w: Walk) -> Val:
    s = ctx.ssa
    if not w.length.rank:
        return w.length
    (n,) = s.reduce([w.length], [ctx.splat(0, DType.i64)], list(range(w.length.rank)),
                    lambda a: [s.binary("maximum", a[0], a[1])], 0, "longest")
    return n


def counted(ctx: Ctx, n: Val, carried: list[Val], refs: list[int],
            step: Callable[[Val, list[Val]], list[Val]]) -> list[Val]:
    """`for k in range(n)` carrying `carried` (and writing `refs`)."""
    s = ctx.ssa

    def cond(cs: list[Val], cv: list[Val]) -> Val:
        return s.compare("LT", cs[0], n)

    def body(cs: list[Val], cv: list[Val]) -> tuple[list[Val], list[Val]]:
        return [s.binary("add", cs[0], ctx.splat(1, DType.i64))], step(cs[0], cv)

    _, outs = loop(ctx, [ctx.splat(0, DType.i64)], carried, refs, cond, body)
    return outs


# ---------------------------------------------------------------------------------------------- fold


def _arg_step(ctx: Ctx, kind: ReduceKind, v: Val, best: Val, best_at: Val, here: Val) -> list[Val]:
    s = ctx.ssa
    better = s.compare("GT" if kind is ReduceKind.argmax else "LT", v, best)
    if v.dtype.is_float:
        better = s.binary("or", better, s.binary("and", s.compare("NE", v, v),
                                                s.unary("not", s.compare("NE", best, best))))
    better = s.binary("or", better, s.compare("LT", best_at, ctx.splat_like(0, best_at)))
    return [s.select(better, v, best), s.select(better, here, best_at)]


@emits(RegionFold)
def _region_fold(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, RegionFold)
    s = ctx.ssa
    ref = ctx.ref(op.src)
    depth = lane_depth(ctx, [ref], [op.index], [op.map, op.combine])
    w = walk(ctx, op, ref, op.index, depth, True, "region_fold", "")
    lanes = ctx.batch[:depth]
    kind = op.kind
    comp_dtypes = [concrete(ctx, v.type.dtype) for v in op.map.yielded] if op.map is not None else \
        [concrete(ctx, ref.val.dtype)]
    map_region, combine_region = op.map, op.combine
    if kind is ReduceKind.custom:
        assert op.identity is not None
        accs = [ctx.splat(lit, dt, lanes, depth) for lit, dt in zip(op.identity, comp_dtypes)]
        accs.append(ctx.splat(False, DType.pred, lanes, depth))  # whether the lane has taken an element
    elif kind in (ReduceKind.argmax, ReduceKind.argmin):
        accs = [ctx.splat(0, comp_dtypes[0], lanes, depth), ctx.splat(-1, DType.i64, lanes, depth)]
    else:
        acc_dtype = concrete(ctx, op.effective_acc())
        accs = [ctx.splat(identity(kind, acc_dtype), acc_dtype, lanes, depth)]
    offset = s.binary("subtract", w.start, w.begin)
    reads_memory = map_region is not None and (len(map_region.args) > 1 or any(
        isinstance(v.type, RefType) for v in captured(map_region)))

    def step(k: Val, cv: list[Val]) -> list[Val]:
        has, pos, coords = element(ctx, w, k)
        elem = gather_points(ctx, ref.val, coords, lanes, depth)
        if map_region is None:
            comps = [elem]
        elif reads_memory:
            # a map that reads other tensors (at the element's position, its optional second argument, or at
            # indices it loaded) runs as the instances' own code, predicated on the lanes holding an element
            with ctx.masked(ctx.and_(ctx.mask, has)):
                comps = [ctx.lift(c, depth) for c in run_region(ctx, map_region, [elem, pos][:len(map_region.args)])]
        else:
            comps = apply_region(ctx, map_region, [elem])
        if kind is ReduceKind.custom:
            assert combine_region is not None
            *acc, started = cv
            combined = apply_region(ctx, combine_region, acc + comps)
            new = [s.select(started, c, x) for c, x in zip(combined, ctx.lift_all(*comps))]
            new.append(ctx.splat_like(True, started))
        elif kind in (ReduceKind.argmax, ReduceKind.argmin):
            here = s.binary("add", s.broadcast_in_dim(k, offset.shape, [], depth), offset)
            new = _arg_step(ctx, kind, ctx.lift(comps[0], depth), cv[0], cv[1], here)
        else:
            new = [apply_builtin(ctx, kind, cv[0], s.convert(comps[0], cv[0].dtype))]
        return [s.select(has, a, b) for a, b in zip(ctx.lift_all(*new), cv)]

    def sequential() -> list[Val]:
        with ctx.nested():
            return counted(ctx, longest(ctx, w), accs, [], step)

    if kind in SEGMENT_KINDS and ref.val.depth == 0 and len(op.index) == 1 and captured_depth(ctx, op.map) == 0 \
            and not reads_memory:
        n_lanes = 1
        for d in lanes:
            n_lanes *= d
        start, length = (s.reshape(v, (n_lanes,), 0) for v in (w.start, w.length))
        ok, cover = disjoint(ctx, start, length, w.extent)

        def by_segments() -> list[Val]:
            with ctx.nested():
                folded = segment_fold(ctx, kind, ref.val, start, length, cover, accs[0].dtype, map_region)
                return [s.reshape(folded, lanes, depth)]

        outs = s.if_(ok, by_segments, sequential, "fold")
    else:
        outs = sequential()
    if kind is ReduceKind.custom:
        outs = outs[:-1]
    elif kind in (ReduceKind.argmax, ReduceKind.argmin):
        outs = [outs[1]]
    else:
        acc = outs[0]
        if op.identity:
            acc = apply_builtin(ctx, kind, ctx.splat_like(op.identity[0], acc), acc)
        elif kind is ReduceKind.sum and acc.dtype.is_float:  # an empty float sum is +0.0, as in the oracle
            acc = s.select(s.compare("GT", w.length, ctx.splat_like(0, w.length)), acc, ctx.splat_like(0.0, acc))
        outs = [acc]
    for v, out in zip(op.results, outs):
        ctx.set(v, s.convert(out, concrete(ctx, v.type.dtype)))


# ---------------------------------------------------------------------------------------------- scan


@emits(RegionScan)
def _region_scan(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, RegionScan)
    s = ctx.ssa
    src, dst = ctx.ref(op.src), ctx.ref(op.dst)
    depth = lane_depth(ctx, [src, dst], [op.src_index, op.dst_index], [op.combine])
    ws = walk(ctx, op, src, op.src_index, depth, False, "region_scan source", "source ")
    wd = walk(ctx, op, dst, op.dst_index, depth, False, "region_scan target", "target ")
    lanes = ctx.batch[:depth]
    dtype = concrete(ctx, src.val.dtype)

    def mismatch(n_src: int, n_dst: int) -> str:
        return f"region_scan{at(op)}: the source subregion has {n_src} elements but the target has {n_dst}"

    report(ctx, op, "length", s.compare("NE", ws.length, wd.length), (ws.length, wd.length), mismatch)
    if op.kind is ScanKind.custom:
        assert op.identity is not None and op.combine is not None
        acc_dtype = dtype
        start = op.identity[0]
    else:
        kind = op.kind.as_reduce
        acc_dtype = concrete(ctx, default_acc(kind, dtype) or dtype)
        start = op.identity[0] if op.identity else identity(kind, dtype)
    combine_region = op.combine
    in_place = op.src.id == op.dst.id

    def step(k: Val, cv: list[Val]) -> list[Val]:
        acc = cv[0]
        has, _, scoords = element(ctx, ws, k, op.reverse)
        has_dst, _, dcoords = element(ctx, wd, k, op.reverse)
        source = dst.val if in_place else src.val
        elem = gather_points(ctx, source, scoords, lanes, depth)
        inside = in_range(ctx, scoords[src.val.depth:], src.val.logical)
        if inside is not None:
            elem = s.select(inside, elem, ctx.splat_like(start, elem))
        elem = s.convert(elem, acc_dtype)
        if op.kind is ScanKind.custom:
            assert combine_region is not None
            pair = [elem, acc] if op.reverse else [acc, elem]
            (new,) = apply_region(ctx, combine_region, pair)
        else:
            new = apply_builtin(ctx, op.kind.as_reduce, acc, elem)
        written = s.convert(acc if op.exclusive else new, dtype)
        keep = s.binary("and", has, has_dst)
        dst.val = scatter_last_wins(ctx, dst.val, dcoords, written, keep)
        return [s.select(has, new, acc)]

    counted(ctx, longest(ctx, ws), [ctx.splat(start, acc_dtype, lanes, depth)], [op.dst.id], step)

