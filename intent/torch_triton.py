"""CUDA kernels as `torch.library.triton_op` operators, so that Inductor sees the generated Triton kernel.

`intent.torch_op` registers an opaque custom operator per specialisation. For CUDA tensors the operator
is instead a `triton_op` whose body launches the generated `@triton.jit` function through
`torch.library.wrap_triton`: when AOTAutograd functionalises the graph it traces that body, and the
graph holds the Triton kernel itself (a `triton_kernel_wrapper` node) that Inductor compiles and
schedules with the rest of the program. Called eagerly, the body is the ordinary launcher.

The traced launch evaluates the kernel's ABI on the symbolic shapes: shape symbols, strides, grid and
symbol arguments stay symbolic (a dynamic size recompiles nothing), while constexprs (block sizes),
`num_warps` and `num_stages` must be concrete and so specialise the sizes they depend on. Offsets are
computed in 64 bits (`INDEX_64`), which is always correct and needs no guard on the sizes. Inductor
launches the kernel with its own compile options, so floating-point contraction into FMAs is Inductor's
choice there (the direct launcher compiles without it; see docs/architecture.md on numerics).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Mapping
from typing import Any

import torch

from kir.core import Kernel, RefType
from kir.dims import DConst
from kir.dtypes import DType
from kir.errors import IntentError
from physical import launch_expr as LE
from physical.launch_expr import DEVICE_SMS, WARP_SLOTS, next_pow2_int

from .torch_op import KernelOp, Schema, bind_symbolic, record, sym_dim


def supported(kernel: Kernel, autotune: bool, device: torch.device) -> bool:
    """Whether calls on `device` take the Triton-operator path: compiled CUDA launches without device checks
    (Triton's debug mode) or autotuning (which times launches), neither of which Inductor can do."""
    if device.type != "cuda" or kernel.checks or autotune:
        return False
    from emit_triton import targets

    return targets.target_for(device).mode is targets.Mode.COMPILED


def register_triton(name: str, kernel: Kernel, schema: Schema) -> KernelOp:
    """`intent::<name>` as a `triton_op`: eager calls run the launcher, traced calls the Triton kernel."""
    from torch.library import triton_op

    entry = KernelOp(name, kernel, schema, False, None)

    def body(*values: Any) -> Any:
        if not _traced(values):
            return entry.run(*values)
        return traced_launch(kernel, schema, dict(zip(schema.inputs, values)))

    # triton_op infers the schema from the function's signature: give the body the one `schema` describes.
    body.__signature__ = _signature(kernel, schema)  # type: ignore[attr-defined]
    entry.definition = triton_op(entry.qualname, body, mutates_args=schema.mutated)
    inferred = str(entry.op._schema).split("(", 1)[1]
    if f"({inferred}" != schema.text:
        raise IntentError(f"internal error: the Triton operator of kernel {kernel.name} has the schema ({inferred}, "
                          f"not {schema.text}")
    return record(entry)


def _signature(kernel: Kernel, schema: Schema) -> inspect.Signature:
    def annotation(name: str) -> Any:
        t = kernel.param(name).type
        if isinstance(t, RefType):
            return torch.Tensor
        assert isinstance(t.dtype, DType)
        return bool if t.dtype.is_pred else int if t.dtype.is_int else float

    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation(n))
              for n in schema.inputs]
    returns: Any = None if not schema.returned else torch.Tensor if len(schema.returned) == 1 else \
        tuple[tuple(torch.Tensor for _ in schema.returned)]
    return inspect.Signature(params, return_annotation=returns)


def _traced(values: tuple[Any, ...]) -> bool:
    return torch._C._len_torch_dispatch_stack() > 0 or any(
        isinstance(v, torch.Tensor) and type(v) is not torch.Tensor for v in values)


def traced_launch(kernel: Kernel, schema: Schema, args: Mapping[str, Any]) -> Any:
    """Launch through `wrap_triton` (recorded by the tracer); returns the omitted outputs."""
    from torch.library import wrap_triton

    from emit_triton import targets

    launch = launch_arguments(kernel, schema, args)
    fn = targets.jit_function(launch.emitted, launch.key, targets.Mode.COMPILED, launch.owner)
    wrap_triton(fn)[(launch.grid,)](*launch.positional, **launch.keywords)
    outs = launch.outputs
    if not outs:
        return None
    return outs[0] if len(outs) == 1 else outs


class LaunchArguments:
    """What one traced launch passes to Triton."""

    def __init__(self, emitted: Any, key: str, positional: list[Any], keywords: dict[str, Any], grid: Any,
                 outputs: tuple[torch.Tensor, ...], owner: Any) -> None:
        self.emitted, self.key, self.positional, self.keywords = emitted, key, positional, keywords
        self.grid, self.outputs = grid, outputs
        self.owner = owner  # the kernel's emit_triton.bound.BoundKernel (its loaded functions)


