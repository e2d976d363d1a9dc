"""Compile one generated kernel ahead of time in a fresh process (run as a script, not imported).

Used when `triton` was imported in the caller with `TRITON_INTERPRET=1`: Triton's own library
functions (`tl.sum`, ...) are then interpreter objects for the life of that process and cannot
be compiled there. This script starts with interpretation off, loads the cache entry's kernel.py
(after checking its sha256), compiles it with the specialisation the caller computed, and prints
one JSON object: `{"ptx": ..., "cubin": base64 or null, "metadata": Triton's kernel metadata}` or
`{"error": ...}`.

It depends on the standard library, `triton` and the Triton adapter (intent/runtime/triton_adapter.py,
loaded by path: it imports the standard library only), so it starts quickly and needs no path setup.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import linecache
import os
import sys
import types
from pathlib import Path
from typing import Any


def _load(path: str, sha256: str, name: str) -> Any:
    with open(path, "rb") as fh:
        data = fh.read()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise RuntimeError(f"{path} does not match its recorded sha256")
    text = data.decode("utf-8")
    module = types.ModuleType(f"_intent_aot_{sha256[:16]}")
    module.__file__ = path
    # Triton reads the jit function's source through linecache: serve the verified text.
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    sys.modules[module.__name__] = module
    exec(compile(text, path, "exec", dont_inherit=True), module.__dict__)  # the verified generated module
    return getattr(module, name)


def _adapter() -> Any:
    """The one module that calls Triton's compiler API (`compile_for`), loaded from its file."""
    path = Path(__file__).resolve().parent.parent / "intent" / "runtime" / "triton_adapter.py"
    spec = importlib.util.spec_from_file_location("_intent_aot_triton_adapter", path)
    if spec is None or spec.loader is None:  # pragma: no cover - only when the file is missing
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _paths(obj: dict[str, Any]) -> dict[tuple[int, ...], Any]:
    return {tuple(json.loads(k)): v for k, v in obj.items()}


def main() -> int:
    os.environ.pop("TRITON_INTERPRET", None)
    request = json.loads(sys.stdin.read())
    try:
        fn = _load(request["path"], request["sha256"], request["name"])
        ptx, cubin, metadata = _adapter().compile_for(fn, request["arch"], request["signature"],
                                                      _paths(request["constexprs"]), _paths(request["attrs"]),
                                                      request["options"])
        reply = {"ptx": ptx, "cubin": base64.b64encode(cubin).decode("ascii") if cubin else None,
                 "metadata": metadata}
    except Exception as exc:  # reported to the caller, which raises it as an IntentError
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(reply))
    return 0


if __name__ == "__main__":
    sys.exit(main())
