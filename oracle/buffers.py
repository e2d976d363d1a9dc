"""Local buffers: one per allocation instance (a row per lane), `empty` ones tracked for first writes."""

from __future__ import annotations

import numpy as np

from kir.buffers import Alloc, InitMode

from .interp import Frame, evaluates
from .memory import Memory, MemView
from .numerics import np_dtype, to_storage


@evaluates(Alloc)
def _alloc(frame: Frame, op: Alloc) -> tuple[MemView]:
    shape = (frame.size, *(frame.dim(d) for d in op.shape))
    dtype = op.dtype
    np_dtype(dtype)  # refuses an unassigned dtype variable
    written = None
    if op.init is InitMode.full:
        data = np.full(shape, to_storage(np.array(op.fill), dtype))  # type: ignore[arg-type]
    else:
        data = np.zeros(shape, np_dtype(dtype))
        written = np.zeros(shape, bool)  # reading an element before its first write is an error
    where = f" at {op.loc}" if op.loc is not None else ""
    mem = Memory(data, dtype, f"the buffer allocated{where}", writable=True, written=written)  # type: ignore[arg-type]
    return (MemView(mem, np.arange(frame.size)),)
