"""Executing emitted modules with jaxlib's XLA CPU client.

The route, for jax/jaxlib 0.10 (all public-enough entry points that jax's own export path uses):

1. Parse the text in jax's MLIR context (`jax._src.interpreters.mlir.make_ir_context()`, which has
   the StableHLO dialect registered) and run the MLIR verifier on it.
2. Serialise a portable artifact for the pinned version with
   `jaxlib.mlir.dialects.stablehlo.serialize_portable_artifact(module, TARGET_VERSION)`: VHLO
   bytecode whose header names `StableHLO_v<TARGET_VERSION>`. Serialisation fails if the module
   uses anything that version cannot express.
3. Compile that artifact (not the text) for the CPU backend:
   `jax.extend.backend.get_backend("cpu").compile_and_load(artifact, DeviceList, CompileOptions)`;
   PJRT deserialises and upgrades it itself, so what runs is exactly what was serialised. Excess
   precision is switched off so that f16/bf16 intermediates round after every op, as the oracle's.
4. Place inputs with `jax.device_put` inside `jax.enable_x64(True)` (so 64-bit integers are not
   narrowed), execute, and read the results back as NumPy (bf16 results as float32 values).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from kir.core import Kernel
from kir.dtypes import DType
from kir.errors import IntentError

from .bind import input_arrays
from .checks import raise_first
from .module import Module, build
from .version import TARGET_VERSION, within

INSTALL_HINT = "install the stablehlo extra: pip install -e '.[stablehlo]'"
_CACHE: OrderedDict[bytes, Any] = OrderedDict()
_CACHE_SIZE = 64


def _jax() -> Any:
    try:
        import jax
        import jax.extend  # noqa: F401
        from jax._src.interpreters import mlir as jax_mlir  # noqa: F401
        from jaxlib.mlir import ir  # noqa: F401
        from jaxlib.mlir.dialects import stablehlo  # noqa: F401
    except ImportError as exc:
        raise IntentError(f"the StableHLO runtime needs jax and jaxlib ({exc}); {INSTALL_HINT}") from None
    if not hasattr(jax, "enable_x64") or not hasattr(jax.extend.backend.get_backend("cpu"), "compile_and_load"):
        raise IntentError(f"the StableHLO runtime needs jax >= 0.10 (found {jax.__version__}); {INSTALL_HINT}")
    return jax


def supported_range() -> tuple[str, str]:
    """The (minimum, current) StableHLO versions the installed jaxlib reads and writes."""
    _jax()
    from jaxlib.mlir.dialects import stablehlo

    return str(stablehlo.get_minimum_version()), str(stablehlo.get_current_version())


def check_pin() -> None:
    lo, hi = supported_range()
    if not within(TARGET_VERSION, lo, hi):
        raise IntentError(f"the pinned StableHLO version {TARGET_VERSION} is outside the installed jaxlib's "
                          f"supported range [{lo}, {hi}]; update oracle/stablehlo/version.py")


def serialize(text: str) -> bytes:
    """Parse, verify and serialise module text as a portable artifact for the pinned version."""
    _jax()
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    check_pin()
    with jax_mlir.make_ir_context():
        try:
            module = ir.Module.parse(text)
        except Exception as exc:  # MLIRError carries the parser's diagnostics
            raise IntentError(f"StableHLO exit produced a module that does not parse: {exc}") from None
        if not module.operation.verify():
            raise IntentError("StableHLO exit produced a module that does not verify")
        try:
            return bytes(stablehlo.serialize_portable_artifact(module, TARGET_VERSION))
        except Exception as exc:
            raise IntentError(f"cannot serialise the module for StableHLO {TARGET_VERSION}: {exc}") from None


def artifact(kernel: Kernel, args: Mapping[str, Any], checks: bool | None = None) -> bytes:
    """The portable artifact (VHLO bytecode for `TARGET_VERSION`) of the specialisation `args` select."""
    return serialize(build(kernel, args, checks).text)


def _executable(art: bytes) -> Any:
    key = hashlib.sha256(art).digest()
    exe = _CACHE.get(key)
    if exe is not None:
        _CACHE.move_to_end(key)
        return exe
    jax = _jax()
    from jax._src.lib import _jax as jaxlib_ext

    backend = jax.extend.backend.get_backend("cpu")
    options = jaxlib_ext.CompileOptions()
    options.env_option_overrides = [("xla_allow_excess_precision", False)]
    devices = jaxlib_ext.DeviceList((backend.local_devices()[0],))
    exe = backend.compile_and_load(art, devices, options)
    _CACHE[key] = exe
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return exe


def _device_value(array: np.ndarray, dtype: DType) -> np.ndarray:
    if dtype == DType.bf16:
        import ml_dtypes

        return np.asarray(array, dtype=np.float32).astype(ml_dtypes.bfloat16)
    if dtype.is_fp8:
        from kir.dtypes import fp8_ml_dtype

        return np.asarray(array, dtype=np.float32).astype(fp8_ml_dtype(dtype))
    if dtype is DType.i4:
        import ml_dtypes

        return np.asarray(array).astype(ml_dtypes.int4)
    return np.ascontiguousarray(array)


def execute(module: Module, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    jax = _jax()
    exe = _executable(serialize(module.text))
    device = exe.local_devices()[0]
    with jax.enable_x64(True):
        inputs = [jax.device_put(_device_value(arrays[p.name], p.type.dtype), device)  # type: ignore[arg-type]
                  for p in module.inputs]
        results = exe.execute(inputs)
        if module.checks:
            raise_first(list(module.checks), np.asarray(results[-1]))
        out: dict[str, np.ndarray] = {}
        for p, r in zip(module.outputs, results):
            value = np.asarray(r)
            if p.type.dtype is DType.i4:  # ml_dtypes' int4 -> one value per int8, as the oracle gives them
                value = value.astype(np.int8)
            out[p.name] = value.astype(np.float32) if p.type.dtype.in_f32 else value
    return out


def run(kernel: Kernel, args: Mapping[str, Any], checks: bool | None = None) -> dict[str, np.ndarray]:
    """Execute the kernel's StableHLO module with XLA on the CPU: `{output name: ndarray}`.

    `checks` (default: the kernel's flag or `INTENT_CHECKS=1`, as for the oracle) turns out-of-range
    data-dependent accesses into errors instead of fill/drop."""
    _jax()
    module = build(kernel, args, checks)
    arrays = input_arrays(kernel, args, module.env)
    return execute(module, arrays)
