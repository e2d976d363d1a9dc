"""Random kernels for differential testing: executable on concrete inputs, with deterministic results.

`cases()` is a hypothesis strategy of `Case`s (kernel, concrete shapes, input specs, seed). Unlike
`tests/kirgen.py` (which covers every corner of the *syntax*), every kernel drawn here has one
meaning on its inputs that the oracle, the launcher and the StableHLO exit must agree on:

* no uninitialised reads, no two writes to one element except through integer atomics (whose final
  memory does not depend on order), no float atomics, scatters only through unique indices;
* integer division only by non-zero constants (a zero divisor is undefined in KIR);
* discontinuous operations (comparisons, floor/ceil/round, float->int casts, bitcasts of floats,
  argmax/argmin, compare-based combines) only see *exact* values: values that every correct
  implementation computes bit for bit (loads, constants, correctly rounded `+ - *`, min/max,
  selects, casts). Transcendentals, divisions, square roots, float sums/products of reductions,
  scans and contractions are *inexact* (see `tests/diffexact.py`): comparing or flooring them would
  turn an allowed ulp of difference into a different result.

Kernels are built from blocks (`tests/diffblocks.py`): parallel rows, 2-D points, segments (region
fold/scan), elements (gathers, atomics, scatters), whole-tensor code (layout, reductions, scans,
contractions, histograms) and ordered top-level loops. Shapes are drawn from boundary sizes: 1,
primes, 2^k +- 1 and sizes just over a tile.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from kir import (
    INDEX_DTYPE,
    Binary,
    BinaryFn,
    Bitcast,
    Broadcast,
    Builder,
    Cast,
    CmpFn,
    Compare,
    Constant,
    DType,
    Load,
    Parallel,
    Param,
    RefType,
    Region,
    RegionFold,
    Role,
    Select,
    Slice,
    TensorType,
    Unary,
    UnaryFn,
    Value,
    Yield,
    build_kernel,
    scalar,
)
from kir.core import Op, new_value
from kir.dims import DBin, DConst, Dim, DSym, PCmp, Pred, solve_for
from kir.solver import ShapeSolver
from tests.diffexact import TRANSCENDENTAL, _is_float, _written_value, result_inexact, writes_inexact
from tests.diffinputs import Case, InputSpec

Draw = Callable[[st.SearchStrategy[Any]], Any]

SYMBOLS = ("M", "N", "K", "S", "E", "B")
# Boundary sizes per symbol: 1, primes, 2^k +- 1, just over a tile. M (rows) stays small because the
# interpreter runs program instances one by one.
SHAPE_CHOICES: dict[str, tuple[int, ...]] = {
    "M": (1, 2, 3, 5, 4, 7),
    "N": (1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 33, 64, 65, 127, 129),
    "K": (1, 2, 3, 7, 15, 16, 17, 31, 33),
    "S": (1, 2, 3, 5, 7, 11),
    "E": (0, 1, 2, 5, 13, 17, 33, 65),
    "B": (1, 2, 3, 5, 8, 9, 17),
}
FLOATS = (DType.f32, DType.f16, DType.bf16, DType.f64)
# i4 (two values a byte in memory, kir.dtypes.I4_PACKING) is a parameter's dtype only where the last extent is even
INTS = (DType.i32, DType.i64, DType.i8, DType.u8, DType.i16, DType.u16, DType.u32, DType.u64, DType.i4)

STEPWISE = {UnaryFn.floor, UnaryFn.ceil, UnaryFn.round, UnaryFn.isnan, UnaryFn.isinf}
FLOAT_UNARY = tuple(sorted(TRANSCENDENTAL | STEPWISE | {UnaryFn.neg, UnaryFn.abs}, key=lambda f: f.value))
FLOAT_BINARY = (BinaryFn.add, BinaryFn.sub, BinaryFn.mul, BinaryFn.maximum, BinaryFn.minimum, BinaryFn.div,
                BinaryFn.pow, BinaryFn.floordiv, BinaryFn.mod)
INT_BINARY = (BinaryFn.add, BinaryFn.sub, BinaryFn.mul, BinaryFn.maximum, BinaryFn.minimum, BinaryFn.and_,
              BinaryFn.or_, BinaryFn.xor, BinaryFn.shl, BinaryFn.shr, BinaryFn.floordiv, BinaryFn.mod, BinaryFn.pow)
PRED_BINARY = (BinaryFn.and_, BinaryFn.or_, BinaryFn.xor, BinaryFn.maximum, BinaryFn.minimum)
BITCAST_PARTNERS = {8: (DType.i8, DType.u8), 16: (DType.i16, DType.u16, DType.f16, DType.bf16),
                    32: (DType.i32, DType.u32, DType.f32), 64: (DType.i64, DType.u64, DType.f64)}
FLOAT_LITERALS = (0.0, 1.0, -1.0, 0.5, 2.0, -0.0, 3.25, 1e-3, 100.0, float("inf"), float("-inf"), float("nan"))


# Every draw of the generator is `draw(_ints(lo, hi))`: one integer choice in hypothesis' choice
# sequence. `RandomDraw` makes the same draws uniformly and records them, so a case found by plain
# random generation can be handed to hypothesis' shrinker as its choice sequence.
_BOUNDS: dict[int, tuple[int, int]] = {}


@functools.cache
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    strategy = st.integers(lo, hi)
    _BOUNDS[id(strategy)] = (lo, hi)
    return strategy


class RandomDraw:
    """A `draw` for `build_case` that picks uniformly with `rng` and records each choice."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.choices: list[int] = []

    def __call__(self, strategy: st.SearchStrategy[Any]) -> int:
        lo, hi = _BOUNDS[id(strategy)]
        value = self.rng.randint(lo, hi)
        self.choices.append(value)
        return value


