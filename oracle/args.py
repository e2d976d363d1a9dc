"""Binding launch arguments for the oracle: NumPy views of the caller's data, shape symbols, scalars.

Inputs are torch tensors (any device; they are read on the CPU), NumPy arrays, or Python/NumPy
scalars for scalar parameters. `in` tensors are read through read-only views; `out`/`inout` tensors
are copied, so the caller's arguments are never changed. An omitted `out` tensor starts as zeros.
Every error is a `LaunchError` naming the parameter and the expectation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kir.core import Kernel, Param, ParamKind, RefType, Role, shape_str
from kir.dims import bind_extents
from kir.dtypes import DType, fp8_ml_dtype, fp8_rounded, i4_unpacked
from kir.errors import LaunchError
from kir.solver import check_concrete, default_lower_bounds

from .numerics import np_dtype, round_bf16


def _describe(p: Param) -> str:
    t = p.type
    article = "an" if str(t.dtype)[0] in "fi" else "a"  # "an f32", "an i64", "a u8", "a bf16"
    if isinstance(t, RefType):
        return f"{article} {t.dtype}{shape_str(t.shape)} tensor"
    return f"{article} {t.dtype} scalar"


def tensor_array(p: Param, x: Any) -> np.ndarray:
    """The argument of tensor parameter `p` as a NumPy array holding `p`'s storage dtype."""
    dtype: DType = p.type.dtype  # type: ignore[assignment]
    if not isinstance(dtype, DType):
        raise LaunchError(f"{p.name}: the kernel is not specialised (dtype variable {dtype})")
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency; NumPy arguments work without it
        torch = None  # type: ignore[assignment]
    if torch is not None and isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            raise LaunchError(f"{p.name}: expected {_describe(p)}, got a tensor with layout {x.layout}")
        if x.device.type == "meta":
            raise LaunchError(f"{p.name}: expected {_describe(p)}, got a tensor on the meta device (it has no data)")
        got = DType.from_torch(x.dtype)
        if dtype is DType.i4 and got in (DType.i8, DType.u8) and x.dim() >= 1:
            return i4_unpacked(x.detach().cpu().numpy())  # the packed bytes (kir.dtypes.I4_PACKING)
        if got is not dtype:
            raise LaunchError(f"{p.name}: expected {_describe(p)}, got a tensor of {x.dtype}")
        t = x.detach().cpu()
        return t.float().numpy() if dtype.in_f32 else t.resolve_conj().resolve_neg().numpy()
    if isinstance(x, np.ndarray):
        if dtype is DType.bf16 and x.dtype.name in ("bfloat16", "float32"):
            # NumPy has no bf16: float32 arrays stand for bf16 tensors (their values are rounded).
            return round_bf16(x.astype(np.float32))
        if dtype.is_fp8 and (x.dtype == fp8_ml_dtype(dtype) or x.dtype.name == "float32"):
            # NumPy's fp8 (ml_dtypes) arrays, or float32 arrays standing for them (their values are rounded).
            return fp8_rounded(x.astype(np.float32), dtype)
        if dtype is DType.i4 and x.dtype.name in ("int8", "uint8") and x.ndim >= 1:
            return i4_unpacked(x)
        got = _FROM_NUMPY.get(x.dtype)
        if got is not dtype:
            raise LaunchError(f"{p.name}: expected {_describe(p)}, got an array of {x.dtype}")
        return x
    raise LaunchError(f"{p.name}: expected {_describe(p)} (a torch.Tensor or numpy.ndarray), got "
                      f"{type(x).__name__}")


_FROM_NUMPY = {d.np: d for d in DType if not d.in_f32}


