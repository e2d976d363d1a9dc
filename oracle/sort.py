"""Sorting along one value axis (`kir.sort.Sort`): a stable sort by value, NaN after every number ascending and
before every number descending (`-0.0` equals `0.0`), vectorised over lanes and the other axes."""

from __future__ import annotations

import numpy as np

from kir.sort import Sort

from .interp import Frame, evaluates


def sort_order(x: np.ndarray, descending: bool) -> np.ndarray:
    """The positions that sort the last axis of `x` (a stable order; equal values keep index order)."""
    if np.issubdtype(x.dtype, np.integer):
        return np.argsort(x if not descending else ~x, axis=-1, kind="stable")  # ~ reverses every integer order
    f = x.astype(np.float64)  # exact for every float dtype (bf16 and fp8 are held in f32 or their own type)
    nan = np.isnan(f)
    key = np.where(nan, 0.0, f)
    # np.lexsort is stable and sorts by its last key first: NaN-ness, then the value
    return np.lexsort((-key, ~nan) if descending else (key, nan), axis=-1)


@evaluates(Sort)
def _sort(frame: Frame, op: Sort) -> tuple[np.ndarray, ...]:
    axis = op.axis + 1  # after the lanes axis
    x = np.moveaxis(frame.get(op.x), axis, -1)
    order = sort_order(x, op.descending)
    if op.k is not None:
        order = order[..., :op.k]
    values = np.take_along_axis(x, order, axis=-1)
    return np.moveaxis(values, -1, axis), np.moveaxis(order.astype(np.int64), -1, axis)
