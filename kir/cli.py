"""`kirc`: check, lower, run and explain kernels from `.kir` files and Python files.

Exit codes: 0 success; 1 a diagnostic about the input (rendered with file:line:col and a caret);
2 a usage error (including names the command line gives that the file does not have: a kernel, dtype
variables, shape symbols); 3 an internal error (a bug in Intent: shown as one line, with the traceback when
KIRC_DEBUG=1).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .contract import Dot, Precision
from .core import DynSlice, Kernel, Op, Param, RefType, Region, TensorType, Type, Value
from .dtypes import DType, DTypeVar, i4_unpacked
from .errors import IntentError, LaunchError
from .verify import verify

EMITS = ("kir", "physical", "triton", "stablehlo", "ptx")

# Output comparison in `kirc run`: integers and preds exactly, floats within these (atol, rtol).
FLOAT_TOLERANCE = {DType.f16: (1e-2, 1e-2), DType.bf16: (5e-2, 2e-2), DType.f32: (1e-4, 1e-4),
                   DType.f64: (1e-8, 1e-8), DType.f8e4m3: (2.5e-1, 1.25e-1), DType.f8e5m2: (5e-1, 2.5e-1)}
# A kernel with a `precision=tf32` contraction rounds its f32 operands to 10-bit mantissas on the device.
TF32_TOLERANCE = (2e-2, 2e-2)


class UsageError(Exception):
    """A command line that cannot be carried out as written (exit code 2)."""


class StageUnavailable(IntentError):
    def __init__(self, stage: str) -> None:
        super().__init__(f"{stage} is not available yet")


# ---------------------------------------------------------------------------------------------- arguments


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kirc", description="The Intent kernel compiler over .kir and Python files.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def common(p: argparse.ArgumentParser, dtypes: bool = True) -> None:
        p.add_argument("file", metavar="FILE", help="a .kir file, or a .py file with @intent.kernel functions")
        p.add_argument("--kernel", metavar="NAME", help="the kernel to use when FILE holds several")
        if dtypes:
            p.add_argument("--dtype", metavar="T=DTYPE", action="extend", nargs="+", default=[],
                           help="assign a dtype variable of a generic kernel (e.g. T=f16)")

    def shapes(p: argparse.ArgumentParser) -> None:
        p.add_argument("--shape", metavar="S=N", action="extend", nargs="+", default=[],
                       help="bind a shape symbol (e.g. M=1024); random inputs are drawn for these shapes")
        p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")

    check = sub.add_parser("check", help="parse, typecheck (Z3) and verify",
                           description="Parse, typecheck and verify every kernel of FILE (or just --kernel).")
    common(check, dtypes=False)

    lower = sub.add_parser("lower", help="print a stage of the pipeline",
                           description="Lower one kernel and print the chosen stage.")
    common(lower)
    lower.add_argument("--emit", required=True, choices=EMITS, help="the stage to print")
    shapes(lower)
    lower.add_argument("--arch", type=int, default=90, help="the CUDA architecture for --emit=ptx (default 90)")
    lower.add_argument("--standalone", action="store_true",
                       help="with --emit=triton: a module that runs on its own (the kernel, its grid and "
                            "constexprs for --shape, and a __main__ that launches it on random inputs)")
    lower.add_argument("-o", "--output", metavar="OUT", help="write to OUT instead of standard output")

    run = sub.add_parser("run", help="run on random inputs and compare with the oracle",
                         description="Run the kernel on random inputs honouring its refinements, run the "
                                     "NumPy oracle on the same inputs, and report the max error per output.")
    common(run)
    shapes(run)
    run.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                     help="cpu runs the Triton interpreter (default); cuda runs on the GPU")

    build = sub.add_parser("build", help="compile specialisations into a directory for intent.load",
                           description="Compile the chosen specialisations of the kernels of FILE (or just --kernel) "
                                       "into DIR: per dtype signature the Triton source, per specialisation a cubin "
                                       "(with PTX and Triton's metadata), and registry.json, which intent.load(DIR) "
                                       "runs without the compiler.")
    build.add_argument("file", metavar="FILE", help="a .kir file, or a .py file with @intent.kernel functions")
    build.add_argument("--kernel", metavar="NAME", action="append", default=[],
                       help="a kernel to build (repeatable; default: every kernel of FILE)")
    build.add_argument("--dtype", metavar="T=DTYPE[,DTYPE...]", action="extend", nargs="+", default=[],
                       help="the dtypes to build for a dtype variable (default: all its choices)")
    build.add_argument("--shape", metavar="S=N[,N...]", action="extend", nargs="+", default=[],
                       help="the sizes to build for (every combination; a symbol not named takes 1024): they "
                            "choose the constexprs (tile sizes) each cubin is compiled with")
    build.add_argument("--const", metavar="C=V[,V...]", action="extend", nargs="+", default=[],
                       help="the values to build for an intent.const parameter (default: its default)")
    build.add_argument("--arch", type=int, default=90, help="the CUDA architecture (80 or 90; default 90)")
    build.add_argument("-o", "--output", metavar="DIR", required=True, help="the build directory")

    explain = sub.add_parser("explain", help="show the physical plan",
                             description="Worksets, groups, segments, buffers, bounds proofs and performance notes; "
                                         "launch formulas in terms of the constexprs, each defined once. With "
                                         "--shape (a value for every shape symbol): the grid, programs per group, "
                                         "block sizes, warps, the active form of each group and the bytes moved "
                                         "against the ideal at those shapes.")
    common(explain)
    explain.add_argument("--shape", metavar="S=N", action="extend", nargs="+", default=[],
                         help="evaluate the plan with these shape symbols (e.g. M=4096 N=1000)")
    explain.add_argument("--sms", type=int, default=None, metavar="N",
                         help="multiprocessors of the device the launch is sized for (default 132, an H100; "
                              "0: Triton's interpreter)")
    return ap


def _assignments(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UsageError(f"--{what} expects NAME=VALUE, got '{item}'")
        if name in out:
            raise UsageError(f"--{what} {name} is given twice")
        out[name] = value
    return out


def _shapes(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in _assignments(items, "shape").items():
        try:
            out[name] = int(value)
        except ValueError:
            raise UsageError(f"--shape {name}={value}: the value must be an integer") from None
    return out


def _dtypes(items: list[str]) -> dict[str, DType]:
    out: dict[str, DType] = {}
    for name, value in _assignments(items, "dtype").items():
        try:
            out[name] = DType.parse(value)
        except ValueError as exc:
            raise UsageError(f"--dtype {name}={value}: {exc}") from None
    return out


# ---------------------------------------------------------------------------------------------- loading


def _load(path: str) -> dict[str, Any]:
    """Kernels of FILE by name: `kir.Kernel` for .kir files, kernel objects for .py files."""
    suffix = Path(path).suffix
    if suffix == ".kir":
        from .text import parse_file

        return {k.name: k for k in parse_file(path)}
    if suffix == ".py":
        if not Path(path).is_file():
            raise FileNotFoundError(2, "No such file", path)
        try:
            import intent
            kernels_in_file = intent.kernels_in_file
        except (ImportError, AttributeError):
            raise StageUnavailable("reading kernels from Python files (intent.kernels_in_file)") from None
        return dict(kernels_in_file(path))
    raise LaunchError(f"{path}: expected a .kir or a .py file")


def _select(kernels: dict[str, Any], name: str | None, path: str) -> list[tuple[str, Any]]:
    if name is not None:
        if name not in kernels:
            raise UsageError(f"{path} has no kernel {name} (kernels: {', '.join(kernels) or 'none'})")
        return [(name, kernels[name])]
    if not kernels:
        raise LaunchError(f"{path} holds no kernel")
    # A Python file may bind one kernel object to several names; each kernel is listed once, under its
    # own name when that is one of them.
    chosen: dict[int, tuple[str, Any]] = {}
    for key, obj in kernels.items():
        own = getattr(obj, "__name__", None)
        if id(obj) not in chosen or (key == own and chosen[id(obj)][0] != own):
            chosen[id(obj)] = (key, obj)
    return list(chosen.values())


def _one(kernels: dict[str, Any], name: str | None, path: str) -> tuple[str, Any]:
    chosen = _select(kernels, name, path)
    if len(chosen) > 1:
        names = ", ".join(n for n, _ in chosen)
        raise UsageError(f"{path} holds several kernels ({names}); choose one with --kernel")
    return chosen[0]


def _kir_of(obj: Any) -> Kernel:
    return obj if isinstance(obj, Kernel) else obj.kir


def _specialised(obj: Any, dtypes: dict[str, DType]) -> Kernel:
    """The KIR of a kernel with dtype variables assigned (a Python kernel object specialises itself)."""
    if not dtypes:
        return _kir_of(obj)
    generic = _kir_of(obj)
    check_assignment(generic, dtypes, UsageError)  # what the command line names: a usage error when it does not fit
    if not isinstance(obj, Kernel):
        for method in ("specialize_with", "specialize_dtypes"):
            if hasattr(obj, method):
                return _kir_of(getattr(obj, method)(dtypes))
    return specialize_dtypes(_kir_of(obj), dtypes)


def check_assignment(kernel: Kernel, assignment: dict[str, DType], error: type[Exception]) -> dict[str, DTypeVar]:
    """`kernel`'s dtype variables by name, once each name in `assignment` is one of them and its dtype one of the
    variable's choices (else `error` says which is not)."""
    variables = {v.name: v for v in kernel.dtype_vars}
    for name, dt in assignment.items():
        if name not in variables:
            have = ", ".join(variables) or "none"
            raise error(f"kernel {kernel.name} has no dtype variable {name} (its dtype variables: {have})")
        if dt not in variables[name].choices:
            choices = ", ".join(str(c) for c in variables[name].choices)
            raise error(f"dtype variable {name} of kernel {kernel.name} is one of {choices}, not {dt}")
    return variables