def scalar_array(p: Param, x: Any) -> np.ndarray:
    """A runtime scalar argument as a one-lane array of the parameter's dtype."""
    dtype: DType = p.type.dtype  # type: ignore[assignment]
    if not isinstance(dtype, DType):
        raise LaunchError(f"{p.name}: the kernel is not specialised (dtype variable {dtype})")
    if hasattr(x, "detach") and hasattr(x, "dim") and x.dim() == 0:  # a 0-d torch tensor
        x = x.detach().cpu().item()
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    if isinstance(x, np.generic):
        x = x.item()
    if dtype.is_pred:
        if not isinstance(x, bool) and x not in (0, 1):
            raise LaunchError(f"{p.name}: expected {_describe(p)} (True or False), got {x!r}")
        return np.array([bool(x)])
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise LaunchError(f"{p.name}: expected {_describe(p)}, got {type(x).__name__} {x!r}")
    if dtype.is_int:
        if isinstance(x, float):
            raise LaunchError(f"{p.name}: expected {_describe(p)}, got the float {x!r}")
        lo, hi = dtype.int_range
        if not lo <= x <= hi:
            raise LaunchError(f"{p.name}: {x} does not fit {dtype} (range {lo} to {hi})")
        return np.array([x], np_dtype(dtype))
    value = np.array([x], np.float64)
    if dtype.is_fp8:
        return fp8_rounded(value, dtype)
    return round_bf16(value.astype(np.float32)) if dtype is DType.bf16 else value.astype(np_dtype(dtype))


class Binding:
    """The arguments of one oracle run, checked against the kernel's signature."""

    def __init__(self, kernel: Kernel, args: Mapping[str, Any]) -> None:
        self.kernel = kernel
        names = [p.name for p in kernel.params]
        unknown = [n for n in args if n not in names]
        if unknown:
            raise LaunchError(f"{kernel.name}: unknown argument {unknown[0]!r}; the parameters are "
                              f"{', '.join(names)}")
        self.tensors: dict[str, np.ndarray] = {}
        self.scalars: dict[str, np.ndarray] = {}
        for p in kernel.params:
            if p.name not in args:
                if p.kind is ParamKind.TENSOR and p.role is Role.OUT:
                    continue  # allocated once the symbols are bound
                raise LaunchError(f"{kernel.name}: missing argument {p.name}: expected {_describe(p)}")
            if p.kind is ParamKind.TENSOR:
                self.tensors[p.name] = tensor_array(p, args[p.name])
            else:
                self.scalars[p.name] = scalar_array(p, args[p.name])
        self.symbols = self._bind_symbols()
        self._check_shapes()
        failure = check_concrete(default_lower_bounds(kernel.symbols, kernel.requires) + kernel.requires
                                 + kernel.axioms, self.symbols)
        if failure is not None:
            raise LaunchError(f"{kernel.name}: {failure}")
        for p in kernel.params:
            if p.kind is ParamKind.TENSOR and p.name not in self.tensors:
                shape = tuple(d.evaluate(self.symbols) for d in p.type.shape)  # type: ignore[union-attr]
                self.tensors[p.name] = np.zeros(shape, np_dtype(p.type.dtype))  # type: ignore[union-attr]

    def _given(self) -> list[tuple[Param, np.ndarray]]:
        return [(p, self.tensors[p.name]) for p in self.kernel.params if p.name in self.tensors]

    def _bind_symbols(self) -> dict[str, int]:
        symbols: dict[str, int] = {}
        for p, x in self._given():
            shape = p.type.shape  # type: ignore[union-attr]
            if x.ndim != len(shape):
                raise LaunchError(f"{p.name}: expected {_describe(p)} (rank {len(shape)}), got rank {x.ndim} "
                                  f"with shape {list(x.shape)}")
        extents = [(d, int(n)) for p, x in self._given() for d, n in zip(p.type.shape, x.shape)]  # type: ignore[union-attr]
        bind_extents(extents, symbols)
        missing = [s for s in self.kernel.symbols if s not in symbols]
        if missing:
            raise LaunchError(f"{self.kernel.name}: the argument shapes do not determine {', '.join(missing)}; "
                              f"pass the tensors whose shapes use them")
        return symbols

    def _check_shapes(self) -> None:
        for p, x in self._given():
            shape = p.type.shape  # type: ignore[union-attr]
            want = tuple(d.evaluate(self.symbols) for d in shape)
            if want != tuple(x.shape):
                bound = ", ".join(f"{s} = {self.symbols[s]}" for s in sorted(set().union(*(d.symbols()
                                                                                       for d in shape))))
                raise LaunchError(f"{p.name}: expected shape {shape_str(shape)} = {list(want)}"
                                  f"{f' ({bound})' if bound else ''}, got {list(x.shape)}")
