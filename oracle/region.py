"""Region fold and region scan over a data-dependent subregion `[b, e)` of one axis, one per lane.

Folds are segment reductions over all lanes at once (`ufunc.reduceat` over the lanes' segments),
never a loop per lane; a custom combine loops over the position within the segments with every
lane that is still inside its segment taking part.

Meaning:
* `[b, e)` with `e <= b` is empty; an empty fold gives the identity (the given one, else the
  kind's: 0, 1, -inf/+inf or the integer extremes, False/True, and -1 for argmax/argmin).
* argmax/argmin give the first index of the extreme relative to `b`, NaN counted as the extreme.
* Elements of the subregion outside the source's extent (and a point index outside its axis) are
  not part of it; with checks on they raise instead. A region scan reads them as the identity and
  drops its writes outside the target.
* A region scan's source and target subregions must have the same length in every instance.
* Sums and products accumulate in the accumulator dtype (f32 for f16/bf16), left to right within a
  segment (`reduceat`); an identity given for a built-in fold is folded in as the accumulator's
  initial value. A region scan with a built-in kind runs as a segmented Hillis-Steele scan (exact
  for integers, max and min; a tree order for float sums).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kir.core import DynSlice, Index, Op
from kir.dtypes import DType
from kir.errors import IntentError
from kir.reduce import ReduceKind, default_acc
from kir.region import RegionFold, RegionScan
from kir.scan import ScanKind

from .combine import flat_region_combine, flat_ufunc_combine, segmented_scan
from .interp import Frame, eval_region, evaluates
from .memory import MemView, at, last_writers, within
from .numerics import accumulate_dtype, np_dtype, reduce_identity, reduce_ufunc, to_storage

ELEMENTWISE_FOLDS = (ReduceKind.sum, ReduceKind.prod, ReduceKind.max, ReduceKind.min, ReduceKind.any,
                     ReduceKind.all)


@dataclass
class Segments:
    """One subregion per lane, clipped to the source; its elements flattened lane by lane."""

    begin: np.ndarray  # (P,) the subregion's first index as written (b)
    lo: np.ndarray  # (P,) first index inside the extent
    lens: np.ndarray  # (P,) number of elements inside the extent
    points: list[np.ndarray | None]  # per axis of the source (the row first): (P,) points, None on the dyn axis
    axis: int  # the subregion's axis of Memory.data

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum(self.lens) - self.lens

    def elements(self) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        """(lane, position in the segment, coordinates into Memory.data) of every element."""
        lane = np.repeat(np.arange(self.lens.shape[0]), self.lens)
        pos = np.arange(lane.shape[0]) - self.starts[lane]
        coords = tuple(self.lo[lane] + pos if p is None else p[lane] for p in self.points)
        return lane, pos, coords


def subregion(frame: Frame, op: Op, view: MemView, index: Index, clip: bool, what: str) -> Segments:
    mem = view.mem
    points: list[np.ndarray | None] = [frame.full(view.rows).astype(np.int64, copy=False)]
    bounds: tuple[np.ndarray, np.ndarray] | None = None
    inside = np.ones(frame.size, bool)
    axis = 0
    for ax, it in enumerate(index):
        if isinstance(it, DynSlice):
            bounds = (frame.full(frame.get(it.begin)).astype(np.int64, copy=False),
                      frame.full(frame.get(it.end)).astype(np.int64, copy=False))
            points.append(None)
            axis = ax + 1
            continue
        p = frame.full(frame.get(it)).astype(np.int64, copy=False)
        ok = (p >= 0) & (p < mem.shape[ax])
        if frame.run.checks and not ok.all():
            raise IntentError(f"{what} out of range{at(op)}: index {int(p[~ok][0])} on axis {ax} of {mem.name} "
                              f"with extent {mem.shape[ax]}")
        inside &= ok
        # A clipped fold leaves lanes with a bad point empty; a scan reads/drops their elements.
        points.append(np.where(ok, p, 0) if clip else p)
    assert bounds is not None
    b, e = bounds
    extent = mem.data.shape[axis]
    wanted = np.maximum(e - b, 0)
    lo, hi = np.minimum(np.maximum(b, 0), extent), np.minimum(np.maximum(e, 0), extent)
    if frame.run.checks and ((wanted > 0) & ((b < 0) | (e > extent))).any():
        k = int(np.flatnonzero((wanted > 0) & ((b < 0) | (e > extent)))[0])
        raise IntentError(f"{what} out of range{at(op)}: subregion [{int(b[k])}, {int(e[k])}) on axis {axis - 1} "
                          f"of {mem.name} with extent {extent}")
    if clip:
        lens = np.where(inside, np.maximum(hi - lo, 0), 0)
        return Segments(b, lo, lens, points, axis)
    return Segments(b, b, wanted, points, axis)


# ---------------------------------------------------------------------------------------------- fold


def fold_runs(fn: np.ufunc, values: np.ndarray, lo: np.ndarray, hi: np.ndarray, acc: np.dtype,
              identity: int | float | bool) -> np.ndarray:
    """fn-fold of values[lo:hi] for each pair, with `identity` for empty pairs (one reduceat call)."""
    out = np.full(lo.shape[0], identity, acc)
    filled = hi > lo
    if not filled.any():
        return out
    lo, hi = lo[filled], hi[filled]
    n = values.shape[0]
    ends = hi == n
    ending = int(ends.sum())
    if ending > 1:
        # reduceat cannot end a run at n except the last one; give the others a neutral end element.
        values = np.concatenate([values, np.full(1, identity, values.dtype)])
        ending = 0
    order = None
    if ending == 1 and not ends[-1]:
        order = np.argsort(ends, kind="stable")  # the run that ends at n goes last, its end left implicit
        lo, hi = lo[order], hi[order]
    pairs = np.empty(2 * lo.shape[0], np.int64)
    pairs[0::2], pairs[1::2] = lo, hi
    folded = fn.reduceat(values, pairs[:-1] if ending else pairs, dtype=acc)[0::2]
    if order is not None:
        folded[order] = folded.copy()
    out[filled] = folded
    return out


def pairwise_runs(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, acc: np.dtype) -> np.ndarray:
    """The float sum of values[lo:hi] for each pair, pairwise in `acc` (as a reduction sums: `np.add.reduceat`
    adds each run sequentially), from the identity -0.0 (so also for empty pairs)."""
    wide = np.ascontiguousarray(values, dtype=acc)
    zero = reduce_identity(ReduceKind.sum, DType.f64)
    out = np.full(lo.shape[0], zero, acc)
    for k in np.flatnonzero(hi > lo):
        out[k] = np.add.reduce(wide[lo[k]:hi[k]], initial=zero)
    return out


def first_extreme(values: np.ndarray, lane: np.ndarray, pos: np.ndarray, seg: Segments, kind: ReduceKind
                  ) -> np.ndarray:
    ext_fn = np.maximum if kind is ReduceKind.argmax else np.minimum
    starts = seg.starts
    ext = fold_runs(ext_fn, values, starts, starts + seg.lens, values.dtype, values.dtype.type(0))
    best = ext[lane]
    hit = values == best
    if values.dtype.kind == "f":
        hit |= np.isnan(values) & np.isnan(best)
    never = np.iinfo(np.int64).max
    first = fold_runs(np.minimum, np.where(hit, pos, never), starts, starts + seg.lens, np.dtype(np.int64), -1)
    return np.where(seg.lens > 0, first + (seg.lo - seg.begin), -1)


@evaluates(RegionFold)
def _region_fold(frame: Frame, op: RegionFold) -> tuple[np.ndarray, ...]:
    view = frame.ref(op.src)
    mem = view.mem
    seg = subregion(frame, op, view, op.index, clip=True, what="region_fold")
    kind = op.kind
    dtype: DType = mem.dtype if op.map is None else op.map.yielded[0].type.dtype
    if kind in ELEMENTWISE_FOLDS and op.map is None and mem.written is None and mem.tracker is None \
            and mem.data.size and _shared(seg):
        line = mem.data[tuple(slice(None) if p is None else int(p[0]) for p in seg.points)]
        return (_fold(op, kind, dtype, line, seg.lo, seg.lo + seg.lens),)
    lane, pos, coords = seg.elements()
    mem.check_initialised(coords, op)
    comps = [mem.data[coords]]
    if op.map is not None:
        # the map's optional second argument: the element's position along the subregion's axis
        args = comps + [coords[seg.axis].astype(np.int64, copy=False)][:len(op.map.args) - 1]
        comps = [np.broadcast_to(c, lane.shape) for c in eval_region(frame.lanes(lane), op.map, args)]
    starts = seg.starts
    if kind in ELEMENTWISE_FOLDS:
        return (_fold(op, kind, dtype, comps[0], starts, starts + seg.lens),)
    if kind in (ReduceKind.argmax, ReduceKind.argmin):
        return (first_extreme(comps[0], lane, pos, seg, kind),)
    return tuple(_custom_fold(frame, op, comps, seg))


def _shared(seg: Segments) -> bool:
    """Whether every lane reads the same line (the points agree), so segments index one 1-D view."""
    return all(p is None or p.shape[0] == 0 or (p == p[0]).all() for p in seg.points)


def _fold(op: RegionFold, kind: ReduceKind, dtype: DType, values: np.ndarray, lo: np.ndarray, hi: np.ndarray
          ) -> np.ndarray:
    acc = accumulate_dtype(kind, dtype, op.effective_acc())
    fn = reduce_ufunc(kind)
    if kind is ReduceKind.sum and acc.kind == "f":
        out = pairwise_runs(values, lo, hi, acc)
    else:
        out = fold_runs(fn, values, lo, hi, acc, reduce_identity(kind, dtype))
    if op.identity:
        out = fn(np.array(op.identity[0], acc), out)
    return out


def _custom_fold(frame: Frame, op: RegionFold, comps: list[np.ndarray], seg: Segments) -> list[np.ndarray]:
    dtypes = [v.type.dtype for v in op.results]
    acc = [np.full(frame.size, to_storage(np.array(i), dt)) for i, dt in zip(op.identity or (), dtypes)]
    starts, lens = seg.starts, seg.lens
    filled = np.flatnonzero(lens > 0)
    for a, c in zip(acc, comps):
        a[filled] = c[starts[filled]]
    combine = flat_region_combine(frame, op.combine)  # type: ignore[arg-type]
    for k in range(1, int(lens.max(initial=0))):
        act = np.flatnonzero(lens > k)
        new = combine([a[act] for a in acc], [c[starts[act] + k] for c in comps], act)
        for a, n in zip(acc, new):
            a[act] = n
    return acc


# ---------------------------------------------------------------------------------------------- scan


@evaluates(RegionScan)
def _region_scan(frame: Frame, op: RegionScan) -> tuple[()]:
    src, dst = frame.ref(op.src), frame.ref(op.dst)
    s = subregion(frame, op, src, op.src_index, clip=False, what="region_scan source")
    d = subregion(frame, op, dst, op.dst_index, clip=False, what="region_scan target")
    if not np.array_equal(s.lens, d.lens):
        k = int(np.flatnonzero(s.lens != d.lens)[0])
        raise IntentError(f"region_scan{at(op)}: the source subregion has {int(s.lens[k])} elements but the "
                          f"target has {int(d.lens[k])}")
    dtype: DType = src.mem.dtype
    custom = op.kind is ScanKind.custom
    identity = to_storage(np.array(op.identity[0] if op.identity else reduce_identity(op.kind.as_reduce, dtype)),
                          dtype)
    lane, pos, coords = s.elements()
    valid = within(coords, src.mem.data.shape)
    if valid is None:
        valid = np.ones(lane.shape[0], bool)
    inside = tuple(c[valid] for c in coords)
    src.mem.check_initialised(inside, op)
    values = np.full(lane.shape[0], identity)
    values[valid] = src.mem.data[inside]
    kind = op.kind.as_reduce
    acc = np_dtype(dtype) if custom else accumulate_dtype(kind, dtype, default_acc(kind, dtype))
    # Scan order: each segment reversed for a reverse scan, and seeded with the identity.
    starts = s.starts
    order = starts[lane] + s.lens[lane] - 1 - pos if op.reverse else np.arange(lane.shape[0])
    seeded = np.full(lane.shape[0] + frame.size, identity, acc)
    slot = np.arange(lane.shape[0]) + lane + 1  # element k sits after its lane's identity
    seeded[slot] = values[order]
    seeded_lane = np.repeat(np.arange(frame.size), s.lens + 1)
    fn = flat_region_combine(frame, op.combine, swap=op.reverse) if custom else \
        flat_ufunc_combine(reduce_ufunc(kind), acc)  # type: ignore[arg-type]
    (inc,) = segmented_scan(fn, [seeded], seeded_lane)
    scanned = inc[slot - 1] if op.exclusive else inc[slot]
    result = np.empty_like(scanned)
    result[order] = scanned
    _write_segments(dst, d, to_storage(result, dst.mem.dtype), op, frame.run.checks)
    return ()


def _write_segments(dst: MemView, d: Segments, values: np.ndarray, op: Op, checks: bool = False) -> None:
    mem = dst.mem
    _, _, coords = d.elements()
    valid = within(coords, mem.data.shape)
    if valid is not None:
        coords = tuple(c[valid] for c in coords)
        values = values[valid]
    keep = last_writers(np.ravel_multi_index(coords, mem.data.shape)) if coords[0].size else None
    if keep is not None and checks and isinstance(op, RegionScan):
        # parallel instances' segments are disjoint (non-decreasing offsets): the compiler runs them at once
        raise IntentError(f"region_scan{at(op)}: the target subregions of several instances overlap in "
                          f"{mem.name}; segment offsets must be non-decreasing")
    if keep is not None:
        coords = tuple(c[keep] for c in coords)
        values = values[keep]
    mem.data[coords] = values
    mem.mark_written(coords, op)
