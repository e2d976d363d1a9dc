"""`@intent.kernel`: the kernel object, its specialisations (per dtype assignment and const values, cached),
argument binding, and delegation to the oracle, the physical planner and the Triton emitter."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kir.core import Kernel, Role
from kir.dtypes import DType, DTypeVar
from kir.errors import DiagnosticError, IntentError, LaunchError
from kir.frontend import KernelSignature, build, const_fits, signature
from kir.frontend.signature import NO_DEFAULT, ConstSpec, ScalarSpec, TensorSpec

from .dsl import user_loc
from .tracebacks import USER_FACING, api_boundary, filter_exception

if TYPE_CHECKING:
    import numpy as np


def _stage(module: str, attr: str, stage: str) -> Callable[..., Any]:
    """The function another package provides for a stage; a clear NotImplementedError while it is missing."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            raise NotImplementedError(f"{stage} is not available: the module {module} does not exist yet") from None
        raise
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise NotImplementedError(f"{stage} is not available: {module}.{attr} does not exist yet")
    return fn


def dtype_of_argument(value: object) -> DType | None:
    """The element type of a torch tensor or a NumPy array (None for anything else)."""
    np = sys.modules.get("numpy")  # an array exists only once NumPy is imported
    if np is not None and isinstance(value, np.ndarray):
        if value.dtype.name == "bfloat16":
            return DType.bf16
        return DType.from_numpy(value.dtype)
    if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "dtype") and hasattr(value, "shape"):
        return DType.from_torch(value.dtype)  # type: ignore[attr-defined]
    return None


def _describe_spec(spec: object) -> str:
    if isinstance(spec, TensorSpec):
        body = f"{spec.dtype}[{', '.join(map(str, spec.shape))}]"
        return {Role.OUT: f"Out[{body}]", Role.INOUT: f"InOut[{body}]"}.get(spec.role, body)
    if isinstance(spec, ScalarSpec):
        return f"scalar {spec.dtype}"
    assert isinstance(spec, ConstSpec)
    return f"intent.const[{spec.kind.__name__}]"


def _launcher() -> Callable[..., Any]:
    """`emit_triton.launch`, looked up on each call (it may be replaced) without an import."""
    module = sys.modules.get("emit_triton")
    fn = getattr(module, "launch", None) if module is not None else None
    return fn if callable(fn) else _stage("emit_triton", "launch", "launching")


# (torch.compiler.is_dynamo_compiling, torch._C._len_torch_dispatch_stack) once torch is imported: whether
# PyTorch traces a call (Dynamo; a dispatch mode such as fake tensors or make_fx) instead of running it.
# Looked up once, they cost two calls per launch; the first returns False except while Dynamo traces.
_tracing_probes: tuple[Callable[[], bool], Callable[[], int]] | None = None


def _torch_probes() -> tuple[Callable[[], bool], Callable[[], int]] | None:
    global _tracing_probes
    torch = sys.modules.get("torch")
    if torch is None:  # nothing can be tracing
        return None
    _tracing_probes = (torch.compiler.is_dynamo_compiling, torch._C._len_torch_dispatch_stack)
    return _tracing_probes


def _launch_shapes(kernel: Kernel, abi: Mapping[str, object]) -> tuple[dict[str, int], int] | None:
    """The shape symbols and multiprocessor count a launch with `abi` would use; None unless every
    parameter is given (inputs may be omitted for `explain`)."""
    if any(p.name not in abi or abi[p.name] is None for p in kernel.params if p.role is not Role.OUT):
        return None
    from emit_triton import targets
    from emit_triton.arguments import bind_arguments

    bound = bind_arguments(kernel, abi)
    return {s: int(bound.env[s]) for s in kernel.symbols}, targets.multiprocessors(bound.device)


# Distinct call forms (positional count, keyword names) and specialisations remembered per kernel object.
_MAX_CALL_FORMS = 64
_MAX_SPECIALISATIONS = 256


