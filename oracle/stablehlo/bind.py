"""Arguments to a concrete specialisation: shape symbols from argument shapes, refinements, NumPy inputs.

`args` maps parameter names to torch tensors, NumPy arrays or Python scalars. bf16 values travel
as float32 arrays holding bf16 values (the oracle's convention); torch bf16 tensors are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kir.core import Kernel, Param, RefType, Role
from kir.dims import DConst, Dim, DSym, bind_extents
from kir.dtypes import DType
from kir.errors import LaunchError
from kir.solver import default_lower_bounds


def _shape_text(shape: tuple[Dim, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _shape_of(x: Any) -> tuple[int, ...] | None:
    shape = getattr(x, "shape", None)
    return tuple(int(d) for d in shape) if shape is not None else None


def bind_symbols(kernel: Kernel, args: Mapping[str, Any]) -> dict[str, int]:
    """Bind every shape symbol from the argument shapes and check shapes and refinements."""
    shapes: dict[str, tuple[int, ...]] = {}
    for p in kernel.params:
        if not isinstance(p.type, RefType) or p.name not in args:
            continue
        shape = _shape_of(args[p.name])
        want = p.type.shape
        if shape is None:
            raise LaunchError(f"parameter {p.name}: expected a tensor {p.type.dtype}{_shape_text(want)}, got "
                              f"{type(args[p.name]).__name__}")
        if len(shape) != len(want):
            raise LaunchError(f"parameter {p.name}: expected rank {len(want)} ({p.type.dtype}{_shape_text(want)}), "
                              f"got shape {shape}")
        if p.type.dtype is DType.i4 and shape:  # two per byte along the last axis (kir.dtypes.I4_PACKING)
            shape = (*shape[:-1], 2 * shape[-1])
        shapes[p.name] = shape
    env: dict[str, int] = {}
    pending = [(p, ax, d) for p in kernel.params if p.name in shapes
               for ax, d in enumerate(p.type.shape)]  # type: ignore[union-attr]
    for p, ax, d in pending:  # plain symbols first: compound extents are then checked against them
        if isinstance(d, DSym) and d.name not in env:
            env[d.name] = shapes[p.name][ax]
    bind_extents([(d, shapes[p.name][ax]) for p, ax, d in pending], env)
    for p, ax, d in pending:
        missing = sorted(s for s in d.symbols() if s not in env)
        if missing:
            continue
        want, got = d.evaluate(env), shapes[p.name][ax]
        if want != got:
            shown = ", ".join(f"{s} = {env[s]}" for s in sorted(d.symbols()))
            detail = f"{d} = {want} with {shown}" if not isinstance(d, DConst | DSym) else f"{d} = {want}"
            raise LaunchError(f"parameter {p.name}: axis {ax} has extent {got} but {detail}")
    unbound = [s for s in kernel.symbols if s not in env]
    if unbound:
        raise LaunchError(f"cannot determine shape symbol{'s' if len(unbound) > 1 else ''} {', '.join(unbound)} "
                          "from the arguments' shapes")
    for pred in default_lower_bounds(kernel.symbols, kernel.requires) + kernel.requires + kernel.axioms:
        if not pred.evaluate(env):
            shown = ", ".join(f"{s} = {env[s]}" for s in sorted(pred.symbols()))
            raise LaunchError(f"{pred} failed: {shown}")
    return env


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def to_numpy(p: Param, x: Any) -> np.ndarray:
    """The argument as a NumPy array of the parameter's storage dtype (bf16: float32 holding bf16 values)."""
    dtype = p.type.dtype
    assert isinstance(dtype, DType)
    if dtype is DType.i4 and getattr(x, "ndim", 0) >= 1 and str(getattr(x, "dtype", "")).split(".")[-1] in (
            "int8", "uint8"):
        from kir.dtypes import i4_unpacked

        return i4_unpacked(x.detach().cpu().numpy() if _is_torch(x) else np.asarray(x))  # kir.dtypes.I4_PACKING
    if _is_torch(x):
        x = x.detach().cpu()
        got = DType.from_torch(x.dtype)
        x = x.float().numpy() if got is not None and got.in_f32 else x.numpy()
    elif isinstance(x, np.ndarray | np.generic) and x.dtype.name == "bfloat16":
        got = DType.bf16
        x = np.asarray(x, dtype=np.float32)
    elif isinstance(x, np.ndarray | np.generic):
        got = DType.from_numpy(x.dtype)
    else:
        return _scalar(p, x)
    arr = np.asarray(x)
    if got != dtype and not (dtype.in_f32 and got == DType.f32):
        raise LaunchError(f"parameter {p.name}: expected dtype {dtype}, got {got or arr.dtype}")
    return arr.astype(dtype.np, copy=False)


def _scalar(p: Param, x: Any) -> np.ndarray:
    dtype = p.type.dtype
    assert isinstance(dtype, DType)
    if isinstance(p.type, RefType):
        raise LaunchError(f"parameter {p.name}: expected a tensor {p.type}, got {type(x).__name__}")
    if isinstance(x, bool) and not dtype.is_pred:
        raise LaunchError(f"parameter {p.name}: expected a {dtype} scalar, got bool")
    if dtype.is_int:
        if not isinstance(x, int):
            raise LaunchError(f"parameter {p.name}: expected an integer ({dtype}) scalar, got {type(x).__name__}")
        lo, hi = dtype.int_range
        if not lo <= x <= hi:
            raise LaunchError(f"parameter {p.name}: {x} does not fit {dtype} (range {lo}..{hi})")
    elif dtype.is_float and not isinstance(x, int | float):
        raise LaunchError(f"parameter {p.name}: expected a {dtype} scalar, got {type(x).__name__}")
    elif dtype.is_pred and not isinstance(x, bool | int):
        raise LaunchError(f"parameter {p.name}: expected a pred scalar, got {type(x).__name__}")
    return np.asarray(x, dtype=dtype.np)


def input_arrays(kernel: Kernel, args: Mapping[str, Any], env: Mapping[str, int]) -> dict[str, np.ndarray]:
    """NumPy values for every parameter; omitted `Out` parameters start as zeros."""
    unknown = sorted(set(args) - {p.name for p in kernel.params})
    if unknown:
        raise LaunchError(f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; the kernel "
                          f"takes {', '.join(p.name for p in kernel.params)}")
    out: dict[str, np.ndarray] = {}
    for p in kernel.params:
        if p.name in args:
            out[p.name] = to_numpy(p, args[p.name])
            continue
        if isinstance(p.type, RefType) and p.role is Role.OUT:
            shape = tuple(int(d.evaluate(env)) for d in p.type.shape)
            out[p.name] = np.zeros(shape, dtype=p.type.dtype.np)  # type: ignore[union-attr]
            continue
        raise LaunchError(f"missing argument {p.name} ({p.type})")
    return out


def check_args(kernel: Kernel, args: Mapping[str, Any]) -> None:
    """Names and presence, without converting values (what text emission needs)."""
    unknown = sorted(set(args) - {p.name for p in kernel.params})
    if unknown:
        raise LaunchError(f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; the kernel "
                          f"takes {', '.join(p.name for p in kernel.params)}")
    for p in kernel.params:
        if p.name not in args and not (isinstance(p.type, RefType) and p.role is Role.OUT):
            if isinstance(p.type, RefType):
                raise LaunchError(f"missing argument {p.name} ({p.type})")
