"""Histogram: counts of integer values into `bins` bins per lane; values outside [0, bins) are ignored."""

from __future__ import annotations

import numpy as np

from kir.histogram import Histogram

from .interp import Frame, evaluates


@evaluates(Histogram)
def _histogram(frame: Frame, op: Histogram) -> tuple[np.ndarray]:
    x = frame.get(op.values)
    bins = frame.dim(op.bins)
    lanes = x.shape[0]
    flat = x.reshape(lanes, -1).astype(np.int64)
    inside = (flat >= 0) & (flat < bins)
    slot = (np.arange(lanes)[:, None] * bins + flat)[inside]
    return (np.bincount(slot, minlength=lanes * bins).reshape(lanes, bins).astype(np.int32),)
