"""Emitted kernels on disk: a new process launches a kernel it has emitted before without lowering it.

`<cache root>/emitted/<kernel key>.json` holds one `EmittedKernel` (source, ABI, launch expressions) as
JSON, in a hash-checked record like every other artifact (nothing is pickled). The kernel key names the
canonical KIR text, the Intent version, the environment that changes lowering (`INTENT_LOOP_BUDGET`) and
a fingerprint of the compiler's own source files (name, size and modification time of every module of
`kir`, `physical` and `emit_triton`), so an edited compiler never reads what an older one emitted.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from enum import Enum
from pathlib import Path
from typing import Any

from kir import dims as kir_dims
from kir.core import Kernel
from kir.dtypes import DType
from physical import launch_expr

from . import abi
from . import cache as cache_mod

ENTRY = "emitted"
_PACKAGES = ("kir", "physical", "emit_triton")
LOOP_BUDGET_VARIABLE = "INTENT_LOOP_BUDGET"


def _classes(*modules: Any) -> dict[str, type]:
    return {name: obj for m in modules for name, obj in vars(m).items()
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == m.__name__}


# The only classes a record may name (decoding builds nothing else).
DATACLASSES = _classes(abi, launch_expr, kir_dims)
ENUMS: dict[str, type[Enum]] = {"DType": DType, "ArgKind": abi.ArgKind}

_fingerprint: str | None = None
_fingerprint_lock = threading.Lock()


def compiler_fingerprint() -> str:
    """sha256 of (path, size, mtime) of every compiler module: changes whenever the compiler is edited."""
    global _fingerprint
    with _fingerprint_lock:
        if _fingerprint is None:
            root = Path(__file__).resolve().parent.parent
            seen: list[str] = []
            for package in _PACKAGES:
                for folder, subdirs, files in os.walk(root / package):
                    subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
                    for name in sorted(files):
                        if name.endswith(".py"):
                            st = os.stat(os.path.join(folder, name))
                            seen.append(f"{os.path.relpath(os.path.join(folder, name), root)}:{st.st_size}:"
                                        f"{st.st_mtime_ns}")
            _fingerprint = cache_mod.sha256_text("\n".join(seen))
        return _fingerprint


def kernel_key(kernel_text: str, intent_version: str) -> str:
    return cache_mod.sha256_text(cache_mod.canonical_json({
        "kir": kernel_text, "intent": intent_version, "compiler": compiler_fingerprint(),
        "loop_budget": os.environ.get(LOOP_BUDGET_VARIABLE, "")}))


# ---------------------------------------------------------------------------------------------- JSON


def encode(obj: Any) -> Any:
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, Enum):
        return {"@enum": type(obj).__name__, "value": obj.value}
    if isinstance(obj, tuple):
        return [encode(v) for v in obj]
    if dataclasses.is_dataclass(obj) and DATACLASSES.get(type(obj).__name__) is type(obj):
        return {"@": type(obj).__name__,
                **{f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}}
    raise TypeError(f"cannot record a {type(obj).__name__} in an emitted kernel")


def decode(data: Any) -> Any:
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return tuple(decode(v) for v in data)
    if isinstance(data, dict) and "@enum" in data:
        return ENUMS[data["@enum"]](data["value"])
    if isinstance(data, dict) and "@" in data:
        cls = DATACLASSES[data["@"]]
        return cls(**{k: decode(v) for k, v in data.items() if k != "@"})
    raise ValueError(f"not an emitted-kernel record: {data!r:.80}")


# ---------------------------------------------------------------------------------------------- disk


def load(kernel: Kernel, text: str, intent_version: str) -> abi.EmittedKernel | None:
    """The emitted kernel recorded for `kernel`, or None (absent, or a record this version cannot read)."""
    key = kernel_key(text, intent_version)
    payload = cache_mod.default_cache().read_artifact(ENTRY, key)
    if payload is None or payload.get("kir") != text:
        return None
    try:
        emitted = decode(payload["emitted"])
    except (KeyError, TypeError, ValueError):
        return None
    return emitted if isinstance(emitted, abi.EmittedKernel) else None


def store(kernel: Kernel, text: str, intent_version: str, emitted: abi.EmittedKernel) -> None:
    """Record `emitted` for `kernel`; a cache that cannot be written only costs the next process a lowering."""
    key = kernel_key(text, intent_version)
    try:
        cache_mod.default_cache().write_artifact(ENTRY, key, {"kir": text, "emitted": encode(emitted)})
    except (OSError, TypeError):
        pass
