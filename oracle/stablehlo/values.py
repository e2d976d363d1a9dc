"""Emitted SSA values, StableHLO element types and exact literals."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from kir.dtypes import DType

_ELEMENT = {
    DType.pred: "i1", DType.i8: "i8", DType.i16: "i16", DType.i32: "i32", DType.i64: "i64",
    DType.u8: "ui8", DType.u16: "ui16", DType.u32: "ui32", DType.u64: "ui64",
    DType.f16: "f16", DType.bf16: "bf16", DType.f32: "f32", DType.f64: "f64",
    DType.f8e4m3: "f8E4M3FN", DType.f8e5m2: "f8E5M2", DType.i4: "i4",
}


def element_type(dtype: DType) -> str:
    return _ELEMENT[dtype]


def tensor_type(dtype: DType, shape: tuple[int, ...]) -> str:
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{element_type(dtype)}>"


@dataclass(frozen=True)
class Val:
    """An SSA tensor in the emitted function.

    `shape` is the full shape; its first `depth` axes are batch axes (the leading axes of the
    enclosing vectorised `parallel` domains), the rest is the KIR value's own (logical) shape.
    """

    name: str
    dtype: DType
    shape: tuple[int, ...]
    depth: int = 0

    @property
    def type(self) -> str:
        return tensor_type(self.dtype, self.shape)

    @property
    def logical(self) -> tuple[int, ...]:
        return self.shape[self.depth:]

    @property
    def batch(self) -> tuple[int, ...]:
        return self.shape[:self.depth]

    @property
    def rank(self) -> int:
        return len(self.shape)


def round_to_bf16(value: float) -> float:
    """Round a float to the nearest bfloat16 (ties to even), the way the oracle stores bf16."""
    with np.errstate(over="ignore"):
        f32 = np.float32(value)
    if not math.isfinite(float(f32)):
        return float(f32)
    bits = int(np.array(f32).view(np.uint32))
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.array(rounded, dtype=np.uint32).view(np.float32))


def _float_bits(value: float, dtype: DType) -> str:
    if dtype == DType.f64:
        return f"0x{struct.unpack('<Q', struct.pack('<d', value))[0]:016X}"
    if dtype == DType.f32:
        return f"0x{int(np.array(value, dtype=np.float32).view(np.uint32)):08X}"
    if dtype == DType.f16:
        return f"0x{int(np.array(value, dtype=np.float16).view(np.uint16)):04X}"
    if dtype.is_fp8:
        from kir.dtypes import fp8_ml_dtype

        return f"0x{int(np.array(value, dtype=np.float32).astype(fp8_ml_dtype(dtype)).view(np.uint8)):02X}"
    bits = int(np.array(round_to_bf16(value), dtype=np.float32).view(np.uint32)) >> 16
    return f"0x{bits:04X}"


def rounded(value: float, dtype: DType) -> float:
    """`value` as the element type holds it."""
    with np.errstate(over="ignore"):  # a literal beyond the type's range becomes +-inf, as in the oracle
        if dtype == DType.bf16:
            return round_to_bf16(value)
        if dtype.is_fp8:
            from kir.dtypes import fp8_rounded

            return float(fp8_rounded(value, dtype))
        return float(np.array(value, dtype=dtype.np))


def literal(value: int | float | bool, dtype: DType) -> str:
    """An exact MLIR literal for one element: decimal where it round-trips, hex bits otherwise."""
    if dtype.is_pred:
        return "true" if bool(value) else "false"
    if dtype.is_int:
        lo, hi = dtype.int_range
        v = int(value)
        if not lo <= v <= hi:
            raise ValueError(f"constant {value!r} does not fit {dtype}")
        return str(v)
    v = rounded(float(value), dtype)
    if math.isfinite(v) and not (v == 0.0 and math.copysign(1.0, v) < 0):
        mantissa, e, exponent = repr(v).partition("e")
        if "." not in mantissa:  # MLIR float literals need the point: 1e-300 -> 1.0e-300
            mantissa += ".0"
        return mantissa + e + exponent
    return _float_bits(v, dtype)
