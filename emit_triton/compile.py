"""From a KIR kernel to its emitted Triton kernel, and the keys that name what was compiled.

`emitted_for` is the one place the launcher asks for emission (tests replace it to launch
hand-written kernels). Keys:

* the *entry key* names a generated module: canonical KIR text, the sha256 of the emitted source,
  the ABI, the Intent and Triton versions;
* an *artifact key* names one compiled specialisation of an entry: the entry key, the target and
  the specialisation Triton compiles for (argument types, alignment/divisibility attributes,
  constexpr values, compile options).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import lru_cache
from types import ModuleType
from typing import Any

from kir.core import Kernel
from kir.errors import IntentError

from .abi import AbiArg, EmittedKernel
from .cache import canonical_json, sha256_text

_INTENT_FALLBACK_VERSION = "0.1.0"


@lru_cache(maxsize=1)
def intent_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return _INTENT_FALLBACK_VERSION
    try:
        return version("intent")
    except PackageNotFoundError:
        return _INTENT_FALLBACK_VERSION


@lru_cache(maxsize=1)
def triton_version() -> str:
    import triton

    return str(triton.__version__)


def kernel_text(kernel: Kernel) -> str:
    """The canonical text of a kernel: the `.kir` printer, or the structural repr without it."""
    try:
        return str(kernel)
    except ImportError:  # the `.kir` printer (kir.text) is not importable
        return repr(kernel)


# ---------------------------------------------------------------------------------------------- emission

def emitted_for(kernel: Kernel, sanitize: bool = False) -> EmittedKernel:
    """Lower and emit `kernel` once per process (kept by the kernel's `bound.BoundKernel`, which equal
    kernels share); `sanitize`: the module with the memory sanitizer's checks (`emit_triton.sanitize`)."""
    from . import bound

    owner = bound.bound(kernel)
    emitted = owner.emitted.get(sanitize)
    if emitted is not None:
        return emitted
    with owner.lock:
        emitted = owner.emitted.get(sanitize)
        if emitted is None:
            emitted = _lower_and_emit(kernel, sanitize)[0] if sanitize else _from_disk_or_emit(kernel)
            owner.emitted[sanitize] = emitted
        return emitted


def clear_emitted() -> None:
    """Forget every kernel's emission, and with it its plans, functions and artifacts."""
    from . import bound

    bound.forget()


def _from_disk_or_emit(kernel: Kernel) -> EmittedKernel:
    """The emitted kernel an earlier process recorded on disk, else lower and emit it (and record it)."""
    from . import emitted_cache

    text = kernel_text(kernel)
    found = emitted_cache.load(kernel, text, intent_version())
    if found is not None:
        return found
    emitted, genuine = _lower_and_emit(kernel)
    if genuine:  # what stand-in stages (tests) emit is never recorded under the kernel's name
        emitted_cache.store(kernel, text, intent_version(), emitted)
    return emitted


def _stage_attribute(package: ModuleType, name: str) -> Any:
    """`package.name`, or None when it is absent or its lazy import fails (reported as "not available")."""
    try:
        return getattr(package, name, None)
    except ImportError:
        return None


def _lower_and_emit(kernel: Kernel, sanitize: bool = False) -> tuple[EmittedKernel, bool]:
    """The emitted kernel (`sanitize`: with the memory sanitizer's checks, never recorded on disk), and
    whether it came from the real `physical.lower` and `emit_triton.emit`."""
    try:
        import emit_triton
        import physical
    except ImportError as exc:  # pragma: no cover - a broken installation
        raise IntentError(f"cannot emit Triton for kernel {kernel.name}: {exc}") from exc
    lower = _stage_attribute(physical, "lower")
    emit = _stage_attribute(emit_triton, "emit")
    if emit is None:
        try:
            emit = importlib.import_module("emit_triton.emit")
        except ImportError:
            emit = None
    if isinstance(emit, ModuleType):  # the submodule `emit_triton.emit` rather than its function
        emit = getattr(emit, "emit", None)
    if lower is None or emit is None:
        missing = "physical.lower" if lower is None else "emit_triton.emit"
        raise IntentError(f"cannot emit Triton for kernel {kernel.name}: {missing} is not available")
    genuine = getattr(lower, "__module__", None) == "physical.lowering" and \
        getattr(emit, "__module__", None) == "emit_triton.emit"
    return (emit(lower(kernel), sanitize=True) if sanitize else emit(lower(kernel))), genuine


# ---------------------------------------------------------------------------------------------- keys


def describe_abi(emitted: EmittedKernel) -> dict[str, Any]:
    """A JSON description of the ABI (for meta.json and for the entry key)."""

    def arg(a: AbiArg) -> dict[str, Any]:
        return {"kind": a.kind.value, "name": a.name, "param": a.param, "axis": a.axis,
                "dtype": None if a.dtype is None else str(a.dtype),
                "expr": None if a.expr is None else str(a.expr), "fill": a.fill}

    return {"name": emitted.name, "args": [arg(a) for a in emitted.args],
            "constexprs": [{"name": c.name, "expr": str(c.expr)} for c in emitted.constexprs],
            "grid": str(emitted.grid), "num_warps": str(emitted.num_warps),
            "num_stages": str(emitted.num_stages), "index64_flag": emitted.index64_flag,
            "device_flag": emitted.device_flag}


def entry_key(kernel: Kernel, emitted: EmittedKernel) -> str:
    return sha256_text(canonical_json({
        "kir": kernel_text(kernel), "source_sha256": sha256_text(emitted.source), "abi": describe_abi(emitted),
        "intent": intent_version(), "triton": triton_version()}))


def artifact_key(entry: str, target: str, specialisation: Mapping[str, Any]) -> str:
    return sha256_text(canonical_json({"entry": entry, "target": target,
                                       "specialisation": jsonable(specialisation)}))


def jsonable(obj: Any) -> Any:
    """A JSON-ready image of a specialisation (tuple keys and odd values become strings)."""
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return repr(obj)
