"""The oracle's evaluator: lane-batched frames, region evaluation and the per-op registry.

Execution model. A frame evaluates a region for a batch of *lanes* at once: one lane per logical
instance that runs the region. Every tensor value is an array of shape `(B, *value_shape)` where
`B` is the frame's lane count, or 1 when the value is the same for every lane (constants, loads
at lane-independent indices); NumPy broadcasting does the rest. The kernel body runs in a frame of
one lane. `parallel` evaluates its body once for all its instances (a child frame with one lane
per instance); ordered loops run in Python over the ordered index with lane-batched carries;
`if`, `while` and loops whose trip counts differ per lane run their regions on the lanes that take
them (a child frame over a subset of the lanes).

A child frame maps its lanes to the parent's with `sel` (None: the same lanes); a value defined
outside a child frame is narrowed to the child's lanes when the child first reads it.

Effects happen op by op for all lanes of a frame, and within one op lanes take effect in instance
order: stores and scatters to one element keep the last instance's value, and the elements of one
atomic op apply in instance order. Instances are unordered with respect to each other, so running
each op for every instance before the next op (and a branch's instances before the other branch's)
is one of the orders a device may take.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kir.control import Yield
from kir.core import Kernel, Op, Region, TensorType, Value, register
from kir.dims import Dim
from kir.dtypes import DType, ElemType, fp8_rounded, i4_wrapped
from kir.errors import IntentError

from .memory import MemView, at
from .numerics import np_dtype, round_bf16

Evaluated = np.ndarray | MemView
EvalFn = Callable[["Frame", Op], Sequence[Evaluated]]

EVAL: dict[type[Op], EvalFn] = {}
# Ops whose results only move or select existing values: a bf16 result needs no rounding.
MOVES: set[type[Op]] = set()


def evaluates(*classes: type[Op], moves: bool = False) -> Callable[[EvalFn], EvalFn]:
    """Register the oracle meaning of op classes."""

    def deco(fn: EvalFn) -> EvalFn:
        for cls in classes:
            register(EVAL, cls, fn, f"oracle evaluation for {cls.__name__}")
            if moves:
                MOVES.add(cls)
        return fn

    return deco


@dataclass
class Run:
    """What one oracle run knows besides values: the kernel, the bound shape symbols and checks."""

    kernel: Kernel
    symbols: dict[str, int]
    checks: bool
    # Model a consumer that computes with subnormal floats flushed to zero (XLA's CPU runtime, which runs with
    # flush-to-zero and denormals-are-zero set): every f32, bf16 and f64 value an arithmetic op reads is taken as
    # 0 (with its sign) where it is subnormal, and every such value it gives is flushed; a bitcast to a float
    # dtype gives 0 for a subnormal. Values only loaded, stored, selected or moved keep their bits.
    flush_subnormals: bool = False
    # Index arrays found to be arithmetic progressions (or not), by identity: loads and stores at the
    # same lane index reuse the finding.
    progressions: dict[int, tuple[np.ndarray, slice | None]] = field(default_factory=dict)

    def dim(self, d: Dim) -> int:
        return d.evaluate(self.symbols)


class Frame:
    def __init__(self, run: Run, size: int, parent: Frame | None = None, sel: np.ndarray | None = None) -> None:
        self.run = run
        self.size = size
        self.parent = parent
        self.sel = sel
        self.values: dict[int, Evaluated] = {}

    # --- frames
    def scope(self) -> Frame:
        """A fresh scope over the same lanes (one loop iteration, one branch)."""
        return Frame(self.run, self.size, self)

    def lanes(self, sel: np.ndarray) -> Frame:
        """A child over `sel`, indices into this frame's lanes (repeats allowed: nested instances)."""
        return Frame(self.run, int(sel.shape[0]), self, sel)

    # --- values
    def get(self, v: Value) -> np.ndarray:
        x = self._lookup(v)
        if not isinstance(x, np.ndarray):
            raise IntentError(f"oracle: {v!r} is memory where a tensor value is expected")
        return x

    def ref(self, v: Value) -> MemView:
        x = self._lookup(v)
        if not isinstance(x, MemView):
            raise IntentError(f"oracle: {v!r} is a tensor value where memory is expected")
        return x

    def _lookup(self, v: Value) -> Evaluated:
        chain: list[Frame] = []
        f: Frame | None = self
        while f is not None and v.id not in f.values:
            chain.append(f)
            f = f.parent
        if f is None:
            raise IntentError(f"oracle: {v!r} is used but never defined")
        x = f.values[v.id]
        for g in reversed(chain):
            if g.sel is not None:
                x = x.narrow(g.sel) if isinstance(x, MemView) else x if x.shape[0] == 1 else x[g.sel]
            g.values[v.id] = x
        return x

    def set(self, v: Value, x: Evaluated) -> None:
        self.values[v.id] = x

    def full(self, x: np.ndarray) -> np.ndarray:
        """`x` with one entry per lane (a read-only broadcast view when it is shared)."""
        return x if x.shape[0] == self.size else np.broadcast_to(x, (self.size, *x.shape[1:]))

    def dim(self, d: Dim) -> int:
        return self.run.dim(d)


