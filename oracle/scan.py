"""Scans along one value axis, vectorised over lanes and the other axes.

Built-in kinds accumulate sequentially with NumPy (`cumsum`-like, in the f32 accumulator for
f16/bf16 sums and products, wrapping for integers; max/min propagate NaN). A custom combine runs as
a Hillis-Steele scan. Every scan starts from the identity (the given one, else the kind's): an
inclusive scan gives `id + x0 + ... + xk`, an exclusive one `id + x0 + ... + x(k-1)`. A reverse scan
runs from the last element to the first.
"""

from __future__ import annotations

import numpy as np

from kir.dtypes import DType
from kir.reduce import default_acc
from kir.scan import Scan, ScanKind

from .combine import region_combine, scan_last
from .interp import Frame, evaluates
from .numerics import accumulate_dtype, reduce_identity, reduce_ufunc, to_storage


def prepend(x: np.ndarray, first: int | float | bool, dtype: DType) -> np.ndarray:
    head = np.full((*x.shape[:-1], 1), to_storage(np.array(first), dtype))
    return np.concatenate([head, x], axis=-1)


@evaluates(Scan)
def _scan(frame: Frame, op: Scan) -> tuple[np.ndarray, ...]:
    axis = op.axis + 1
    dtypes: list[DType] = [v.type.dtype for v in op.inputs]
    xs = [np.moveaxis(frame.get(v), axis, -1) for v in op.inputs]
    if op.reverse:
        xs = [x[..., ::-1] for x in xs]
    custom = op.kind is ScanKind.custom
    starts = op.identity or (() if custom else (reduce_identity(op.kind.as_reduce, dtypes[0]),))
    # The identity only changes a built-in inclusive scan when it is not the kind's own.
    seeded = op.exclusive or (not custom and op.identity is not None)
    if seeded:
        xs = [prepend(x, s, dt) for x, s, dt in zip(xs, starts, dtypes)]
    if custom:
        out = scan_last(region_combine(frame, op.combine, swap=op.reverse), xs)  # type: ignore[arg-type]
    else:
        acc = accumulate_dtype(op.kind.as_reduce, dtypes[0], op.acc_dtype or default_acc(op.kind.as_reduce,
                                                                                        dtypes[0]))
        out = [reduce_ufunc(op.kind.as_reduce).accumulate(xs[0], axis=-1, dtype=acc)]
    if seeded:
        out = [o[..., :-1] if op.exclusive else o[..., 1:] for o in out]
    if op.reverse:
        out = [o[..., ::-1] for o in out]
    return tuple(np.moveaxis(o, -1, axis) for o in out)
