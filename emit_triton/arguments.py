"""Checking launch arguments against a kernel's parameters and binding its shape symbols.

Every failure is a `LaunchError` that names the parameter and what was expected. The checks, in
order: unknown names; per parameter None / kind / dtype / rank / device; missing parameters;
shape-symbol binding (constants, symbols, solvable affine dims `S + c`, then every remaining dim
after binding); omitted outputs whose shape the inputs do not determine; refinements, axioms and
the symbols' lower bounds; memory overlap between parameters and within written parameters.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from intent.runtime.checks import (
    byte_range,
    check_scalar,
    check_tensor,
    common_device,
    contiguous_strides,
    self_overlap,
    settle,
    type_name,
)
from kir.core import Kernel, Param, RefType, Role, TensorType, shape_str
from kir.dims import DConst, Dim, DSym, solve_for
from kir.dtypes import DType, bf16_rounded_bits, fp8_ml_dtype, fp8_rounded
from kir.errors import LaunchError
from kir.solver import check_concrete, default_lower_bounds, limited


@dataclass(frozen=True)
class TensorArg:
    """A tensor parameter's argument; `tensor` is None for an omitted output not yet allocated."""

    param: str
    role: Role
    dtype: DType
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    tensor: torch.Tensor | None


@dataclass
class BoundArgs:
    """Checked arguments: tensors, scalars and the shape-symbol binding."""

    kernel: Kernel
    device: torch.device
    tensors: dict[str, TensorArg] = field(default_factory=dict)
    scalars: dict[str, int | float | bool] = field(default_factory=dict)
    env: dict[str, int] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # symbol -> "parameter x"
    omitted: tuple[str, ...] = ()  # Out parameters to allocate, in parameter order
    # NumPy arrays standing for bf16 parameters the kernel writes: copied back after the launch.
    write_back: list[tuple[np.ndarray, torch.Tensor]] = field(default_factory=list)

    def finish(self) -> None:
        """Copy results into the NumPy arrays that could not be shared (bf16 and fp8 held as f32)."""
        for array, tensor in self.write_back:
            array[...] = tensor.to(torch.float32).cpu().numpy()


def describe(p: Param) -> str:
    t = p.type
    if isinstance(t, RefType):
        return f"a tensor ({t})"
    return f"a {t.dtype} scalar"




# ---------------------------------------------------------------------------------------------- entry


def bind_arguments(kernel: Kernel, args: Mapping[str, Any]) -> BoundArgs:
    if not isinstance(args, Mapping):
        raise LaunchError(f"kernel {kernel.name}: arguments must be a mapping from parameter name to value, "
                          f"got {type_name(args)}")
    names = [p.name for p in kernel.params]
    for key in args:
        if key not in names:
            raise LaunchError(f"unexpected argument {key}: kernel {kernel.name} has no parameter {key} "
                              f"(parameters: {', '.join(names)})")
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, int | float | bool] = {}
    omitted: list[str] = []
    write_back: list[tuple[np.ndarray, torch.Tensor]] = []
    for p in kernel.params:
        if p.name not in args:
            if p.role is Role.OUT:
                omitted.append(p.name)
                continue
            raise LaunchError(f"missing argument {p.name}: expected {describe(p)}")
        value = args[p.name]
        if isinstance(p.type, RefType):
            tensors[p.name] = _check_tensor(p, p.type, value)
            if isinstance(value, np.ndarray) and p.role is not Role.IN and \
                    tensors[p.name].dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
                write_back.append((value, tensors[p.name]))  # a converted copy
        else:
            scalars[p.name] = _check_scalar(p, p.type, value)
    device = common_device(tensors)
    bound = BoundArgs(kernel, device, scalars=scalars, omitted=tuple(omitted), write_back=write_back)
    _bind_symbols(kernel, tensors, bound)
    _check_refinements(kernel, bound)
    for p in kernel.params:
        if p.name in tensors:
            t = tensors[p.name]
            bound.tensors[p.name] = TensorArg(p.name, p.role, _ref(p).dtype, logical_shape(_ref(p), t),
                                              tuple(t.stride()), t)
        elif p.name in omitted:
            shape = tuple(d.evaluate(bound.env) for d in _ref(p).shape)
            if any(e < 0 for e in shape):
                raise LaunchError(f"out parameter {p.name} was omitted and its shape {shape_str(_ref(p).shape)} "
                                  f"evaluates to {shape}, which has a negative extent")
            stored = storage_shape(p.name, _ref(p).dtype, shape)  # type: ignore[arg-type]
            bound.tensors[p.name] = TensorArg(p.name, p.role, _ref(p).dtype, shape, contiguous_strides(stored), None)
    _check_overlap(kernel, tensors)
    return bound


