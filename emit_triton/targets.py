"""Where a generated kernel runs: Triton's interpreter, a CUDA device, or ahead-of-time PTX/cubin.

One source text, two module instances. Triton's `@triton.jit` decides at decoration time whether
it builds an interpreted or a compiled function (from `TRITON_INTERPRET`), so the generated module
file is imported twice under distinct module names: once with interpretation switched on (CPU
tensors), once with it switched off (CUDA tensors and ahead-of-time compiles). The switch is set
only while the module executes and while the interpreter runs, then restored, so users need no
environment variable. A user who sets `TRITON_INTERPRET=1` themselves gets the interpreter for
CUDA tensors too (Triton's own debugging convention).

The module executed is the verified text of the cache entry's `kernel.py` and nothing else.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import linecache
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from kir.errors import IntentError
from physical.ops.access import DEVICE_CHECK

from . import cache as cache_mod
from .abi import EmittedKernel
from .compile import artifact_key, describe_abi, intent_version, invalidate_plans, jsonable, triton_version
from .safety import check_generated

AOT_ARCHES = (80, 90)


class Mode(Enum):
    """How the generated module is loaded: interpreted functions or compiled JIT functions."""

    INTERPRETED = "interpreted"
    COMPILED = "compiled"


@dataclass(frozen=True)
class Target:
    """What a launch runs on: the interpreter (host tensors) or one CUDA device."""

    mode: Mode
    device: Any  # torch.device

    @property
    def name(self) -> str:
        return "interpreter" if self.mode is Mode.INTERPRETED else str(self.device)


def target_for(device: Any) -> Target:
    """CPU tensors run under the interpreter; CUDA tensors on their device (unless the user asked
    for the interpreter, or `triton` was imported in interpreter mode and can only interpret)."""
    if device.type == "cuda" and not _user_wants_interpreter() and library_mode() is Mode.COMPILED:
        return Target(Mode.COMPILED, device)
    return Target(Mode.INTERPRETED, device)


_multiprocessors: dict[int, int] = {}
_simulated: list[int] = []


def multiprocessors(device: Any) -> int:
    """The multiprocessors a launch on `device` spreads its programs over; 0 under the interpreter,
    which runs one program at a time (`physical.launch_expr.LResidentPrograms`)."""
    if _simulated:
        return _simulated[-1]
    if target_for(device).mode is Mode.INTERPRETED:
        return 0
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _multiprocessors:
        _multiprocessors[index] = int(torch.cuda.get_device_properties(index).multi_processor_count)
    return _multiprocessors[index]


@contextmanager
def simulated_multiprocessors(count: int) -> Iterator[None]:
    """Size launches as for a device of `count` multiprocessors (bench/traffic.py counts a GPU's grid)."""
    from . import fast_launch  # cached launches keep the grid they were planned with

    _simulated.append(count)
    fast_launch.clear()
    try:
        yield
    finally:
        _simulated.pop()
        fast_launch.clear()


def _user_wants_interpreter() -> bool:
    from triton import knobs

    return bool(knobs.runtime.interpret)


_MISSING = object()


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


# ---------------------------------------------------------------------------------------------- loading


class _VerifiedSourceLoader(importlib.machinery.SourceFileLoader):
    """Loads a cache entry's kernel.py from the text that was verified, never from a re-read."""

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
        """No bytecode is written next to cache entries."""


_modules: dict[tuple[str, str, Mode], Any] = {}  # (cache root, entry key, mode) -> jit function
_load_lock = threading.RLock()


def entry_meta(emitted: EmittedKernel) -> dict[str, Any]:
    return {"name": emitted.name, "abi": describe_abi(emitted), "intent": intent_version(),
            "triton": triton_version()}


def jit_function(emitted: EmittedKernel, key: str, mode: Mode) -> Any:
    """The `@triton.jit` function of `emitted`, loaded once per (entry key, mode) and process."""
    root = cache_mod.cache_root()
    found = _modules.get((str(root), key, mode))
    if found is not None:
        return found
    with _load_lock:
        found = _modules.get((str(root), key, mode))
        if found is not None:
            return found
        check_generated(emitted.source, emitted.name)  # refuse, never run, text of the wrong shape
        path = cache_mod.DiskCache(root).source_file(key, emitted.source, entry_meta(emitted))
        unique = cache_mod.sha256_text(f"{root}\0{key}")[:16]
        module = _import_generated(path, emitted.source, f"_intent_kernel_{emitted.name}_{unique}_{mode.value}", mode)
        fn = getattr(module, emitted.name, None)
        if fn is None:
            raise IntentError(f"the generated module for kernel {emitted.name} defines no function {emitted.name}")
        _modules[(str(root), key, mode)] = fn
        return fn


def clear_loaded() -> None:
    with _load_lock:
        _modules.clear()
        _artifacts.clear()
        invalidate_plans()


def _import_generated(path: Path, text: str, name: str, mode: Mode) -> Any:
    loader = _VerifiedSourceLoader(name, str(path), text)
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    if spec is None:  # pragma: no cover - only for paths importlib refuses outright
        raise IntentError(f"cannot load the generated module {path}")
    module = importlib.util.module_from_spec(spec)
    # Triton reads the jit function's source through `inspect`, i.e. linecache: serve it the
    # verified text (an entry with no mtime is never re-read from disk).
    linecache.cache[str(path)] = (len(text), None, text.splitlines(True), str(path))
    sys.modules[name] = module
    try:
        with triton_interpret(mode is Mode.INTERPRETED):
            loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


# ---------------------------------------------------------------------------------------------- launching

_interpreted_library: dict[int, tuple[Any, Any]] = {}  # id(jit function) -> (it, its interpreted form)


@contextmanager
def _library_functions_interpreted() -> Iterator[None]:
    """Run Triton's own `@jit` library functions (`tl.sum`, `tl.rand`, ...) under the interpreter.

    They were decorated when `triton` was imported, normally with interpretation off, so they are
    compiled JIT functions that refuse to be called from Python. Had `TRITON_INTERPRET=1` been set
    before that import they would be interpreted functions; while an interpreted kernel runs, calls
    to them go to exactly that interpreted form (built once per function).

    Calling an interpreted function patches `triton.language` for the interpreter and never undoes
    it (harmless in a process that only interprets, fatal to later compiles here), so every such
    nested call patches within a scope that is restored when it returns.
    """
    from triton.runtime.interpreter import InterpretedFunction, _patch_lang
    from triton.runtime.jit import JITFunction

    def interpreted_form(fn: Any) -> Any:
        # Keyed by identity: a JIT function's own hash walks its source and dependencies.
        known = _interpreted_library.get(id(fn))
        if known is None or known[0] is not fn:
            known = _interpreted_library[id(fn)] = (fn, InterpretedFunction(fn.fn))
        return known[1]

    def call_scoped(interpreted: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        scope = _patch_lang(interpreted.fn)
        try:
            return interpreted.rewrite()(*args, **kwargs)
        finally:
            scope.restore()

    def call_jit(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call_scoped(interpreted_form(self), args, kwargs)

    def call_interpreted(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call_scoped(self, args, kwargs)

    originals = (JITFunction.__call__, InterpretedFunction.__call__)
    JITFunction.__call__, InterpretedFunction.__call__ = call_jit, call_interpreted
    try:
        yield
    finally:
        JITFunction.__call__, InterpretedFunction.__call__ = originals


def run(fn: Any, target: Target, grid: int, positional: Sequence[Any], keywords: Mapping[str, Any]) -> None:
    """Launch `fn` once over a 1-D grid of `grid` programs.

    With device checks compiled in (`debug` set), a failed check becomes an `IntentError` with the
    check's own message (the op and its source line) instead of the provider's traceback.
    """
    checked = bool(keywords.get("debug"))
    try:
        if target.mode is Mode.INTERPRETED:
            # The interpreter keeps global state and the switches below are process-wide: one at a time.
            with _load_lock, triton_interpret(True), _library_functions_interpreted(), _interpreter_checks(checked):
                fn[(grid,)](*positional, **keywords)
            return
        import torch

        with torch.cuda.device(target.device):
            fn[(grid,)](*positional, **keywords)
    except Exception as exc:
        failed = device_check_failure(exc) if checked else None
        if failed is None:
            raise
        raise IntentError(failed) from None


_CHECK_TOKEN = re.compile(r"intent_check_[0-9a-f]{16}")


def device_check_failure(exc: BaseException) -> str | None:
    """The message of the device check that `exc` reports, if it reports one."""
    from .emit_access import CHECK_MESSAGES

    seen: BaseException | None = exc
    while seen is not None:
        found = _CHECK_TOKEN.search(str(seen))
        if found is not None and found.group(0) in CHECK_MESSAGES:
            return CHECK_MESSAGES[found.group(0)]
        if "device-side assert" in str(seen):
            return f"{DEVICE_CHECK}a device check of the kernel failed on the device (its message is on the " \
                   f"device's standard output; run with CPU tensors to have it here)"
        seen = seen.__cause__ or seen.__context__
    return None


@contextmanager
def _interpreter_checks(on: bool) -> Iterator[None]:
    """The interpreter honours `tl.device_assert` only under its debug option (fixed per process)."""
    if not on:
        yield
        return
    import dataclasses

    from triton.runtime.interpreter import interpreter_builder

    previous = interpreter_builder.options
    interpreter_builder.options = dataclasses.replace(previous, debug=True, sanitize_overflow=False)
    try:
        yield
    finally:
        interpreter_builder.options = previous


# ---------------------------------------------------------------------------------------------- ahead of time


@dataclass(frozen=True)
class Artifacts:
    """What an ahead-of-time compile produced for one specialisation."""

    ptx: str
    cubin: bytes | None
    specialisation: dict[str, Any]


_artifacts: dict[str, Artifacts] = {}
WORKER_TIMEOUT_S = 600


def compile_ahead_of_time(emitted: EmittedKernel, fn: Any, key: str, arch: int, positional: Sequence[Any],
                          keywords: Mapping[str, Any]) -> Artifacts:
    """Compile `fn` for sm_<arch> with the specialisation a real launch with these values gets.

    Triton's own binder for the target derives argument types, the 16-byte alignment of pointers
    and divisibility by 16 of integers (`tt.divisibility`), and equal-to-1 integers as constants,
    exactly as a launch would; no GPU is needed. Results are cached in memory and in the entry's
    directory on disk, keyed by the specialisation.
    """
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    library = library_mode()
    target = GPUTarget("cuda", arch, 32)
    options_in = dict(keywords, debug=bool(keywords.get("debug", False)))
    if emitted.device_flag:  # compiled for the device, whatever tensors the specialisation came from
        options_in[emitted.device_flag] = True
    with _load_lock, triton_interpret(library is Mode.INTERPRETED):
        backend = make_backend(target)
        binder = create_function_from_signature(fn.signature, fn.params, backend)
        bound, specialisation, options = binder(*positional, **options_in)
        options, signature, constexprs, attrs = fn._pack_args(backend, options_in, bound, specialisation, options)
    spec = {"signature": signature, "constexprs": constexprs, "attrs": attrs,
            "options": {k: v for k, v in sorted(options.__dict__.items()) if k != "extern_libs"}}
    akey = artifact_key(key, f"cuda:sm_{arch}", spec)
    found = _artifacts.get(akey)
    if found is not None:
        return found
    disk = cache_mod.default_cache()
    name = f"sm{arch}-{akey[:32]}"
    found = _read_artifacts(disk, key, name, spec)
    if found is None:
        if library is Mode.COMPILED:
            ptx, cubin = _compile_here(fn, target, signature, constexprs, attrs, options)
        else:
            compile_options = {k: v for k, v in options_in.items() if k not in signature}
            ptx, cubin = _compile_in_worker(emitted, key, arch, signature, constexprs, attrs, compile_options)
        found = Artifacts(ptx, cubin, jsonable(spec))
        disk.write_artifact(key, name, {"ptx": ptx, "cubin": cache_mod.encode_bytes(cubin) if cubin else None,
                                        "arch": arch, "specialisation": found.specialisation})
    _artifacts[akey] = found
    return found


def library_mode() -> Mode:
    """How Triton's own `@jit` library (`tl.sum`, ...) was built when `triton` was first imported.

    With `TRITON_INTERPRET=1` set at that import it consists of interpreter objects for the life
    of the process, and kernels that call it can only be compiled in a fresh process.
    """
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return Mode.INTERPRETED if isinstance(tl.sum, InterpretedFunction) else Mode.COMPILED


def _read_artifacts(disk: cache_mod.DiskCache, key: str, name: str, spec: Mapping[str, Any]) -> Artifacts | None:
    record = disk.read_artifact(key, name)
    if record is None or not isinstance(record.get("ptx"), str):
        return None
    try:
        cubin = cache_mod.decode_bytes(record["cubin"]) if record.get("cubin") else None
    except ValueError:
        return None
    return Artifacts(record["ptx"], cubin, jsonable(spec))


def _compile_here(fn: Any, target: Any, signature: Any, constexprs: Any, attrs: Any,
                  options: Any) -> tuple[str, bytes | None]:
    import triton
    from triton.compiler import ASTSource

    try:
        with _load_lock, triton_interpret(False):
            compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                                      options=options.__dict__)
    except Exception as exc:
        raise IntentError(f"Triton could not compile {fn.__name__} for sm_{target.arch}: {exc}") from exc
    return compiled.asm["ptx"], compiled.asm.get("cubin")


def _compile_in_worker(emitted: EmittedKernel, key: str, arch: int, signature: Mapping[str, str],
                       constexprs: Mapping[Any, Any], attrs: Mapping[Any, Any],
                       options: Mapping[str, Any]) -> tuple[str, bytes | None]:
    import json
    import subprocess

    def by_path(table: Mapping[Any, Any]) -> dict[str, Any]:
        return {json.dumps(list(k)): v for k, v in table.items()}

    path = cache_mod.default_cache().source_file(key, emitted.source, entry_meta(emitted))
    request = {"path": str(path), "sha256": cache_mod.sha256_text(emitted.source), "name": emitted.name,
               "arch": arch, "signature": dict(signature), "constexprs": by_path(constexprs), "attrs": by_path(attrs),
               "options": dict(options)}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    worker = Path(__file__).with_name("aot_worker.py")
    what = f"Triton could not compile {emitted.name} for sm_{arch}"
    try:
        done = subprocess.run([sys.executable, str(worker)], input=json.dumps(request), capture_output=True,
                              text=True, env=env, timeout=WORKER_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise IntentError(f"{what}: the compile worker ran past {WORKER_TIMEOUT_S} s") from exc
    except OSError as exc:
        raise IntentError(f"{what}: the compile worker could not start: {exc}") from exc
    try:
        reply = json.loads(done.stdout)
    except ValueError:
        last = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise IntentError(f"{what}: the compile worker failed: {last[0]}") from None
    if "error" in reply:
        raise IntentError(f"{what}: {reply['error']}")
    return reply["ptx"], cache_mod.decode_bytes(reply["cubin"]) if reply.get("cubin") else None
