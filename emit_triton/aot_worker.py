"""Compile one generated kernel ahead of time in a fresh process (run as a script, not imported).

Used when `triton` was imported in the caller with `TRITON_INTERPRET=1`: Triton's own library
functions (`tl.sum`, ...) are then interpreter objects for the life of that process and cannot
be compiled there. This script starts with interpretation off, loads the cache entry's kernel.py
(after checking its sha256), compiles it with the specialisation the caller computed, and prints
one JSON object: `{"ptx": ..., "cubin": base64 or null, "metadata": Triton's kernel metadata}` or
`{"error": ...}`.

It depends on the standard library and `triton` only, so it starts quickly and needs no path setup.
"""

from __future__ import annotations

import base64
import hashlib
import json
import linecache
import os
import sys
import types
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


def _paths(obj: dict[str, Any]) -> dict[tuple[int, ...], Any]:
    return {tuple(json.loads(k)): v for k, v in obj.items()}


def main() -> int:
    os.environ.pop("TRITON_INTERPRET", None)
    request = json.loads(sys.stdin.read())
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        fn = _load(request["path"], request["sha256"], request["name"])
        src = ASTSource(fn, request["signature"], _paths(request["constexprs"]), _paths(request["attrs"]))
        compiled = triton.compile(src, target=GPUTarget("cuda", request["arch"], 32), options=request["options"])
        cubin = compiled.asm.get("cubin")
        metadata = json.loads(json.dumps(compiled.metadata._asdict(),
                                         default=lambda v: v.__dict__ if hasattr(v, "__dict__") else repr(v)))
        reply = {"ptx": compiled.asm["ptx"], "cubin": base64.b64encode(cubin).decode("ascii") if cubin else None,
                 "metadata": metadata}
    except Exception as exc:  # reported to the caller, which raises it as an IntentError
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(reply))
    return 0


if __name__ == "__main__":
    sys.exit(main())
