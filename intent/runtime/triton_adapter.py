"""Every use of Triton's private (underscored or undocumented) API, in one place.

Intent drives Triton in ways its public `fn[grid](...)` does not cover: switching the interpreter on
and off within one process, running Triton's own library functions interpreted (through per-function
twins: no Triton function or class attribute is replaced), computing the
specialisation a launch gets without launching (for ahead-of-time compiles), and launching a cubin
compiled earlier from its stored metadata; bench/'s traffic counter and fast interpreted reductions
hook the interpreter through scoped substitutions here (never on the launch path). Both the compiler's
launcher (`emit_triton.targets`) and the compiler-free runtime (`intent.load`) go through this module;
`tests/test_triton_adapter.py` fails loudly when a Triton release changes what is used here.

It imports the standard library only; `triton` is imported inside the functions that need it.
"""

from __future__ import annotations

import dataclasses
import importlib.machinery
import importlib.util
import json
import linecache
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# Triton's interpreter keeps global state and the switches below are process-wide: one at a time.
INTERPRETER_LOCK = threading.RLock()


class Mode(Enum):
    """How a generated module is loaded: interpreted functions or compiled JIT functions."""

    INTERPRETED = "interpreted"
    COMPILED = "compiled"


_MISSING = object()


def user_wants_interpreter() -> bool:
    """`TRITON_INTERPRET=1` set by the user: Triton's own debugging convention."""
    from triton import knobs

    return bool(knobs.runtime.interpret)


@contextmanager
def triton_interpret(on: bool) -> Iterator[None]:
    """Switch Triton's interpreter on or off for the duration of the block, then restore it."""
    from triton import knobs

    previous_env = os.environ.get("TRITON_INTERPRET")
    previous_override = knobs.runtime.__dict__.pop("interpret", _MISSING)
    os.environ["TRITON_INTERPRET"] = "1" if on else "0"
    try:
        yield
    finally:
        if previous_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = previous_env
        if previous_override is not _MISSING:
            knobs.runtime.__dict__["interpret"] = previous_override


def library_mode() -> Mode:
    """How Triton's own `@jit` library (`tl.sum`, ...) was built when `triton` was first imported.

    With `TRITON_INTERPRET=1` set at that import it consists of interpreter objects for the life
    of the process, and kernels that call it can only be compiled in a fresh process.
    """
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return Mode.INTERPRETED if isinstance(tl.sum, InterpretedFunction) else Mode.COMPILED


# ---------------------------------------------------------------------------------------------- loading


class _VerifiedSourceLoader(importlib.machinery.SourceFileLoader):
    """Loads a module from the text that was verified, never from a re-read of its file."""

    def __init__(self, fullname: str, path: str, text: str) -> None:
        super().__init__(fullname, path)
        self._text = text

    def get_data(self, path: str) -> bytes:
        if path == self.path:
            return self._text.encode("utf-8")
        raise OSError(f"{path} is not part of this generated module")

    def get_source(self, fullname: str) -> str:
        return self._text

    def get_code(self, fullname: str) -> Any:
        return compile(self._text, self.path, "exec", dont_inherit=True)

    def set_data(self, path: str, data: bytes, *, _mode: int = 0o666) -> None:
        """No bytecode is written next to generated modules."""


def import_source(path: str | Path, text: str, name: str, mode: Mode) -> Any:
    """Execute `text` (the verified contents of `path`) as module `name`, its `@triton.jit` functions
    decorated interpreted or compiled as `mode` says."""
    loader = _VerifiedSourceLoader(name, str(path), text)
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    if spec is None:  # pragma: no cover - only for paths importlib refuses outright
        raise ImportError(f"cannot load the generated module {path}")
    module = importlib.util.module_from_spec(spec)
    # Triton reads the jit function's source through `inspect`, i.e. linecache: serve it the
    # verified text (an entry with no mtime is never re-read from disk).
    linecache.cache[str(path)] = (len(text), None, text.splitlines(True), str(path))
    sys.modules[name] = module
    try:
        with INTERPRETER_LOCK, triton_interpret(mode is Mode.INTERPRETED):
            loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


