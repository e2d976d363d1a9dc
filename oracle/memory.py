"""Memory of the oracle: parameters and local buffers, and the addressing of lane-batched accesses.

A `Memory` holds `data` of shape `(rows, *shape)`: parameters and top-level buffers have one row;
a buffer allocated inside `parallel` has one row per instance (it is instance-private). Inside an
evaluation frame a memory is seen through a `MemView` whose `rows` give each lane its row (one entry
when every lane shares the row).

Point accesses (`load`/`store`) are addressed per lane: each index item is a lane-batched integer
array or a static slice. `locate` turns them into one NumPy index into `data` and says where the
lane axis lands in the selection, so that reads and writes stay vectorised over all lanes. When a
single axis varies over lanes as an arithmetic progression (the common `x[i, :]`), the index is a
basic slice and the read is a view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kir.core import Op
from kir.dtypes import DType
from kir.errors import IntentError

Item = np.ndarray | slice  # per axis of `data`: a lane-batched index of shape (B,), or a static slice


def at(op: Op | None) -> str:
    """` at file:line:col` for an op with a location, else nothing."""
    loc = op.loc if op is not None else None
    return f" at {loc}" if loc is not None else ""


@dataclass(eq=False)
class Writes:
    """What one run did to a writable parameter (`oracle.run(..., writes=...)`, for the sanitizer): the
    elements it wrote, those it read (or read-modify-wrote) before writing them, and the op that last
    wrote each element (an index into `ops`, -1 where none did). Arrays have the parameter's shape."""

    written: np.ndarray
    read_first: np.ndarray
    writer: np.ndarray
    ops: list[Op]
    numbers: dict[int, int]  # id(op) -> its index in `ops`

    @staticmethod
    def of_shape(shape: tuple[int, ...]) -> Writes:
        return Writes(np.zeros(shape, bool), np.zeros(shape, bool), np.full(shape, -1, np.int32), [], {})

    def writer_of(self, flat: int) -> Op | None:
        k = int(self.writer.reshape(-1)[flat])
        return self.ops[k] if k >= 0 else None


@dataclass(eq=False)
class Memory:
    data: np.ndarray  # (rows, *shape), C-contiguous when writable
    dtype: DType
    name: str  # a parameter name, or "the buffer allocated at file:line:col"
    writable: bool
    written: np.ndarray | None = None  # the initialised mask of an `empty` buffer
    tracker: Writes | None = None  # (rows, *shape) arrays: what the run wrote, when asked (parameters only)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape[1:]

    def check_initialised(self, index: tuple, op: Op) -> None:
        """Every read (and read-modify-write) of memory passes here first."""
        if self.tracker is not None:
            self.tracker.read_first[index] |= ~self.tracker.written[index]
        if self.written is not None and not self.written[index].all():
            raise IntentError(f"read of uninitialised memory{at(op)}: {op.NAME} reads elements of {self.name} "
                              f"(allocated `empty`) before they are written")

    def mark_written(self, index: tuple, op: Op) -> None:
        if self.written is not None:
            self.written[index] = True
        t = self.tracker
        if t is not None:
            t.written[index] = True
            k = t.numbers.get(id(op))
            if k is None:
                k = t.numbers[id(op)] = len(t.ops)
                t.ops.append(op)
            t.writer[index] = k


@dataclass(frozen=True, eq=False)
class MemView:
    mem: Memory
    rows: np.ndarray  # (B,) int64: the row of `mem.data` each lane sees; B == 1 when shared

    def narrow(self, sel: np.ndarray) -> MemView:
        return self if self.rows.shape[0] == 1 else MemView(self.mem, self.rows[sel])


def out_of_range(what: str, op: Op, mem: Memory, axis: int, index: int) -> IntentError:
    return IntentError(f"{what} out of range{at(op)}: index {index} on axis {axis} of {mem.name} with extent "
                       f"{mem.shape[axis]}")


def within(coords: Sequence[np.ndarray], shape: Sequence[int]) -> np.ndarray | None:
    """The mask of elements whose coordinates lie inside `shape`; None when every element does."""
    ok: np.ndarray | None = None
    for c, n in zip(coords, shape):
        inside = (c >= 0) & (c < n)
        ok = inside if ok is None else ok & inside
    return None if ok is None or ok.all() else ok


def first_outside(coords: Sequence[np.ndarray], shape: Sequence[int], ok: np.ndarray) -> tuple[int, int]:
    """(axis, index) of the first element, in instance order, that `ok` marks outside."""
    first = int(np.flatnonzero(~ok.reshape(-1))[0])
    for ax, (c, n) in enumerate(zip(coords, shape)):
        v = int(np.broadcast_to(c, ok.shape).reshape(-1)[first])
        if not 0 <= v < n:
            return ax, v
    raise AssertionError("no coordinate is outside")