class _CallLayout:
    """Calls of one form: which parameter each value binds, and the specialised kernels seen with it.

    Binding and specialisation depend only on the parameter names given, the (type, dtype) of the
    values whose dtype variables are inferred, and the (type, value) of const parameters; a call
    with the same of each gets the kernel an earlier, fully checked call got.
    """

    def __init__(self, sig: KernelSignature, positional: int, keywords: tuple[str, ...]) -> None:
        names = [p.name for p in sig.params]
        self.positional_names = tuple(names[:positional])
        given = self.positional_names + keywords
        specs = {p.name: p for p in sig.params}
        self.typed = tuple(n for n in given if isinstance(specs[n].spec, TensorSpec | ScalarSpec)
                           and isinstance(specs[n].spec.dtype, DTypeVar))  # type: ignore[union-attr]
        self.consts = tuple(n for n in given if specs[n].is_const)
        self.launched = tuple(n for n in given if not specs[n].is_const)
        self.optional = tuple(p.name for p in sig.optional)
        self.kernels: dict[tuple[Any, ...], Kernel] = {}

    def _bind(self, args: tuple[object, ...], kwargs: Mapping[str, object]) -> dict[str, object]:
        if not args:
            return dict(kwargs)
        merged = dict(zip(self.positional_names, args))
        merged.update(kwargs)
        return merged

    def _key(self, merged: Mapping[str, object]) -> tuple[Any, ...]:
        key: list[Any] = []
        for n in self.typed:
            value = merged[n]
            key.append((type(value), getattr(value, "dtype", None)))
        for n in self.consts:
            value = merged[n]
            key.append((type(value), value))
        key.extend(merged.get(n) is None for n in self.optional)
        return tuple(key)

    def specialisation(self, args: tuple[object, ...], kwargs: Mapping[str, object]
                       ) -> tuple[Kernel, dict[str, object]] | None:
        """The kernel and launch arguments of a call of a form seen before, or None (take the full path)."""
        merged = self._bind(args, kwargs)
        try:
            kernel = self.kernels.get(self._key(merged))
        except TypeError:  # an unhashable const or dtype: the full path handles it
            return None
        if kernel is None:
            return None
        if self.consts or self.optional:
            merged = {n: merged[n] for n in self.launched if merged[n] is not None or n not in self.optional}
        return kernel, merged

    def remember(self, args: tuple[object, ...], kwargs: Mapping[str, object], kernel: Kernel) -> None:
        try:
            key = self._key(self._bind(args, kwargs))
            hash(key)
        except TypeError:
            return
        if len(self.kernels) >= _MAX_SPECIALISATIONS:
            self.kernels.clear()
        self.kernels[key] = kernel


