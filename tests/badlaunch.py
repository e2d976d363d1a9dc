"""Launch-argument fuzzing: valid arguments with one thing made wrong (or merely unusual).

Each case takes a kernel and arguments that work, then changes one parameter's argument (dtype, rank,
shape, device, strides, storage shared with another argument, a scalar of the wrong type, `None`,
odd Python objects) or the argument mapping itself (a missing or unknown name, not a mapping). The
launcher must raise `LaunchError`, naming the parameter when one is at fault, or run; when it runs
the oracle must accept the same arguments and agree with it.
"""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from kir.core import Kernel, RefType, Role
from kir.dtypes import DType
from kir.errors import DiagnosticError, LaunchError
from kir.text import parse_kernel
from tests.badinput import BadInputReport

SCALAR_KERNEL = """
kernel scale(x: in f32[N], alpha: f32, n: i32, flag: pred, seed: i64, out: out f32[N], hits: inout i32[N])
    symbols(N) requires(N % 2 == 0) {
  %xs: f32[N] = load %x[0:N]
  %a: f32[N] = broadcast %alpha shape=(N) dims=()
  %y: f32[N] = binary mul %xs, %a
  store %out[0:N] = %y
  %h: i32[N] = load %hits[0:N]
  %nb: i32[N] = broadcast %n shape=(N) dims=()
  %h2: i32[N] = binary add %h, %nb
  store %hits[0:N] = %h2
  yield
}
"""

MIXED_KERNEL = """
kernel mixed(a: in bf16[M, N], b: in u8[N], c: inout f16[M, N]) symbols(M, N) {
  parallel (%i: i64) in (M) {
    %row: bf16[N] = load %a[%i, 0:N]
    %wide: f16[N] = cast %row to f16
    %bs: u8[N] = load %b[0:N]
    %bf: f16[N] = cast %bs to f16
    %old: f16[N] = load %c[%i, 0:N]
    %s: f16[N] = binary add %wide, %bf
    %t: f16[N] = binary add %s, %old
    store %c[%i, 0:N] = %t
    yield
  }
  yield
}
"""


def fuzz_kernels() -> list[Kernel]:
    from tests import samples

    return [samples.vector_add(), samples.softmax(), samples.segment_sum(), samples.histogram(),
            parse_kernel(SCALAR_KERNEL, "scale.kir"), parse_kernel(MIXED_KERNEL, "mixed.kir")]


def valid_args(kernel: Kernel, rng: random.Random) -> dict[str, Any]:
    """Arguments that work: shapes small and consistent, offsets monotone, indices in range."""
    from tests.diffinputs import InputSpec, make_inputs

    env = {s: rng.choice((2, 4, 6)) for s in kernel.symbols}
    specs = {"offsets": InputSpec("offsets", "E")}
    if "E" in env and "S" in env:
        env["E"] = env["S"] * 2
    arrays = make_inputs(kernel, env, specs, rng.randrange(1 << 30))
    out: dict[str, Any] = {}
    for p in kernel.params:
        v = arrays[p.name]
        if isinstance(v, np.ndarray):
            t = torch.from_numpy(v.copy())
            out[p.name] = t.to(torch.bfloat16) if p.type.dtype == DType.bf16 else t
        else:
            out[p.name] = v
    return out


# ---------------------------------------------------------------------------------------------- mutations
# Each takes (kernel, args, parameter name, rng), changes args in place and returns a description.

Mutation = Callable[[Kernel, dict[str, Any], str, random.Random], str]
OTHER_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8,
                torch.uint8, torch.bool, torch.complex64, torch.int16)


def m_dtype(k: Kernel, args: dict[str, Any], name: str, rng: random.Random) -> str:
    t = args[name]
    target = rng.choice([d for d in OTHER_DTYPES if d != t.dtype])
    args[name] = t.to(target)
    return f"dtype {target}"