def specialize_dtypes(kernel: Kernel, assignment: dict[str, DType]) -> Kernel:
    """Replace dtype variables by concrete dtypes everywhere in `kernel` (value ids are kept)."""
    variables = check_assignment(kernel, assignment, LaunchError)
    subst = {variables[n]: dt for n, dt in assignment.items()}
    values: dict[int, Value] = {}

    def elem(e: Any) -> Any:
        return subst.get(e, e) if isinstance(e, DTypeVar) else e

    def type_(t: Type) -> Type:
        if isinstance(t, RefType):
            return RefType(elem(t.dtype), t.shape, t.role)
        return TensorType(elem(t.dtype), t.shape)

    def value(v: Value) -> Value:
        if v.id not in values:
            values[v.id] = Value(v.id, type_(v.type), v.name)
        return values[v.id]

    def field(x: Any) -> Any:
        if isinstance(x, Value):
            return value(x)
        if isinstance(x, Region):
            return Region(tuple(value(a) for a in x.args), tuple(op(o) for o in x.ops))
        if isinstance(x, tuple):
            return tuple(field(y) for y in x)
        if isinstance(x, DynSlice):
            return DynSlice(value(x.begin), value(x.end))
        return elem(x)

    def op(o: Op) -> Op:
        changes = {f.name: field(getattr(o, f.name)) for f in o.fields()}
        return dataclasses.replace(o, results=tuple(value(v) for v in o.results), **changes)

    body = field(kernel.body)
    params = tuple(Param(p.name, a) for p, a in zip(kernel.params, body.args))
    remaining = tuple(v for v in kernel.dtype_vars if v.name not in assignment)
    return dataclasses.replace(kernel, params=params, body=body, dtype_vars=remaining)