# ---------------------------------------------------------------------------------------------- interpreted runs

# Combines Triton's interpreter recognises by identity and folds with NumPy (np.sum, argmax, ...), never
# calling them: twins keep these very objects.
_NATIVE_COMBINES = ("_sum_combine", "_prod_combine", "_elementwise_max", "_elementwise_min",
                    "_argmax_combine_tie_break_left", "_argmax_combine_tie_break_fast",
                    "_argmin_combine_tie_break_left", "_argmin_combine_tie_break_fast")


class _Twin:
    """A callable interpreted twin of one `@jit` function, for interpreted runs only.

    Triton's own library (`tl.sum`, `tl.rand`, ...) was decorated when `triton` was imported, normally
    with interpretation off: compiled JIT functions that refuse to be called from Python. A twin runs
    a copy of the function's Python code whose globals are twins too (`_twin_namespace`), so every
    call it makes reaches another twin; nothing of Triton's is replaced. Each call patches
    `triton.language` for the interpreter within a scope restored when it returns (Triton's own
    interpreted call never restores it: harmless in a process that only interprets, fatal to later
    compiles here).
    """

    def __init__(self, fn: Any) -> None:
        from triton.runtime.interpreter import InterpretedFunction

        self.fn = _function_copy(fn, _twin_namespace(fn.__globals__))  # the interpreter folds with `.fn`
        self.interpreted = InterpretedFunction(self.fn)
        self.__name__ = fn.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from triton.runtime.interpreter import _patch_lang

        scope = _patch_lang(self.fn)
        try:
            return self.interpreted.rewrite()(*args, **kwargs)
        finally:
            scope.restore()