def m_rank(k: Kernel, args: dict[str, Any], name: str, rng: random.Random) -> str:
    t = args[name]
    args[name] = t.unsqueeze(0) if rng.random() < 0.5 or t.dim() == 0 else t.reshape(-1)[:1].reshape(())
    return f"rank {args[name].dim()}"


def m_shape(k: Kernel, args: dict[str, Any], name: str, rng: random.Random) -> str:
    t = args[name]
    shape = list(t.shape)
    ax = rng.randrange(len(shape))
    shape[ax] = rng.choice((0, 1, shape[ax] + 1, shape[ax] * 3 + 1))
    args[name] = torch.zeros(shape, dtype=t.dtype)
    return f"shape {tuple(shape)}"


def m_device(k: Kernel, args: dict[str, Any], name: str, rng: random.Random) -> str:
    args[name] = torch.empty(args[name].shape, dtype=args[name].dtype, device="meta")
    return "device meta"


def m_strides(k: Kernel, args: dict[str, Any], name: str, rng: random.Random) -> str:
    t = args[name]
    kind = rng.choice(("step", "transpose", "expand", "numpy-reversed", "numpy-step"))
    if kind == "step":
        big = torch.zeros([2 * s for s in t.shape] or [1], dtype=t.dtype)
        view = big[tuple(slice(None, None, 2) for _ in t.shape)] if t.dim() else big[0]
        view.copy_(t)
        args[name] = view
    elif kind == "transpose" and t.dim() == 2:
        args[name] = t.t().contiguous().t()
    elif kind == "expand" and t.dim() >= 1:
        args[name] = t.reshape(-1)[:1].expand(t.shape) if t.numel() else t
    elif kind == "numpy-reversed" and t.dtype != torch.bfloat16:
        args[name] = np.ascontiguousarray(t.numpy()[::-1])[::-1]
    elif kind == "numpy-step" and t.dtype != torch.bfloat16:
        big = np.zeros([2 * s for s in t.shape] or [1], dtype=t.numpy().dtype)
        view = big[tuple(slice(None, None, 2) for _ in t.shape)] if t.dim() else big
        view[...] = t.numpy()
        args[name] = view
    else:
        return "strides unchanged"
    return f"strides {kind}"


def m_overlap(k: Kernel, args: dict[str, Any], name: str, rng: random.Random) -> str:
    others = [p.name for p in k.params if p.name != name and isinstance(args.get(p.name), torch.Tensor)
              and args[p.name].dtype == args[name].dtype]
    if not others:
        return "no partner to overlap"
    other = rng.choice(others)
    if args[other].shape == args[name].shape and rng.random() < 0.6:
        args[name] = args[other]
        return f"the same tensor as {other}"
    flat = args[other].reshape(-1)
    n = args[name].numel()
    if flat.numel() >= n and n:
        args[name] = flat[flat.numel() - n:].reshape(args[name].shape)
        return f"a view of {other}'s storage"
    return "no overlap possible"


def m_value(k: Kernel, args: dict[str, Any], name: str, rng: random.Random) -> str:
    """A value of the wrong kind entirely."""
    choice = rng.choice(("none", "str", "list", "dict", "object", "int", "float", "bool", "nan", "huge", "bytes",
                         "np-scalar", "0d-tensor", "complex", "sparse", "grad", "array-obj"))
    current = args[name]
    value: Any = {
        "none": None, "str": "1.5", "list": [1.0, 2.0], "dict": {"a": 1}, "object": object(), "int": 3,
        "float": 2.5, "bool": True, "nan": float("nan"), "huge": 2**70, "bytes": b"\x00\x01",
        "np-scalar": np.float32(1.5), "0d-tensor": torch.tensor(1.0), "complex": 1 + 2j,
        "array-obj": np.array([object()] * 2)}.get(choice)
    if choice == "sparse" and isinstance(current, torch.Tensor) and current.dim() >= 1:
        value = current.float().to_sparse()
    elif choice == "grad" and isinstance(current, torch.Tensor) and current.is_floating_point():
        value = current.clone().requires_grad_(True)
    elif choice in ("sparse", "grad"):
        value = None
    args[name] = value
    return f"value {choice}"


