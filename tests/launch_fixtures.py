"""Hand-written emitted kernels (Triton source + ABI) and matching KIR signatures for launcher tests.

The launcher only reads a kernel's parameters, symbols and refinements; the emitted kernel says
what to run. `install(monkeypatch, {kernel: emitted})` makes `emit_triton.compile.emitted_for`
return these fixtures instead of lowering and emitting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from emit_triton.abi import AbiArg, ArgKind, ConstexprArg, EmittedKernel
from kir import Builder, DSym, DType, Param, RefType, Role, Yield, build_kernel, scalar
from kir.core import Kernel
from kir.dims import DConst, Pred
from kir.solver import ShapeSolver

BLOCK = 128


# ---------------------------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Sym:
    name: str

    def evaluate(self, env: Mapping[str, int]) -> int:
        return int(env[self.name])

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Const:
    value: int

    def evaluate(self, env: Mapping[str, int]) -> int:
        return self.value

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class CDiv:
    """ceil(num / den) where num is a product of symbols."""

    factors: tuple[str, ...]
    den: int

    def evaluate(self, env: Mapping[str, int]) -> int:
        n = 1
        for f in self.factors:
            n *= int(env[f])
        return -(-n // self.den)

    def __str__(self) -> str:
        return f"cdiv({' * '.join(self.factors)}, {self.den})"


# ---------------------------------------------------------------------------------------------- KIR signatures


def signature_kernel(name: str, params: list[tuple[str, RefType | DType]], symbols: tuple[str, ...],
                     requires: tuple[Pred, ...] = ()) -> Kernel:
    """A kernel with these parameters and an empty body (the launcher reads only its signature)."""
    b = Builder(ShapeSolver(symbols, requires))
    types = tuple(t if isinstance(t, RefType) else scalar(t) for _, t in params)
    values = b.begin_region(types, tuple(n for n, _ in params))
    b.make(Yield, values=())
    return build_kernel(name, tuple(Param(n, v) for (n, _), v in zip(params, values)), symbols, b.end_region(),
                        requires=requires)


f32, i64 = DType.f32, DType.i64
M, N, S, E = DSym("M"), DSym("N"), DSym("S"), DSym("E")


def ref(dtype: DType, shape: tuple, role: Role = Role.IN) -> RefType:
    return RefType(dtype, tuple(DSym(d) if isinstance(d, str) else (DConst(d) if isinstance(d, int) else d)
                                for d in shape), role)


# ---------------------------------------------------------------------------------------------- emitted kernels


def _tensor(name: str, rank: int) -> tuple[AbiArg, ...]:
    return (AbiArg(ArgKind.TENSOR, name, param=name),) + tuple(
        AbiArg(ArgKind.STRIDE, f"{name}_stride_{a}", param=name, axis=a) for a in range(rank))


VADD_SOURCE = '''\
import triton
import triton.language as tl


@triton.jit
def vadd(x, x_stride_0, y, y_stride_0, out, out_stride_0, N, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    a = tl.load(x + offs * x_stride_0, mask=mask)
    b = tl.load(y + offs * y_stride_0, mask=mask)
    tl.store(out + offs * out_stride_0, a + b, mask=mask)
'''


def vadd_emitted() -> EmittedKernel:
    """out = x + y over N, one BLOCK of elements per program."""
    return EmittedKernel(
        name="vadd", source=VADD_SOURCE,
        args=_tensor("x", 1) + _tensor("y", 1) + _tensor("out", 1) + (AbiArg(ArgKind.SYMBOL, "N", expr=Sym("N")),),
        constexprs=(ConstexprArg("BLOCK", Const(BLOCK)),), grid=CDiv(("N",), BLOCK))


ADD2D_SOURCE = '''\
import triton
import triton.language as tl


@triton.jit
def add2d(x, x_stride_0, x_stride_1, y, y_stride_0, y_stride_1, out, out_stride_0, out_stride_1, M, N,
          BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    i = offs // N
    j = offs % N
    a = tl.load(x + i * x_stride_0 + j * x_stride_1, mask=mask)
    b = tl.load(y + i * y_stride_0 + j * y_stride_1, mask=mask)
    tl.store(out + i * out_stride_0 + j * out_stride_1, a + b, mask=mask)
'''


def add2d_kernel() -> Kernel:
    return signature_kernel("add2d", [("x", ref(f32, ("M", "N"))), ("y", ref(f32, ("M", "N"))),
                                      ("out", ref(f32, ("M", "N"), Role.OUT))], ("M", "N"))


def add2d_emitted() -> EmittedKernel:
    return EmittedKernel(
        name="add2d", source=ADD2D_SOURCE,
        args=_tensor("x", 2) + _tensor("y", 2) + _tensor("out", 2)
        + (AbiArg(ArgKind.SYMBOL, "M", expr=Sym("M")), AbiArg(ArgKind.SYMBOL, "N", expr=Sym("N"))),
        constexprs=(ConstexprArg("BLOCK", Const(BLOCK)),), grid=CDiv(("M", "N"), BLOCK))


AXPY_SOURCE = '''\
import triton
import triton.language as tl


@triton.jit
def axpy(a, x, x_stride_0, y, y_stride_0, out, out_stride_0, N, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    xv = tl.load(x + offs * x_stride_0, mask=mask)
    yv = tl.load(y + offs * y_stride_0, mask=mask)
    tl.store(out + offs * out_stride_0, a * xv + yv, mask=mask)
'''


def axpy_kernel() -> Kernel:
    return signature_kernel("axpy", [("a", f32), ("x", ref(f32, ("N",))), ("y", ref(f32, ("N",))),
                                     ("out", ref(f32, ("N",), Role.OUT))], ("N",))


def axpy_emitted() -> EmittedKernel:
    return EmittedKernel(
        name="axpy", source=AXPY_SOURCE,
        args=(AbiArg(ArgKind.SCALAR, "a", param="a", dtype=f32),) + _tensor("x", 1) + _tensor("y", 1)
        + _tensor("out", 1) + (AbiArg(ArgKind.SYMBOL, "N", expr=Sym("N")),),
        constexprs=(ConstexprArg("BLOCK", Const(BLOCK)),), grid=CDiv(("N",), BLOCK))


SUM_DIFF_SOURCE = '''\
import triton
import triton.language as tl


@triton.jit
def sum_diff(x, x_stride_0, y, y_stride_0, s, s_stride_0, d, d_stride_0, N, BLOCK: tl.constexpr,
             INDEX_64: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    a = tl.load(x + offs * x_stride_0, mask=mask)
    b = tl.load(y + offs * y_stride_0, mask=mask)
    tl.store(s + offs * s_stride_0, a + b, mask=mask)
    tl.store(d + offs * d_stride_0, a - b, mask=mask)
'''


def sum_diff_kernel() -> Kernel:
    return signature_kernel("sum_diff", [("x", ref(f32, ("N",))), ("y", ref(f32, ("N",))),
                                         ("s", ref(f32, ("N",), Role.OUT)), ("d", ref(f32, ("N",), Role.OUT))],
                            ("N",))


def sum_diff_emitted() -> EmittedKernel:
    return EmittedKernel(
        name="sum_diff", source=SUM_DIFF_SOURCE,
        args=_tensor("x", 1) + _tensor("y", 1) + _tensor("s", 1) + _tensor("d", 1)
        + (AbiArg(ArgKind.SYMBOL, "N", expr=Sym("N")),),
        constexprs=(ConstexprArg("BLOCK", Const(BLOCK)),), grid=CDiv(("N",), BLOCK))


SEGMENT_SUM_SOURCE = '''\
import triton
import triton.language as tl


@triton.jit
def segment_sum(values, values_stride_0, offsets, offsets_stride_0, out, out_stride_0, S,
                BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    s = tl.program_id(0)
    begin = tl.load(offsets + s * offsets_stride_0)
    end = tl.load(offsets + (s + 1) * offsets_stride_0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(begin, end, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        acc += tl.load(values + idx * values_stride_0, mask=idx < end, other=0.0)
    tl.store(out + s * out_stride_0, tl.sum(acc, axis=0))
'''


def segment_sum_emitted() -> EmittedKernel:
    """Matches `tests.samples.segment_sum()`: one program per segment; offsets has S + 1 entries."""
    return EmittedKernel(
        name="segment_sum", source=SEGMENT_SUM_SOURCE,
        args=_tensor("values", 1) + _tensor("offsets", 1) + _tensor("out", 1)
        + (AbiArg(ArgKind.SYMBOL, "S", expr=Sym("S")),),
        constexprs=(ConstexprArg("BLOCK", Const(32)),), grid=Sym("S"))


WORKSPACE_SOURCE = '''\
import triton
import triton.language as tl


@triton.jit
def from_workspace(out, out_stride_0, ws, scratch, N, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(scratch + pid, pid)
    tl.store(out + pid * out_stride_0, tl.load(ws + pid) + tl.load(scratch + pid))
'''


def workspace_kernel() -> Kernel:
    return signature_kernel("from_workspace", [("out", ref(i64, ("N",), Role.OUT))], ("N",))


def workspace_emitted() -> EmittedKernel:
    """out[n] = ws[n] + n where `ws` is a workspace filled with 7 and `scratch` an uninitialised one."""
    return EmittedKernel(
        name="from_workspace", source=WORKSPACE_SOURCE,
        args=_tensor("out", 1) + (AbiArg(ArgKind.WORKSPACE, "ws", dtype=i64, expr=Sym("N"), fill=7),
                                  AbiArg(ArgKind.WORKSPACE, "scratch", dtype=i64, expr=Sym("N")),
                                  AbiArg(ArgKind.SYMBOL, "N", expr=Sym("N"))),
        constexprs=(), grid=Sym("N"))


def install(monkeypatch, table: Mapping[Kernel, EmittedKernel]) -> None:
    """Make the launcher emit `table[kernel]` (by structural equality) for these kernels."""
    import emit_triton.compile as compile_mod

    def emitted_for(kernel: Kernel) -> EmittedKernel:
        try:
            return table[kernel]
        except KeyError:
            raise AssertionError(f"no fixture for kernel {kernel.name}") from None

    monkeypatch.setattr(compile_mod, "emitted_for", emitted_for)


TOTAL_SOURCE = '''\
import triton
import triton.language as tl


@triton.jit
def total(x, x_stride_0, out, out_stride_0, N, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        if INDEX_64:
            idx = idx.to(tl.int64)
        acc += tl.load(x + idx * x_stride_0, mask=idx < N, other=0.0)
    tl.store(out, tl.sum(acc, axis=0))
'''


def total_kernel() -> Kernel:
    return signature_kernel("total", [("x", ref(f32, ("N",))), ("out", ref(f32, (1,), Role.OUT))], ("N",))


def total_emitted() -> EmittedKernel:
    """out[0] = sum(x), one program looping over N."""
    return EmittedKernel(
        name="total", source=TOTAL_SOURCE,
        args=_tensor("x", 1) + _tensor("out", 1) + (AbiArg(ArgKind.SYMBOL, "N", expr=Sym("N")),),
        constexprs=(ConstexprArg("BLOCK", Const(64)),), grid=Const(1))


ACCUMULATE_SOURCE = '''\
import triton
import triton.language as tl


@triton.jit
def accumulate(x, x_stride_0, acc, acc_stride_0, N, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs * x_stride_0, mask=offs < N, other=0.0)
    tl.atomic_add(acc, tl.sum(v, axis=0))
'''


def accumulate_emitted() -> EmittedKernel:
    """acc[0] += sum(x): one atomic per program, cdiv(N, BLOCK) programs (none when N == 0)."""
    return EmittedKernel(
        name="accumulate", source=ACCUMULATE_SOURCE,
        args=_tensor("x", 1) + _tensor("acc", 1) + (AbiArg(ArgKind.SYMBOL, "N", expr=Sym("N")),),
        constexprs=(ConstexprArg("BLOCK", Const(BLOCK)),), grid=CDiv(("N",), BLOCK))


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """A fresh, private cache directory for one test."""
    root = tmp_path / "intent-cache"
    monkeypatch.setenv("INTENT_CACHE_DIR", str(root))
    return root


SMALL_HELD = 512  # the held tile of the region-scan tests: a long segment's pieces hold a tile and scan a rest


@pytest.fixture
def small_tile(isolated_cache, monkeypatch):
    """A private cache and a held-tile budget of SMALL_HELD elements, with no emitted kernel kept from before."""
    from emit_triton.compile import clear_emitted
    from physical.passes.looped import BUDGET_VARIABLE

    monkeypatch.setenv(BUDGET_VARIABLE, str(SMALL_HELD))
    clear_emitted()
    yield
    clear_emitted()


FIRST_SOURCE = '''\
import triton
import triton.language as tl


@triton.jit
def first(count, x, x_stride_0, out, out_stride_0, N, INDEX_64: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(out + pid * out_stride_0, tl.load(x + pid * x_stride_0))
'''


def first_kernel() -> Kernel:
    return signature_kernel("first", [("count", i64), ("x", ref(f32, ("N",))), ("out", ref(f32, ("N",), Role.INOUT))],
                            ("N",))


def first_emitted() -> EmittedKernel:
    """out[:count] = x[:count]: the grid reads the runtime scalar `count`."""
    return EmittedKernel(
        name="first", source=FIRST_SOURCE,
        args=(AbiArg(ArgKind.SCALAR, "count", param="count", dtype=i64),) + _tensor("x", 1) + _tensor("out", 1)
        + (AbiArg(ArgKind.SYMBOL, "N", expr=Sym("N")),),
        constexprs=(), grid=Sym("count"))


def vadd_via_f32_emitted() -> EmittedKernel:
    """vadd computing in f32 and rounding once to the output's dtype.

    Triton's interpreter holds bf16 values as raw 16-bit integers, so bf16 arithmetic is only
    meaningful there after a cast to f32.
    """
    source = VADD_SOURCE.replace("tl.store(out + offs * out_stride_0, a + b, mask=mask)",
                                 "s = a.to(tl.float32) + b.to(tl.float32)\n"
                                 "    tl.store(out + offs * out_stride_0, s.to(out.dtype.element_ty), mask=mask)")
    assert source != VADD_SOURCE
    return dataclasses.replace(vadd_emitted(), source=source)