def eval_region(frame: Frame, region: Region, args: Sequence[Evaluated]) -> list[np.ndarray]:
    """Evaluate `region` in `frame` with its arguments bound; returns the yielded values."""
    for a, x in zip(region.args, args):
        frame.set(a, x)
    for op in region.ops:
        eval_op(frame, op)
    end = region.terminator
    return [frame.get(v) for v in end.values] if isinstance(end, Yield) else []


def eval_op(frame: Frame, op: Op) -> None:
    fn = EVAL.get(type(op))
    if fn is None:
        raise IntentError(f"the oracle cannot evaluate {op.NAME}{at(op)}")
    flushing = frame.run.flush_subnormals and type(op) not in MOVES
    try:
        results = fn(_operands_flushed(frame, op) if flushing else frame, op)
    except IntentError:
        raise
    except Exception as exc:  # a kernel the verifier would reject; say where, never a bare traceback
        raise IntentError(f"oracle: {op.NAME}{at(op)} failed: {type(exc).__name__}: {exc}") from exc
    rounds = type(op) not in MOVES
    for v, x in zip(op.results, results):
        if isinstance(v.type, TensorType) and isinstance(x, np.ndarray):
            x = _as_type(x, v.type.dtype, rounds)
            if flushing and v.type.dtype in FLUSHED:
                x = flush_subnormal(x, v.type.dtype)
        frame.set(v, x)


# The dtypes a flushing consumer computes without subnormals (`Run.flush_subnormals`): f16 and fp8 arithmetic
# widens to f32 first, where their subnormals are normal
FLUSHED = (DType.f32, DType.bf16, DType.f64)


def flush_subnormal(x: np.ndarray, dtype: ElemType) -> np.ndarray:
    """`x` (of KIR dtype `dtype`, one of FLUSHED) with its subnormals replaced by 0 of the same sign."""
    tiny = float(np.finfo(np.float64 if dtype is DType.f64 else np.float32).tiny)
    return np.where(np.abs(x) < tiny, x * 0, x).astype(x.dtype)


def _operands_flushed(frame: Frame, op: Op) -> Frame:
    """A scope of `frame` where the FLUSHED float operands of an arithmetic op without regions or memory read as
    flushed (denormals-are-zero); other ops see `frame` itself."""
    if op.regions() or any(not isinstance(v.type, TensorType) for v in op.operands()):
        return frame
    scope: Frame | None = None
    for v in op.operands():
        if v.type.dtype in FLUSHED:
            x = frame.get(v)
            flushed = flush_subnormal(x, v.type.dtype)
            if np.any((flushed == 0) != (x == 0)):  # some operand element is subnormal
                scope = scope or frame.scope()
                scope.set(v, flushed)
    return scope or frame


def _as_type(x: np.ndarray, dtype: ElemType, rounds: bool) -> np.ndarray:
    if dtype is DType.bf16:
        return round_bf16(x) if rounds or x.dtype != np.float32 else x
    if isinstance(dtype, DType) and dtype.is_fp8:
        return fp8_rounded(x, dtype) if rounds or x.dtype != np.float32 else x
    if dtype is DType.i4:  # held in int8, wrapped at 4 bits
        return i4_wrapped(x) if rounds or x.dtype != np.int8 else x
    want = np_dtype(dtype)
    return x if x.dtype == want else x.astype(want)
