"""Memory access: load, store (point indices proven in bounds), gather and scatter (data-dependent).

Out-of-range gather reads give the fill value and out-of-range scatter writes are dropped; with
checks on, both raise instead, naming the op, the index and the extent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kir.access import Gather, Load, Scatter, Store
from kir.core import Index, Op, Slice, TensorType, Value
from kir.errors import IntentError

from .interp import Frame, evaluates
from .memory import (
    Item,
    Memory,
    MemView,
    at,
    first_outside,
    lanes_at,
    lanes_first,
    last_writers,
    locate,
    out_of_range,
    within,
)
from .numerics import to_storage

# ---------------------------------------------------------------------------------------------- load/store


def point_items(frame: Frame, view: MemView, index: Index) -> list[Item]:
    items: list[Item] = [view.rows]
    for it in index:
        items.append(slice(frame.dim(it.start), frame.dim(it.stop)) if isinstance(it, Slice) else frame.get(it))
    return items


@evaluates(Load, moves=True)
def _load(frame: Frame, op: Load) -> tuple[np.ndarray]:
    view = frame.ref(op.src)
    mem = view.mem
    items = point_items(frame, view, op.index)
    where = locate(items, mem, frame.size, frame.run.progressions, op, "load")
    mem.check_initialised(where.index, op)
    x = lanes_first(mem.data[where.index], where.lane_axis)
    if mem.writable and np.may_share_memory(x, mem.data):
        x = x.copy()  # values are immutable: a later store must not change what was loaded
    return (x,)


@evaluates(Store)
def _store(frame: Frame, op: Store) -> tuple[()]:
    view = frame.ref(op.dst)
    mem = view.mem
    items = point_items(frame, view, op.index)
    value = frame.get(op.value)
    where = locate(items, mem, frame.size, frame.run.progressions, op, "store")
    index = where.index
    if where.lane_axis is None:
        if op.unique and frame.run.checks and frame.size > 1:
            raise duplicate_write(op, mem)
        mem.data[index] = value[-1]  # every lane writes these elements: the last instance's value stays
    else:
        lanes = frame.full(value)
        if where.lane_keys is not None:
            keep = last_writers(where.lane_keys)
            if keep is not None:
                if op.unique and frame.run.checks:
                    raise duplicate_write(op, mem)
                index = tuple(it[keep] if isinstance(it, np.ndarray) else it for it in index)
                lanes = lanes[keep]
        mem.data[index] = lanes_at(lanes, where.lane_axis)
    mem.mark_written(index, op)
    return ()


def duplicate_write(op: Op, mem: Memory) -> IntentError:
    return IntentError(f"{op.NAME} declared unique{at(op)} but several instances write one element of {mem.name}")


# ---------------------------------------------------------------------------------------------- data-dependent


def lift(x: np.ndarray, rank: int) -> np.ndarray:
    """A lane-batched scalar (B,) as (B, 1, ..., 1) so that it broadcasts against rank-`rank` tensors."""
    return x.reshape(x.shape + (1,) * (rank - (x.ndim - 1)))


def value_rank(values: tuple[Value, ...]) -> int:
    return max((len(v.type.shape) for v in values if isinstance(v.type, TensorType)), default=0)


@dataclass
class Addresses:
    """Element addresses of a gather/scatter/atomic, flattened in instance order."""

    coords: list[np.ndarray]  # one per axis of Memory.data (the row first)
    valid: np.ndarray  # within the extents
    operands: list[np.ndarray]  # the op's value operands, flattened alongside
    shape: tuple[int, ...]  # the lane-batched shape the elements were flattened from

    def only(self, mask: np.ndarray) -> Addresses:
        return Addresses([c[mask] for c in self.coords], self.valid[mask], [o[mask] for o in self.operands],
                         self.shape)


def addresses(frame: Frame, op: Op, view: MemView, indices: tuple[Value, ...], operands: tuple[Value, ...],
              what: str) -> Addresses:
    """Flatten a lane-batched data-dependent access; raise on out-of-range elements when checks are on."""
    mem = view.mem
    rank = value_rank(indices + operands)
    parts = [lift(view.rows, rank)] + [lift(frame.get(v), rank) for v in indices + operands]
    elem_shape = np.broadcast_shapes(*(p.shape[1:] for p in parts))
    full = [np.broadcast_to(p, (frame.size, *elem_shape)).reshape(-1) for p in parts]
    coords, ops = full[:1 + len(indices)], full[1 + len(indices):]
    ok = within(coords[1:], mem.shape)
    if ok is not None and frame.run.checks:
        raise out_of_range(what, op, mem, *first_outside(coords[1:], mem.shape, ok))
    valid = np.ones(coords[0].shape, bool) if ok is None else ok
    return Addresses(coords, valid, ops, (frame.size, *elem_shape))


@evaluates(Gather, moves=True)
def _gather(frame: Frame, op: Gather) -> tuple[np.ndarray]:
    view = frame.ref(op.src)
    mem = view.mem
    rank = value_rank(op.indices)
    parts = np.broadcast_arrays(lift(view.rows, rank), *(lift(frame.get(v), rank) for v in op.indices))
    fill = to_storage(np.array(op.fill), mem.dtype)
    valid = within(parts[1:], mem.shape)
    if valid is None:
        mem.check_initialised(tuple(parts), op)
        return (mem.data[tuple(parts)],)
    if frame.run.checks and not op.masked:
        raise out_of_range("gather", op, mem, *first_outside(parts[1:], mem.shape, valid))
    if 0 in mem.shape:
        return (np.full(parts[0].shape, fill, mem.data.dtype),)
    index = (parts[0], *(np.where(valid, c, 0) for c in parts[1:]))
    mem.check_initialised(tuple(c[valid] for c in index), op)
    return (np.where(valid, mem.data[index], fill),)


@evaluates(Scatter)
def _scatter(frame: Frame, op: Scatter) -> tuple[()]:
    view = frame.ref(op.dst)
    mem = view.mem
    addr = addresses(frame, op, view, op.indices, (op.value,), "scatter")
    if not addr.valid.all():
        addr = addr.only(addr.valid)  # out-of-range writes are dropped
    keep = last_writers(np.ravel_multi_index(tuple(addr.coords), mem.data.shape))
    if keep is not None:
        if op.unique and frame.run.checks:
            raise duplicate_write(op, mem)
        addr = addr.only(keep)
    index = tuple(addr.coords)
    mem.data[index] = addr.operands[0]
    mem.mark_written(index, op)
    return ()
