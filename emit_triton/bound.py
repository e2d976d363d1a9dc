"""One object per kernel specialisation that holds everything the process keeps for launching it.

Like Triton's `JITFunction` or Helion's `BoundKernel`, a `BoundKernel` owns, for one KIR kernel (a
specialisation: dtypes and constants fixed): its emitted modules (plain and sanitized) and their entry
keys, its cached launch plans by argument signature (`fast_launch`), its loaded `@triton.jit`
functions (per cache root, entry key and target mode), its ahead-of-time artifacts and its autotuned
configurations. Nothing about a kernel lives anywhere else in the process, so dropping the object
drops all of it: there is no generation counter to compare against.

`bound(kernel)` finds the object: by identity first (the hot path of a cached launch), else by the
kernel's structural equality, so an equal kernel rebuilt elsewhere shares the emission. An object is
made under one emission function (`compile.emitted_for`, which tests replace to launch hand-written
modules): when that changes, the kernel gets a new object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kir.core import Kernel

from . import compile as compile_mod


@dataclass(eq=False)
class BoundKernel:
    """What the process keeps for one kernel (see the module doc)."""

    kernel: Kernel
    emission: Callable[..., Any]  # the `compile.emitted_for` this object was made under
    emitted: dict[bool, Any] = field(default_factory=dict)  # sanitize -> EmittedKernel
    keys: dict[int, tuple[Any, str]] = field(default_factory=dict)  # id(emitted) -> (it, entry key)
    plans: dict[tuple[str, ...], Any] = field(default_factory=dict)  # argument names -> fast_launch.Plan
    functions: dict[tuple[str, str, Any], Any] = field(default_factory=dict)  # (root, key, mode) -> jit fn
    artifacts: dict[str, Any] = field(default_factory=dict)  # artifact key -> targets.Artifacts
    tuned: dict[str, Any] = field(default_factory=dict)  # "entry/record" -> autotune.Config
    lock: threading.RLock = field(default_factory=threading.RLock)

    def entry_key(self, emitted: Any) -> str:
        """The entry key of `emitted` (one of this kernel's modules), computed once."""
        hit = self.keys.get(id(emitted))
        if hit is not None and hit[0] is emitted:
            return hit[1]
        key = compile_mod.entry_key(self.kernel, emitted)
        with self.lock:
            self.keys[id(emitted)] = (emitted, key)
        return key

    def forget_loaded(self) -> None:
        """Drop the loaded functions and artifacts, and the plans that hold functions."""
        with self.lock:
            self.functions.clear()
            self.artifacts.clear()
            self.plans.clear()


# The one per-kernel table: id(kernel) -> (kernel, its object), and kernel (structurally) -> object.
BY_ID: dict[int, tuple[Kernel, BoundKernel]] = {}
_by_value: dict[Kernel, BoundKernel] = {}
_lock = threading.Lock()


def bound(kernel: Kernel) -> BoundKernel:
    """The object of `kernel` under the current emission function (made on first use)."""
    hit = BY_ID.get(id(kernel))
    if hit is not None and hit[0] is kernel and hit[1].emission is compile_mod.emitted_for:
        return hit[1]
    with _lock:
        found = _by_value.get(kernel)
        if found is None or found.emission is not compile_mod.emitted_for:
            found = _by_value[kernel] = BoundKernel(kernel, compile_mod.emitted_for)
        BY_ID[id(kernel)] = (kernel, found)
        return found


def peek(kernel: Kernel) -> BoundKernel | None:
    """The object of `kernel` if the hot path knows it (no lock, nothing made): cached launches."""
    hit = BY_ID.get(id(kernel))
    if hit is not None and hit[0] is kernel and hit[1].emission is compile_mod.emitted_for:
        return hit[1]
    return None


def every() -> Iterator[BoundKernel]:
    """Every kernel's object (a snapshot)."""
    with _lock:
        objects = list(_by_value.values())
    return iter(objects)


def forget() -> None:
    """Drop every kernel's object (emissions, plans, functions, artifacts, choices)."""
    with _lock:
        BY_ID.clear()
        _by_value.clear()


__all__ = ["BoundKernel", "bound", "peek", "every", "forget"]
