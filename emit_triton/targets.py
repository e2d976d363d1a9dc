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

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intent.runtime import checks
from intent.runtime import profiling as profile_mod
from intent.runtime import triton_adapter as adapter
from intent.runtime.triton_adapter import Mode, library_mode, triton_interpret  # noqa: F401  (re-exported)
from kir.errors import IntentError

from . import cache as cache_mod
from .abi import EmittedKernel
from .bound import BoundKernel
from .compile import artifact_key, describe_abi, intent_version, jsonable, triton_version
from .safety import check_generated

AOT_ARCHES = (80, 90)


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
    return adapter.user_wants_interpreter()


# ---------------------------------------------------------------------------------------------- loading


_load_lock = adapter.INTERPRETER_LOCK


def entry_meta(emitted: EmittedKernel) -> dict[str, Any]:
    return {"name": emitted.name, "abi": describe_abi(emitted), "intent": intent_version(),
            "triton": triton_version()}


def jit_function(emitted: EmittedKernel, key: str, mode: Mode, owner: BoundKernel) -> Any:
    """The `@triton.jit` function of `emitted` (one of `owner`'s modules), loaded once per cache root,
    entry key and mode, and kept by `owner`."""
    root = cache_mod.cache_root()
    modules = owner.functions
    found = modules.get((str(root), key, mode))
    if found is not None:
        return found
    with _load_lock:
        found = modules.get((str(root), key, mode))
        if found is not None:
            return found
        check_generated(emitted.source, emitted.name)  # refuse, never run, text of the wrong shape
        path = cache_mod.DiskCache(root).source_file(key, emitted.source, entry_meta(emitted))
        unique = cache_mod.sha256_text(f"{root}\0{key}")[:16]
        module = adapter.import_source(path, emitted.source, f"_intent_kernel_{emitted.name}_{unique}_{mode.value}",
                                       mode)
        fn = getattr(module, emitted.name, None)
        if fn is None:
            raise IntentError(f"the generated module for kernel {emitted.name} defines no function {emitted.name}")
        modules[(str(root), key, mode)] = fn
        return fn


def clear_loaded() -> None:
    """Forget every loaded module and artifact (and the cached plans that hold loaded functions)."""
    from . import bound

    with _load_lock:
        for owner in bound.every():
            owner.forget_loaded()


# ---------------------------------------------------------------------------------------------- launching

def run(fn: Any, target: Target, grid: int, positional: Sequence[Any], keywords: Mapping[str, Any],
        info: Any = None) -> None:
    """Launch `fn` once over a 1-D grid of `grid` programs (`info`: what a profile records of it).

    With device checks compiled in (`debug` set), a failed check becomes an `IntentError` with the
    check's own message (the op and its source line) instead of the provider's traceback.
    """
    checked = bool(keywords.get("debug"))
    try:
        if target.mode is Mode.INTERPRETED:
            adapter.run_interpreted(fn, grid, positional, keywords)
            return
        import torch

        with torch.cuda.device(target.device):
            fn[(grid,)](*positional, **keywords)
    except Exception as exc:
        failed = device_check_failure(exc) if checked else None
        if failed is None:
            raise
        raise IntentError(failed) from None


def _profiled(original: Any) -> Any:
    """`run` while a profile records (`intent.runtime.profiling.instrument`)."""

    def run(fn: Any, target: Target, grid: int, positional: Sequence[Any], keywords: Mapping[str, Any],
            info: Any = None) -> None:
        path = "interpreter" if target.mode is Mode.INTERPRETED else "jit"
        profile_mod.record(info, grid, target.device, path,
                           lambda: original(fn, target, grid, positional, keywords, info))

    return run


profile_mod.instrument(sys.modules[__name__], "run", _profiled)


def device_check_failure(exc: BaseException) -> str | None:
    """The message of the device check that `exc` reports, if it reports one."""
    from .emit_access import CHECK_MESSAGES

    return checks.device_check_failure(exc, CHECK_MESSAGES)


# ---------------------------------------------------------------------------------------------- ahead of time


