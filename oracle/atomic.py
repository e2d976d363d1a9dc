"""Atomics: read-modify-write per element in instance order, returning the old values.

All elements of one atomic op apply in instance order (lane order, then row-major within a lane's
index tensor); successive atomic ops apply one after the other. Per address, the old value each
element sees is the initial value combined with the values of the elements before it: for
add/max/min/and/or/xor that running value is a segmented scan (exact for integers, max and min;
for float add it is a deterministic tree order, as float atomics have no fixed order on a device);
`xchg` sees the previous element's value; `cas` runs element by element per address and succeeds
when the old value's bits equal `expected` (as the hardware compares). Out-of-range elements are
dropped and return 0; with checks on they raise.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kir.atomic import Atomic, AtomicCAS, AtomicKind
from kir.core import Op
from kir.dtypes import DType

from .access import Addresses, addresses
from .combine import Components, segmented_scan
from .interp import Frame, evaluates
from .memory import Memory
from .numerics import to_storage

UFUNC: dict[AtomicKind, np.ufunc] = {
    AtomicKind.add: np.add,
    AtomicKind.max: np.maximum,  # NaN-propagating
    AtomicKind.min: np.minimum,
    AtomicKind.and_: np.bitwise_and,
    AtomicKind.or_: np.bitwise_or,
    AtomicKind.xor: np.bitwise_xor,
}


class Groups:
    """The elements of one atomic op sorted by address, instance order kept within an address."""

    def __init__(self, mem: Memory, addr: Addresses) -> None:
        keys = np.ravel_multi_index(tuple(addr.coords), mem.data.shape)
        self.order = np.argsort(keys, kind="stable")
        k = keys[self.order]
        self.first = np.ones(k.shape[0], bool)
        self.first[1:] = k[1:] != k[:-1]
        self.group = np.cumsum(self.first) - 1
        self.keys = k[self.first]
        self.last = np.flatnonzero(np.append(self.first[1:], True))

    def unsort(self, sorted_values: np.ndarray) -> np.ndarray:
        out = np.empty_like(sorted_values)
        out[self.order] = sorted_values
        return out


def _apply(op: Op, mem: Memory, addr: Addresses, run: Callable[..., tuple[np.ndarray, np.ndarray]]
           ) -> np.ndarray:
    """Drop out-of-range elements, run `run(groups, init, *sorted operands) -> (old, final)`, write back."""
    old = np.zeros(addr.valid.shape[0], mem.data.dtype)
    live = addr if addr.valid.all() else addr.only(addr.valid)
    if live.valid.shape[0]:
        mem.check_initialised(tuple(live.coords), op)
        flat = mem.data.reshape(-1)  # writable memory is C-contiguous: a view
        groups = Groups(mem, live)
        init = flat[groups.keys]
        live_old, final = run(groups, init, *(o[groups.order] for o in live.operands))
        flat[groups.keys] = final
        mem.mark_written(tuple(live.coords), op)
        old[addr.valid] = groups.unsort(live_old)
    return old.reshape(addr.shape)


def _exchange(groups: Groups, init: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """xchg: each element sees the value the element before it (at its address) wrote."""
    before = np.empty_like(values)
    before[1:] = values[:-1]
    return np.where(groups.first, init[groups.group], before), values[groups.last]


def _read_modify_write(kind: AtomicKind, dtype: DType) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    fn = UFUNC[kind]

    def combine(a: Components, b: Components, lanes: np.ndarray) -> Components:
        return [to_storage(fn(a[0], b[0]), dtype)]

    def run(groups: Groups, init: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # running[k]: the values up to and including element k at its address, combined
        (running,) = segmented_scan(combine, [values], groups.group)
        before = np.empty_like(running)
        before[1:] = running[:-1]
        start = init[groups.group]
        old = np.where(groups.first, start, to_storage(fn(start, before), dtype))
        return old, to_storage(fn(init, running[groups.last]), dtype)

    return run


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.kind == "f" else x


def _cas(groups: Groups, init: np.ndarray, expected: np.ndarray, values: np.ndarray
         ) -> tuple[np.ndarray, np.ndarray]:
    current = init.copy()
    old = np.empty_like(values)
    starts = np.flatnonzero(groups.first)
    lens = np.diff(np.append(starts, values.shape[0]))
    for r in range(int(lens.max(initial=0))):
        g = np.flatnonzero(lens > r)
        k = starts[g] + r
        seen = current[g]
        old[k] = seen
        current[g] = np.where(_bits(seen) == _bits(expected[k]), values[k], seen)
    return old, current


@evaluates(Atomic)
def _atomic(frame: Frame, op: Atomic) -> tuple[np.ndarray]:
    view = frame.ref(op.dst)
    addr = addresses(frame, op, view, op.indices, (op.value,), f"atomic_{op.kind}")
    run = _exchange if op.kind is AtomicKind.xchg else _read_modify_write(op.kind, view.mem.dtype)
    return (_apply(op, view.mem, addr, run),)


@evaluates(AtomicCAS)
def _atomic_cas(frame: Frame, op: AtomicCAS) -> tuple[np.ndarray]:
    view = frame.ref(op.dst)
    addr = addresses(frame, op, view, op.indices, (op.expected, op.value), "atomic_cas")
    return (_apply(op, view.mem, addr, _cas),)
