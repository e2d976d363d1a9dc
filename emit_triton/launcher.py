"""The launcher: check and bind arguments, evaluate the emitted ABI, choose the index width, launch once.

    launch(kernel, args)          run the kernel (CPU tensors: Triton's interpreter; CUDA: the device)
    source(kernel, args)          the generated Triton module for these arguments
    ptx(kernel, args, arch=90)    ahead-of-time PTX (no GPU needed); cubin(...) likewise

`args` maps parameter names to torch tensors (NumPy arrays are accepted and shared, not copied;
a bf16 parameter takes an f32 array, converted in and, when written, copied back) and Python
scalars. `Out` parameters may be omitted when their shapes follow from the other arguments: they
are allocated and returned (one tensor, or a tuple in parameter order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from intent.runtime.profiling import LaunchInfo, specialisation_text
from kir.core import Kernel
from kir.errors import IntentError, LaunchError
from physical.launch_expr import DEVICE_SMS

from . import autotune as autotune_mod
from . import bound as bound_mod
from . import compile as compile_mod
from . import fast_launch, targets
from . import sanitize as sanitize_mod
from .abi import AbiArg, ArgKind, EmittedKernel, LaunchExpr, scalar_argument
from .arguments import BoundArgs, bind_arguments, storage_dtype, storage_shape
from .bound import BoundKernel
from .index_width import IndexWidth, TensorExtent, choose_index_width

# CUDA's limit on the x dimension of a grid.
MAX_GRID = 2**31 - 1

# Contracting `a * b + c` into one FMA changes rounding against the oracle; Intent invents no
# fast-math, so generated kernels compile without it.
COMPILE_OPTIONS: dict[str, Any] = {"enable_fp_fusion": False}
# Kernels with checks: device asserts on, Triton's own integer-overflow sanitiser off (wrapping integer
# arithmetic is defined in KIR).
CHECKED_OPTIONS: dict[str, Any] = {"debug": True, "sanitize_overflow": False}


@dataclass
class LaunchPlan:
    """Everything one launch passes to Triton, computed from the checked arguments."""

    kernel: Kernel
    emitted: EmittedKernel
    key: str  # the cache entry of the generated module
    bound: BoundArgs
    positional: list[Any]  # runtime arguments in signature order
    keywords: dict[str, Any]  # constexprs, the index-width flag and compile options
    grid: int
    index_width: IndexWidth
    outputs: tuple[torch.Tensor, ...]  # omitted Out parameters, allocated (empty when not materialised)
    # symbols, integer scalars, workspace sizes and integer constexprs, by name
    launch_values: dict[str, int] = field(default_factory=dict)
    info: LaunchInfo | None = None  # what a profile records of this launch
    owner: BoundKernel | None = None  # what the process keeps for the kernel (loaded functions, plans)

    def function(self, mode: targets.Mode) -> Any:
        """The loaded `@triton.jit` function of this plan's module for `mode`."""
        assert self.owner is not None
        return targets.jit_function(self.emitted, self.key, mode, self.owner)


def launch(kernel: Kernel, args: Mapping[str, Any], *, autotune: bool = False, sanitize: bool | None = None
           ) -> None | torch.Tensor | tuple[torch.Tensor, ...]:
    """Run `kernel` once on `args`; returns the omitted `Out` parameters it allocated, if any.

    A repeated launch with arguments of the same signature takes a cached plan (see `fast_launch`);
    anything the plan cannot vouch for goes through the full checks below, which also make the plan.
    `autotune`: on a CUDA device, the first launch of a specialisation picks its launch configuration
    by timing a handful (`autotune`); the plan keeps the choice. `sanitize`: run under the memory
    sanitizer (`emit_triton.sanitize`; by default for kernels with checks and under `INTENT_SANITIZE=1`),
    which applies to launches under the interpreter.
    """
    choice = sanitize_mod.decided(kernel, sanitize)
    if choice and _interpreted(args):
        return sanitize_mod.launch(kernel, args, _sanitized_launch)
    outputs = fast_launch.try_launch(kernel, args)  # plans are made by unsanitized launches only
    if outputs is not fast_launch.NOT_PLANNED:
        return outputs
    if choice is None and sanitize_mod.environment_wants() and _interpreted(args):
        return sanitize_mod.launch(kernel, args, _sanitized_launch)
    plan = plan_launch(kernel, args, materialise=True)
    fn = None
    target = targets.target_for(plan.bound.device)
    if plan.grid > 0:  # an empty program space launches nothing (outputs stay as they were)
        fn = plan.function(target.mode)
        if autotune:
            best, _ = autotune_mod.tune(kernel, plan.emitted, plan.key, fn, target, plan.grid, plan.positional,
                                        plan.keywords)
            plan.keywords.update(num_warps=best.num_warps, num_stages=best.num_stages)
        targets.run(fn, target, plan.grid, plan.positional, plan.keywords, plan.info)
        plan.bound.finish()
    fast_launch.record(kernel, args, plan, target, fn)
    if not plan.outputs:
        return None
    return plan.outputs[0] if len(plan.outputs) == 1 else plan.outputs


