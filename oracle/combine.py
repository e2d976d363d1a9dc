"""Folds and scans with a combine: a NumPy ufunc for built-in kinds or a KIR combine region.

A combine region takes `(a_1..a_k, b_1..b_k)` scalars and yields k scalars. It is evaluated for
many element pairs at once: the pairs become the lanes of a child frame, each mapped back to the
frame lane it belongs to (the region may read values defined around it).

Orders. A custom reduction combines adjacent elements pairwise, level by level (a tree, which keeps
left-to-right order, so any associative combine gives the sequential result up to float rounding);
a custom scan is a Hillis-Steele scan (log2(n) vectorised steps, order kept); segmented scans are
the same with segment boundaries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kir.core import Region

from .interp import Frame, eval_region

Components = list[np.ndarray]
CombineFn = Callable[[Components, Components], Components]
FlatCombineFn = Callable[[Components, Components, np.ndarray], Components]


def reads_outside(region: Region) -> bool:
    """Whether the region uses a value defined outside it (then its lanes must map to frame lanes)."""
    defined = {a.id for a in region.args}
    used: set[int] = set()
    for op in region.walk():
        used.update(v.id for v in op.operands())
        defined.update(v.id for v in op.results)
        for r in op.regions():
            defined.update(a.id for a in r.args)
    return bool(used - defined)


def run_combine(frame: Frame, region: Region, flat: Sequence[np.ndarray], lane_of: np.ndarray | None
                ) -> Components:
    """Evaluate `region` on flat operand arrays (one entry per pair); `lane_of` maps pairs to frame lanes."""
    n = int(flat[0].shape[0])
    # Without a lane map the region reads nothing from outside: it runs in a frame of its own.
    child = frame.lanes(lane_of) if lane_of is not None else Frame(frame.run, n)
    outs = eval_region(child, region, list(flat))
    return [np.broadcast_to(o, (n,)) if o.shape[0] != n else o for o in outs]


def region_combine(frame: Frame, region: Region, swap: bool = False) -> CombineFn:
    """The combine of `region` on lane-first arrays (axis 0 is the frame's lane axis, or 1 if shared)."""
    outside = reads_outside(region)

    def combine(a: Components, b: Components) -> Components:
        if swap:
            a, b = b, a
        shape = np.broadcast_shapes(*(x.shape for x in a + b))
        lane_of = None
        if outside:
            shape = (frame.size, *shape[1:])
            per = int(np.prod(shape[1:], dtype=np.int64))
            lane_of = np.repeat(np.arange(frame.size), per)
        flat = [np.broadcast_to(x, shape).reshape(-1) for x in a + b]
        return [o.reshape(shape) for o in run_combine(frame, region, flat, lane_of)]

    return combine


def flat_region_combine(frame: Frame, region: Region, swap: bool = False) -> FlatCombineFn:
    """The combine of `region` on flat element arrays; `lanes` gives each pair's frame lane."""

    def combine(a: Components, b: Components, lanes: np.ndarray) -> Components:
        if swap:
            a, b = b, a
        return run_combine(frame, region, a + b, lanes)

    return combine


def flat_ufunc_combine(fn: np.ufunc, dtype: np.dtype | None = None) -> FlatCombineFn:
    def combine(a: Components, b: Components, lanes: np.ndarray) -> Components:
        return [fn(a[0], b[0], dtype=dtype)]

    return combine


def tree_fold(fn: CombineFn, comps: Components) -> Components:
    """Fold the last axis (length >= 1) by combining adjacent pairs level by level."""
    xs = list(np.broadcast_arrays(*comps))
    while xs[0].shape[-1] > 1:
        n = xs[0].shape[-1]
        h = n // 2
        merged = fn([x[..., 0:2 * h:2] for x in xs], [x[..., 1:2 * h:2] for x in xs])
        if n % 2:
            merged = [np.concatenate([m, x[..., -1:]], axis=-1) for m, x in zip(merged, xs)]
        xs = merged
    return [x[..., 0] for x in xs]


def scan_last(fn: CombineFn, comps: Components) -> Components:
    """Inclusive scan along the last axis (Hillis-Steele)."""
    xs = list(np.broadcast_arrays(*comps))
    n = xs[0].shape[-1]
    d = 1
    while d < n:
        new = fn([x[..., :-d] for x in xs], [x[..., d:] for x in xs])
        xs = [np.concatenate([x[..., :d], y], axis=-1) for x, y in zip(xs, new)]
        d *= 2
    return xs


def segmented_scan(fn: FlatCombineFn, comps: Components, seg: np.ndarray) -> Components:
    """Inclusive scan of flat elements within runs of equal `seg`, the frame lane of each element."""
    xs = [np.array(c) for c in comps]
    n = seg.shape[0]
    d = 1
    while d < n:
        k = np.flatnonzero(seg[d:] == seg[:-d]) + d
        if k.size == 0:  # runs are contiguous: no run is longer than d
            break
        new = fn([x[k - d] for x in xs], [x[k] for x in xs], seg[k])
        xs = [x.copy() for x in xs]
        for x, y in zip(xs, new):
            x[k] = y
        d *= 2
    return xs
