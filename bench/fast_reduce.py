"""Vectorised custom-combine reductions for Triton's interpreter, so that traffic runs finish in minutes.

Triton's interpreter reduces with a custom combine function (`tl.reduce(..., combine_fn)`, e.g. the
Welford combine) one scalar element at a time: a 64x4096 Welford reduction is 262,144 interpreted
calls of the combine function. `vectorised_custom_reductions()` replaces that loop by a pairwise
tree over the reduced axis: each level combines adjacent pairs of whole arrays in one call (the
combine function is elementwise), keeping the operands' order, so an associative combine gives the
same result up to floating-point rounding (SPEC: float reduction order is unspecified). Only
compute changes: combine functions do no memory accesses, so traffic counts are unaffected.
Built-in reductions (sum, max, min, argmax, argmin) keep the interpreter's own NumPy paths.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from intent.runtime import triton_adapter as adapter


@contextmanager
def vectorised_custom_reductions() -> Iterator[None]:
    """While active, the interpreter's generic (custom-combine) reduction is the pairwise tree."""
    with adapter.interpreter_custom_reduce(_tree_reduce):
        yield


def _tree_reduce(self: Any, inputs: tuple[Any, ...]) -> list[Any]:
    """`ReduceOps.generic_reduce` with the same inputs and outputs, one combine call per tree level."""
    import triton.language as tl

    original_axis = self.axis
    inputs, axis = self.unravel(inputs, self.axis)
    dtypes = [arg.dtype for arg in inputs]
    input_rank = inputs[0].handle.data.ndim
    data = [np.moveaxis(arg.handle.data, axis, -1) for arg in inputs]
    while data[0].shape[-1] > 1:
        n = data[0].shape[-1]
        even = n - n % 2
        lhs = [self.to_tensor(np.ascontiguousarray(d[..., 0:even:2]), dt) for d, dt in zip(data, dtypes)]
        rhs = [self.to_tensor(np.ascontiguousarray(d[..., 1:even:2]), dt) for d, dt in zip(data, dtypes)]
        result = self.combine_fn.fn(*lhs, *rhs)
        result = result if isinstance(result, tuple) else (result,)
        shape = data[0][..., 0:even:2].shape
        combined = []
        for r, d in zip(result, data):
            values = r.handle.data if isinstance(r, tl.core.tensor) else np.asarray(r)
            values = np.broadcast_to(values.astype(d.dtype, copy=False), shape)
            combined.append(np.concatenate([values, d[..., even:]], axis=-1) if n % 2 else np.array(values))
        data = combined
    out = []
    for d, dt in zip(data, dtypes):
        value: Any = d[..., 0]
        if self.keep_dims:
            if original_axis is not None:
                value = np.expand_dims(value, axis)
            else:
                for _ in range(input_rank):
                    value = np.expand_dims(value, 0)
        elif original_axis is None:
            value = value.item()
        out.append(self.to_tensor(value, dt))
    return out