class KernelObject:
    """What `@intent.kernel` returns: call it to launch; `.kir`, `.oracle(...)`, `.triton_source(...)`, `.ptx(...)`,
    `.stablehlo(...)`, `.stablehlo_run(...)`, `.explain(...)` expose each stage."""

    @api_boundary
    def __init__(self, fn: Callable[..., Any], requires: Iterable[object] | None = None,
                 checks: bool | None = None, autotune: bool | None = None) -> None:
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.checks = bool(checks) if checks is not None else os.environ.get("INTENT_CHECKS", "") not in ("", "0")
        # Bounded autotuning of CUDA launches (emit_triton.autotune); never needed for a good kernel.
        self.autotune = bool(autotune) if autotune is not None else \
            os.environ.get("INTENT_AUTOTUNE", "") not in ("", "0")
        self._requires = requires
        self.signature: KernelSignature = signature(fn, requires)
        self._cache: dict[tuple, Kernel] = {}
        self._call_layouts: dict[tuple[int, tuple[str, ...]], _CallLayout] = {}
        self._generic: Kernel | None = None
        missing = [p for p in self.signature.consts
                   if p.default is NO_DEFAULT and p.spec.kind is not int]  # type: ignore[union-attr]
        self._no_generic = missing[0] if missing else None
        if self._no_generic is None:  # built now, so that diagnostics appear where the kernel is defined
            self._generic = build(fn, checks=self.checks, signature=self.signature)

    # ------------------------------------------------------------------------------------------ KIR
    @property
    @api_boundary
    def kir(self) -> Kernel:
        """The generic KIR: dtype variables stay variables; const parameters take their defaults, and const int
        parameters without one are shape symbols."""
        if self._generic is None:
            p = self._no_generic
            assert p is not None
            raise DiagnosticError(f"kernel {self.__name__} has the compile-time parameter `{p.name}` "
                                  f"({_describe_spec(p.spec)}) without a default, so its KIR exists per value: use "
                                  f"{self.__name__}.specialize({{...}}) or give `{p.name}` a default", p.loc)
        return self._generic

    @api_boundary
    def specialize_with(self, dtypes: Mapping[str, DType | str] | None = None,
                        consts: Mapping[str, object] | None = None, absent: Iterable[str] = ()) -> Kernel:
        """The specialised KIR for explicit dtype-variable values and const values, without the optional tensor
        parameters named in `absent` (cached per key)."""
        dts: dict[str, DType] = {}
        for name, dt in (dtypes or {}).items():
            dts[name] = dt if isinstance(dt, DType) else DType.parse(str(getattr(dt, "__kir_dtype__", dt)))
        cvals = dict(consts or {})
        for p in self.signature.consts:
            if p.name not in cvals and p.default is not NO_DEFAULT:
                cvals[p.name] = p.default
        gone = tuple(sorted(absent))
        if not dts and not cvals and not gone and self._generic is not None:
            return self._generic
        key = (tuple(sorted((k, v.value) for k, v in dts.items())),
               tuple(sorted((k, type(v).__name__, v) for k, v in cvals.items())), gone)
        hit = self._cache.get(key)
        if hit is None:
            hit = build(self.__wrapped__, checks=self.checks, dtypes=dts, consts=cvals, signature=self.signature,
                        absent=gone)
            self._cache[key] = hit
        return hit

    @api_boundary
    def specialize(self, args: Mapping[str, object]) -> Kernel:
        """The KIR specialised for these arguments: dtype variables bound from the tensors' dtypes, const
        parameters from their values."""
        sig = self.signature
        dtypes: dict[str, DType] = {}
        origin: dict[str, str] = {}
        for p in sig.params:
            spec = p.spec
            if not isinstance(spec, TensorSpec | ScalarSpec) or not isinstance(spec.dtype, DTypeVar) \
                    or args.get(p.name, None) is None:
                continue
            var = spec.dtype
            dt = dtype_of_argument(args[p.name])
            if dt is None:
                if isinstance(spec, TensorSpec):
                    raise LaunchError(f"parameter {p.name}: expected a tensor of type {_describe_spec(spec)} (a torch "
                                      f"tensor or NumPy array), got {type(args[p.name]).__name__}")
                continue
            if dt not in var.choices:
                raise LaunchError(f"parameter {p.name}: dtype {dt} is not one of {var.name}'s choices "
                                  f"({', '.join(map(str, var.choices))})")
            if var.name in dtypes and dtypes[var.name] != dt:
                raise LaunchError(f"parameter {p.name}: dtype {dt}, but {var.name} = {dtypes[var.name]} from parameter "
                                  f"{origin[var.name]}")
            dtypes[var.name], origin[var.name] = dt, p.name
        for var in sig.dtype_vars:
            if var.name not in dtypes:
                users = [p.name for p in sig.params if isinstance(p.spec, TensorSpec) and p.spec.dtype == var]
                raise LaunchError(f"cannot infer the dtype variable {var.name}: pass a tensor for "
                                  f"{' or '.join(users) or 'a parameter of that type'}")
        consts: dict[str, object] = {}
        for p in sig.consts:
            kind = p.spec.kind  # type: ignore[union-attr]
            if p.name in args:
                if not const_fits(args[p.name], kind):
                    raise LaunchError(f"parameter {p.name}: expected a compile-time {kind.__name__} "
                                      f"(intent.const[{kind.__name__}]), got {args[p.name]!r}")
                consts[p.name] = args[p.name]
            elif p.default is NO_DEFAULT:
                raise LaunchError(f"missing argument {p.name} (intent.const[{kind.__name__}])")
        absent = [p.name for p in sig.optional if args.get(p.name) is None]
        return self.specialize_with(dtypes, consts, absent)

    # ------------------------------------------------------------------------------------------ arguments
    def bind_arguments(self, args: tuple[object, ...], kwargs: Mapping[str, object],
                       require_inputs: bool = True) -> dict[str, object]:
        """Map positional and keyword arguments to parameter names; Out parameters may be omitted."""
        names = [p.name for p in self.signature.params]
        if len(args) > len(names):
            raise LaunchError(f"{self.__name__}() takes {len(names)} arguments ({', '.join(names)}) but {len(args)} "
                              f"were given")
        out: dict[str, object] = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise LaunchError(f"{self.__name__}() got an unexpected argument '{k}'; its parameters are "
                                  f"{', '.join(names)}")
            if k in out:
                raise LaunchError(f"{self.__name__}() got multiple values for argument '{k}'")
            out[k] = v
        if require_inputs:
            missing = [p for p in self.signature.params if p.name not in out
                       and not (isinstance(p.spec, TensorSpec) and (p.spec.role is Role.OUT or p.spec.optional))
                       and not (p.is_const and p.default is not NO_DEFAULT)]
            if missing:
                shown = ", ".join(f"{p.name} ({_describe_spec(p.spec)})" for p in missing)
                raise LaunchError(f"{self.__name__}() is missing argument(s): {shown}")
        return out

    def _prepare(self, args: tuple[object, ...], kwargs: Mapping[str, object],
                 require_inputs: bool = True) -> tuple[Kernel, dict[str, object]]:
        bound = self.bind_arguments(args, kwargs, require_inputs)
        kernel = self.specialize(bound)
        dropped = {p.name for p in self.signature.consts} | {p.name for p in self.signature.optional
                                                              if bound.get(p.name) is None}
        return kernel, {k: v for k, v in bound.items() if k not in dropped}

    # ------------------------------------------------------------------------------------------ stages
    def __call__(self, *args: object, **kwargs: object) -> Any:
        try:  # inline rather than @api_boundary: this is the launch path, where every call counts
            probes = _tracing_probes or _torch_probes()
            if probes is not None and (probes[0]() or probes[1]()):  # traced: a call of the kernel's torch op
                from .torch_op import call

                return call(self, args, kwargs)
            layout = self._call_layouts.get((len(args), tuple(kwargs)))
            if layout is not None:
                found = layout.specialisation(args, kwargs)
                if found is not None:
                    return self._launch(found[0], found[1])
            kernel, abi = self._prepare(args, kwargs)
            self._remember_call(args, kwargs, kernel)
            return self._launch(kernel, abi)
        except USER_FACING as exc:
            filter_exception(exc)
            raise

    @api_boundary
    def with_options(self, *, checks: bool | None = None, autotune: bool | None = None) -> KernelObject:
        """The same kernel with other options (`checks`, `autotune`); unnamed options stay as they are."""
        return KernelObject(self.__wrapped__, self._requires, self.checks if checks is None else checks,
                            self.autotune if autotune is None else autotune)

    def _launch(self, kernel: Kernel, abi: Mapping[str, object]) -> Any:
        if self.autotune:
            return _launcher()(kernel, abi, autotune=True)
        return _launcher()(kernel, abi)

    def _remember_call(self, args: tuple[object, ...], kwargs: Mapping[str, object], kernel: Kernel) -> None:
        """After a call passed binding and specialisation, let calls of the same form skip both."""
        shape = (len(args), tuple(kwargs))
        layout = self._call_layouts.get(shape)
        if layout is None:
            if len(self._call_layouts) >= _MAX_CALL_FORMS:
                self._call_layouts.clear()
            layout = self._call_layouts[shape] = _CallLayout(self.signature, len(args), tuple(kwargs))
        layout.remember(args, kwargs, kernel)

    @api_boundary
    def oracle(self, *args: object, **kwargs: object) -> dict[str, np.ndarray]:
        kernel, abi = self._prepare(args, kwargs)
        return _stage("oracle", "run", "the NumPy oracle")(kernel, abi, checks=self.checks)

    @api_boundary
    def triton_source(self, *args: object, **kwargs: object) -> str:
        kernel, abi = self._prepare(args, kwargs)
        return _stage("emit_triton", "source", "Triton source emission")(kernel, abi)

    @api_boundary
    def ptx(self, *args: object, arch: int = 90, **kwargs: object) -> str:
        kernel, abi = self._prepare(args, kwargs)
        return _stage("emit_triton", "ptx", "ahead-of-time PTX")(kernel, abi, arch)

    @api_boundary
    def stablehlo(self, *args: object, **kwargs: object) -> str:
        kernel, abi = self._prepare(args, kwargs)
        return _stage("oracle.stablehlo", "emit", "the StableHLO exit")(kernel, abi)

    @api_boundary
    def stablehlo_run(self, *args: object, **kwargs: object) -> dict[str, np.ndarray]:
        kernel, abi = self._prepare(args, kwargs)
        return _stage("oracle.stablehlo", "run", "the StableHLO exit")(kernel, abi)

    @api_boundary
    def explain(self, *args: object, **kwargs: object) -> str:
        """The physical plan; given every tensor argument, also its numbers at their shapes (grid, block
        sizes, warps, active forms, bytes moved against the ideal) on their device."""
        kernel, abi = self._prepare(args, kwargs, require_inputs=False)
        explain = _stage("physical", "explain", "the physical plan")
        at = _launch_shapes(kernel, abi)
        return explain(kernel) if at is None else explain(kernel, *at)

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {_describe_spec(p.spec)}" for p in self.signature.params)
        return f"<intent.kernel {self.__name__}({params})>"


