"""Reductions over value axes, vectorised over lanes (value axis k is array axis k + 1).

Sums and products accumulate in `Reduce.effective_acc()` (f32 for f16/bf16); float sums are pairwise
over the reduced elements in row-major order whatever the axes (NumPy's pairwise summation, which it
applies only along a contiguous axis, so the reduced axes are made that axis first), and integers
wrap at the accumulator's width. An identity given for a built-in kind is the accumulator's initial
value (folded in, as a device accumulator starts from it); without one, an empty built-in reduction
gives the kind's identity (0, 1, -inf/+inf or the integer extremes, False/True; -1 for
argmax/argmin). A custom combine folds adjacent pairs level by level and gives its identity when the
reduced extent is 0.
"""

from __future__ import annotations

import numpy as np

from kir.dtypes import DType
from kir.reduce import Reduce, ReduceKind

from .combine import region_combine, tree_fold
from .interp import Frame, evaluates
from .numerics import accumulate_dtype, argextreme, reduce_identity, reduce_ufunc, to_storage

ARG_KINDS = (ReduceKind.argmax, ReduceKind.argmin)


def reduced_last(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """`x` with the array axes `axes` moved last and flattened into one (row-major over them)."""
    kept = [d for a, d in enumerate(x.shape) if a not in axes]
    extent = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    return np.moveaxis(x, axes, tuple(range(-len(axes), 0))).reshape((*kept, extent))


def keep_dims(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.expand_dims(x, axes)


def identities(values: tuple[int | float | bool, ...], dtypes: list[DType], shape: tuple[int, ...]
               ) -> list[np.ndarray]:
    return [np.full(shape, to_storage(np.array(v), dt)) for v, dt in zip(values, dtypes)]


@evaluates(Reduce)
def _reduce(frame: Frame, op: Reduce) -> tuple[np.ndarray, ...]:
    xs = [frame.get(v) for v in op.inputs]
    axes = tuple(a + 1 for a in op.axes)
    if op.kind is ReduceKind.custom:
        flat = [reduced_last(x, axes) for x in xs]
        if flat[0].shape[-1] == 0:
            dtypes = [v.type.dtype for v in op.inputs]
            out = identities(op.identity or (), dtypes, flat[0].shape[:-1])
        else:
            out = tree_fold(region_combine(frame, op.combine), flat)  # type: ignore[arg-type]
        return tuple(keep_dims(o, axes) if op.keepdims else o for o in out)
    x = xs[0]
    dtype: DType = op.inputs[0].type.dtype
    if op.kind in ARG_KINDS:
        out = argextreme(reduced_last(x, axes), op.kind)
        return (keep_dims(out, axes) if op.keepdims else out,)
    acc = accumulate_dtype(op.kind, dtype, op.effective_acc())
    empty = any(x.shape[a] == 0 for a in axes)
    initial = op.identity[0] if op.identity else reduce_identity(op.kind, dtype) if empty else None
    kwargs = {} if initial is None else {"initial": initial}
    if op.kind is ReduceKind.sum and acc.kind == "f":
        # NumPy sums pairwise only along one contiguous axis (a column sum adds row after row): move the
        # reduced axes last, in the accumulator's type, so that every float sum is pairwise.
        # Started from the identity (-0.0): NumPy would start an add from +0.0 and lose the sign of a sum
        # of negative zeros.
        flat = np.ascontiguousarray(reduced_last(x, axes), dtype=acc)
        out = np.add.reduce(flat, axis=-1, initial=reduce_identity(op.kind, dtype) if initial is None else initial)
        return (np.asarray(keep_dims(out, axes) if op.keepdims else out),)
    out = reduce_ufunc(op.kind).reduce(x, axis=axes, dtype=acc, keepdims=op.keepdims, **kwargs)
    return (np.asarray(out),)
