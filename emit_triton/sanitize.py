"""The memory sanitizer: launches under Triton's interpreter that check every access and every write.

On for kernels with `checks=True`, for every launch while `INTENT_SANITIZE=1` is set, inside
`with sanitizing():`, and for one call with `launch(kernel, args, sanitize=True)`. The fuzz campaigns
(`python -m tests.fuzz`) run with it on. Launches on CUDA tensors are not sanitized.

A sanitized launch

1. runs the oracle on copies of the arguments, recording what it does to each writable parameter
   (`oracle.Writes`: the elements it writes, those it reads before writing, and the op that writes);
2. fills every element the oracle writes without reading it first with a sentinel bit pattern (a NaN
   with a payload for floats, `0xA5...` for integers and preds; flipped in its lowest bit where the
   oracle's own result has those bits, so that a correct write never looks unwritten);
3. runs the generated module emitted with the sanitizer's checks (`emit_access.sanitize_access`): before
   each load, store and atomic, every active lane's coordinates must lie inside the buffer (the access
   relation the physical program declared) and its element offset -- the terms its pointer is built
   from -- inside the storage span of the tensor as bound (or of the workspace). A violation fails the
   launch with a `SanitizerError` naming the access and its source location;
4. reports every element that still holds its sentinel: the kernel did not write what it should,
   named with the parameter, the first such index and the source location of the op that writes it.

No part of Triton is patched: the checks are `tl.device_assert`s in the generated module (compiled in
under Triton's debug option, as `checks=True` device checks are).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import torch

from kir.core import Kernel, ParamKind, RefType
from kir.dtypes import DType, fp8_ml_dtype, i4_packed, i4_unpacked
from kir.errors import IntentError

ENV = "INTENT_SANITIZE"
SANITIZER = "sanitizer: "  # how every message of the sanitizer begins (its device checks' and its own)
_forced: ContextVar[bool | None] = ContextVar("intent_sanitize", default=None)


class SanitizerError(IntentError):
    """A sanitized launch accessed memory outside what it declared, or left an output element unwritten."""


def decided(kernel: Kernel, explicit: bool | None = None) -> bool | None:
    """Whether a launch of `kernel` is sanitized, where that is decided without the environment:
    `explicit`, else `with sanitizing(...)`, else True for a kernel with checks; None otherwise."""
    if explicit is not None:
        return explicit
    forced = _forced.get()
    if forced is not None:
        return forced
    return True if kernel.checks else None


def environment_wants() -> bool:
    """`INTENT_SANITIZE=1`. Read on a launch's full path only: a planned launch (`fast_launch`) repeats an
    unsanitized one and consults nothing, so set the variable before the process launches its kernels."""
    return os.environ.get(ENV, "") not in ("", "0")


def wanted(kernel: Kernel, explicit: bool | None = None) -> bool:
    """Whether a launch of `kernel` is sanitized: `decided`, else `INTENT_SANITIZE=1`."""
    choice = decided(kernel, explicit)
    return environment_wants() if choice is None else choice


@contextmanager
def sanitizing(on: bool = True) -> Iterator[None]:
    """Sanitize (or, with `on=False`, do not sanitize) every launch in the block (this thread/task)."""
    token = _forced.set(on)
    try:
        yield
    finally:
        _forced.reset(token)


# ---------------------------------------------------------------------------------------------- sentinels

_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_TORCH_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# NaNs with a payload for floats (f16 0x7E5A, bf16 0x7FA5, f32 0x7FA5A5A5, f64 0x7FF5A5A5A5A5A5A5);
# the same patterns for integers of the width, 0xA5 for 8-bit integers and preds.
_PATTERN = {1: 0xA5, 2: 0x7E5A, 4: 0x7FA5A5A5, 8: 0x7FF5A5A5A5A5A5A5}
_BF16_PATTERN = 0x7FA5


def _width(dtype: DType) -> int:
    return 1 if dtype.is_pred else dtype.bits // 8


def _storage_bits(x: Any, dtype: DType) -> np.ndarray | None:
    """A writable NumPy view of the bit patterns of argument `x` (None where there is none to take); i4: its
    packed bytes, two elements each (`_Nibbles`)."""
    if dtype is DType.i4:
        if isinstance(x, torch.Tensor) and x.device.type == "cpu" and x.element_size() == 1 and x.dim() >= 1:
            return _Nibbles(x.view(torch.uint8).numpy())
        return None
    w = _width(dtype)
    if isinstance(x, torch.Tensor):
        if x.device.type != "cpu" or x.element_size() != w:
            return None
        return x.view(_TORCH_BITS[w]).numpy().view(_BITS[w])
    if isinstance(x, np.ndarray) and x.dtype.itemsize == w and x.flags.writeable:
        return x.view(_BITS[w])
    return None  # e.g. a bf16 parameter given as an f32 array (converted by the launcher)


class _Nibbles:
    """The 4-bit patterns of a packed i4 tensor (kir.dtypes.I4_PACKING) as an array of its elements' shape, read
    from and written back to the bytes it wraps."""

    def __init__(self, packed: np.ndarray) -> None:
        self.packed = packed
        self.shape = (*packed.shape[:-1], 2 * packed.shape[-1])

    def values(self) -> np.ndarray:
        return (i4_unpacked(self.packed).astype(np.int64) & 15).astype(np.uint8)

    def __eq__(self, other: object) -> np.ndarray:  # type: ignore[override]
        return self.values() == other

    __hash__ = None  # type: ignore[assignment]

    def __setitem__(self, where: np.ndarray, value: np.ndarray) -> None:
        nibbles = self.values()
        nibbles[where] = value
        self.packed[...] = i4_packed(nibbles)


def _oracle_bits(values: np.ndarray, dtype: DType) -> np.ndarray:
    """The oracle's results as the bit patterns the device stores (bf16: the high half of its f32)."""
    if dtype is DType.i4:  # the nibbles
        return (np.asarray(values).astype(np.int64) & 15).astype(np.uint8)
    if dtype is DType.bf16:
        return (np.ascontiguousarray(values, np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    if dtype.is_fp8:  # the oracle holds fp8 values in f32 (exactly): the device stores their 8-bit patterns
        return np.asarray(values, np.float32).astype(fp8_ml_dtype(dtype)).view(np.uint8)
    return np.ascontiguousarray(values).view(_BITS[_width(dtype)])


def _sentinel(dtype: DType, expected: np.ndarray) -> np.ndarray:
    if dtype is DType.i4:  # 0xA (-6), 0xB where the oracle writes 0xA
        return np.where(expected == 0xA, np.uint8(0xB), np.uint8(0xA)).astype(np.uint8)
    pattern = _BF16_PATTERN if dtype is DType.bf16 else _PATTERN[_width(dtype)]
    bits = _BITS[_width(dtype)]
    p = bits(pattern)
    return np.where(expected == p, bits(pattern ^ 1), p).astype(bits)


# ---------------------------------------------------------------------------------------------- launching


def launch(kernel: Kernel, args: Mapping[str, Any], run: Any) -> Any:
    """A sanitized launch (see the module docstring); `run(kernel, args)` launches with the sanitizer's
    checks compiled in and returns what `emit_triton.launch` returns."""
    import oracle
    from oracle.memory import at

    from .arguments import storage_dtype, storage_shape

    writes: dict[str, Any] = {}
    copies = {k: (v.clone() if isinstance(v, torch.Tensor) else v.copy() if isinstance(v, np.ndarray) else v)
              for k, v in args.items()}
    want = oracle.run(kernel, copies, checks=False, writes=writes)
    given = dict(args)
    allocated: list[str] = []
    for p in kernel.outputs:  # omitted Out parameters: allocated here, so that they can hold sentinels
        if p.name not in given and p.name in want:
            ref = p.type
            assert isinstance(ref, RefType)
            shape = storage_shape(p.name, ref.dtype, tuple(want[p.name].shape))  # type: ignore[arg-type]
            given[p.name] = torch.empty(shape, dtype=storage_dtype(ref.dtype))  # type: ignore[arg-type]
            allocated.append(p.name)
    planted: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []
    for p in kernel.params:
        if p.kind is ParamKind.SCALAR or p.name not in writes or p.name not in given:
            continue
        ref = p.type
        assert isinstance(ref, RefType)
        dtype = ref.dtype
        assert isinstance(dtype, DType)
        rec = writes[p.name]
        bits = _storage_bits(given[p.name], dtype)
        if bits is None or bits.shape != rec.written.shape:
            continue
        fresh = rec.written & ~rec.read_first
        if not fresh.any():
            continue
        sentinel = _sentinel(dtype, _oracle_bits(want[p.name], dtype))
        bits[fresh] = sentinel[fresh]
        planted.append((p.name, bits, fresh, sentinel))
    run(kernel, given)
    for name, bits, fresh, sentinel in planted:
        left = fresh & (bits == sentinel)
        if left.any():
            first = int(np.flatnonzero(left.reshape(-1))[0])
            index = np.unravel_index(first, left.shape)
            op = writes[name].writer_of(first)
            what = f"{op.NAME}{at(op)}" if op is not None else "the kernel"
            raise SanitizerError(
                f"sanitizer: kernel {kernel.name} left {int(left.sum())} element(s) of {name} unwritten that it "
                f"writes (the oracle does), the first {name}[{', '.join(map(str, index))}], written by {what}")
    if not allocated:
        return None
    out = tuple(given[n] for n in allocated)
    return out[0] if len(out) == 1 else out


__all__ = ["ENV", "SANITIZER", "SanitizerError", "decided", "environment_wants", "launch", "sanitizing", "wanted"]