@functools.cache
def _solver(symbols: tuple[str, ...], requires: tuple[Pred, ...]) -> ShapeSolver:
    # Shared between draws: its proof cache makes the typing obligations of later kernels cheap.
    return ShapeSolver(symbols, requires)


# ---------------------------------------------------------------------------------------------- the generator


@dataclass
class Gen:
    """Drawing and building: the builder, the parameters made so far, the value pool of the scope."""

    draw: Draw
    b: Builder
    env: dict[str, int]
    params: list[Param] = field(default_factory=list)
    specs: dict[str, InputSpec] = field(default_factory=dict)
    pool: list[Value] = field(default_factory=list)
    inexact: set[int] = field(default_factory=set)
    inexact_refs: set[int] = field(default_factory=set)
    counters: dict[str, int] = field(default_factory=dict)
    features: set[str] = field(default_factory=set)
    depth: int = 0

    # --- drawing (every choice shrinks toward the first option, every flip toward False)
    def int(self, lo: int, hi: int) -> int:
        return self.draw(_ints(lo, hi))

    def choose(self, options: Any) -> Any:
        options = tuple(options)
        return options[self.int(0, len(options) - 1)]

    def weighted(self, options: dict[str, int]) -> str:
        """A key of `options`, drawn with the given integer weights (shrinks toward the first key)."""
        roll = self.int(0, sum(options.values()) - 1)
        for key, weight in options.items():
            if roll < weight:
                return key
            roll -= weight
        raise AssertionError("unreachable")

    def flip(self, p: float = 0.5) -> bool:
        return self.int(0, 99) >= 100 - round(100 * p)

    def float_dtype(self) -> DType:
        return self.choose(FLOATS)

    def int_dtype(self) -> DType:
        return self.choose(INTS)

    def dtype(self) -> DType:
        """Any element dtype: floats half the time, integers most of the rest, pred rarely."""
        roll = self.int(0, 19)
        if roll < 10:
            return self.choose(FLOATS)
        return self.choose(INTS) if roll < 19 else DType.pred

    # --- parameters
    def param(self, prefix: str, type_: RefType | TensorType, spec: InputSpec | None = None) -> Value:
        if type_.dtype is DType.i4:
            self.features.add(f"param:i4:{'tensor' if isinstance(type_, RefType) else 'scalar'}")
        n = self.counters.get(prefix, 0)
        self.counters[prefix] = n + 1
        name = f"{prefix}{n}"
        v = new_value(type_, name)
        self.params.append(Param(name, v))
        if spec is not None:
            self.specs[name] = spec
        return v

    def packable(self, dtype: DType, shape: tuple[Dim, ...]) -> bool:
        """Whether a parameter of `dtype` and `shape` can be passed: i4 needs an even last extent."""
        return dtype is not DType.i4 or (bool(shape) and shape[-1].evaluate(self.env) % 2 == 0)

    def input(self, prefix: str, dtype: DType, shape: tuple[Dim, ...], spec: InputSpec | None = None) -> Value:
        dtype = dtype if self.packable(dtype, shape) else DType.i8  # the reader takes the loaded value's dtype
        if spec is None:
            spec = InputSpec("values", wide=self.flip(0.15), specials=dtype.is_float and self.flip(0.15))
        return self.param(prefix, RefType(dtype, shape, Role.IN), spec)

    def output(self, dtype: DType, shape: tuple[Dim, ...], role: Role = Role.OUT) -> Value:
        assert self.packable(dtype, shape), f"an i4 output needs an even last extent, got {shape} (diffblocks.storable)"
        return self.param("out" if role is Role.OUT else "acc", RefType(dtype, shape, role), InputSpec("values"))

    def scalar_input(self, prefix: str, dtype: DType) -> Value:
        v = self.param(prefix, scalar(dtype), InputSpec("scalar", wide=self.flip(0.1)))
        self.pool.append(v)
        return v

    def symbols_in_params(self) -> set[str]:
        out: set[str] = set()
        for p in self.params:
            for d in p.type.shape:
                out |= d.symbols()
        return out

    def symbols_determined(self, env: dict[str, int]) -> set[str]:
        """The symbols the launch binders (`oracle.args`, `emit_triton.arguments`) recover from the parameter
        shapes at `env`: repeatedly, an extent with one unbound symbol that it is affine in. An extent such as
        `(B - B // 2 + 1) // 2` is the same for B = 2 and B = 3, so it determines nothing."""
        bound: dict[str, int] = {}
        progress = True
        while progress:
            progress = False
            for p in self.params:
                for d in p.type.shape:
                    free = d.symbols() - bound.keys()
                    if len(free) == 1:
                        (name,) = free
                        if solve_for(d, name, d.evaluate(env), bound) == env[name]:
                            bound[name] = env[name]
                            progress = True
        return set(bound)

    # --- building
    def add(self, cls: type[Op], name: str | None = None, inexact: bool | None = None, **fields: Any) -> Value:
        return self.make(cls, inexact=inexact, names=name, **fields)[0]

    def make(self, cls: type[Op], inexact: bool | None = None, names: Any = None, **fields: Any
             ) -> tuple[Value, ...]:
        op = self.b.make(cls, names=names, **fields)
        src = getattr(op, "src", None)
        if inexact is None:
            reads_inexact = isinstance(op, Load | RegionFold) and src is not None and src.id in self.inexact_refs
            inexact = reads_inexact or result_inexact(op, self.is_inexact)
        for v in op.results:
            if isinstance(v.type, TensorType):
                if inexact and _is_float(v):
                    self.inexact.add(v.id)
                self.pool.append(v)
        if writes_inexact(op, self.is_inexact, self.inexact_refs):
            self.inexact_refs.add(_written_value(op)[0].id)  # type: ignore[index]
        self.features.add(cls.NAME)
        return op.results

    def effect(self, cls: type[Op], **fields: Any) -> None:
        self.make(cls, **fields)

    @contextmanager
    def scope(self) -> Iterator[None]:
        saved = len(self.pool)
        try:
            yield
        finally:
            del self.pool[saved:]

    def region(self, arg_types: tuple[TensorType, ...], body: Callable[[tuple[Value, ...]], tuple[Value, ...]],
               inexact_args: tuple[bool, ...] | None = None) -> Region:
        """A nested region; its args and values are visible only inside it."""
        args = self.b.begin_region(arg_types)
        with self.scope():
            self.pool.extend(args)
            for a, bad in zip(args, inexact_args or (False,) * len(args)):
                if bad and _is_float(a):
                    self.inexact.add(a.id)
            self.depth += 1
            try:
                yielded = body(args)
                self.b.make(Yield, values=tuple(yielded))
            finally:
                self.depth -= 1
        return self.b.end_region()

    @contextmanager
    def parallel(self, domain: tuple[Dim, ...]) -> Iterator[tuple[Value, ...]]:
        idx = self.b.begin_region((scalar(INDEX_DTYPE),) * len(domain), tuple("ijk"[: len(domain)]))
        with self.scope():
            self.pool.extend(idx)
            yield idx
            self.b.make(Yield, values=())
        self.effect(Parallel, domain=domain, body=self.b.end_region())

    # --- picking values
    def pick(self, shape: tuple[Dim, ...] | None = None, dtype: DType | None = None, exact: bool = False,
             ok: Callable[[Value], bool] | None = None) -> Value | None:
        options = [v for v in self.pool if isinstance(v.type, TensorType)
                   and (shape is None or v.type.shape == shape) and (dtype is None or v.type.dtype == dtype)
                   and not (exact and v.id in self.inexact) and (ok is None or ok(v))]
        return self.choose(options) if options else None

    def is_exact(self, v: Value) -> bool:
        return v.id not in self.inexact

    def is_inexact(self, v: Value) -> bool:
        return v.id in self.inexact

    def literal(self, dtype: DType) -> int | float | bool:
        if dtype.is_pred:
            return self.flip()
        if dtype.is_float:
            return self.choose(FLOAT_LITERALS)
        lo, hi = dtype.int_range
        return self.choose((0, 1, 2, -1 if lo < 0 else 3, 7, lo, hi, hi // 2))

    def constant(self, dtype: DType, shape: tuple[Dim, ...] = (), value: Any = None) -> Value:
        c = self.add(Constant, value=self.literal(dtype) if value is None else value, dtype=dtype)
        return c if not shape else self.add(Broadcast, x=c, shape=shape, dims=())

    def index(self, n: int) -> Value:
        return self.add(Constant, value=n, dtype=INDEX_DTYPE)

    def value(self, shape: tuple[Dim, ...], dtype: DType | None = None, exact: bool = False) -> Value:
        """A value of `shape` (and `dtype`): from the pool, a cast of a pool value, or a constant."""
        found = self.pick(shape, dtype, exact)
        if found is not None and self.flip(0.85):
            return found
        if dtype is not None:
            other = self.pick(shape, exact=True, ok=lambda v: castable(v.type.dtype, dtype))
            if other is not None and self.flip(0.6):
                return self.add(Cast, x=other, dtype=dtype)
        return self.constant(dtype or self.dtype(), shape)

    def like(self, x: Value, exact: bool = False) -> Value:
        t = x.type
        assert isinstance(t, TensorType)
        return self.value(t.shape, t.dtype, exact)  # type: ignore[arg-type]


def castable(src: DType, dst: DType) -> bool:
    """Casts the generator makes from exact values: any pair (float->int saturates, NaN -> 0)."""
    return src != dst


# ---------------------------------------------------------------------------------------------- pointwise


def pointwise(g: Gen, shape: tuple[Dim, ...]) -> Value:
    """One random pointwise op giving a value of `shape`."""
    x = g.value(shape)
    t = x.type
    assert isinstance(t, TensorType) and isinstance(t.dtype, DType)
    dt = t.dtype
    kind = g.choose(("binary", "unary", "cast", "compare", "select", "bitcast"))
    exact = g.is_exact(x)
    if kind == "unary":
        return unary(g, x)
    if kind == "compare" and (exact or not dt.is_float):
        other = g.like(x, exact=True)
        return g.add(Compare, fn=g.choose(tuple(CmpFn)), lhs=x, rhs=other)
    if kind == "select":
        cond = g.pick(shape, DType.pred) or g.add(Compare, fn=CmpFn.ne, lhs=g.like(x, exact=True),
                                                  rhs=g.like(x, exact=True)) if not dt.is_float or exact \
            else g.pick(shape, DType.pred)
        if cond is not None:
            return g.add(Select, cond=cond, on_true=x, on_false=g.like(x))
    if kind == "cast" and (exact or not dt.is_float):
        target = g.dtype()
        if target != dt:
            return g.add(Cast, x=x, dtype=target)
    if kind == "bitcast" and dt.bits in BITCAST_PARTNERS and (exact or not dt.is_float):
        return g.add(Bitcast, x=x, dtype=g.choose(BITCAST_PARTNERS[dt.bits]))
    return binary(g, x)


def unary(g: Gen, x: Value) -> Value:
    dt = x.type.dtype
    assert isinstance(dt, DType)
    if dt.is_pred:
        return g.add(Unary, fn=UnaryFn.not_, x=x)
    if dt.is_int:
        return g.add(Unary, fn=g.choose((UnaryFn.neg, UnaryFn.abs, UnaryFn.not_)), x=x)
    fns = FLOAT_UNARY if g.is_exact(x) else tuple(f for f in FLOAT_UNARY if f not in STEPWISE)
    return g.add(Unary, fn=g.choose(fns), x=x)


def binary(g: Gen, x: Value) -> Value:
    t = x.type
    dt = t.dtype
    assert isinstance(t, TensorType) and isinstance(dt, DType)
    fns = PRED_BINARY if dt.is_pred else FLOAT_BINARY if dt.is_float else INT_BINARY
    fn = g.choose(fns)
    if dt.is_float and fn in (BinaryFn.floordiv, BinaryFn.mod):
        # floor(a / b) and fmod with a power-of-two divisor are exact; other divisors would round.
        if not g.is_exact(x):
            fn = BinaryFn.add
        else:
            rhs = g.constant(dt, t.shape, g.choose((2.0, 0.5, -4.0, 1.0)))
            return g.add(Binary, fn=fn, lhs=x, rhs=rhs)
    if dt.is_int and fn in (BinaryFn.floordiv, BinaryFn.mod):
        lo, _ = dt.int_range
        divisor = g.choose((2, 3, 7, 1) + ((-3, -2) if lo < 0 else (5,)))
        return g.add(Binary, fn=fn, lhs=x, rhs=g.constant(dt, t.shape, divisor))
    if dt.is_int and fn in (BinaryFn.shl, BinaryFn.shr):
        amount = g.int(0, dt.bits - 1) if g.flip(0.9) else g.choose((dt.bits, dt.bits + 3, -1 if dt.is_signed
                                                                     else 2 * dt.bits))
        return g.add(Binary, fn=fn, lhs=x, rhs=g.constant(dt, t.shape, amount))
    if dt.is_int and fn is BinaryFn.pow:
        exponent = g.int(0, 4) if g.flip(0.9) or not dt.is_signed else g.choose((-1, -2))
        return g.add(Binary, fn=fn, lhs=x, rhs=g.constant(dt, t.shape, exponent))
    return g.add(Binary, fn=fn, lhs=x, rhs=g.like(x))


# ---------------------------------------------------------------------------------------------- combines


@dataclass(frozen=True)
class Combine:
    """A custom combine: its region builder and identity (a true identity, so that padding is harmless)."""

    identity: tuple[int | float | bool, ...]
    body: Callable[[Gen, tuple[Value, ...]], tuple[Value, ...]]
    name: str


def _elementwise_kinds(dt: DType) -> tuple[tuple[BinaryFn, int | float | bool], ...]:
    if dt.is_pred:
        return ((BinaryFn.or_, False), (BinaryFn.and_, True), (BinaryFn.xor, False), (BinaryFn.maximum, False))
    if dt.is_float:
        return ((BinaryFn.add, 0.0), (BinaryFn.maximum, float("-inf")), (BinaryFn.minimum, float("inf")),
                (BinaryFn.mul, 1.0))
    lo, hi = dt.int_range
    ones = -1 if dt.is_signed else hi
    return ((BinaryFn.add, 0), (BinaryFn.maximum, lo), (BinaryFn.minimum, hi), (BinaryFn.mul, 1),
            (BinaryFn.and_, ones), (BinaryFn.or_, 0), (BinaryFn.xor, 0))


def elementwise_combine(g: Gen, dtypes: tuple[DType, ...]) -> Combine:
    """Each component folds with its own associative, commutative op."""
    kinds = tuple(g.choose(_elementwise_kinds(dt)) for dt in dtypes)

    def body(gen: Gen, args: tuple[Value, ...]) -> tuple[Value, ...]:
        k = len(dtypes)
        return tuple(gen.add(Binary, fn=fn, lhs=args[n], rhs=args[n + k]) for n, (fn, _) in enumerate(kinds))

    return Combine(tuple(ident for _, ident in kinds), body, "+".join(fn.value for fn, _ in kinds))


def argmax_combine(g: Gen, value_dtype: DType, index_dtype: DType, smallest: bool) -> Combine:
    """(value, index) pairs: the larger (smaller) value wins, ties go to the smaller index."""
    lo, hi = value_dtype.int_range
    _, ihi = index_dtype.int_range

    def body(gen: Gen, args: tuple[Value, ...]) -> tuple[Value, ...]:
        av, ai, bv, bi = args
        better = gen.add(Compare, fn=CmpFn.lt if smallest else CmpFn.gt, lhs=bv, rhs=av)
        tie = gen.add(Binary, fn=BinaryFn.and_, lhs=gen.add(Compare, fn=CmpFn.eq, lhs=bv, rhs=av),
                      rhs=gen.add(Compare, fn=CmpFn.lt, lhs=bi, rhs=ai))
        take = gen.add(Binary, fn=BinaryFn.or_, lhs=better, rhs=tie)
        return gen.add(Select, cond=take, on_true=bv, on_false=av), gen.add(Select, cond=take, on_true=bi, on_false=ai)

    return Combine((hi if smallest else lo, ihi), body, "argmin-pair" if smallest else "argmax-pair")


def welford_combine() -> Combine:
    """(mean, m2, count) as in the acceptance kernel: float, associative up to rounding."""

    def body(gen: Gen, args: tuple[Value, ...]) -> tuple[Value, ...]:
        ma, qa, na, mb, qb, nb = args
        dt = ma.type.dtype
        n = gen.add(Binary, fn=BinaryFn.add, lhs=na, rhs=nb)
        one = gen.constant(dt, (), 1.0)  # type: ignore[arg-type]
        zero = gen.constant(dt, (), 0.0)  # type: ignore[arg-type]
        frac = gen.add(Select, cond=gen.add(Compare, fn=CmpFn.eq, lhs=n, rhs=zero), on_true=zero,
                       on_false=gen.add(Binary, fn=BinaryFn.div, lhs=nb,
                                        rhs=gen.add(Binary, fn=BinaryFn.maximum, lhs=n, rhs=one)))
        delta = gen.add(Binary, fn=BinaryFn.sub, lhs=mb, rhs=ma)
        mean = gen.add(Binary, fn=BinaryFn.add, lhs=ma, rhs=gen.add(Binary, fn=BinaryFn.mul, lhs=delta, rhs=frac))
        dd = gen.add(Binary, fn=BinaryFn.mul, lhs=gen.add(Binary, fn=BinaryFn.mul, lhs=delta, rhs=delta), rhs=na)
        m2 = gen.add(Binary, fn=BinaryFn.add, lhs=gen.add(Binary, fn=BinaryFn.add, lhs=qa, rhs=qb),
                     rhs=gen.add(Binary, fn=BinaryFn.mul, lhs=dd, rhs=frac))
        return mean, m2, n

    return Combine((0.0, 0.0, 0.0), body, "welford")


def combine_region(g: Gen, combine: Combine, dtypes: tuple[DType, ...]) -> Region:
    return g.region(tuple(scalar(d) for d in dtypes) * 2, lambda args: combine.body(g, args),
                    inexact_args=(True,) * (2 * len(dtypes)))


# ---------------------------------------------------------------------------------------------- the strategy


def _op_symbols(ops: tuple[Op, ...]) -> set[str]:
    """Shape symbols mentioned anywhere in `ops`: attributes, indices and result types."""
    out: set[str] = set()

    def visit(x: Any) -> None:
        if isinstance(x, Dim):
            out.update(x.symbols())
        elif isinstance(x, Slice):
            visit(x.start)
            visit(x.stop)
        elif isinstance(x, tuple):
            for y in x:
                visit(y)
        elif isinstance(x, Value) and isinstance(x.type, TensorType | RefType):
            visit(x.type.shape)
        elif isinstance(x, Region):
            for a in x.args:
                visit(a)
            for o in x.ops:
                visit_op(o)

    def visit_op(o: Op) -> None:
        for f in o.fields():
            visit(getattr(o, f.name))
        for v in o.results:
            visit(v)

    for o in ops:
        visit_op(o)
    return out


def draw_shapes(draw: Draw) -> dict[str, int]:
    return {s: SHAPE_CHOICES[s][draw(_ints(0, len(SHAPE_CHOICES[s]) - 1))] for s in SYMBOLS}


def refinements(g: Gen, symbols: set[str]) -> tuple[Pred, ...]:
    """True facts about the drawn shapes, sometimes stated: they let the compiler drop guards."""
    out: list[Pred] = []
    if "E" in symbols:
        out.append(PCmp(">=", DSym("E"), DConst(0)))
    for s in sorted(symbols):
        v = g.env[s]
        if not g.flip(0.2):
            continue
        facts = [PCmp("<=", DSym(s), DConst(v + g.int(0, 3))), PCmp(">=", DSym(s), DConst(min(v, 1)))]
        facts += [PCmp("==", DBin("%", DSym(s), DConst(d)), DConst(0)) for d in (2, 4, 8, 16) if v % d == 0]
        out.append(g.choose(facts))
    return tuple(out)


@st.composite
def cases(draw: Draw, max_blocks: int = 3, blocks: tuple[str, ...] | None = None) -> Case:
    """A random differential case; `blocks` restricts the kinds of blocks (see tests/diffblocks.py)."""
    return build_case(draw, max_blocks, blocks)


def random_case(rng: random.Random, max_blocks: int = 3, blocks: tuple[str, ...] | None = None
                ) -> tuple[Case, list[int]]:
    """A case drawn uniformly (more varied than hypothesis' generation) and its choice sequence."""
    drawer = RandomDraw(rng)
    return build_case(drawer, max_blocks, blocks), drawer.choices


def build_case(draw: Draw, max_blocks: int = 3, blocks: tuple[str, ...] | None = None) -> Case:
    from tests.diffblocks import BLOCKS, build_block

    env = draw_shapes(draw)
    probe = Gen(draw, Builder(None), env)
    kinds = tuple(blocks or BLOCKS)
    chosen = [probe.choose(kinds) for _ in range(probe.int(1, max_blocks))]
    # The refinements are drawn before building (the builder's solver needs them); stating a fact about
    # a symbol that no parameter ends up using would leave it unbound, so only E's is unconditional.
    requires = refinements(probe, set(SYMBOLS) - {"E"}) if probe.flip(0.3) else ()
    requires = (PCmp(">=", DSym("E"), DConst(0)),) + requires
    g = Gen(draw, Builder(_solver(SYMBOLS, requires)), env)
    g.b.begin_region(())
    for kind in chosen:
        build_block(g, kind)
    g.b.make(Yield, values=())
    ops = g.b.end_region().ops
    for sym in sorted((_op_symbols(ops) | g.symbols_in_params()) - g.symbols_determined(env)):
        # A symbol only the body uses (a histogram's bins), or that the parameters' shapes do not determine
        # (only in `(B - B // 2 + 1) // 2`), is bound at launch by an extra parameter.
        g.input("extent", DType.i8, (DSym(sym),))
    used = g.symbols_in_params()
    kept = tuple(p for p in requires if p.symbols() <= used)
    symbols = tuple(s for s in SYMBOLS if s in used)
    body = Region(tuple(p.value for p in g.params), ops)
    kernel = build_kernel(f"fuzz_{'_'.join(chosen)}", tuple(g.params), symbols, body, requires=kept)
    seed = draw(_ints(0, 2**31 - 1))
    specs = tuple((p.name, g.specs.get(p.name, InputSpec("values"))) for p in kernel.params)
    shapes = tuple((s, env[s]) for s in symbols)
    return Case(kernel, shapes, specs, seed, notes=tuple(sorted(g.features)))
