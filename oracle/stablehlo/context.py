"""The emission context: KIR values to emitted SSA values, memory as values, and vectorisation state.

Vectorisation: inside a `parallel` every KIR value gains leading batch axes, the parallel domain
(nested domains append). A value that does not depend on some trailing batch axes keeps fewer of
them (its `depth` is a prefix of the context's batch axes) and is broadcast when it meets a deeper
value. Memory (tensor parameters and local buffers) is a value too: each ref has its current
contents, which loads read and stores replace, functionally.

Divergent control (`if`, `while`/`for` whose condition differs between instances) is vectorised
with an active-lane mask: both sides run, stores commit only on active lanes, carried values keep
their old value on inactive lanes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kir.affine import linear_terms
from kir.core import Kernel, Op, Value
from kir.dims import Dim, DSym
from kir.dtypes import DType
from kir.errors import DiagnosticError, IntentError, Loc, NotExpressible

from .ssa import SSA
from .values import Val


def batch_index(axis: int) -> DSym:
    """The affine form of the index along batch axis `axis` (batch axes numbered in the context)."""
    return DSym(f"_b{axis}")


def constant_value(form: Dim | None) -> int | None:
    """The value of a form without batch indices (None when it has some, or no form)."""
    lin = linear_terms(form) if form is not None else None
    return lin[0] if lin is not None and not lin[1] else None


def single_axis(form: Dim) -> tuple[int, int] | None:
    """(axis, const) when `form` is exactly `batch index + const` (`kir.affine.linear_terms`)."""
    lin = linear_terms(form)
    if lin is None or len(lin[1]) != 1:
        return None
    ((name, coeff),) = lin[1].items()
    return (int(name[2:]), lin[0]) if coeff == 1 and name.startswith("_b") else None


@dataclass
class RefState:
    """A tensor parameter or local buffer: its current contents (shape = its batch axes + its shape)."""

    val: Val
    name: str


def not_expressible(op: Op | None, reason: str, kernel: Kernel | None = None) -> NotExpressible:
    """A located 'not expressible' error that names the op and shows its source line."""
    what = f"{op.NAME}" if op is not None else "kernel"
    loc: Loc | None = op.loc if op is not None else (kernel.loc if kernel is not None else None)
    message = f"{what} is not expressible at the StableHLO exit: {reason}"
    err = NotExpressible(DiagnosticError(message, loc).render())
    err.loc = loc  # type: ignore[attr-defined]
    err.op_name = what  # type: ignore[attr-defined]
    return err


@dataclass
class Ctx:
    kernel: Kernel
    env: Mapping[str, int]
    ssa: SSA
    used: frozenset[int]
    values: dict[int, Val] = field(default_factory=dict)
    affine: dict[int, Dim] = field(default_factory=dict)  # integer values' forms (`kir.affine`)
    refs: dict[int, RefState] = field(default_factory=dict)
    batch: tuple[int, ...] = ()
    mask: Val | None = None
    current: Op | None = None
    lazy: dict[int, Callable[[], Val]] = field(default_factory=dict)
    sites: dict[tuple[int, str], int] = field(default_factory=dict)  # (op, check) -> error-state row
    site_ops: set[int] = field(default_factory=set)
    site_messages: dict[int, Any] = field(default_factory=dict)
    _materialised: list[int] = field(default_factory=list)

    # ------------------------------------------------------------------------------------- values
    def dim(self, d: Dim) -> int:
        return int(d.evaluate(self.env))

    def dims(self, ds: tuple[Dim, ...]) -> tuple[int, ...]:
        return tuple(self.dim(d) for d in ds)

    def get(self, v: Value) -> Val:
        got = self.values.get(v.id)
        if got is not None:
            return got
        make = self.lazy.get(v.id)
        if make is None:
            raise IntentError(f"StableHLO exit: value {v!r} used before it was emitted")
        got = self.values[v.id] = make()
        self._materialised.append(v.id)
        return got

    def set_lazy(self, v: Value, make: Callable[[], Val]) -> None:
        """Define `v` by a thunk emitted at its first use (parallel indices often serve only as coordinates)."""
        self.values.pop(v.id, None)
        self.lazy[v.id] = make

    def set(self, v: Value, val: Val) -> None:
        self.values[v.id] = val

    def is_used(self, v: Value) -> bool:
        return v.id in self.used

    def ref(self, v: Value) -> RefState:
        try:
            return self.refs[v.id]
        except KeyError:
            raise IntentError(f"StableHLO exit: memory {v!r} is not a parameter or buffer in scope") from None

    def refuse(self, reason: str, op: Op | None = None) -> NotExpressible:
        return not_expressible(op or self.current, reason, self.kernel)

    # ------------------------------------------------------------------------------------- shapes
    @property
    def depth(self) -> int:
        return len(self.batch)

    def lift(self, x: Val, depth: int) -> Val:
        """Broadcast `x` to carry the first `depth` batch axes."""
        if x.depth >= depth:
            return x
        shape = self.batch[:depth] + x.logical
        dims = list(range(x.depth)) + [depth + i for i in range(len(x.logical))]
        return self.ssa.broadcast_in_dim(x, shape, dims, depth)

    def lift_all(self, *xs: Val) -> list[Val]:
        depth = max(x.depth for x in xs)
        return [self.lift(x, depth) for x in xs]

    def expand(self, x: Val, logical: tuple[int, ...], dims: list[int]) -> Val:
        """Broadcast the logical part of `x` into `logical` (its axes going to `dims`)."""
        shape = x.batch + tuple(logical)
        bdims = list(range(x.depth)) + [x.depth + d for d in dims]
        return self.ssa.broadcast_in_dim(x, shape, bdims, x.depth)

    def splat(self, value: int | float | bool, dtype: DType, shape: tuple[int, ...] = (), depth: int = 0) -> Val:
        return self.ssa.constant(value, dtype, shape, depth)

    def splat_like(self, value: int | float | bool, like: Val, dtype: DType | None = None) -> Val:
        return self.ssa.constant(value, dtype or like.dtype, like.shape, like.depth)

    def to_i64(self, x: Val) -> Val:
        return self.ssa.convert(x, DType.i64)

    # ------------------------------------------------------------------------------------- lanes
    def and_(self, a: Val | None, b: Val | None) -> Val | None:
        if a is None:
            return b
        if b is None:
            return a
        a, b = self.lift_all(a, b)
        return self.ssa.binary("and", a, b, "active")

    def not_(self, a: Val) -> Val:
        return self.ssa.unary("not", a)

    def any_lane(self, pred: Val) -> Val:
        """OR over every axis: whether any lane is active (a scalar pred)."""
        if pred.rank == 0:
            return Val(pred.name, pred.dtype, (), 0)
        init = self.splat(False, DType.pred)
        (out,) = self.ssa.reduce([pred], [init], list(range(pred.rank)),
                                 lambda a: [self.ssa.binary("or", a[0], a[1])], 0, "any")
        return out

    # ------------------------------------------------------------------------------------- scopes
    @contextmanager
    def nested(self) -> Iterator[None]:
        """A StableHLO region: lazy values first emitted inside it are not visible after it."""
        mark = len(self._materialised)
        try:
            yield
        finally:
            for vid in self._materialised[mark:]:
                self.values.pop(vid, None)
            del self._materialised[mark:]

    @contextmanager
    def batched(self, extents: tuple[int, ...]) -> Iterator[None]:
        saved = self.batch
        self.batch = self.batch + tuple(extents)
        try:
            yield
        finally:
            self.batch = saved

    @contextmanager
    def masked(self, mask: Val | None) -> Iterator[None]:
        saved = self.mask
        self.mask = mask
        try:
            yield
        finally:
            self.mask = saved

    @contextmanager
    def elementwise(self, shape: tuple[int, ...]) -> Iterator[None]:
        """Emit a scalar region (a combine or map) vectorised over whole tensors of `shape`."""
        saved = self.batch, self.mask, self.refs
        self.batch, self.mask, self.refs = tuple(shape), None, {}
        try:
            yield
        finally:
            self.batch, self.mask, self.refs = saved
