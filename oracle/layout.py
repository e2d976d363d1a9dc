"""Layout ops on lane-batched values: value axis k is array axis k + 1 (axis 0 is the lane axis)."""

from __future__ import annotations

import numpy as np

from kir.layout import Broadcast, Concat, ExpandDims, Reshape, SliceOp, Squeeze, Transpose

from .interp import Frame, evaluates


@evaluates(Broadcast, moves=True)
def _broadcast(frame: Frame, op: Broadcast) -> tuple[np.ndarray]:
    x = frame.get(op.x)
    shape = tuple(frame.dim(d) for d in op.shape)
    placed = [1] * len(shape)
    for k, d in enumerate(op.dims):
        placed[d] = x.shape[k + 1]
    return (np.broadcast_to(x.reshape((x.shape[0], *placed)), (x.shape[0], *shape)),)


@evaluates(Reshape, moves=True)
def _reshape(frame: Frame, op: Reshape) -> tuple[np.ndarray]:
    x = frame.get(op.x)
    return (x.reshape((x.shape[0], *(frame.dim(d) for d in op.shape))),)


@evaluates(Transpose, moves=True)
def _transpose(frame: Frame, op: Transpose) -> tuple[np.ndarray]:
    return (frame.get(op.x).transpose((0, *(p + 1 for p in op.perm))),)


@evaluates(SliceOp, moves=True)
def _slice(frame: Frame, op: SliceOp) -> tuple[np.ndarray]:
    index = tuple(slice(frame.dim(a), frame.dim(b), s) for a, b, s in zip(op.starts, op.stops, op.steps))
    return (frame.get(op.x)[(slice(None), *index)],)


@evaluates(Concat, moves=True)
def _concat(frame: Frame, op: Concat) -> tuple[np.ndarray]:
    xs = [frame.get(v) for v in op.inputs]
    lanes = max(x.shape[0] for x in xs)
    return (np.concatenate([np.broadcast_to(x, (lanes, *x.shape[1:])) for x in xs], axis=op.axis + 1),)


@evaluates(ExpandDims, moves=True)
def _expand_dims(frame: Frame, op: ExpandDims) -> tuple[np.ndarray]:
    return (np.expand_dims(frame.get(op.x), op.axis + 1),)


@evaluates(Squeeze, moves=True)
def _squeeze(frame: Frame, op: Squeeze) -> tuple[np.ndarray]:
    return (np.squeeze(frame.get(op.x), op.axis + 1),)
