"""`kirc lower --emit=triton --standalone`: the generated Triton kernel as a module that runs on its own.

The module holds the generated source (the `@triton.jit` kernel and its helpers) and, for the shapes the
command was given, everything the launcher would have computed: the grid, the constexprs (block sizes,
the form flags, the index width), `num_warps`, `num_stages` and the compile options; `launch(args)` passes
the ABI (tensors, strides, scalars, shape values, workspaces) in the kernel's order, and `__main__`
launches it on random inputs drawn like `kirc run`'s (offsets monotone from 0, indices in range) and
prints each output's shape, dtype and sum. It needs torch and triton only: on a GPU it runs there; with
`TRITON_INTERPRET=1` (or no GPU) it runs on CPU tensors under Triton's interpreter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kir.core import Kernel, TensorType
from kir.dtypes import DType
from kir.inputs import _index_uses, concrete_shapes

from .abi import ArgKind

_MAIN = '''

def _device():
    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return "cpu"
    return "cuda"


def _uniform_ints(low, high, shape, dtype, gen):
    return torch.randint(low, high, shape, generator=gen, dtype=torch.int64).to(dtype)


def make_inputs(device, seed={seed}):
    """Random arguments for SHAPES: floats standard normal, offsets monotone from 0, indices in range,
    outputs zero-filled."""
    gen = torch.Generator().manual_seed(seed)
    args = {{}}
{inputs}
    return {{name: value.to(device) if isinstance(value, torch.Tensor) else value for name, value in args.items()}}


def launch(args):
    """Launch the kernel once on `args` (a dict by parameter name), as the Intent launcher does."""
    device = next(v.device for v in args.values() if isinstance(v, torch.Tensor))
    constexprs = dict(CONSTEXPRS)
{device_flag}    {name}[GRID](
{abi}
        **constexprs, num_warps=NUM_WARPS, num_stages=NUM_STAGES, **COMPILE_OPTIONS)


if __name__ == "__main__":
    args = make_inputs(_device())
    launch(args)
    for name in OUTPUTS:
        value = args[name]
        print(f"{{name}}: {{tuple(value.shape)}} {{value.dtype}} sum {{value.double().sum().item():.6g}}")
'''


def _tensor_recipe(name: str, dtype: DType, shape: tuple[int, ...], role: str, use: Any) -> str:
    torch_dtype = f"torch.{_TORCH_NAMES[dtype]}"
    if dtype is DType.i4:  # the packed bytes (two elements a byte along the last axis), any bit pattern
        packed = (*shape[:-1], shape[-1] // 2)
        if role == "out":
            return f"    args[{name!r}] = torch.zeros({packed!r}, dtype=torch.uint8)"
        return f"    args[{name!r}] = _uniform_ints(0, 256, {packed!r}, torch.uint8, gen)"
    if role == "out":
        return f"    args[{name!r}] = torch.zeros({shape!r}, dtype={torch_dtype})"
    if dtype.is_pred:
        return f"    args[{name!r}] = _uniform_ints(0, 2, {shape!r}, torch.bool, gen)"
    if dtype.is_float:
        return f"    args[{name!r}] = torch.randn({shape!r}, generator=gen).to({torch_dtype})"
    if use is not None and use.offsets_extent is not None and len(shape) == 1 and shape[0] >= 1:
        total = use.offsets_extent
        return (f"    cuts = torch.sort(_uniform_ints(0, {total + 1}, ({shape[0]},), torch.int64, gen)).values\n"
                f"    cuts[0], cuts[-1] = 0, {total}\n"
                f"    args[{name!r}] = cuts.to({torch_dtype})")
    if use is not None and (use.index_extent or use.offsets_extent):
        extent = use.index_extent if use.index_extent is not None else use.offsets_extent
        return f"    args[{name!r}] = _uniform_ints(0, {max(1, extent)}, {shape!r}, {torch_dtype}, gen)"
    low = 0 if not dtype.is_signed else -8
    return f"    args[{name!r}] = _uniform_ints({low}, 8, {shape!r}, {torch_dtype}, gen)"


_TORCH_NAMES = {DType.pred: "bool", DType.i8: "int8", DType.i16: "int16", DType.i32: "int32", DType.i64: "int64",
                DType.u8: "uint8", DType.u16: "uint16", DType.u32: "uint32", DType.u64: "uint64",
                DType.f16: "float16", DType.bf16: "bfloat16", DType.f32: "float32", DType.f64: "float64",
                DType.f8e4m3: "float8_e4m3fn", DType.f8e5m2: "float8_e5m2",
                DType.i4: "int8"}  # local i4 buffers: one element a byte


def standalone_module(kernel: Kernel, args: Mapping[str, Any], seed: int = 0) -> str:
    """The module for `kernel` at the shapes of `args` (arrays or tensors by parameter name; their values
    are not used, only their shapes and the scalars)."""
    from . import launcher

    plan = launcher.plan_launch(kernel, args, materialise=False)
    emitted = plan.emitted
    env = dict(plan.bound.env)
    shapes = concrete_shapes(kernel, {s: env[s] for s in kernel.symbols})
    uses = _index_uses(kernel, shapes)
    inputs = []
    for p in kernel.params:
        if isinstance(p.type, TensorType):  # a runtime scalar: the value drawn for the command
            inputs.append(f"    args[{p.name!r}] = {args[p.name]!r}")
            continue
        shape = tuple(int(d.evaluate(shapes)) for d in p.type.shape)
        inputs.append(_tensor_recipe(p.name, p.type.dtype, shape, p.type.role.value, uses.get(p.name)))
    abi = []
    for a, value in zip(emitted.args, plan.positional):
        if a.kind is ArgKind.TENSOR:
            abi.append(f"        args[{a.param!r}],")
        elif a.kind is ArgKind.STRIDE:
            abi.append(f"        args[{a.param!r}].stride({a.axis}),")
        elif a.kind is ArgKind.SCALAR:
            abi.append(f"        args[{a.param!r}],")
        elif a.kind is ArgKind.SYMBOL:
            abi.append(f"        {int(value)},  # {a.name} = {a.expr}")
        else:  # a workspace the launcher allocates
            count = plan.launch_values[a.name]
            dtype = f"torch.{_TORCH_NAMES[a.dtype]}"
            make = f"torch.empty({count}, dtype={dtype}, device=device)" if a.fill is None else \
                f"torch.full(({count},), {a.fill!r}, dtype={dtype}, device=device)"
            abi.append(f"        {make},  # workspace {a.name}")
    skip = {"num_warps", "num_stages", *launcher.COMPILE_OPTIONS, *launcher.CHECKED_OPTIONS}
    constexprs = {k: v for k, v in plan.keywords.items() if k not in skip}
    device_flag = ""
    if emitted.device_flag:
        constexprs.pop(emitted.device_flag, None)
        device_flag = f"    constexprs[{emitted.device_flag!r}] = device.type == 'cuda' and " \
                      f"os.environ.get('TRITON_INTERPRET') != '1'\n"
    options = dict(launcher.COMPILE_OPTIONS, **(launcher.CHECKED_OPTIONS if kernel.checks else {}))
    bound = ", ".join(f"{s}={v}" for s, v in shapes.items())
    header = [f'"""Kernel {kernel.name} as generated by Intent, launched on its own at {bound or "no shapes"}.',
              "",
              f"    python {kernel.name}_standalone.py     (a GPU if there is one, else TRITON_INTERPRET=1 on CPU)",
              '"""', "", "import os", "", "import torch", "",
              "if not torch.cuda.is_available():  # before Triton is imported: its interpreter runs CPU tensors",
              "    os.environ.setdefault('TRITON_INTERPRET', '1')", ""]
    source = emitted.source.rstrip("\n")
    settings = [
        "",
        "",
        f"SHAPES = {shapes!r}",
        f"GRID = ({plan.grid},)",
        f"CONSTEXPRS = {constexprs!r}",
        f"NUM_WARPS = {plan.keywords['num_warps']!r}",
        f"NUM_STAGES = {plan.keywords['num_stages']!r}",
        f"COMPILE_OPTIONS = {options!r}",
        f"OUTPUTS = {tuple(p.name for p in kernel.outputs)!r}",
    ]
    main = _MAIN.format(seed=seed, inputs="\n".join(inputs) or "    pass", device_flag=device_flag,
                        name=emitted.name, abi="\n".join(abi))
    return "\n".join(header) + source + "\n" + "\n".join(settings) + "\n" + main


__all__ = ["standalone_module"]