def storage_shape(name: str, dtype: DType, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of the tensor that holds values of `shape`: i4 packs two per byte along the last axis."""
    if dtype is not DType.i4:
        return shape
    if not shape or shape[-1] % 2:
        raise LaunchError(f"out parameter {name} was omitted and its shape is {list(shape)}: i4 packs two elements "
                          f"per byte along the last axis, which must have an even extent")
    return (*shape[:-1], shape[-1] // 2)


def storage_dtype(dtype: DType) -> torch.dtype:
    """The torch dtype of an allocated tensor of `dtype` (i4: its packed bytes, uint8)."""
    return torch.uint8 if dtype is DType.i4 else dtype.torch


def logical_shape(ref: RefType, t: torch.Tensor) -> tuple[int, ...]:
    """The shape of the values a tensor holds: i4 packs two per byte along the last axis
    (`kir.dtypes.I4_PACKING`), so its last extent is twice the tensor's; strides stay in bytes."""
    shape = tuple(int(e) for e in t.shape)
    if ref.dtype is DType.i4 and shape:
        return (*shape[:-1], 2 * shape[-1])
    return shape


def _ref(p: Param) -> RefType:
    assert isinstance(p.type, RefType)
    return p.type


# ---------------------------------------------------------------------------------------------- per parameter


def _check_tensor(p: Param, ref: RefType, value: Any) -> torch.Tensor:
    if value is None:
        raise LaunchError(f"parameter {p.name}: expected a tensor ({ref}), got None")
    if isinstance(value, np.ndarray):
        value = _from_numpy(p, ref, value)
    assert isinstance(ref.dtype, DType), "launch needs a specialised kernel"
    return check_tensor(p.name, str(ref), str(ref.dtype), ref.rank, value, _dtype_name)  # shared with intent.load


def _dtype_name(t: torch.Tensor) -> str | None:
    found = DType.from_torch(t.dtype)
    return None if found is None else str(found)


def _from_numpy(p: Param, ref: RefType, array: np.ndarray) -> torch.Tensor:
    """Share the array's memory; bf16 (which NumPy lacks) comes as f32 and is converted (a copy); fp8 comes as
    ml_dtypes' fp8 (its bits shared) or as f32 values (rounded as the oracle rounds them, a copy)."""
    if isinstance(ref.dtype, DType) and ref.dtype.is_fp8:
        if array.dtype == fp8_ml_dtype(ref.dtype):
            return torch.from_numpy(array.view(np.uint8)).view(ref.dtype.torch)
        if array.dtype == np.float32:
            bits = fp8_rounded(array, ref.dtype).astype(fp8_ml_dtype(ref.dtype)).view(np.uint8)
            return torch.from_numpy(np.ascontiguousarray(bits)).view(ref.dtype.torch)
    try:
        shared = torch.from_numpy(array)
    except (TypeError, ValueError) as exc:
        raise LaunchError(f"parameter {p.name}: cannot use this NumPy array as {ref}: {exc}") from None
    if ref.dtype is DType.bf16 and shared.dtype == torch.float32:
        return _to_bf16(array)
    return shared


def _to_bf16(array: np.ndarray) -> torch.Tensor:
    """f32 values rounded to bf16 as KIR rounds them (nearest, ties to even; NaN -> 0x7FC0). torch's
    vectorised conversion turns NaN into 0xFFFF, which a bitcast would see."""
    half = (bf16_rounded_bits(array) >> np.uint32(16)).astype(np.uint16)
    return torch.from_numpy(half.view(np.int16)).view(torch.bfloat16)


def _check_scalar(p: Param, t: TensorType, value: Any) -> int | float | bool:
    assert isinstance(t.dtype, DType), "launch needs a specialised kernel"
    return check_scalar(p.name, str(t.dtype), value)  # one implementation, shared with loaded kernels


# ---------------------------------------------------------------------------------------------- symbols


@dataclass(frozen=True)
class _Pending:
    param: str
    axis: int
    dim: Dim
    extent: int


def _bind_symbols(kernel: Kernel, tensors: Mapping[str, torch.Tensor], bound: BoundArgs) -> None:
    env, origin = bound.env, bound.origin
    pending: list[_Pending] = []
    for p in kernel.params:
        if p.name not in tensors:
            continue
        for axis, (d, extent) in enumerate(zip(_ref(p).shape, logical_shape(_ref(p), tensors[p.name]))):
            extent = int(extent)
            if isinstance(d, DConst):
                if extent != d.value:
                    raise LaunchError(f"parameter {p.name}: axis {axis} has extent {extent} but the kernel "
                                      f"expects {d.value}")
            elif isinstance(d, DSym):
                if d.name not in env:
                    env[d.name], origin[d.name] = extent, f"parameter {p.name}"
                elif env[d.name] != extent:
                    raise LaunchError(f"parameter {p.name}: axis {axis} has extent {extent} but {d.name} = "
                                      f"{env[d.name]} from {origin[d.name]}")
            else:
                pending.append(_Pending(p.name, axis, d, extent))

    def resolve(item: _Pending) -> bool:
        unbound = sorted(item.dim.symbols() - env.keys())
        if not unbound:
            _check_derived(item, env, origin)
            return True
        value = solve_for(item.dim, unbound[0], item.extent, env) if len(unbound) == 1 else None
        if value is None:
            return False
        env[unbound[0]], origin[unbound[0]] = value, f"parameter {item.param}"
        return True

    settle(pending, resolve)
    missing_outs = []
    for name in bound.omitted:
        ref = _ref(kernel.param(name))
        unbound = sorted(set().union(*(d.symbols() for d in ref.shape)) - env.keys())
        if unbound:
            missing_outs.append((name, ref, unbound))
    if missing_outs:
        name, ref, unbound = missing_outs[0]
        verb = "is" if len(unbound) == 1 else "are"
        raise LaunchError(f"out parameter {name} was omitted and its shape {shape_str(ref.shape)} cannot be "
                          f"inferred: {', '.join(unbound)} {verb} not bound by any input")
    for item in pending:
        unbound = sorted(item.dim.symbols() - env.keys())
        raise LaunchError(f"parameter {item.param}: axis {item.axis} has extent {item.extent} = {item.dim}, which "
                          f"does not determine {', '.join(unbound)}; pass a parameter whose shape gives it directly")
    for s in kernel.symbols:
        if s not in env:
            raise LaunchError(f"shape symbol {s} of kernel {kernel.name} is not bound by any argument")


def _check_derived(item: _Pending, env: Mapping[str, int], origin: Mapping[str, str]) -> None:
    try:
        want = item.dim.evaluate(env)
    except ZeroDivisionError:
        want = None
    if want != item.extent:
        given = ", ".join(f"{s} = {env[s]} from {origin[s]}" for s in sorted(item.dim.symbols()))
        shown = "cannot be evaluated (division by zero)" if want is None else f"= {want}"
        raise LaunchError(f"parameter {item.param}: axis {item.axis} has extent {item.extent} but {item.dim} "
                          f"{shown} ({given})")


def _check_refinements(kernel: Kernel, bound: BoundArgs) -> None:
    env, origin = bound.env, bound.origin

    def whence(symbols: frozenset[str]) -> str:
        return "; ".join(f"{s} from {origin[s]}" for s in sorted(symbols) if s in origin)

    for pred in default_lower_bounds(kernel.symbols, kernel.requires):
        failure = check_concrete((pred,), env)
        if failure is not None:
            s = next(iter(pred.symbols()))
            raise LaunchError(f"{failure} ({whence(pred.symbols())}; a shape symbol is >= 1 unless the kernel "
                              f"states {s} >= 0)")
    for word, preds in (("requires", kernel.requires), ("axiom", kernel.axioms)):
        for pred in preds:
            failure = check_concrete((pred,), env)
            if failure is not None:
                raise LaunchError(f"{word} {failure} ({whence(pred.symbols())})")


# ---------------------------------------------------------------------------------------------- memory


def views_share_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether some byte of an element of `a` is a byte of an element of `b`, decided exactly from their
    shapes, strides, element sizes and offsets (`_lattices_meet`)."""
    def geometry(t: torch.Tensor) -> tuple[tuple[tuple[int, int], ...], int]:
        return tuple((e, st) for e, st in zip(t.shape, t.stride()) if e > 1), t.element_size()

    return _lattices_meet(geometry(a), geometry(b), b.data_ptr() - a.data_ptr())


@functools.lru_cache(maxsize=256)
def _lattices_meet(a: tuple[tuple[tuple[int, int], ...], int], b: tuple[tuple[tuple[int, int], ...], int],
                   delta: int) -> bool:
    """Is there an element index `i` of `a`, `j` of `b` and bytes `u < size(a)`, `v < size(b)` with
    `sum(i * stride(a)) + u == delta + sum(j * stride(b)) + v` (byte offsets; `delta` = start(b) - start(a))?
    A bounded integer linear problem, given to Z3; an answer it cannot give counts as meeting."""
    import z3

    solver = limited(z3.Solver())
    sides = []
    for tag, (axes, size), start in (("a", a, 0), ("b", b, delta)):
        offset = z3.IntVal(start)
        for k, (e, st) in enumerate(axes):
            i = z3.Int(f"{tag}{k}")
            solver.add(i >= 0, i < e)
            offset = offset + i * (st * size)
        byte = z3.Int(f"{tag}_byte")
        solver.add(byte >= 0, byte < size)
        sides.append(offset + byte)
    solver.add(sides[0] == sides[1])
    return solver.check() != z3.unsat


def _check_overlap(kernel: Kernel, tensors: Mapping[str, torch.Tensor]) -> None:
    params = [p for p in kernel.params if p.name in tensors]
    for p in params:
        if p.role is not Role.IN and tensors[p.name].numel() > 0:
            why = self_overlap(tensors[p.name])
            if why is not None:
                raise LaunchError(f"parameter {p.name}: {why}; the elements of a parameter that the kernel "
                                  f"writes must not share memory")
    ranges = {p.name: byte_range(tensors[p.name]) for p in params}
    for i, p in enumerate(params):
        for q in params[i + 1:]:
            if p.role is Role.IN and q.role is Role.IN:
                continue  # reading the same memory twice is harmless
            a, b = ranges[p.name], ranges[q.name]
            if a is None or b is None or a[1] <= b[0] or b[1] <= a[0]:
                continue
            if not views_share_memory(tensors[p.name], tensors[q.name]):
                continue  # interleaved but disjoint: y[:, :N] and y[:, N:], or the even and odd columns
            writer, other = (q, p) if q.role is not Role.IN else (p, q)
            raise LaunchError(f"parameter {writer.name}: its memory overlaps parameter {other.name}; memory the "
                              f"kernel writes may be reached through one parameter only (pass the tensor once, "
                              f"as an inout parameter, to read and write it)")
