"""The closed set of element types, and dtype variables for generic kernels."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # NumPy is imported where it is used: `import intent` stays light
    import numpy as np


class SpelledEnum(Enum):
    """An enum whose members print as their values: the spelling the text format, the printer and messages use."""

    def __str__(self) -> str:
        return self.value


class DType(SpelledEnum):
    pred = "pred"
    i4 = "i4"  # signed 4-bit, two per byte in memory (see `I4_PACKING`)
    i8 = "i8"
    i16 = "i16"
    i32 = "i32"
    i64 = "i64"
    u8 = "u8"
    u16 = "u16"
    u32 = "u32"
    u64 = "u64"
    f16 = "f16"
    bf16 = "bf16"
    f32 = "f32"
    f64 = "f64"
    f8e4m3 = "f8e4m3"  # torch.float8_e4m3fn: 4 exponent bits, 3 mantissa bits, no infinities, max 448
    f8e5m2 = "f8e5m2"  # torch.float8_e5m2: IEEE-like with infinities, max 57344

    def __repr__(self) -> str:
        return f"DType.{self.value}"

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.f16, DType.bf16, DType.f32, DType.f64, DType.f8e4m3, DType.f8e5m2)

    @property
    def is_fp8(self) -> bool:
        return self in (DType.f8e4m3, DType.f8e5m2)

    @property
    def in_f32(self) -> bool:
        """Held in f32 registers and arrays (values exactly representable in the dtype): bf16 and fp8."""
        return self in (DType.bf16, DType.f8e4m3, DType.f8e5m2)

    @property
    def is_int(self) -> bool:
        """Integer types, not counting `pred`."""
        return self.value[0] in "iu"

    @property
    def is_signed(self) -> bool:
        return self.value[0] == "i" or self.is_float

    @property
    def is_pred(self) -> bool:
        return self is DType.pred

    @property
    def np(self) -> np.dtype:
        """The NumPy storage dtype (bf16 and fp8 are stored as f32 rounded to the dtype by the oracle)."""
        import numpy

        return numpy.dtype(_NP[self])

    @property
    def torch(self):  # -> torch.dtype; torch is imported lazily to keep kir light
        import torch

        return getattr(torch, _TORCH[self])

    @property
    def int_range(self) -> tuple[int, int]:
        if not self.is_int:
            raise ValueError(f"{self} is not an integer type")
        if self.is_signed:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return 0, (1 << self.bits) - 1

    @staticmethod
    def parse(text: str) -> DType:
        try:
            return DType(text)
        except ValueError:
            raise ValueError(f"unknown dtype '{text}' (expected one of {', '.join(d.value for d in DType)})") \
                from None

    @staticmethod
    def from_torch(dt) -> DType | None:
        name = str(dt).removeprefix("torch.")
        return _FROM_TORCH.get(name)

    @staticmethod
    def from_numpy(dt) -> DType | None:
        import numpy

        return _FROM_NP.get(numpy.dtype(dt).name)


_BITS = {DType.pred: 1, DType.i4: 4, DType.i8: 8, DType.i16: 16, DType.i32: 32, DType.i64: 64, DType.u8: 8,
         DType.u16: 16, DType.u32: 32, DType.u64: 64, DType.f16: 16, DType.bf16: 16, DType.f32: 32, DType.f64: 64,
         DType.f8e4m3: 8, DType.f8e5m2: 8}
_NP = {DType.pred: "bool", DType.i4: "int8", DType.i8: "int8", DType.i16: "int16", DType.i32: "int32",
       DType.i64: "int64", DType.u8: "uint8", DType.u16: "uint16", DType.u32: "uint32", DType.u64: "uint64",
       DType.f16: "float16", DType.bf16: "float32", DType.f32: "float32", DType.f64: "float64",
       DType.f8e4m3: "float32", DType.f8e5m2: "float32"}
_TORCH = {DType.pred: "bool", DType.i8: "int8", DType.i16: "int16", DType.i32: "int32", DType.i64: "int64",
          DType.u8: "uint8", DType.u16: "uint16", DType.u32: "uint32", DType.u64: "uint64",
          DType.f16: "float16", DType.bf16: "bfloat16", DType.f32: "float32", DType.f64: "float64",
          DType.f8e4m3: "float8_e4m3fn", DType.f8e5m2: "float8_e5m2"}
_FROM_TORCH = {v: k for k, v in _TORCH.items()}
_TORCH[DType.i4] = "int8"  # the packed bytes; an int8 (or uint8) tensor is i8 (u8) unless a parameter says i4
_FROM_NP = {v: k for k, v in _NP.items() if not k.in_f32 and k is not DType.i4}

I4_PACKING = """An i4[..., N] parameter is an int8 or uint8 tensor of shape [..., N // 2] (N even): element 2j of
the last axis is the low nibble of byte j, element 2j + 1 its high nibble, each a two's-complement value in
[-8, 7]. The other axes and every stride are the tensor's own (in bytes)."""


def i4_unpacked(packed: np.ndarray) -> np.ndarray:
    """The int8 values of an i4 tensor from its packed bytes (`I4_PACKING`); the last axis doubles."""
    import numpy as np

    b = np.asarray(packed).view(np.uint8) if np.asarray(packed).dtype.itemsize == 1 else np.asarray(packed)
    b = b.astype(np.uint8)
    low = ((b & 0x0F).astype(np.int8) ^ 8) - 8
    high = ((b >> 4).astype(np.int8) ^ 8) - 8
    out = np.stack([low, high], axis=-1).astype(np.int8)
    return out.reshape(*b.shape[:-1], b.shape[-1] * 2) if b.ndim else out


def i4_packed(values: np.ndarray) -> np.ndarray:
    """Pack int values in [-8, 7] (last axis even) into uint8 bytes (`I4_PACKING`)."""
    import numpy as np

    v = np.asarray(values).astype(np.int64) & 0x0F
    pairs = v.reshape(*v.shape[:-1], v.shape[-1] // 2, 2)
    return (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)


def i4_wrapped(x: np.ndarray) -> np.ndarray:
    """Integers wrapped to i4's range (two's complement at 4 bits), as int8."""
    import numpy as np

    return ((np.asarray(x).astype(np.int64) + 8) % 16 - 8).astype(np.int8)


@dataclass(frozen=True)
class DTypeVar:
    """A dtype variable of a generic kernel: `T in {f16, bf16, f32}`."""

    name: str
    choices: tuple[DType, ...]

    def __str__(self) -> str:
        return self.name


ElemType = DType | DTypeVar


def bf16_rounded_bits(x: object) -> np.ndarray:
    """The f32 bit patterns (uint32) of `x` rounded to the nearest bf16, ties to even; every NaN becomes
    0x7FC00000. KIR's one rounding rule for bf16: the oracle, the emitter's constants and the launcher's
    conversion of f32 arrays all use it."""
    import numpy as np

    x32 = np.asarray(x, dtype=np.float32)
    bits = x32.view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    return np.where(np.isnan(x32), np.uint32(0x7FC00000), rounded).astype(np.uint32)


# ---------------------------------------------------------------------------------------------- fp8

# (largest finite value, exponent bias, mantissa bits, smallest normal exponent) of each fp8 format
FP8 = {DType.f8e4m3: (448.0, 7, 3, -6), DType.f8e5m2: (57344.0, 15, 2, -14)}


def fp8_ml_dtype(dtype: DType) -> np.dtype:
    """The `ml_dtypes` NumPy dtype of an fp8 format (the oracle's reference for its rounding)."""
    import ml_dtypes
    import numpy as np

    return np.dtype(ml_dtypes.float8_e4m3fn if dtype is DType.f8e4m3 else ml_dtypes.float8_e5m2)


def fp8_rounded(x: object, dtype: DType) -> np.ndarray:
    """`x` rounded to the nearest `dtype` value (ties to even), as float32: KIR's one fp8 rounding. It does not
    saturate: beyond the largest finite value (past the halfway point) f8e4m3 gives NaN (it has no infinities)
    and f8e5m2 gives +-inf; NaN stays NaN. f64 rounds through f32 (innocuous: 24 >= 2 * 4 + 2)."""
    import numpy as np

    x32 = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return x32.astype(fp8_ml_dtype(dtype)).astype(np.float32)
