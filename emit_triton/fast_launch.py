"""Cached launch plans: the per-call work of a repeated launch, and nothing more.

After a launch passes the full checks of `arguments.bind_arguments` and `launcher.plan_launch`,
`record` keeps a plan for that kernel and *argument signature*: the argument names in the order
given, per tensor parameter its dtype and device (exact `torch.Tensor` values only), per scalar its
exact Python type. Under the plan, everything that follows from the *geometry* of the arguments
(shapes, strides and the values of integer scalars) is memoised as it was computed by the full
checks: the symbol binding and its consistency, refinements, axioms and lower bounds, rank and
constant extents, the self-overlap of written tensors, launch expressions (ABI values, grid,
constexprs), the index width and the grid limit. A launch with a geometry seen before therefore
passes every one of those checks by construction.

What varies between calls with one geometry is checked on every call, with integer comparisons:
the dtype, layout, device and exact type of each value, scalar ranges, and the memory overlap of a written
parameter with any other parameter (byte ranges from `data_ptr` and the memoised extents). Any
mismatch, any new geometry and any value the plan does not cover returns `NOT_PLANNED`, and the
launcher takes the full path, which gives the exact `LaunchError` or records the new geometry.

The plan also holds the loaded `@triton.jit` function per target mode, so no cache directory,
environment variable or file is consulted. Plans belong to the kernel's `bound.BoundKernel`: they go
with it when emitted kernels are dropped or `compile.emitted_for` is replaced (the kernel then gets a
new object), and are cleared with the loaded modules (`targets.clear_loaded`).
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from intent.runtime.checks import FLOAT_MAX, INT_RANGES, byte_range
from kir.core import Kernel, RefType, Role
from kir.dtypes import DType

from . import bound as bound_mod
from . import compile as compile_mod
from . import targets
from .abi import ArgKind, scalar_argument
from .arguments import storage_dtype, storage_shape

if TYPE_CHECKING:
    from .launcher import LaunchPlan

NOT_PLANNED: Any = object()  # `try_launch` found no plan that covers these arguments
_REJECT: Any = object()  # a scalar check failed: the full path reports it

_dtype = operator.attrgetter("dtype")
_layout = operator.attrgetter("layout")
_shape = operator.attrgetter("shape")
_is_cpu = operator.attrgetter("is_cpu")
_is_cuda = operator.attrgetter("is_cuda")
_stride = torch.Tensor.stride
_data_ptr = torch.Tensor.data_ptr
_device_index = torch.Tensor.get_device

_BY_ID = bound_mod.BY_ID

# Geometries kept per plan; a kernel launched on ever new shapes starts again rather than grow.
MAX_GEOMETRIES = 256

Outputs = None | torch.Tensor | tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class _ScalarSlot:
    name: str
    kind: type  # the exact Python type the plan was made with
    convert: Callable[[Any], Any] = field(compare=False)  # the checked value passed to the kernel, or _REJECT
    indexes: bool  # an integer launch value: part of the geometry key


@dataclass(frozen=True)
class _Geometry:
    """What the full checks computed for one geometry (no tensors or per-call values held)."""

    positional: tuple[Any, ...]  # ABI values; per-call positions are filled in by the plan
    keywords: dict[str, Any]  # constexprs, index width, compile options (never mutated)
    grid: int
    # (slot i, slot j, bytes i reaches, bytes j reaches) for the overlap pairs where both are non-empty
    overlap_pairs: tuple[tuple[int, int, int, int], ...]
    outputs: tuple[tuple[tuple[int, ...], tuple[int, ...], torch.dtype], ...]  # (ABI positions, shape, dtype)
    # (position, count, fill, dtype, self-resetting)
    workspaces: tuple[tuple[int, int, int | float | None, torch.dtype, bool], ...]
    info: Any = None  # the profiler's description of these launches (`intent.runtime.profiling.LaunchInfo`)


@dataclass
class Plan:
    """One kernel's launches for one argument signature (see the module doc)."""

    kernel: Kernel
    device: torch.device
    tensor_slots: tuple[tuple[str, torch.dtype], ...]  # given tensors in parameter order
    scalar_slots: tuple[_ScalarSlot, ...]
    tensor_positions: tuple[tuple[int, int], ...]  # (ABI position, tensor slot)
    scalar_positions: tuple[tuple[int, int], ...]  # (ABI position, scalar slot)
    overlap_pairs: tuple[tuple[int, int], ...]  # tensor slots of which at least one is written
    functions: dict[targets.Mode, Any] = field(default_factory=dict)
    geometries: dict[tuple[Any, ...], _Geometry] = field(default_factory=dict)
    # The interpreter target and its function, for host tensors (the target never changes there).
    host_target: targets.Target | None = None
    host_function: Any = None
    # Workspace memory by (ABI position, stream, thread): see `workspace`.
    scratch: dict[tuple[int, int, int], torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [name for name, _ in self.tensor_slots]
        getter = operator.itemgetter(*names) if names else None
        self.take_tensors: Callable[[Mapping[str, Any]], tuple[Any, ...]] = \
            (lambda args: (args[names[0]],)) if len(names) == 1 else getter  # type: ignore[assignment]
        self.tensor_types = (torch.Tensor,) * len(names)
        self.tensor_layouts = (torch.strided,) * len(names)  # others have no strides to read
        self.tensor_dtypes = tuple(dtype for _, dtype in self.tensor_slots)

    def launch(self, args: Mapping[str, Any]) -> Outputs:
        # Built-in maps over the tensors keep the per-tensor reads in C; comparisons are of whole tuples.
        tensors = self.take_tensors(args) if self.tensor_slots else ()
        if tuple(map(type, tensors)) != self.tensor_types or tuple(map(_layout, tensors)) != self.tensor_layouts \
                or tuple(map(_dtype, tensors)) != self.tensor_dtypes:
            return NOT_PLANNED
        on_cpu = self.host_target is not None
        if on_cpu:
            if not all(map(_is_cpu, tensors)):
                return NOT_PLANNED
        elif not all(map(_is_cuda, tensors)) or any(i != self.device.index for i in map(_device_index, tensors)):
            return NOT_PLANNED
        key = list(map(_shape, tensors))
        key += map(_stride, tensors)
        scalars: list[Any] = []
        for slot in self.scalar_slots:
            value = args[slot.name]
            if type(value) is not slot.kind:
                return NOT_PLANNED
            value = slot.convert(value)
            if value is _REJECT:
                return NOT_PLANNED
            if slot.indexes:
                key.append(value)
            scalars.append(value)
        geometry = self.geometries.get(tuple(key))
        if geometry is None:
            return NOT_PLANNED
        if geometry.overlap_pairs:
            starts = list(map(_data_ptr, tensors))
            for i, j, reach_i, reach_j in geometry.overlap_pairs:
                if starts[i] < starts[j] + reach_j and starts[j] < starts[i] + reach_i:
                    return NOT_PLANNED

        if on_cpu:
            target, fn = self.host_target, self.host_function
        else:
            target = targets.target_for(self.device)
            fn = self.functions.get(target.mode)
        if fn is None and geometry.grid > 0:
            return NOT_PLANNED
        positional = list(geometry.positional)
        for position, slot in self.tensor_positions:
            positional[position] = tensors[slot]
        for position, slot in self.scalar_positions:
            positional[position] = scalars[slot]
        outputs: list[torch.Tensor] = []
        for positions, shape, dtype in geometry.outputs:
            out = torch.empty(shape, dtype=dtype, device=self.device)
            outputs.append(out)
            for position in positions:
                positional[position] = out
        for position, count, fill, dtype, resets in geometry.workspaces:
            positional[position] = self.workspace(position, count, fill, dtype, resets)
        if geometry.grid > 0:
            try:
                targets.run(fn, target, geometry.grid, positional, geometry.keywords, geometry.info)
            except BaseException:
                # A launch that stopped part way (a failed device check) may leave a self-resetting
                # workspace changed: the next launch allocates it afresh.
                for position, _, _, _, resets in geometry.workspaces:
                    if resets:
                        self.forget_workspace(position)
                raise
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def workspace(self, position: int, count: int, fill: int | float | None, dtype: torch.dtype,
                  resets: bool = False) -> torch.Tensor:
        """The memory of one workspace argument, allocated once and grown to the largest count needed.

        A cached launch thus allocates only the outputs the caller omitted, which is what lets a CUDA
        graph capture it and keeps the caching allocator out of the hot path. Launches from one thread
        on one stream run in order, so the memory is kept per stream and thread: a launch can never
        overwrite the workspace of one still running elsewhere. A filled workspace is refilled on the
        device before each launch (no host synchronisation either way), except a self-resetting one
        (`resets`): it is filled when allocated, and every launch leaves it filled again.
        """
        key = self._workspace_key(position)
        memory = self.scratch.get(key)
        if memory is None or memory.numel() < count:
            if resets:
                memory = torch.full((max(count, 1),), fill, dtype=dtype, device=self.device)
            else:
                memory = torch.empty(max(count, 1), dtype=dtype, device=self.device)
            self.scratch[key] = memory
        view = memory if memory.numel() == count else memory[:count]
        if fill is not None and not resets:
            view.fill_(fill)
        return view

    def _workspace_key(self, position: int) -> tuple[int, int, int]:
        stream = 0 if self.device.type != "cuda" else torch._C._cuda_getCurrentRawStream(self.device.index)
        return (position, stream, threading.get_ident())

    def forget_workspace(self, position: int) -> None:
        self.scratch.pop(self._workspace_key(position), None)


# ---------------------------------------------------------------------------------------------- lookup

def try_launch(kernel: Kernel, args: Mapping[str, Any]) -> Outputs:
    """Launch through a cached plan; `NOT_PLANNED` when none covers `args` (nothing was run)."""
    if type(args) is not dict:
        return NOT_PLANNED
    hit = _BY_ID.get(id(kernel))  # `bound.peek`, inline: this is the hot path of every cached launch
    if hit is None or hit[0] is not kernel or hit[1].emission is not compile_mod.emitted_for:
        return NOT_PLANNED
    plan = hit[1].plans.get(tuple(args))
    if plan is None:
        return NOT_PLANNED
    return plan.launch(args)


def clear() -> None:
    """Drop every kernel's plans (their launches take the full path once again)."""
    for owner in bound_mod.every():
        with owner.lock:
            owner.plans.clear()


# ---------------------------------------------------------------------------------------------- recording


def record(kernel: Kernel, args: Mapping[str, Any], launched: LaunchPlan, target: targets.Target,
           fn: Any) -> None:
    """Remember a launch that passed the full checks, when its arguments are of a kind plans cover."""
    if type(args) is not dict or launched.bound.write_back:
        return
    names = tuple(args)
    plan = _plan_for(kernel, args, names, launched)
    if plan is None:
        return
    if fn is not None:
        plan.functions[target.mode] = fn
        if plan.device.type == "cpu" and target.mode is targets.Mode.INTERPRETED:
            plan.host_target, plan.host_function = target, fn
    tensors = [args[name] for name, _ in plan.tensor_slots]
    key: list[Any] = [t.shape for t in tensors] + [t.stride() for t in tensors]
    spans = [_span(t) for t in tensors]
    for slot in plan.scalar_slots:
        if slot.indexes:
            key.append(launched.bound.scalars[slot.name])
    geometry = _geometry(plan, launched, spans)
    if geometry is None:
        return
    if len(plan.geometries) >= MAX_GEOMETRIES:
        plan.geometries.clear()
    plan.geometries[tuple(key)] = geometry


def _plan_for(kernel: Kernel, args: Mapping[str, Any], names: tuple[str, ...], launched: LaunchPlan) -> Plan | None:
    """The current plan for this signature, made anew when there is none or it no longer fits."""
    tensor_slots: list[tuple[str, torch.dtype]] = []
    scalar_slots: list[_ScalarSlot] = []
    for p in kernel.params:
        if p.name not in args:
            continue
        value = args[p.name]
        if isinstance(p.type, RefType):
            if type(value) is not torch.Tensor:
                return None
            tensor_slots.append((p.name, value.dtype))
        else:
            dtype = p.type.dtype
            if type(value) not in (int, float, bool) or not isinstance(dtype, DType):
                return None
            scalar_slots.append(_ScalarSlot(p.name, type(value), _scalar_check(dtype, type(value)),
                                            dtype.is_int and type(value) is int))
    device = launched.bound.device
    owner = launched.owner if launched.owner is not None else bound_mod.bound(kernel)
    with owner.lock:
        plan = owner.plans.get(names)
        if plan is not None and plan.device == device \
                and plan.tensor_slots == tuple(tensor_slots) and plan.scalar_slots == tuple(scalar_slots):
            return plan
        plan = _new_plan(kernel, launched, device, tuple(tensor_slots), tuple(scalar_slots))
        owner.plans[names] = plan
        return plan


def _new_plan(kernel: Kernel, launched: LaunchPlan, device: torch.device,
              tensor_slots: tuple[tuple[str, torch.dtype], ...], scalar_slots: tuple[_ScalarSlot, ...]) -> Plan:
    tensor_index = {name: i for i, (name, _) in enumerate(tensor_slots)}
    scalar_index = {slot.name: i for i, slot in enumerate(scalar_slots)}
    tensor_positions, scalar_positions = [], []
    for position, a in enumerate(launched.emitted.args):
        if a.kind is ArgKind.TENSOR and a.param in tensor_index:
            tensor_positions.append((position, tensor_index[a.param]))
        elif a.kind is ArgKind.SCALAR and a.param in scalar_index:
            scalar_positions.append((position, scalar_index[a.param]))
    roles = {p.name: p.role for p in kernel.params}
    pairs = tuple((i, j) for i in range(len(tensor_slots)) for j in range(i + 1, len(tensor_slots))
                  if roles[tensor_slots[i][0]] is not Role.IN or roles[tensor_slots[j][0]] is not Role.IN)
    return Plan(kernel, device, tensor_slots, scalar_slots, tuple(tensor_positions), tuple(scalar_positions), pairs)


def _geometry(plan: Plan, launched: LaunchPlan, spans: list[int]) -> _Geometry | None:
    per_call = {position for position, _ in plan.tensor_positions + plan.scalar_positions}
    outputs = []
    for name in launched.bound.omitted:
        arg = launched.bound.tensors[name]
        positions = tuple(n for n, a in enumerate(launched.emitted.args)
                          if a.kind is ArgKind.TENSOR and a.param == name)
        per_call.update(positions)
        outputs.append((positions, storage_shape(name, arg.dtype, arg.shape), storage_dtype(arg.dtype)))
    workspaces = []
    for position, a in enumerate(launched.emitted.args):
        if a.kind is ArgKind.WORKSPACE:
            assert a.dtype is not None
            per_call.add(position)
            workspaces.append((position, launched.launch_values[a.name], a.fill, a.dtype.torch, a.resets))
    # Only integers, floats and bools stay in the template: per-call values are never retained.
    positional = tuple(None if n in per_call else v for n, v in enumerate(launched.positional))
    if any(isinstance(v, torch.Tensor) for v in positional):  # an ABI value this module does not know
        return None
    pairs = tuple((i, j, spans[i], spans[j]) for i, j in plan.overlap_pairs if spans[i] and spans[j])
    return _Geometry(positional, dict(launched.keywords), launched.grid, pairs, tuple(outputs), tuple(workspaces),
                     launched.info)


def _span(t: torch.Tensor) -> int:
    """The bytes `t` reaches from its data pointer (`intent.runtime.checks.byte_range`); 0 when empty."""
    reach = byte_range(t)
    return 0 if reach is None else reach[1] - reach[0]


def _scalar_check(dtype: DType, kind: type) -> Callable[[Any], Any]:
    """`intent.runtime.checks.check_scalar` for one dtype and exact Python type, as a closure that returns the
    value passed, or `_REJECT` where the check would raise (the full path then reports it)."""
    name = str(dtype)
    if dtype.is_pred:
        return bool if kind is bool else (lambda value: _REJECT)
    if dtype.is_int:
        if kind is not int:
            return lambda value: _REJECT
        lo, hi = INT_RANGES[name]
        return lambda value: value if lo <= value <= hi else _REJECT
    if kind is bool:
        return lambda value: _REJECT
    largest = FLOAT_MAX[name]

    def check_float(value: Any) -> Any:
        try:
            number = float(value)
        except OverflowError:
            return _REJECT
        return _REJECT if math.isfinite(number) and abs(number) > largest else number

    if dtype is DType.f64:  # as `abi.scalar_argument`: the 64-bit pattern
        return lambda value: _REJECT if (number := check_float(value)) is _REJECT else \
            scalar_argument(dtype, number)
    return check_float