def launch_arguments(kernel: Kernel, schema: Schema, args: Mapping[str, Any]) -> LaunchArguments:
    """The ABI of `kernel` evaluated on `args` (tensors may be fake, sizes symbolic): the same values as
    `emit_triton.launcher.plan_launch` except the index width (64-bit) and the compile options."""
    from emit_triton import compile as compile_mod
    from emit_triton import targets
    from emit_triton.abi import ArgKind, scalar_argument
    from emit_triton.bound import bound

    env = bind_symbolic(kernel, args)
    device = next((v.device for v in args.values() if isinstance(v, torch.Tensor)), torch.device("cuda"))
    tensors = {n: v for n, v in args.items() if isinstance(v, torch.Tensor)}
    outputs = []
    for name in schema.returned:
        ref = kernel.param(name).type
        tensors[name] = torch.empty([sym_dim(d, env) for d in ref.shape], dtype=ref.dtype.torch,  # type: ignore
                                    device=device)
        outputs.append(tensors[name])
    scalars = {n: v for n, v in args.items() if not isinstance(v, torch.Tensor)}
    for name, value in scalars.items():
        if isinstance(value, int | torch.SymInt) and not isinstance(value, bool) and name not in env:
            env[name] = value
    env[DEVICE_SMS] = targets.multiprocessors(device)
    emitted = compile_mod.emitted_for(kernel)
    keywords: dict[str, Any] = {}
    for c in emitted.constexprs:
        keywords[c.name] = concrete(c.expr, env)
    env.update((k, v) for k, v in keywords.items() if isinstance(v, int))
    positional: list[Any] = []
    for a in emitted.args:
        if a.kind is ArgKind.TENSOR:
            positional.append(tensors[a.param])  # type: ignore[index]
        elif a.kind is ArgKind.STRIDE:
            positional.append(tensors[a.param].stride(a.axis))  # type: ignore[index,arg-type]
        elif a.kind is ArgKind.SCALAR:
            value = scalars[a.param]  # type: ignore[index]
            if a.dtype is not None and a.dtype.is_float:
                value = float(value)  # the bits of an f64 need a concrete value
            positional.append(scalar_argument(a.dtype, value) if a.dtype is not None else value)
        elif a.kind is ArgKind.SYMBOL:
            positional.append(symbolic(a.expr, env))  # type: ignore[arg-type]
        else:
            count = symbolic(a.expr, env)  # type: ignore[arg-type]
            assert a.dtype is not None
            positional.append(torch.empty(count, dtype=a.dtype.torch, device=device) if a.fill is None
                              else torch.full((count,), a.fill, dtype=a.dtype.torch, device=device))
    if emitted.index64_flag:
        keywords[emitted.index64_flag] = True
    keywords["num_warps"] = concrete(emitted.num_warps, env)
    keywords["num_stages"] = concrete(emitted.num_stages, env)
    grid = symbolic(emitted.grid, env)
    owner = bound(kernel)
    return LaunchArguments(emitted, owner.entry_key(emitted), positional, keywords, grid, tuple(outputs), owner)


def symbolic(expr: LE.LaunchExpr | int, env: Mapping[str, Any]) -> Any:
    """A launch expression on symbolic sizes. `+ - * // cdiv`, min, max and sums stay symbolic; powers of
    two and warp counts become ints under range guards (`4 < N <= 8` gives 8: every N of that range
    shares the compiled program); anything else is evaluated on concrete sizes (specialising them)."""
    if isinstance(expr, bool | int):
        return expr
    if isinstance(expr, LE.LConst):
        return expr.value
    if isinstance(expr, LE.LDim):
        return sym_dim(expr.dim, env) if not isinstance(expr.dim, DConst) else expr.dim.value
    if isinstance(expr, LE.LScalar | LE.LConstexpr):
        return env[expr.name]
    if isinstance(expr, LE.LBin):
        a, b = symbolic(expr.lhs, env), symbolic(expr.rhs, env)
        if expr.op == "cdiv":
            return -(-a // b)
        return {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv}[expr.op](a, b)
    if isinstance(expr, LE.LMinMax):
        items = [symbolic(x, env) for x in expr.items]
        pick = torch.sym_min if expr.op == "min" else torch.sym_max
        out = items[0]
        for x in items[1:]:
            out = pick(out, x)
        return out
    if isinstance(expr, LE.LSelect):  # bool() on a symbolic condition installs a guard, as for LWarps
        return symbolic(expr.when_set if bool(symbolic(expr.cond, env) != 0) else expr.otherwise, env)
    if isinstance(expr, LE.LSum):
        total: Any = 0
        for x in expr.items:
            total = total + symbolic(x, env)
        return total
    if isinstance(expr, LE.LNextPow2 | LE.LTileBlock):
        n = symbolic(expr.x if isinstance(expr, LE.LNextPow2) else expr.extent, env)
        b = next_pow2_int(_hint(n))
        # bool() on a symbolic comparison installs a guard: every size in (b/2, b] shares this program
        if not isinstance(n, int) and not (bool(n <= b) and (b == 1 or bool(n > b // 2))):
            raise IntentError(f"internal error: {expr} = {b} does not hold for the size {n} it was computed from")
        if isinstance(expr, LE.LTileBlock):
            if b > expr.limit:  # the launcher's own message for a tile too large
                LE.LTileBlock(LE.LConst(_hint(n)), expr.limit, expr.what).evaluate({})
        return b
    if isinstance(expr, LE.LWarps):
        n = symbolic(expr.elements, env)
        return 16 if bool(n >= 16384) else 8 if bool(n >= 4096) else 4  # bool(): a range guard
    if isinstance(expr, LE.LResidentPrograms):
        sms = int(env[DEVICE_SMS])
        return 1 if sms <= 0 else sms * max(1, WARP_SLOTS // (2 * max(1, concrete(expr.warps, env))))
    reads = expr.names() | {DEVICE_SMS}  # only these are specialised
    return int(expr.evaluate({k: int(v) for k, v in env.items() if k in reads}))


def _hint(n: Any) -> int:
    """The value a symbolic size has in this trace (its example value)."""
    if isinstance(n, torch.SymInt):
        hint = getattr(n.node, "hint", None)
        if hint is not None:
            return int(hint)
    return int(n)


def concrete(expr: LE.LaunchExpr | int, env: Mapping[str, Any]) -> int:
    """A launch expression as an int (a constexpr, num_warps): a symbolic result is guarded to its value."""
    value = symbolic(expr, env)
    return value if isinstance(value, int) else int(value)
