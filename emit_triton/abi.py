"""What the emitter hands the launcher: the source text and the generated kernel's ABI.

The launcher never reads KIR structure to launch: it binds shape symbols from the arguments,
then evaluates every expression here on that binding. Expressions are any object with
`evaluate(env: Mapping[str, int]) -> int` and a readable `__str__` (kir dims, physical launch
expressions).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from kir.dtypes import DType


class LaunchExpr(Protocol):
    def evaluate(self, env: Mapping[str, int]) -> int: ...


def scalar_argument(dtype: DType, value: int | float | bool) -> int | float | bool:
    """A checked scalar as the kernel receives it: Triton types every Python float as f32, so an f64
    scalar travels as its 64-bit pattern (an int) and the kernel bitcasts it back."""
    if dtype is DType.f64:
        return struct.unpack("<q", struct.pack("<d", float(value)))[0]
    return value


class ArgKind(Enum):
    TENSOR = "tensor"        # data pointer of a tensor parameter
    STRIDE = "stride"        # element stride of one axis of a tensor parameter
    SCALAR = "scalar"        # a runtime scalar parameter
    SYMBOL = "symbol"        # the value of a shape expression (a symbol or a launch expression)
    WORKSPACE = "workspace"  # a hidden invocation workspace the launcher allocates


@dataclass(frozen=True)
class AbiArg:
    kind: ArgKind
    name: str                      # the name in the generated signature
    param: str | None = None       # the KIR parameter (TENSOR, STRIDE, SCALAR)
    axis: int | None = None        # STRIDE: which axis
    dtype: DType | None = None     # SCALAR and WORKSPACE element type
    expr: LaunchExpr | None = None  # SYMBOL: value; WORKSPACE: element count
    fill: int | float | None = None  # WORKSPACE: initial value (None: uninitialised)
    # WORKSPACE: self-resetting: it holds `fill` when allocated and every launch leaves it so, so the
    # launcher allocates it once (per plan, stream and thread) and never fills it before a launch.
    resets: bool = False


@dataclass(frozen=True)
class ConstexprArg:
    """A `tl.constexpr` parameter whose value the launcher computes from the symbol binding."""

    name: str
    expr: LaunchExpr


@dataclass(frozen=True)
class EmittedKernel:
    name: str                                 # the @triton.jit function's name in `source`
    source: str                               # a whole Python module (imports + the jit function)
    args: tuple[AbiArg, ...]                  # runtime arguments in signature order
    constexprs: tuple[ConstexprArg, ...]      # constexpr arguments, after `args`
    grid: LaunchExpr                          # number of programs (1-D program space)
    num_warps: LaunchExpr | int = 4
    num_stages: LaunchExpr | int = 2
    # Offsets are computed in 64 bits unless the launcher proves every offset fits in 31 bits,
    # in which case it passes INDEX_64=False; the source reads the flag as a constexpr.
    index64_flag: str = "INDEX_64"
    # Where exact numerics differ by target (the device's float `%` is inexact, the interpreter has no
    # libdevice), the source reads this constexpr: True when compiled for a GPU, False under the interpreter.
    device_flag: str | None = None
    notes: tuple[str, ...] = field(default=())  # performance notes carried to `explain`
    # ("bytes" | "flops" | "exact", launch expression): what one launch moves and computes (the profiler)
    counts: tuple[tuple[str, LaunchExpr], ...] = field(default=())