@dataclass(frozen=True)
class Artifacts:
    """What an ahead-of-time compile produced for one specialisation (`raw`: Triton's own
    signature, constexprs and attrs, which a launcher of the cubin is built from)."""

    ptx: str
    cubin: bytes | None
    specialisation: dict[str, Any]
    metadata: dict[str, Any] | None = None  # Triton's kernel metadata (shared memory, warps, name, ...)
    raw: tuple[Any, ...] = ()


WORKER_TIMEOUT_S = 600


def compile_ahead_of_time(emitted: EmittedKernel, fn: Any, key: str, arch: int, positional: Sequence[Any],
                          keywords: Mapping[str, Any], *, owner: BoundKernel, portable: bool = False) -> Artifacts:
    """Compile `fn` for sm_<arch> with the specialisation a real launch with these values gets.

    Triton's own binder for the target derives argument types, the 16-byte alignment of pointers
    and divisibility by 16 of integers (`tt.divisibility`), and equal-to-1 integers as constants,
    exactly as a launch would; no GPU is needed. Results are kept by `owner` (the kernel's
    `bound.BoundKernel`) and in the entry's directory on disk, keyed by the specialisation.

    `portable`: drop the divisibility assumptions about integer arguments (pointer alignment stays),
    so that the cubin serves every size with the same constexprs (`kirc build`).
    """
    if emitted.device_flag:  # compiled for the device, whatever tensors the specialisation came from
        keywords = {**keywords, emitted.device_flag: True}
    options, signature, constexprs, attrs = adapter.specialisation(fn, arch, positional, keywords)
    if portable:
        names = list(signature)
        attrs = {path: (found if signature[names[path[0]]].startswith("*") else [])
                 for path, found in attrs.items()}
    spec = {"signature": signature, "constexprs": constexprs, "attrs": attrs,
            "options": {k: v for k, v in sorted(options.__dict__.items()) if k != "extern_libs"}}
    akey = artifact_key(key, f"cuda:sm_{arch}", spec)
    found = owner.artifacts.get(akey)
    if found is not None:
        return found
    disk = cache_mod.default_cache()
    name = f"sm{arch}-{akey[:32]}"
    raw = (signature, constexprs, attrs)
    found = _read_artifacts(disk, key, name, spec, raw)
    if found is None:
        what = f"Triton could not compile {emitted.name} for sm_{arch}"
        if library_mode() is Mode.COMPILED:
            try:
                ptx, cubin, metadata = adapter.compile_for(fn, arch, signature, constexprs, attrs, options.__dict__)
            except Exception as exc:
                raise IntentError(f"{what}: {exc}") from exc
        else:
            options_in = dict(keywords, debug=bool(keywords.get("debug", False)))
            compile_options = {k: v for k, v in options_in.items() if k not in signature}
            ptx, cubin, metadata = _compile_in_worker(emitted, key, arch, signature, constexprs, attrs,
                                                      compile_options)
        found = Artifacts(ptx, cubin, jsonable(spec), metadata, raw)
        disk.write_artifact(key, name, {"ptx": ptx, "cubin": cache_mod.encode_bytes(cubin) if cubin else None,
                                        "arch": arch, "specialisation": found.specialisation, "metadata": metadata})
    owner.artifacts[akey] = found
    return found


def _read_artifacts(disk: cache_mod.DiskCache, key: str, name: str, spec: Mapping[str, Any],
                    raw: tuple[Any, ...]) -> Artifacts | None:
    record = disk.read_artifact(key, name)
    if record is None or not isinstance(record.get("ptx"), str) or not isinstance(record.get("metadata"), dict):
        return None
    try:
        cubin = cache_mod.decode_bytes(record["cubin"]) if record.get("cubin") else None
    except ValueError:
        return None
    return Artifacts(record["ptx"], cubin, jsonable(spec), record["metadata"], raw)


def _compile_in_worker(emitted: EmittedKernel, key: str, arch: int, signature: Mapping[str, str],
                       constexprs: Mapping[Any, Any], attrs: Mapping[Any, Any],
                       options: Mapping[str, Any]) -> tuple[str, bytes | None, dict[str, Any] | None]:
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
    cubin = cache_mod.decode_bytes(reply["cubin"]) if reply.get("cubin") else None
    return reply["ptx"], cubin, reply.get("metadata")