@dataclass(frozen=True)
class Located:
    index: tuple  # into Memory.data
    lane_axis: int | None  # where the lane axis lands in data[index]; None: every lane selects the same
    lane_keys: np.ndarray | None = None  # per lane, a key of the selected point (only for fancy indexing)


def progression(a: np.ndarray, memo: dict[int, tuple[np.ndarray, slice | None]]) -> slice | None:
    """`a` as a slice when it is an increasing arithmetic progression (remembered per array)."""
    hit = memo.get(id(a))
    if hit is not None and hit[0] is a:
        return hit[1]
    n = a.shape[0]
    if n < 2:
        return None
    start = int(a[0])
    step = int(a[1]) - start
    last = start + step * (n - 1)
    found = None
    if step > 0 and int(a[-1]) == last and np.array_equal(a, np.arange(start, last + 1, step, dtype=a.dtype)):
        found = slice(start, last + 1, step)
    memo[id(a)] = (a, found)
    return found


def locate(items: list[Item], mem: Memory, size: int, memo: dict[int, tuple[np.ndarray, slice | None]],
           op: Op, what: str) -> Located:
    """One NumPy index for a lane-batched point access (`items[0]` is the row index), bounds-checked.

    Point indices of load/store are proven in bounds by the verifier; the check keeps an unverified
    kernel from reading past an extent or wrapping a negative index.
    """
    shape = mem.data.shape
    varying = [ax for ax, it in enumerate(items) if isinstance(it, np.ndarray) and it.shape[0] != 1]
    spans: list[int | slice | np.ndarray] = [int(it[0]) if isinstance(it, np.ndarray) and it.shape[0] == 1
                                             else it for it in items]
    if len(varying) == 1:
        found = progression(items[varying[0]], memo)
        if found is not None:
            spans[varying[0]] = found
    for ax, sp in enumerate(spans[1:], start=1):
        if isinstance(sp, np.ndarray) and sp.size == 0:
            continue
        lo, hi = (sp, sp) if isinstance(sp, int) else \
            (sp.start, sp.stop - 1) if isinstance(sp, slice) else (int(sp.min()), int(sp.max()))
        if isinstance(sp, slice) and sp.step is None:
            if not 0 <= sp.start <= sp.stop <= shape[ax]:
                raise IntentError(f"{what} out of range{at(op)}: slice {sp.start}:{sp.stop} on axis {ax - 1} of "
                                  f"{mem.name} with extent {shape[ax]}")
        elif lo < 0 or hi >= shape[ax]:
            raise out_of_range(what, op, mem, ax - 1, lo if lo < 0 else hi)
    arrays = [ax for ax, sp in enumerate(spans) if isinstance(sp, np.ndarray)]
    if not arrays:
        if not varying:
            return Located(tuple(spans), None)
        lane_axis = sum(1 for sp in spans[:varying[0]] if isinstance(sp, slice))
        return Located(tuple(spans), lane_axis)
    points = [k for k, sp in enumerate(spans) if not isinstance(sp, slice)]
    index = tuple(np.broadcast_to(np.asarray(sp), (size,)) if not isinstance(sp, slice) else sp for sp in spans)
    # NumPy puts the broadcast point axis where adjacent points stand, or first when slices separate them.
    lane_axis = points[0] if points == list(range(points[0], points[-1] + 1)) else 0
    keys = np.ravel_multi_index(tuple(index[k] for k in varying), tuple(shape[k] for k in varying))
    return Located(index, lane_axis, keys)


def lanes_at(lanes: np.ndarray, lane_axis: int) -> np.ndarray:
    """Move the lane axis (the first) of a value to `lane_axis`, where `data[index]` has it."""
    return lanes if lane_axis == 0 else np.moveaxis(lanes, 0, lane_axis)


def lanes_first(selected: np.ndarray, lane_axis: int | None) -> np.ndarray:
    """Move the lane axis of `data[index]` to the front (add a shared one when there is none)."""
    if lane_axis is None:
        return selected[None]
    return selected if lane_axis == 0 else np.moveaxis(selected, lane_axis, 0)


def last_writers(keys: np.ndarray) -> np.ndarray | None:
    """Lanes whose write survives when several write one element (the last in instance order wins);
    None when all keys differ."""
    rev = keys[::-1]
    _, first_in_rev = np.unique(rev, return_index=True)
    if first_in_rev.shape[0] == keys.shape[0]:
        return None
    return np.sort(keys.shape[0] - 1 - first_in_rev)
