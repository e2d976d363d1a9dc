"""Contractions (dot_general), with the lane axis as one more batch axis.

f16/bf16 operands are exact in f32 and accumulate there; f32 operands multiply and accumulate in
f32 (IEEE, `precision="ieee"`); `precision="tf32"` rounds the operands to tf32 (10 mantissa bits,
nearest even) first. Integer operands accumulate in the accumulator dtype, wrapping at its width.
"""

from __future__ import annotations

import numpy as np

from kir.contract import Dot, Precision

from .interp import Frame, evaluates
from .numerics import np_dtype


def round_tf32(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + (np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1)))) & np.uint32(0xFFFFE000)
    return np.where(np.isnan(x), x, rounded.view(np.float32))


def _arrange(x: np.ndarray, batch: tuple[int, ...], contract: tuple[int, ...], free_last: bool) -> np.ndarray:
    """(lanes, batch, free, contract) or (lanes, batch, contract, free), each group flattened."""
    rank = x.ndim - 1
    free = tuple(a for a in range(rank) if a not in batch + contract)
    groups = (batch, contract, free) if free_last else (batch, free, contract)
    perm = (0, *(a + 1 for g in groups for a in g))
    sizes = [int(np.prod([x.shape[a + 1] for a in g], dtype=np.int64)) for g in groups]
    return x.transpose(perm).reshape((x.shape[0], *sizes))


@evaluates(Dot)
def _dot(frame: Frame, op: Dot) -> tuple[np.ndarray]:
    a, b = frame.get(op.lhs), frame.get(op.rhs)
    acc = np_dtype(op.acc_dtype)
    work = acc if acc.kind == "f" else np.dtype(np.int64)  # integer products wrap once, at the end
    lhs = _arrange(a, op.lhs_batch, op.lhs_contract, free_last=False).astype(work, copy=False)
    rhs = _arrange(b, op.rhs_batch, op.rhs_contract, free_last=True).astype(work, copy=False)
    if op.precision is Precision.tf32:
        lhs, rhs = round_tf32(lhs), round_tf32(rhs)
    out = np.matmul(lhs, rhs)
    batch = [a.shape[d + 1] for d in op.lhs_batch]
    free_a = [a.shape[d + 1] for d in range(a.ndim - 1) if d not in op.lhs_batch + op.lhs_contract]
    free_b = [b.shape[d + 1] for d in range(b.ndim - 1) if d not in op.rhs_batch + op.rhs_contract]
    return (out.reshape((out.shape[0], *batch, *free_a, *free_b)).astype(acc, copy=False),)
