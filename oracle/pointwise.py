"""Constants, index values and pointwise ops (the numerics are in `oracle/numerics.py`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from kir import pointwise as kp
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn, UnaryFn

from .interp import FLUSHED, Frame, evaluates, flush_subnormal
from .numerics import (
    BINARY,
    bitcast,
    cast,
    float_floordiv,
    float_mod,
    float_pow,
    int_floordiv,
    int_mod,
    int_pow,
    np_dtype,
    to_storage,
)


def value_dtype(v) -> DType:
    dt = v.type.dtype
    np_dtype(dt)  # refuses unassigned dtype variables with a clear error
    return dt


@evaluates(kp.Constant)
def _constant(frame: Frame, op: kp.Constant) -> tuple[np.ndarray]:
    return (to_storage(np.array([op.value]), op.dtype),)


@evaluates(kp.Iota)
def _iota(frame: Frame, op: kp.Iota) -> tuple[np.ndarray]:
    return (np.arange(frame.dim(op.extent), dtype=np_dtype(op.dtype))[None],)


@evaluates(kp.DimValue)
def _dim_value(frame: Frame, op: kp.DimValue) -> tuple[np.ndarray]:
    return (to_storage(np.array([frame.dim(op.dim)], dtype=np.int64), op.dtype),)


# ---------------------------------------------------------------------------------------------- unary


def _erf(x: np.ndarray) -> np.ndarray:
    # NumPy has no erf; torch's CPU erf is correctly rounded to well within the float tolerance.
    wide = np.array(x, dtype=np.float64 if x.dtype == np.float64 else np.float32)  # a private, writable copy
    return torch.erf(torch.from_numpy(wide)).numpy().astype(x.dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = np.ones((), x.dtype)
    return one / (one + np.exp(-x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.ones((), x.dtype) / np.sqrt(x)


def _not(x: np.ndarray) -> np.ndarray:
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


UNARY: dict[UnaryFn, Callable[[np.ndarray], np.ndarray]] = {
    UnaryFn.neg: np.negative,
    UnaryFn.abs: np.abs,
    UnaryFn.exp: np.exp,
    UnaryFn.exp2: np.exp2,
    UnaryFn.log: np.log,
    UnaryFn.log2: np.log2,
    UnaryFn.log1p: np.log1p,
    UnaryFn.sqrt: np.sqrt,
    UnaryFn.rsqrt: _rsqrt,
    UnaryFn.sin: np.sin,
    UnaryFn.cos: np.cos,
    UnaryFn.tanh: np.tanh,
    UnaryFn.sigmoid: _sigmoid,
    UnaryFn.erf: _erf,
    UnaryFn.floor: np.floor,
    UnaryFn.ceil: np.ceil,
    UnaryFn.round: np.rint,  # half to even
    UnaryFn.not_: _not,
    UnaryFn.isnan: np.isnan,
    UnaryFn.isinf: np.isinf,
}


@evaluates(kp.Unary)
def _unary(frame: Frame, op: kp.Unary) -> tuple[np.ndarray]:
    return (UNARY[op.fn](frame.get(op.x)),)


# ---------------------------------------------------------------------------------------------- binary


INT_BINARY: dict[BinaryFn, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    BinaryFn.floordiv: int_floordiv,
    BinaryFn.mod: int_mod,
    BinaryFn.pow: int_pow,
}

FLOAT_BINARY: dict[BinaryFn, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    BinaryFn.div: np.true_divide,
    BinaryFn.floordiv: float_floordiv,
    BinaryFn.mod: float_mod,
    BinaryFn.pow: float_pow,
}

@evaluates(kp.Binary)
def _binary(frame: Frame, op: kp.Binary) -> tuple[np.ndarray]:
    a, b = frame.get(op.lhs), frame.get(op.rhs)
    table = FLOAT_BINARY if value_dtype(op.lhs).is_float else INT_BINARY
    fn = table.get(op.fn) or BINARY[op.fn]
    return (fn(a, b),)


COMPARE: dict[CmpFn, np.ufunc] = {
    CmpFn.eq: np.equal,
    CmpFn.ne: np.not_equal,
    CmpFn.lt: np.less,
    CmpFn.le: np.less_equal,
    CmpFn.gt: np.greater,
    CmpFn.ge: np.greater_equal,
}


@evaluates(kp.Compare)
def _compare(frame: Frame, op: kp.Compare) -> tuple[np.ndarray]:
    return (COMPARE[op.fn](frame.get(op.lhs), frame.get(op.rhs)),)


@evaluates(kp.Select, moves=True)
def _select(frame: Frame, op: kp.Select) -> tuple[np.ndarray]:
    return (np.where(frame.get(op.cond), frame.get(op.on_true), frame.get(op.on_false)),)


@evaluates(kp.Cast)
def _cast(frame: Frame, op: kp.Cast) -> tuple[np.ndarray]:
    return (cast(frame.get(op.x), value_dtype(op.x), value_dtype(op.results[0])),)


@evaluates(kp.Bitcast, moves=True)
def _bitcast(frame: Frame, op: kp.Bitcast) -> tuple[np.ndarray]:
    dtype = value_dtype(op.results[0])
    bits = bitcast(frame.get(op.x), value_dtype(op.x), dtype)
    if frame.run.flush_subnormals and dtype in FLUSHED:
        bits = flush_subnormal(bits, dtype)
    return (bits,)
