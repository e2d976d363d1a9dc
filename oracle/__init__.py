"""The NumPy oracle: the executable meaning of every KIR kernel.

`run(kernel, args)` interprets a specialised kernel over NumPy, vectorised over parallel instances
(see `oracle/interp.py` for the execution model and `oracle/numerics.py` for the numeric rules),
and returns the final contents of its `out` and `inout` tensors. `oracle.philox` is the Philox
4x32-10 generator, bit-exact with Triton's `tl.rand`/`tl.randn`/`tl.randint`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from kir.core import Kernel, ParamKind, RefType, load_families

from .args import Binding
from .interp import EVAL, Frame, Run, eval_region
from .memory import Memory, MemView, Writes

load_families(__name__)  # importing each family's module registers its evaluation

__all__ = ["run", "EVAL", "Writes"]


def checks_enabled(kernel: Kernel, checks: bool | None) -> bool:
    """Explicit `checks`, else the kernel's own flag, else `INTENT_CHECKS=1` in the environment."""
    if checks is not None:
        return checks
    return kernel.checks or os.environ.get("INTENT_CHECKS", "") == "1"


def run(kernel: Kernel, args: Mapping[str, Any], checks: bool | None = None,
        writes: dict[str, Writes] | None = None, flush_subnormals: bool = False) -> dict[str, np.ndarray]:
    """Evaluate `kernel` on `args` (parameter name -> torch tensor, NumPy array or scalar).

    Returns `{name: array}` for every `out` and `inout` parameter (bf16 as float32 arrays holding
    bf16 values); the arguments themselves are never modified. Raises `LaunchError` for arguments
    that do not fit the kernel and `IntentError` for a run that goes wrong (an out-of-range access
    with checks on, a read of uninitialised memory). With `writes` (a dict), fills it with what the run
    did to each writable parameter (`Writes`: elements written, read before written, and their writer).
    `flush_subnormals` models a consumer that computes f32, bf16 and f64 with subnormals flushed to zero (read as
    zero and written as zero by every arithmetic op, and made zero by a bitcast from bits), as XLA's CPU runtime
    does; the kernel's own meaning keeps them.
    """
    binding = Binding(kernel, args)
    state = Run(kernel, binding.symbols, checks_enabled(kernel, checks), flush_subnormals)
    memories: list[Memory] = []
    values: list[Any] = []
    for p in kernel.params:
        if p.kind is ParamKind.SCALAR:
            values.append(binding.scalars[p.name])
            continue
        ref = p.type
        assert isinstance(ref, RefType)
        given = binding.tensors[p.name]
        if ref.writable:
            data = np.array(given, dtype=given.dtype, order="C", copy=True)[None]
        else:
            data = given.view()[None]
            data.flags.writeable = False
        mem = Memory(data, ref.dtype, p.name, writable=ref.writable)  # type: ignore[arg-type]
        if writes is not None and ref.writable:
            mem.tracker = Writes.of_shape(data.shape)
        memories.append(mem)
        values.append(MemView(mem, np.zeros(1, np.int64)))
    with np.errstate(all="ignore"):
        eval_region(Frame(state, 1), kernel.body, values)
    by_name = {m.name: m for m in memories}
    if writes is not None:
        for m in memories:
            t = m.tracker
            if t is not None:  # drop the row axis: arrays of the parameter's shape
                writes[m.name] = Writes(t.written[0], t.read_first[0], t.writer[0], t.ops, t.numbers)
    return {p.name: by_name[p.name].data[0, ...] for p in kernel.outputs}