def m_missing(k: Kernel, args: dict[str, Any], name: str, rng: random.Random) -> str:
    del args[name]
    return "missing"


MUTATIONS: dict[str, Mutation] = {"dtype": m_dtype, "rank": m_rank, "shape": m_shape, "device": m_device,
                                  "strides": m_strides, "overlap": m_overlap, "value": m_value, "missing": m_missing}
TENSOR_ONLY = {"dtype", "rank", "shape", "device", "strides", "overlap"}


def mutate_args(k: Kernel, args: dict[str, Any], rng: random.Random) -> tuple[Any, str | None, str]:
    """(arguments, the parameter at fault or None, description)."""
    roll = rng.random()
    if roll < 0.04:
        args["bogus"] = torch.zeros(1)
        return args, "bogus", "unknown argument bogus"
    if roll < 0.06:
        return rng.choice((list(args.values()), None, tuple(args.items()), "x")), None, "not a mapping"
    p = rng.choice(k.params)
    kinds = [m for m in MUTATIONS if isinstance(p.type, RefType) or m not in TENSOR_ONLY]
    kind = rng.choice(kinds)
    return args, p.name, f"{p.name}: {MUTATIONS[kind](k, args, p.name, rng)}"


# ---------------------------------------------------------------------------------------------- running


def _host(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.detach().float().numpy() if v.dtype == torch.bfloat16 else v.detach().numpy()
    return v


def _copy(args: Any) -> Any:
    if not isinstance(args, dict):
        return args
    return {k: (v.clone() if isinstance(v, torch.Tensor) and v.device.type != "meta" else
                v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def check_launch(k: Kernel, args: Any, fault: str | None, what: str, report: BadInputReport) -> None:
    import emit_triton
    import oracle

    report.total += 1
    try:
        want = oracle.run(k, _copy(args))
    except LaunchError:
        want = None
    except Exception as exc:
        want = exc
    given = _copy(args)
    try:
        returned = emit_triton.launch(k, given)
    except LaunchError as exc:
        report.outcomes["launch:rejected"] += 1
        if fault is not None and fault not in str(exc) and fault != "bogus":
            report.failures.append(f"{what}: the LaunchError does not name {fault}: {exc}")
        return
    except DiagnosticError as exc:  # a refusal of the kernel itself is not about the arguments
        report.outcomes["launch:refused"] += 1
        report.messages[exc.message[:70]] += 1
        return
    except Exception as exc:
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else "?"
        report.outcomes["launch:crash"] += 1
        report.failures.append(f"{what}: {type(exc).__name__}: {str(exc)[:200]} (raised at {where})")
        return
    report.outcomes["launch:accepted"] += 1
    if want is None or isinstance(want, Exception):
        report.failures.append(f"{what}: the launcher ran but the oracle refused the arguments ({want!r})")
        return
    allocated = list(returned) if isinstance(returned, tuple) else [] if returned is None else [returned]
    for p in k.outputs:
        got = _host(given[p.name] if p.name in given else allocated.pop(0))
        w = want[p.name]
        if np.asarray(got).shape != w.shape or not np.allclose(np.asarray(got, dtype=np.float64),
                                                                w.astype(np.float64), rtol=1e-2, atol=1e-2,
                                                                equal_nan=True):
            report.failures.append(f"{what}: accepted, but {p.name} differs from the oracle")


def run_launch_fuzz(count: int, seed: int, report: BadInputReport, tick: Callable[[], None] | None = None) -> None:
    rng = random.Random(seed)
    kernels = fuzz_kernels()
    for n in range(count):
        k = kernels[n % len(kernels)]
        args, fault, what = mutate_args(k, valid_args(k, rng), rng)
        check_launch(k, args, fault, f"launch case {n} (seed {seed}) {k.name} {what}", report)
        if tick is not None:
            tick()


__all__ = ["run_launch_fuzz", "mutate_args", "check_launch", "fuzz_kernels", "valid_args", "Role"]