def _interpreted(args: Mapping[str, Any]) -> bool:
    devices = {v.device for v in args.values() if isinstance(v, torch.Tensor)}
    return all(targets.target_for(d).mode is targets.Mode.INTERPRETED for d in devices)


def _sanitized_launch(kernel: Kernel, args: Mapping[str, Any]) -> None:
    """One launch of the module emitted with the sanitizer's checks (no cached plan: it is checked)."""
    plan = plan_launch(kernel, args, materialise=True, sanitize=True)
    if plan.grid == 0:
        return
    target = targets.target_for(plan.bound.device)
    fn = plan.function(target.mode)
    try:
        targets.run(fn, target, plan.grid, plan.positional, plan.keywords, plan.info)
    except IntentError as exc:
        text = str(exc)
        if text.startswith(sanitize_mod.SANITIZER):
            raise sanitize_mod.SanitizerError(text) from None
        raise
    plan.bound.finish()


def source(kernel: Kernel, args: Mapping[str, Any], *, sanitize: bool = False) -> str:
    """The generated Triton module source that `launch(kernel, args)` runs (`sanitize`: the module with
    the memory sanitizer's checks)."""
    return plan_launch(kernel, args, materialise=False, sanitize=sanitize).emitted.source


def index_width_for(kernel: Kernel, args: Mapping[str, Any]) -> IndexWidth:
    """The index width `launch(kernel, args)` would choose, and why."""
    return plan_launch(kernel, args, materialise=False).index_width


def ptx(kernel: Kernel, args: Mapping[str, Any], arch: int = 90) -> str:
    """PTX for sm_<arch> (80 or 90), specialised as a launch with `args` would be; no GPU needed."""
    return _ahead_of_time(kernel, args, arch).ptx


def cubin(kernel: Kernel, args: Mapping[str, Any], arch: int = 90) -> bytes:
    """The cubin for sm_<arch> (80 or 90) next to `ptx`; needs Triton's bundled ptxas."""
    found = _ahead_of_time(kernel, args, arch).cubin
    if found is None:
        raise IntentError(f"Triton produced no cubin for kernel {kernel.name} on sm_{arch}")
    return found


def _ahead_of_time(kernel: Kernel, args: Mapping[str, Any], arch: int) -> targets.Artifacts:
    if isinstance(arch, bool) or arch not in targets.AOT_ARCHES:
        raise LaunchError(f"parameter arch: expected one of {', '.join(map(str, targets.AOT_ARCHES))}, got {arch!r}")
    plan = plan_launch(kernel, args, materialise=False)
    fn = plan.function(targets.Mode.COMPILED)
    assert plan.owner is not None
    return targets.compile_ahead_of_time(plan.emitted, fn, plan.key, arch, plan.positional, plan.keywords,
                                         owner=plan.owner)


# ---------------------------------------------------------------------------------------------- planning

def plan_launch(kernel: Kernel, args: Mapping[str, Any], *, materialise: bool, sanitize: bool = False
                ) -> LaunchPlan:
    """Check `args`, then evaluate the ABI; `materialise=False` allocates nothing (placeholders).
    `sanitize`: the module emitted with the memory sanitizer's checks."""
    bound = bind_arguments(kernel, args)
    emitted = compile_mod.emitted_for(kernel, sanitize=True) if sanitize else compile_mod.emitted_for(kernel)
    owner = bound_mod.bound(kernel)
    key = owner.entry_key(emitted)
    env = launch_env(bound)
    device = bound.device

    outputs: list[torch.Tensor] = []
    tensors: dict[str, torch.Tensor] = {}
    for name, arg in bound.tensors.items():
        if arg.tensor is not None:
            tensors[name] = arg.tensor
        elif materialise:
            tensors[name] = torch.empty(storage_shape(name, arg.dtype, arg.shape), dtype=storage_dtype(arg.dtype),
                                        device=device)
            outputs.append(tensors[name])
        else:  # a fresh allocation is 16-byte aligned, like this placeholder's null pointer
            tensors[name] = torch.empty(0, dtype=storage_dtype(arg.dtype))

    extents = [TensorExtent(name, a.shape, a.strides) for name, a in bound.tensors.items()]
    launch_values: dict[str, int] = dict(env)  # symbols and integer scalars: they index too
    positional: list[Any] = []
    for a in emitted.args:
        value = _abi_value(kernel, a, bound, env, tensors, materialise)
        if a.kind is ArgKind.SYMBOL:
            launch_values[a.name] = value
        elif a.kind is ArgKind.WORKSPACE:
            count = _evaluate(kernel, a.expr, env, f"the size of workspace {a.name}")
            launch_values[a.name] = count
            extents.append(TensorExtent(a.name, (count,), (1,)))
        positional.append(value)

    keywords: dict[str, Any] = {}
    for c in emitted.constexprs:
        keywords[c.name] = _evaluate(kernel, c.expr, env, f"constexpr {c.name}")
    grid = _evaluate(kernel, emitted.grid, env, "the grid")
    if grid < 0:
        raise IntentError(f"internal error in kernel {kernel.name}: the grid {emitted.grid} evaluates to {grid}")
    if grid > MAX_GRID:
        raise LaunchError(f"kernel {kernel.name}: these shapes need {grid} programs, more than the {MAX_GRID} one "
                          f"launch may have ({_binding(bound)})")
    int_constexprs = {k: v for k, v in keywords.items() if isinstance(v, int) and not isinstance(v, bool)}
    launch_values.update(int_constexprs)
    width = choose_index_width(extents, launch_values, grid, tile=max(int_constexprs.values(), default=1))
    if emitted.index64_flag:
        keywords[emitted.index64_flag] = width.index64
    if emitted.device_flag:
        keywords[emitted.device_flag] = targets.target_for(bound.device).mode is targets.Mode.COMPILED
    keywords["num_warps"] = _evaluate(kernel, emitted.num_warps, env, "num_warps")
    keywords["num_stages"] = _evaluate(kernel, emitted.num_stages, env, "num_stages")
    keywords.update(COMPILE_OPTIONS)
    if kernel.checks or sanitize:  # device checks (tl.device_assert) are compiled in only under Triton's debug
        keywords.update(CHECKED_OPTIONS)
    info = LaunchInfo(kernel.name, specialisation_text({p.name: str(p.type.dtype) for p in kernel.params},
                                                       {c.name: keywords[c.name] for c in emitted.constexprs}),
                      emitted.counts, launch_values)
    return LaunchPlan(kernel, emitted, key, bound, positional, keywords, grid, width, tuple(outputs), launch_values,
                      info, owner)