@api_boundary
def kernel(fn: Callable[..., Any] | None = None, *, requires: Iterable[object] | None = None,
           checks: bool | None = None, autotune: bool | None = None) -> Any:
    """`@intent.kernel` or `@intent.kernel(requires=[N <= 65536], checks=True, autotune=True)`.

    `autotune=True` (or `INTENT_AUTOTUNE=1`) times a handful of launch configurations on the first CUDA
    launch of each specialisation and keeps the fastest (`emit_triton.autotune`)."""
    if fn is None:
        return lambda f: kernel(f, requires=requires, checks=checks, autotune=autotune)
    if not callable(fn) or isinstance(fn, type):
        raise DiagnosticError(f"@intent.kernel decorates a function, got {fn!r}; pass refinements by keyword: "
                              f"@intent.kernel(requires=[...])", user_loc())
    return KernelObject(fn, requires, checks, autotune)


class Helper:
    """An `@intent.func` helper or `@intent.combine` function: inlined where a kernel body calls it."""

    @api_boundary
    def __init__(self, fn: Callable[..., Any], kind: str) -> None:
        if not callable(fn) or not hasattr(fn, "__code__"):
            raise DiagnosticError(f"@intent.{kind} decorates a `def` function, got {fn!r}", user_loc())
        self.__wrapped__ = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        setattr(self, f"__intent_{kind}__", fn)
        self._kind = kind

    def __call__(self, *args: object, **kwargs: object) -> Any:
        raise IntentError(f"`{self.__name__}` is an @intent.{self._kind} function: it is inlined into kernel bodies "
                          f"and cannot be called from Python")

    def __repr__(self) -> str:
        return f"<intent.{self._kind} {self.__name__}>"


@api_boundary
def func(fn: Callable[..., Any]) -> Helper:
    """`@intent.func`: a helper whose body is inlined at each call site in a kernel body."""
    return Helper(fn, "func")


@api_boundary
def combine(fn: Callable[..., Any]) -> Helper:
    """`@intent.combine`: `def c(a, b)` combining two partial results (tuples for tuple reductions)."""
    return Helper(fn, "combine")