class _TwinModule:
    """`triton.language` (or a submodule) as interpreted code sees it: `@jit` attributes are twins, every
    other attribute is read from the module when asked (the interpreter patches its builtins)."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self._twins: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        twin = self._twins.get(name)
        if twin is not None and twin[0] is value:
            return twin[1]
        made = _twin_of(value)
        if made is not value:
            self._twins[name] = (value, made)
        return made


# Twins of Triton's own modules and functions, id(original) -> (original, twin), for the life of the
# process (the library is fixed), so each is rewritten by the interpreter once. A generated module's
# twins live on its own objects and go with them.
_twins: dict[int, tuple[Any, Any]] = {}
_TWIN_ATTRIBUTE = "_intent_twin"
_TWIN_NAMESPACE = "__intent_twin_namespace__"


def _is_library(namespace: dict[str, Any]) -> bool:
    return str(namespace.get("__name__", "")).startswith("triton.")


def _function_copy(fn: Any, namespace: dict[str, Any]) -> Any:
    import types

    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__annotations__ = dict(fn.__annotations__)
    copy.__qualname__ = fn.__qualname__
    copy.__module__ = fn.__module__
    return copy


def _native_combines() -> set[int]:
    import triton.language as tl

    return {id(getattr(tl.standard, name)) for name in _NATIVE_COMBINES}


def _twin_of(value: Any) -> Any:
    import types

    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    if isinstance(value, types.ModuleType) and value.__name__.startswith(tl.__name__):
        key = id(value)
        if key not in _twins:
            _twins[key] = (value, _TwinModule(value))
        return _twins[key][1]
    if not isinstance(value, JITFunction | InterpretedFunction) or id(value) in _native_combines():
        return value
    if not _is_library(value.fn.__globals__):
        twin = value.__dict__.get(_TWIN_ATTRIBUTE)
        if twin is None:
            twin = _Twin(value.fn)
            setattr(value, _TWIN_ATTRIBUTE, twin)
        return twin
    known = _twins.get(id(value))
    if known is None or known[0] is not value:
        known = _twins[id(value)] = (value, _Twin(value.fn))
    return known[1]


_namespaces: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}


def _twin_namespace(namespace: dict[str, Any]) -> dict[str, Any]:
    """A copy of a module's globals for interpreted twins: `@jit` functions and `triton.language` modules
    become twins; the modules themselves stay reachable under private names (the interpreter finds
    `triton.language` among a function's globals to patch it)."""
    library = _is_library(namespace)
    known = _namespaces.get(id(namespace)) if library else (namespace, namespace.get(_TWIN_NAMESPACE))
    if known is not None and known[0] is namespace and known[1] is not None:
        return known[1]
    twin: dict[str, Any] = {}
    # recorded before filling: functions refer to their own module
    if library:
        _namespaces[id(namespace)] = (namespace, twin)
    else:
        namespace[_TWIN_NAMESPACE] = twin
    for name, value in list(namespace.items()):
        if name == _TWIN_NAMESPACE:
            continue
        twin[name] = _twin_of(value)
        if twin[name] is not value and not callable(value):
            twin[f"_intent_module_{name}"] = value
    return twin


def run_interpreted(fn: Any, grid: int, positional: Sequence[Any], keywords: Mapping[str, Any]) -> None:
    """Run an interpreted `@triton.jit` function over a 1-D grid of `grid` programs.

    The kernel runs as an interpreted copy whose globals are twins (`_Twin`), so it can call Triton's
    compiled library and the module's own helpers without any Triton function being replaced.
    """
    from triton.runtime.interpreter import InterpretedFunction

    with INTERPRETER_LOCK, triton_interpret(True), _interpreter_checks(bool(keywords.get("debug"))):
        kernel = fn.__dict__.get("_intent_kernel_twin")
        if kernel is None:
            kernel = InterpretedFunction(_function_copy(fn.fn, _twin_namespace(fn.fn.__globals__)))
            fn._intent_kernel_twin = kernel
        kernel[(grid,)](*positional, **keywords)


@contextmanager
def _interpreter_checks(on: bool) -> Iterator[None]:
    """The interpreter honours `tl.device_assert` only under its debug option (fixed per process)."""
    if not on:
        yield
        return
    from triton.runtime.interpreter import interpreter_builder

    previous = interpreter_builder.options
    interpreter_builder.options = dataclasses.replace(previous, debug=True, sanitize_overflow=False)
    try:
        yield
    finally:
        interpreter_builder.options = previous


# ---------------------------------------------------------------------------------------------- ahead of time


def specialisation(fn: Any, arch: int, positional: Sequence[Any], keywords: Mapping[str, Any]
                   ) -> tuple[Any, dict[str, str], dict[Any, Any], dict[Any, Any]]:
    """What Triton compiles a launch of the compiled JIT function `fn` with these arguments for on
    sm_<arch>: (options, signature, constexprs, attrs), from Triton's own binder (argument types,
    16-byte alignment of pointers, divisibility by 16 of integers). No GPU is needed."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    options_in = dict(keywords, debug=bool(keywords.get("debug", False)))
    with INTERPRETER_LOCK, triton_interpret(library_mode() is Mode.INTERPRETED):
        backend = make_backend(GPUTarget("cuda", arch, 32))
        binder = create_function_from_signature(fn.signature, fn.params, backend)
        bound, spec, options = binder(*positional, **options_in)
        return fn._pack_args(backend, options_in, bound, spec, options)


def compile_for(fn: Any, arch: int, signature: Any, constexprs: Any, attrs: Any,
                options: Mapping[str, Any]) -> tuple[str, bytes | None, dict[str, Any]]:
    """Compile `fn` for sm_<arch>: (PTX, cubin, Triton's metadata as JSON-ready data)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    with INTERPRETER_LOCK, triton_interpret(False):
        compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", arch, 32),
                                  options=dict(options))
    return compiled.asm["ptx"], compiled.asm.get("cubin"), metadata_json(compiled.metadata)


def metadata_json(metadata: Any) -> dict[str, Any]:
    """Triton's kernel metadata (a namedtuple) as JSON data, as Triton's own cache stores it."""
    data = metadata._asdict() if hasattr(metadata, "_asdict") else dict(metadata)
    return json.loads(json.dumps(data, default=lambda v: v.__dict__ if hasattr(v, "__dict__") else repr(v)))


def load_compiled(folder: Path, name: str, metadata_file: str, cubin_file: str, arg_names: Sequence[str],
                  signature: Mapping[str, str], constants: Mapping[Any, Any], key: str) -> Any:
    """A launchable kernel from a stored cubin and its metadata (no compile): Triton's `CompiledKernel`.

    Triton builds its launcher from the compile source's `signature`, `constants` and argument
    names; a namespace with exactly those stands in for the `ASTSource` of the original compile.
    Launch with `kernel[(grid, 1, 1)](*every_argument_in_signature_order)`.
    """
    from triton.compiler import CompiledKernel

    src = SimpleNamespace(signature=dict(signature), constants=dict(constants),
                          fn=SimpleNamespace(arg_names=list(arg_names), launch_metadata=None))
    group = {f"{name}.json": str(folder / metadata_file), f"{name}.cubin": str(folder / cubin_file)}
    return CompiledKernel(src, group, key)


# ---------------------------------------------------------------------------------------------- measurement (bench/)
#
# bench/traffic.py counts the memory an interpreted launch touches and bench/fast_reduce.py shortens the
# interpreter's element-at-a-time custom reductions. Triton's interpreter offers no hook for either: both
# are scoped substitutions inside Triton's interpreter (never its compiler or library), made only while the
# caller's block runs, under the interpreter lock, and undone when it ends. Launches never use them.


@contextmanager
def interpreter_builder_hooks(names: Sequence[str], wrap: Any) -> Iterator[None]:
    """While the block runs, Triton's interpreter builder calls `wrap(name, original)` in place of each of its
    methods `names` (instance attributes of the one builder object; its class is untouched)."""
    from triton.runtime.interpreter import interpreter_builder as builder

    absent = object()
    with INTERPRETER_LOCK:
        saved = {name: builder.__dict__.get(name, absent) for name in names}
        for name in names:
            builder.__dict__[name] = wrap(name, getattr(builder, name))
        try:
            yield
        finally:
            for name, previous in saved.items():
                if previous is absent:
                    builder.__dict__.pop(name, None)
                else:
                    builder.__dict__[name] = previous


@contextmanager
def interpreter_custom_reduce(reduce: Any) -> Iterator[None]:
    """While the block runs, the interpreter reduces with a custom combine through `reduce(ops, inputs)`
    (`ops`: the interpreter's reduction, with `axis`, `keep_dims`, `combine_fn`, `unravel` and `to_tensor`)
    instead of its own element-at-a-time `generic_reduce`."""
    from triton.runtime import interpreter

    cls = interpreter.ReduceOps
    original = cls.__dict__["generic_reduce"]
    with INTERPRETER_LOCK:
        cls.generic_reduce = reduce  # the one class attribute of Triton's that is ever replaced (bench only)
        try:
            yield
        finally:
            cls.generic_reduce = original


def is_interpreted(fn: Any) -> bool:
    """Whether `fn` (a `@triton.jit` function) was built for Triton's interpreter."""
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(fn, InterpretedFunction)


def ptxas_path(arch: int) -> Path:
    """The ptxas Triton itself assembles sm_<arch> with (it ships two: one for sm_8x, a newer one from sm_90)."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        return Path(get_ptxas(arch).path)
    except (ImportError, AttributeError, RuntimeError):
        import triton

        name = "ptxas" if arch < 90 else "ptxas-blackwell"
        return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