def launch_env(bound: BoundArgs) -> dict[str, int]:
    """What launch expressions read: the shape symbols, then the integer runtime scalars by name."""
    env = dict(bound.env)
    for name, value in bound.scalars.items():
        if isinstance(value, int) and not isinstance(value, bool) and name not in env:
            env[name] = int(value)
    env[DEVICE_SMS] = targets.multiprocessors(bound.device)
    return env


def _abi_value(kernel: Kernel, a: AbiArg, bound: BoundArgs, env: Mapping[str, int],
               tensors: Mapping[str, torch.Tensor], materialise: bool) -> Any:
    if a.kind in (ArgKind.TENSOR, ArgKind.STRIDE):
        if a.param not in bound.tensors:
            raise IntentError(f"internal error in kernel {kernel.name}: ABI argument {a.name} refers to "
                              f"{a.param!r}, which is not a tensor parameter")
        if a.kind is ArgKind.TENSOR:
            return tensors[a.param]
        strides = bound.tensors[a.param].strides
        if a.axis is None or not 0 <= a.axis < len(strides):
            raise IntentError(f"internal error in kernel {kernel.name}: ABI argument {a.name} names axis {a.axis} "
                              f"of {a.param}, which has rank {len(strides)}")
        return strides[a.axis]
    if a.kind is ArgKind.SCALAR:
        if a.param not in bound.scalars:
            raise IntentError(f"internal error in kernel {kernel.name}: ABI argument {a.name} refers to "
                              f"{a.param!r}, which is not a scalar parameter")
        return scalar_argument(a.dtype, bound.scalars[a.param]) if a.dtype is not None else bound.scalars[a.param]
    if a.kind is ArgKind.SYMBOL:
        return _evaluate(kernel, a.expr, env, f"ABI argument {a.name}")
    assert a.kind is ArgKind.WORKSPACE
    if a.dtype is None:
        raise IntentError(f"internal error in kernel {kernel.name}: workspace {a.name} has no dtype")
    count = _evaluate(kernel, a.expr, env, f"the size of workspace {a.name}")
    if count < 0:
        raise IntentError(f"internal error in kernel {kernel.name}: workspace {a.name} has size {count}")
    if not materialise:
        return torch.empty(0, dtype=a.dtype.torch)
    if a.fill is None:
        return torch.empty(count, dtype=a.dtype.torch, device=bound.device)
    # A self-resetting workspace is new memory here (this path plans a launch; the cached plans of
    # `fast_launch` keep theirs between launches and never fill it again).
    return torch.full((count,), a.fill, dtype=a.dtype.torch, device=bound.device)


def _evaluate(kernel: Kernel, expr: LaunchExpr | int | None, env: Mapping[str, int], what: str) -> Any:
    if expr is None:
        raise IntentError(f"internal error in kernel {kernel.name}: {what} has no expression")
    if isinstance(expr, (bool, int, float)):
        return expr
    try:
        return expr.evaluate(env)
    except (KeyError, ZeroDivisionError, ValueError) as exc:
        raise IntentError(f"internal error in kernel {kernel.name}: {what} ({expr}) cannot be evaluated on "
                          f"{_env_text(env)}: {exc}") from exc


def _env_text(env: Mapping[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in env.items()) or "no symbols"


def _binding(bound: BoundArgs) -> str:
    return _env_text(bound.env)