def _stage(module: str, attr: str, stage: str) -> Callable[..., Any]:
    """A function of another package, imported when needed; missing means not built yet."""
    import importlib

    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name):
            raise StageUnavailable(stage) from None
        raise
    fn = getattr(mod, attr, None)
    if fn is None:
        raise StageUnavailable(stage)
    return fn


def _require_specialised(k: Kernel) -> None:
    if k.dtype_vars:
        names = ", ".join(v.name for v in k.dtype_vars)
        raise UsageError(f"kernel {k.name} is generic in {names}; choose with --dtype {k.dtype_vars[0].name}=...")


# ---------------------------------------------------------------------------------------------- commands


def _cmd_check(opts: argparse.Namespace) -> int:
    kernels = _load(opts.file)
    failed = 0
    for name, obj in _select(kernels, opts.kernel, opts.file):
        try:
            verify(_kir_of(obj))
        except IntentError as exc:
            failed += 1
            print(str(exc), file=sys.stderr)
            continue
        print(f"{name}: ok")
    return 1 if failed else 0


def _cmd_lower(opts: argparse.Namespace) -> int:
    if opts.standalone and opts.emit != "triton":
        raise UsageError("--standalone goes with --emit=triton")
    name, obj = _one(_load(opts.file), opts.kernel, opts.file)
    k = _specialised(obj, _dtypes(opts.dtype))
    verify(k)
    emit = opts.emit
    if emit == "kir":
        from .text import print_kernel

        text = print_kernel(k)
    elif emit == "physical":
        lower = _stage("physical", "lower", "the physical stage (physical.lower)")
        print_program = _stage("physical", "print_program", "the physical printer (physical.print_program)")
        _require_specialised(k)
        text = print_program(lower(k))
    else:
        _require_specialised(k)
        args = _random_args(k, opts)
        if emit == "triton" and opts.standalone:
            standalone = _stage("emit_triton.standalone", "standalone_module",
                                "standalone modules (emit_triton.standalone)")
            text = standalone(k, args, seed=opts.seed)
        elif emit == "triton":
            text = _stage("emit_triton", "source", "Triton emission (emit_triton.source)")(k, args)
        elif emit == "ptx":
            text = _stage("emit_triton", "ptx", "PTX compilation (emit_triton.ptx)")(k, args, opts.arch)
        else:
            text = _stage("oracle.stablehlo", "emit", "the StableHLO exit (oracle.stablehlo.emit)")(k, args)
    if not text.endswith("\n"):
        text += "\n"
    if opts.output:
        Path(opts.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _random_args(k: Kernel, opts: argparse.Namespace) -> dict[str, Any]:
    from .inputs import random_inputs

    shapes = _shapes(opts.shape)
    _check_symbols(k, shapes)
    return random_inputs(k, shapes, opts.seed)


def _check_symbols(k: Kernel, shapes: dict[str, int]) -> None:
    """Every shape symbol bound and no other name, reported all at once (a usage error)."""
    problems = []
    missing = [s for s in k.symbols if s not in shapes]
    if missing:
        values = " ".join(f"{s}=..." for s in missing)
        what = "values for shape symbols" if len(missing) > 1 else "a value for shape symbol"
        problems.append(f"kernel {k.name} needs {what} {', '.join(missing)} (--shape {values})")
    unknown = [s for s in shapes if s not in k.symbols]
    if unknown:
        problems.append(f"kernel {k.name} has no shape symbol{'s' * (len(unknown) > 1)} {', '.join(unknown)} "
                        f"(its symbols: {', '.join(k.symbols) or 'none'})")
    if problems:
        raise UsageError("; ".join(problems))


def _cmd_explain(opts: argparse.Namespace) -> int:
    name, obj = _one(_load(opts.file), opts.kernel, opts.file)
    k = _specialised(obj, _dtypes(opts.dtype))
    verify(k)
    _require_specialised(k)
    explain = _stage("physical", "explain", "the physical plan (physical.explain)")
    if opts.sms is not None and opts.sms < 0:
        raise UsageError(f"--sms {opts.sms}: the count of multiprocessors cannot be negative")
    if opts.shape:
        from .inputs import concrete_shapes

        shapes = _shapes(opts.shape)
        _check_symbols(k, shapes)
        concrete_shapes(k, shapes)  # the refinements hold at these shapes (else a diagnostic naming the failure)
        text = explain(k, shapes, *(() if opts.sms is None else (opts.sms,)))
    else:
        if opts.sms is not None:
            raise UsageError("--sms goes with --shape")
        text = explain(k)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _cmd_build(opts: argparse.Namespace) -> int:
    kernels = _load(opts.file)
    chosen = [pair for name in opts.kernel for pair in _select(kernels, name, opts.file)] if opts.kernel \
        else _select(kernels, None, opts.file)
    dtypes: dict[str, list[DType]] = {}
    for name, value in _assignments(opts.dtype, "dtype").items():
        try:
            dtypes[name] = [DType.parse(v) for v in value.split(",")]
        except ValueError as exc:
            raise UsageError(f"--dtype {name}={value}: {exc}") from None
    shapes: dict[str, list[int]] = {}
    for name, value in _assignments(opts.shape, "shape").items():
        try:
            shapes[name] = [int(v) for v in value.split(",")]
        except ValueError:
            raise UsageError(f"--shape {name}={value}: the values must be integers") from None
    consts: dict[str, list[object]] = {}
    for name, value in _assignments(opts.const, "const").items():
        try:
            consts[name] = [ast.literal_eval(v) for v in value.split(",")]
        except (ValueError, SyntaxError):
            raise UsageError(f"--const {name}={value}: the values must be Python literals (2, 0.5, True)") from None
    build = _stage("emit_triton.aot", "build", "ahead-of-time builds (emit_triton.aot.build)")
    path = build(chosen, opts.output, dtypes=dtypes, shapes=shapes, consts=consts, arch=opts.arch)
    print(f"wrote {path}")
    return 0


def _cmd_run(opts: argparse.Namespace) -> int:
    name, obj = _one(_load(opts.file), opts.kernel, opts.file)
    k = _specialised(obj, _dtypes(opts.dtype))
    verify(k)
    _require_specialised(k)
    args = _random_args(k, opts)
    oracle_run = _stage("oracle", "run", "the oracle (oracle.run)")
    expected = oracle_run(k, _copy(args))
    try:
        launch = _stage("emit_triton", "launch", "Triton emission (emit_triton.launch)")
    except StageUnavailable as exc:
        print(f"{exc}: ran the oracle only")
        for out in k.outputs:
            arr = np.asarray(expected[out.name])
            print(f"{out.name}: oracle result {arr.dtype}{list(arr.shape)}")
        return 0
    got = _launch(launch, k, args, opts.device)
    ok = True
    tf32 = any(isinstance(o, Dot) and o.precision is Precision.tf32 for o in k.walk())
    for out in k.outputs:
        line, passed = _compare(out, got[out.name], np.asarray(expected[out.name]), tf32)
        ok &= passed
        print(line)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def _copy(args: dict[str, Any]) -> dict[str, Any]:
    return {n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in args.items()}


def _launch(launch: Callable[..., Any], k: Kernel, args: dict[str, Any], device: str) -> dict[str, np.ndarray]:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise LaunchError("--device cuda: no CUDA device is available")
    from .inputs import torch_argument

    targs: dict[str, Any] = {}
    for p in k.params:
        v = torch_argument(p.type.dtype, args[p.name])  # type: ignore[arg-type]
        targs[p.name] = v.to(device) if isinstance(v, torch.Tensor) else v
    launch(k, targs)
    return {p.name: _host_array(p.type.dtype, targs[p.name].detach().cpu()) for p in k.outputs}


def _host_array(dt: Any, t: Any) -> np.ndarray:
    """A launched output as the oracle gives it: bf16 and fp8 as f32, i4 unpacked (one value per int8)."""
    import torch

    if dt is DType.i4:
        return i4_unpacked(t.numpy())
    return t.to(torch.float32 if dt.in_f32 else dt.torch).numpy()


def _compare(p: Param, got: np.ndarray, want: np.ndarray, tf32: bool = False) -> tuple[str, bool]:
    dt = p.type.dtype
    if got.shape != want.shape:
        return f"{p.name}: shape {list(got.shape)} but the oracle gives {list(want.shape)}  FAIL", False
    if isinstance(dt, DType) and dt.is_float:
        g, w = got.astype(np.float64), want.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(w)
        with np.errstate(invalid="ignore"):
            diff = np.where(both_nan | (g == w), 0.0, np.abs(g - w))
        diff = np.nan_to_num(diff, nan=np.inf)
        err = float(diff.max()) if diff.size else 0.0
        atol, rtol = TF32_TOLERANCE if tf32 and dt is DType.f32 else FLOAT_TOLERANCE[dt]
        passed = bool(np.all(diff <= atol + rtol * np.nan_to_num(np.abs(w), nan=0.0, posinf=0.0)))
        return f"{p.name}: max abs error {err:.3g} ({dt}, atol {atol:g}, rtol {rtol:g})  " \
               f"{'PASS' if passed else 'FAIL'}", passed
    mismatches = int(np.count_nonzero(got != want))
    passed = mismatches == 0
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()) if got.size else 0.0
    return f"{p.name}: max abs error {err:g}, {mismatches} mismatching elements ({dt}, exact)  " \
           f"{'PASS' if passed else 'FAIL'}", passed


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "check": _cmd_check, "lower": _cmd_lower, "run": _cmd_run, "explain": _cmd_explain, "build": _cmd_build}


def main(argv: Sequence[str] | None = None) -> int:
    ap = _parser()
    try:
        opts = ap.parse_args(argv)
    except SystemExit as exc:  # argparse: --help exits 0, bad usage 2
        return int(exc.code or 0)
    if opts.command == "run" and opts.device == "cpu":
        # Generated kernels must be decorated under the interpreter to run on CPU tensors.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        return COMMANDS[opts.command](opts)
    except UsageError as exc:
        print(f"kirc {opts.command}: error: {exc}", file=sys.stderr)
        return 2
    except IntentError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except OSError as exc:
        what = exc.filename if exc.filename is not None else opts.file
        print(f"kirc: cannot read or write {what}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug in Intent: visible, but no raw traceback unless asked for
        if os.environ.get("KIRC_DEBUG") == "1":
            traceback.print_exc()
        print(f"kirc: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
