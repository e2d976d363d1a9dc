"""Hypothesis strategies for random *valid* KIR kernels, built through `kir.Builder`.

`kernels()` draws small kernels that use every op family: pointwise ops of every function and dtype,
casts and bitcasts, layout ops, loads, stores, gathers and scatters, built-in and custom reductions
(argmax included), scans (reverse, exclusive, custom), region folds and scans over subregions whose
bounds are loaded from an offsets parameter, contractions, histograms, atomics, random numbers,
parallel/for/while/if and local buffers. Every kernel it draws passes `kir.verify`.

The kernel's parameters are fixed (see `PARAMS`) so that consumers know the shapes: the symbols are
M, N (a matrix), S and E (S segments of E values, `offsets: i64[S + 1]`) and B (bins).

    from tests.kirgen import kernels

    @given(kernels())
    def test_something(k): ...
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from kir import (
    INDEX_DTYPE,
    Alloc,
    Atomic,
    AtomicCAS,
    AtomicKind,
    Binary,
    BinaryFn,
    Bitcast,
    Broadcast,
    Builder,
    Cast,
    CmpFn,
    Compare,
    Concat,
    Constant,
    DimValue,
    Dot,
    DType,
    DTypeVar,
    DynSlice,
    ExpandDims,
    For,
    Gather,
    Histogram,
    If,
    InitMode,
    Iota,
    Kernel,
    Load,
    Loc,
    MemOrder,
    Parallel,
    Param,
    Precision,
    Random,
    Reduce,
    ReduceKind,
    RefType,
    RegionFold,
    RegionScan,
    Reshape,
    RngKind,
    Role,
    Scan,
    ScanKind,
    Scatter,
    Select,
    Slice,
    SliceOp,
    Squeeze,
    Store,
    TensorType,
    Transpose,
    Unary,
    UnaryFn,
    Value,
    While,
    Yield,
    build_kernel,
    scalar,
)
from kir.contract import default_dot_acc
from kir.dims import DBin, DConst, Dim, DSym, PAnd, PCmp, PNot, POr, Pred
from kir.pointwise import FLOAT_ONLY_UNARY, is_float_like
from kir.solver import ShapeSolver

SYMBOLS = ("M", "N", "S", "E", "B")
M, N, S, E, B = (DSym(s) for s in SYMBOLS)
FLOATS = (DType.f16, DType.bf16, DType.f32, DType.f64)
INTS = (DType.i8, DType.i16, DType.i32, DType.i64, DType.u8, DType.u16, DType.u32, DType.u64)
GENERIC = DTypeVar("T", (DType.f16, DType.bf16, DType.f32))

# Jointly satisfiable refinements; each kernel takes a subset. `E >= 0` lifts E's default `>= 1`.
REQUIRES = (
    PCmp("<=", N, DConst(65536)),
    PCmp("==", DBin("%", N, DConst(4)), DConst(0)),
    POr((PCmp(">=", M, DConst(2)), PCmp(">=", N, DConst(2)))),
    PNot(PCmp("==", S, DConst(3))),
    PAnd((PCmp("<=", B, DConst(1024)), PNot(POr((PCmp("<", E, DConst(0)), PCmp(">", E, DConst(1 << 40))))))),
    PCmp(">=", E, DConst(0)),
)
AXIOMS = (PCmp("==", DBin("*", M, N), DBin("*", N, M)),)

# Value names exercise the printer's uniquing: repeats, parameter names, Python keywords and
# names that are not identifiers (printed as unnamed values).
VALUE_NAMES = (None, None, None, None, "row", "row", "acc", "t", "x", "v_1", "for", "class", "a-b", "é", "_")
LOC_FILES = ("kernel.py", 'dir/my "file".py', "ünïcode.py", "a\\b.py")
LOCS = (None, None, None, None, Loc(LOC_FILES[0], 3, 5), Loc(LOC_FILES[1], 12, 1), Loc(LOC_FILES[2], 999, 80),
        Loc(LOC_FILES[3], 1, 1))
SPECIAL_FLOATS = (0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, 1e-300, 65504.0, 1e-05, 0.1)

FLOAT_BINARY = (BinaryFn.add, BinaryFn.sub, BinaryFn.mul, BinaryFn.div, BinaryFn.floordiv, BinaryFn.mod,
                BinaryFn.pow, BinaryFn.maximum, BinaryFn.minimum)
INT_BINARY = (BinaryFn.add, BinaryFn.sub, BinaryFn.mul, BinaryFn.floordiv, BinaryFn.mod, BinaryFn.pow,
              BinaryFn.maximum, BinaryFn.minimum, BinaryFn.and_, BinaryFn.or_, BinaryFn.xor, BinaryFn.shl,
              BinaryFn.shr)
PRED_BINARY = (BinaryFn.and_, BinaryFn.or_, BinaryFn.xor, BinaryFn.maximum, BinaryFn.minimum)
BITCAST_PARTNERS = {8: (DType.i8, DType.u8), 16: (DType.i16, DType.u16, DType.f16, DType.bf16),
                    32: (DType.i32, DType.u32, DType.f32), 64: (DType.i64, DType.u64, DType.f64)}

Draw = Callable[[st.SearchStrategy[Any]], Any]


# Strategies are built once and reused: building one per draw dominates the generation time.
@functools.cache
def ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


BOOLS = st.booleans()


@functools.cache
def literal_strategy(dtype: DType | DTypeVar) -> st.SearchStrategy[int | float | bool]:
    """Literals that fit `dtype`; NaN is always `math.nan` so that equality of kernels holds."""
    if dtype == DType.pred:
        return st.booleans()
    if isinstance(dtype, DType) and dtype.is_int:
        lo, hi = dtype.int_range
        return st.sampled_from((0, 1, lo, hi)) | st.integers(lo, hi)
    return st.sampled_from(SPECIAL_FLOATS) | st.floats(allow_nan=False, width=32) | st.integers(-4, 4)


def identifiers() -> st.SearchStrategy[str]:
    import keyword

    return st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(lambda s: not keyword.iskeyword(s))


@dataclass
class Block:
    """Where ops are being added: the kind of the enclosing parallel block and its loop indices."""

    kind: str  # top | rows (i < M) | points (i < M, j < N) | segments (s < S) | elements (e < N)
    indices: tuple[Value, ...] = ()


@dataclass
class Gen:
    draw: Draw
    b: Builder
    params: dict[str, Value]
    fdt: DType | DTypeVar  # the float dtype of x, y, alpha, out
    idt: DType             # the integer dtype of xi and outi
    pool: list[Value] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    depth: int = 0
    families: tuple[str, ...] = ()

    # --- drawing
    def choose(self, options: Any) -> Any:
        options = tuple(options)
        return options[self.draw(ints(0, len(options) - 1))]

    def flip(self) -> bool:
        return self.draw(BOOLS)

    def int(self, lo: int, hi: int) -> int:
        return self.draw(ints(lo, hi))

    # --- building
    def name(self) -> str | None:
        return self.choose(VALUE_NAMES)

    def loc(self) -> Loc | None:
        return self.choose(LOCS)

    def add(self, cls: type, **fields: Any) -> Value:
        v = self.b.add(cls, name=self.name(), loc=self.loc(), **fields)
        if isinstance(v.type, TensorType):
            self.pool.append(v)
        return v

    def make(self, cls: type, **fields: Any) -> tuple[Value, ...]:
        op = self.b.make(cls, names=None, loc=self.loc(), **fields)
        self.pool.extend(v for v in op.results if isinstance(v.type, TensorType))
        return op.results

    def region(self, arg_types: tuple, body: Callable[[tuple[Value, ...]], tuple[Value, ...]]) -> Any:
        """Build a region whose args are visible (with the outer pool) only inside it."""
        args = self.b.begin_region(arg_types, tuple(self.name() for _ in arg_types))
        saved = len(self.pool)
        self.pool.extend(args)
        self.depth += 1
        try:
            yielded = body(args)
            self.b.make(Yield, values=yielded, loc=self.loc())
        finally:
            self.depth -= 1
            del self.pool[saved:]
        return self.b.end_region()

    # --- choosing
    def pick(self, ok: Callable[[TensorType], bool] = lambda t: True) -> Value | None:
        options = [v for v in self.pool if isinstance(v.type, TensorType) and ok(v.type)]
        return self.choose(options) if options else None

    def const(self, dtype: DType | DTypeVar, value: Any = None) -> Value:
        if value is None:
            value = self.draw(literal_strategy(dtype))
        return self.add(Constant, value=value, dtype=dtype)

    def index_const(self, n: int) -> Value:
        return self.b.add(Constant, value=n, dtype=INDEX_DTYPE)

    def some_value(self) -> Value:
        """Any tensor value; makes a constant when the pool has none."""
        v = self.pick()
        if v is None:
            v = self.const(self.choose((self.fdt, self.idt, DType.pred)))
        return v


# ---------------------------------------------------------------------------------------------- snippets
# Each snippet adds a few valid ops in the current block. They return nothing; values go to the pool.


def unary_fns(dtype: DType | DTypeVar) -> tuple[UnaryFn, ...]:
    if dtype == DType.pred:
        return (UnaryFn.not_,)
    if is_float_like(dtype):
        return tuple(f for f in UnaryFn if f is not UnaryFn.not_)
    return tuple(f for f in UnaryFn if f not in FLOAT_ONLY_UNARY)


def binary_fns(dtype: DType | DTypeVar) -> tuple[BinaryFn, ...]:
    if dtype == DType.pred:
        return PRED_BINARY
    return FLOAT_BINARY if is_float_like(dtype) else INT_BINARY


def snip_pointwise(g: Gen, blk: Block) -> None:
    x = g.some_value()
    t = x.type
    assert isinstance(t, TensorType)
    other = g.pick(lambda u: u == t) or x
    kind = g.choose(("unary", "binary", "compare", "select"))
    if kind == "unary":
        g.add(Unary, fn=g.choose(unary_fns(t.dtype)), x=x)
    elif kind == "binary":
        g.add(Binary, fn=g.choose(binary_fns(t.dtype)), lhs=x, rhs=other)
    elif kind == "compare":
        g.add(Compare, fn=g.choose(list(CmpFn)), lhs=x, rhs=other)
    else:
        cond = g.pick(lambda u: u.dtype == DType.pred and u.shape == t.shape)
        if cond is None:
            cond = g.add(Compare, fn=CmpFn.ne, lhs=x, rhs=other)
        g.add(Select, cond=cond, on_true=x, on_false=other)


def snip_constants(g: Gen, blk: Block) -> None:
    kind = g.choose(("constant", "iota", "dim"))
    if kind == "constant":
        g.const(g.choose((*FLOATS, *INTS, DType.pred, g.fdt)))
    elif kind == "iota":
        g.add(Iota, extent=g.choose((N, DBin("+", N, DConst(1)), DConst(4))),
              dtype=g.choose(INTS))
    else:
        dim = g.choose((N, DBin("-", DBin("*", M, DConst(2)), DConst(1)),
                                      DBin("%", DBin("+", N, DConst(1)), DConst(3)),
                                      DBin("//", E, DBin("+", DConst(2), DConst(2))), DConst(-7)))
        g.add(DimValue, dim=dim, dtype=g.choose((DType.i32, DType.i64)))


def snip_cast(g: Gen, blk: Block) -> None:
    x = g.some_value()
    t = x.type
    assert isinstance(t, TensorType)
    if g.flip() and isinstance(t.dtype, DType) and t.dtype != DType.pred:
        g.add(Bitcast, x=x, dtype=g.choose(BITCAST_PARTNERS[t.dtype.bits]))
    else:
        g.add(Cast, x=x, dtype=g.choose((*FLOATS, *INTS, DType.pred, g.fdt)))


def snip_layout(g: Gen, blk: Block) -> None:
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:  # only scalars so far: broadcast one
        x = g.add(Broadcast, x=g.some_value(), shape=(N, DConst(2)), dims=())
    t = x.type
    assert isinstance(t, TensorType)
    kind = g.choose(("broadcast", "reshape", "transpose", "slice", "concat", "expand", "squeeze"))
    if kind == "broadcast":
        g.add(Broadcast, x=x, shape=(DConst(3), *t.shape), dims=tuple(range(1, t.rank + 1)))
    elif kind == "reshape":
        g.add(Reshape, x=x, shape=(*t.shape, DConst(1)))
    elif kind == "transpose":
        g.add(Transpose, x=x, perm=tuple(reversed(range(t.rank))))
    elif kind == "slice":
        g.add(SliceOp, x=x, starts=(DConst(0),) * t.rank, stops=t.shape,
              steps=tuple(g.int(1, 3) for _ in t.shape))
    elif kind == "concat":
        g.add(Concat, inputs=(x, x), axis=g.int(0, t.rank - 1))
    else:
        e = g.add(ExpandDims, x=x, axis=g.int(0, t.rank))
        if kind == "squeeze":
            g.add(Squeeze, x=e, axis=e.type.shape.index(DConst(1)))  # type: ignore[union-attr]


def snip_access(g: Gen, blk: Block) -> None:
    """Loads of the block's natural slice, gathers at data-dependent coordinates, scatters."""
    p = g.params
    kind = g.choose(("load", "gather", "scatter"))
    if kind == "load":
        load_natural(g, blk)
    elif kind == "gather":
        if blk.kind == "elements":
            (e,) = blk.indices
            row = g.add(Load, src=p["idx"], index=(e,))
            g.add(Gather, src=p["x"], indices=(row, e), fill=g.draw(literal_strategy(g.fdt)))
        else:
            ids = g.add(Load, src=p["idx"], index=(Slice(DConst(0), N),))
            g.add(Gather, src=p["values"], indices=(ids,))
    elif blk.kind == "top" and "outi" not in g.written:
        g.written.add("outi")
        ids = g.add(Load, src=p["idx"], index=(Slice(DConst(0), N),))
        vals = g.add(Load, src=p["xi"], index=(Slice(DConst(0), N),))
        g.make(Scatter, dst=p["outi"], indices=(ids,), value=vals, unique=g.flip())
    elif blk.kind == "elements" and "outi" not in g.written:
        g.written.add("outi")
        (e,) = blk.indices
        ids = g.add(Load, src=p["idx"], index=(e,))
        g.make(Scatter, dst=p["outi"], indices=(ids,), value=g.const(g.idt))


def load_natural(g: Gen, blk: Block) -> Value:
    p = g.params
    if blk.kind == "rows":
        (i,) = blk.indices
        return g.add(Load, src=p[g.choose(("x", "y"))], index=(i, Slice(DConst(0), N)))
    if blk.kind == "points":
        i, j = blk.indices
        return g.add(Load, src=p["x"], index=(i, j))
    if blk.kind == "segments":
        (s,) = blk.indices
        return g.add(Load, src=p["offsets"], index=(s,))
    if blk.kind == "elements":
        (e,) = blk.indices
        return g.add(Load, src=p[g.choose(("xi", "idx"))], index=(e,))
    which = g.choose(("x", "xi", "values", "half"))
    if which == "x":
        return g.add(Load, src=p["x"], index=(Slice(DConst(0), M), Slice(DConst(0), N)))
    if which == "half":
        return g.add(Load, src=p["x"], index=(Slice(DConst(0), M), Slice(DBin("//", N, DConst(2)), N)))
    return g.add(Load, src=p[which], index=(Slice(DConst(0), N if which == "xi" else E),))


def combine_region(g: Gen, dtypes: tuple[DType | DTypeVar, ...]) -> Any:
    """A combine over k components: a per-component add/max (or/and on pred)."""

    def body(args: tuple[Value, ...]) -> tuple[Value, ...]:
        k = len(dtypes)
        out = []
        for n, dt in enumerate(dtypes):
            fn = g.choose(PRED_BINARY[:2] if dt == DType.pred else (BinaryFn.add, BinaryFn.maximum))
            out.append(g.add(Binary, fn=fn, lhs=args[n], rhs=args[n + k]))
        return tuple(out)

    return g.region(tuple(scalar(d) for d in dtypes) * 2, body)


def identity_for(g: Gen, dtypes: tuple[DType | DTypeVar, ...]) -> tuple:
    return tuple(g.draw(literal_strategy(d)) for d in dtypes)


def builtin_kinds(dtype: DType | DTypeVar, scan: bool = False) -> tuple:
    if scan:
        return () if dtype == DType.pred else (ScanKind.sum, ScanKind.prod, ScanKind.max, ScanKind.min)
    if dtype == DType.pred:
        return (ReduceKind.any, ReduceKind.all)
    return (ReduceKind.sum, ReduceKind.prod, ReduceKind.max, ReduceKind.min, ReduceKind.argmax, ReduceKind.argmin)


def snip_reduce(g: Gen, blk: Block) -> None:
    x = g.pick(lambda t: t.rank >= 1) or load_natural(g, Block("top"))
    t = x.type
    assert isinstance(t, TensorType)
    axes = tuple(sorted(g.draw(st.sets(st.integers(0, t.rank - 1), min_size=1))))
    keepdims = g.flip()
    if g.flip():
        others = [v for v in g.pool if isinstance(v.type, TensorType) and v.type.shape == t.shape and v is not x]
        inputs = (x, *others[: g.int(0, 1)])
        dts = tuple(v.type.dtype for v in inputs)  # type: ignore[union-attr]
        g.make(Reduce, inputs=inputs, axes=axes, kind=ReduceKind.custom, keepdims=keepdims,
               identity=identity_for(g, dts), combine=combine_region(g, dts))
        return
    kind = g.choose(builtin_kinds(t.dtype))
    acc = None
    if kind in (ReduceKind.sum, ReduceKind.prod) and g.flip():
        acc = g.choose((DType.f32, DType.f64) if is_float_like(t.dtype) else (DType.i64,))
    g.add(Reduce, inputs=(x,), axes=axes, kind=kind, keepdims=keepdims, acc_dtype=acc)


def snip_scan(g: Gen, blk: Block) -> None:
    x = g.pick(lambda t: t.rank >= 1 and t.dtype != DType.pred) or load_natural(g, Block("top"))
    t = x.type
    assert isinstance(t, TensorType)
    axis = g.int(0, t.rank - 1)
    flags = {"reverse": g.flip(), "exclusive": g.flip()}
    if g.flip():
        g.make(Scan, inputs=(x,), axis=axis, kind=ScanKind.custom, identity=identity_for(g, (t.dtype,)),
               combine=combine_region(g, (t.dtype,)), **flags)
    else:
        kind = g.choose(builtin_kinds(t.dtype, scan=True))
        identity = (g.draw(literal_strategy(t.dtype)),) if g.flip() else None
        g.add(Scan, inputs=(x,), axis=axis, kind=kind, identity=identity, **flags)


def snip_region(g: Gen, blk: Block) -> None:
    """Region fold/scan over values[offsets[s]:offsets[s + 1]] (in a segments block)."""
    if blk.kind != "segments":
        return
    p = g.params
    (s,) = blk.indices
    beg = g.add(Load, src=p["offsets"], index=(s,))
    end = g.add(Load, src=p["offsets"], index=(g.add(Binary, fn=BinaryFn.add, lhs=s, rhs=g.index_const(1)),))
    sub = (DynSlice(beg, end),)
    if g.flip() and "segout" not in g.written:
        g.written.add("segout")
        custom = g.flip()
        g.make(RegionScan, dst=p["segout"], dst_index=sub, src=p["values"], src_index=sub,
               kind=ScanKind.custom if custom else g.choose(builtin_kinds(DType.f32, scan=True)),
               reverse=g.flip(), exclusive=g.flip(),
               identity=identity_for(g, (DType.f32,)) if custom else None,
               combine=combine_region(g, (DType.f32,)) if custom else None)
        return
    mapped = g.flip()
    comps: tuple[DType | DTypeVar, ...] = (DType.f32,)
    map_region = None
    if mapped:
        comps = g.choose(((DType.f32,), (DType.f64, DType.f32), (DType.pred,)))

        def body(args: tuple[Value, ...]) -> tuple[Value, ...]:
            (v,) = args
            out = []
            for dt in comps:
                out.append(g.add(Cast, x=v, dtype=dt) if dt != DType.f32 else g.add(Unary, fn=UnaryFn.abs, x=v))
            return tuple(out)

        map_region = g.region((scalar(DType.f32),), body)
    if len(comps) > 1 or g.flip():
        results = g.make(RegionFold, src=p["values"], index=sub, kind=ReduceKind.custom,
                         identity=identity_for(g, comps),
                         map=map_region, combine=combine_region(g, comps))
    else:
        kind = g.choose(builtin_kinds(comps[0]))
        results = g.make(RegionFold, src=p["values"], index=sub, kind=kind, map=map_region,
                         acc_dtype=DType.f64 if kind is ReduceKind.sum and g.flip() else None)
    store_result(g, blk, results[0])


def snip_contract(g: Gen, blk: Block) -> None:
    if blk.kind != "top":
        return
    p = g.params
    x = g.add(Load, src=p["x"], index=(Slice(DConst(0), M), Slice(DConst(0), N)))
    y = g.add(Load, src=p["y"], index=(Slice(DConst(0), M), Slice(DConst(0), N)))
    batched = g.flip()
    precision = Precision.tf32 if g.fdt == DType.f32 and g.flip() else Precision.ieee
    g.add(Dot, lhs=x, rhs=y, lhs_batch=(0,) if batched else (), rhs_batch=(0,) if batched else (),
          lhs_contract=(1,), rhs_contract=(1,), acc_dtype=default_dot_acc(g.fdt), precision=precision)


def snip_histogram(g: Gen, blk: Block) -> None:
    if blk.kind != "top":
        return
    vals = g.add(Load, src=g.params["xi"], index=(Slice(DConst(0), N),))
    h = g.add(Histogram, values=vals, bins=B)
    if "counts" not in g.written and g.flip():
        g.written.add("counts")
        g.make(Store, dst=g.params["counts"], index=(Slice(DConst(0), B),), value=h)


def snip_atomic(g: Gen, blk: Block) -> None:
    if blk.kind != "elements" or "counts" in g.written:
        return
    p = g.params
    (e,) = blk.indices
    bin_ = g.add(Load, src=p["xi"], index=(e,))
    order = g.choose(list(MemOrder))
    if g.flip():
        g.make(Atomic, kind=g.choose(list(AtomicKind)), dst=p["counts"], indices=(bin_,),
               value=g.const(DType.i32), order=order)
    elif g.flip():
        g.make(Atomic, kind=g.choose((AtomicKind.add, AtomicKind.max, AtomicKind.min,
                                                    AtomicKind.xchg)),
               dst=p["facc"], indices=(bin_,), value=g.const(DType.f32), order=order)
    else:
        g.make(AtomicCAS, dst=p["counts"], indices=(bin_,), expected=g.const(DType.i32), value=g.const(DType.i32),
               order=order)


def snip_rng(g: Gen, blk: Block) -> None:
    offset = blk.indices[0] if blk.indices and g.flip() else \
        g.add(Iota, extent=N, dtype=g.choose((DType.i32, DType.i64)))
    g.add(Random, kind=g.choose(list(RngKind)), seed=g.params["seed"], offset=offset)


def snip_for(g: Gen, blk: Block) -> None:
    start = g.index_const(0)
    up_to_n = g.flip()
    stop = g.b.add(DimValue, dim=N) if up_to_n else g.index_const(g.int(0, 5))
    step = g.index_const(g.int(1, 3))
    scalars = [v for v in g.pool if isinstance(v.type, TensorType) and v.type.is_scalar]
    carried = tuple(scalars[:g.int(0, 2)])

    def body(args: tuple[Value, ...]) -> tuple[Value, ...]:
        iv, *acc = args
        if blk.kind == "rows" and up_to_n:  # iv < N: an in-bounds point of the row
            g.add(Load, src=g.params["x"], index=(blk.indices[0], iv))
        nested(g, blk)
        out = []
        for a in acc:
            fns = binary_fns(a.type.dtype)  # type: ignore[union-attr]
            out.append(g.add(Binary, fn=g.choose(fns), lhs=a, rhs=a))
        return tuple(out)

    region = g.region((scalar(INDEX_DTYPE), *(v.type for v in carried)), body)
    g.make(For, start=start, stop=stop, step=step, inits=carried, body=region)


def snip_while(g: Gen, blk: Block) -> None:
    zero = g.index_const(0)
    extra = g.pick(lambda t: t.is_scalar)
    inits = (zero,) if extra is None else (zero, extra)
    types = tuple(v.type for v in inits)
    limit = g.int(0, 4)

    def cond(args: tuple[Value, ...]) -> tuple[Value, ...]:
        return (g.add(Compare, fn=CmpFn.lt, lhs=args[0], rhs=g.index_const(limit)),)

    def body(args: tuple[Value, ...]) -> tuple[Value, ...]:
        nested(g, blk)
        return (g.add(Binary, fn=BinaryFn.add, lhs=args[0], rhs=g.index_const(1)), *args[1:])

    c = g.region(types, cond)
    bd = g.region(types, body)
    g.make(While, inits=inits, cond=c, body=bd)


def snip_if(g: Gen, blk: Block) -> None:
    a = g.pick(lambda t: t.is_scalar) or g.const(g.fdt)
    cond = g.add(Compare, fn=g.choose(list(CmpFn)), lhs=a, rhs=a)
    results = g.pick() if g.flip() else None

    def then(args: tuple[Value, ...]) -> tuple[Value, ...]:
        nested(g, blk)
        return () if results is None else (results,)

    def other(args: tuple[Value, ...]) -> tuple[Value, ...]:
        if results is None:
            return ()
        fns = unary_fns(results.type.dtype)  # type: ignore[union-attr]
        safe = [f for f in fns if f not in (UnaryFn.isnan, UnaryFn.isinf)]
        return (g.add(Unary, fn=g.choose(safe), x=results),)

    g.make(If, cond=cond, then_=g.region((), then), else_=g.region((), other))


def snip_buffer(g: Gen, blk: Block) -> None:
    dtype = g.choose((g.fdt, g.idt, DType.pred))
    init = g.choose(list(InitMode))
    fill = g.draw(literal_strategy(dtype)) if init is InitMode.full else 0
    buf = g.b.add(Alloc, dtype=dtype, shape=(N,), init=init, fill=fill, name=g.name())
    src = g.pick(lambda t: t.shape == (N,) and t.dtype == dtype)
    if src is None:
        src = g.add(Broadcast, x=g.const(dtype), shape=(N,), dims=())
    g.make(Store, dst=buf, index=(Slice(DConst(0), N),), value=src)
    g.add(Load, src=buf, index=(Slice(DBin("//", N, DConst(2)), N),))


SNIPPETS: dict[str, Callable[[Gen, Block], None]] = {
    "pointwise": snip_pointwise, "constants": snip_constants, "cast": snip_cast, "layout": snip_layout,
    "access": snip_access, "reduce": snip_reduce, "scan": snip_scan, "region": snip_region,
    "contract": snip_contract, "histogram": snip_histogram, "atomic": snip_atomic, "rng": snip_rng,
    "for": snip_for, "while": snip_while, "if": snip_if, "buffer": snip_buffer,
}
FAMILIES = tuple(SNIPPETS)
CONTROL = ("for", "while", "if")
MAX_DEPTH = 2


def nested(g: Gen, blk: Block) -> None:
    """A few snippets inside a control region (bounded depth)."""
    options = [f for f in g.families if g.depth < MAX_DEPTH or f not in CONTROL]
    for _ in range(g.int(0, 2) if options else 0):
        SNIPPETS[g.choose(options)](g, blk)


def store_result(g: Gen, blk: Block, v: Value) -> None:
    """Write `v` to the output that matches the block, once per output."""
    target = {"rows": "out", "points": "out", "top": "out", "segments": "outv", "elements": "outi"}[blk.kind]
    ref = g.params[target]
    t = v.type
    assert isinstance(t, TensorType) and isinstance(ref.type, RefType)
    index: tuple
    if blk.kind == "top":
        index = tuple(Slice(DConst(0), d) for d in ref.type.shape)
        want: tuple[Dim, ...] = ref.type.shape
    elif blk.kind == "rows":
        index, want = (blk.indices[0], Slice(DConst(0), N)), (N,)
    else:
        index, want = blk.indices[: ref.type.rank], ()
    if target in g.written or t.shape != want:
        return
    g.written.add(target)
    if t.dtype != ref.type.dtype:
        v = g.add(Cast, x=v, dtype=ref.type.dtype)
    g.make(Store, dst=ref, index=index, value=v)


BLOCK_DOMAINS: dict[str, tuple[Dim, ...]] = {"rows": (M,), "points": (M, N), "segments": (S,), "elements": (N,)}


# The snippets each kind of block tries first, so that every family shows up often.
SIGNATURES: dict[str, tuple[str, ...]] = {
    "top": ("contract", "histogram", "access", "layout"), "rows": ("reduce", "scan", "buffer", "layout"),
    "points": ("if", "while", "for", "rng"), "segments": ("region",), "elements": ("atomic", "access")}


def block(g: Gen, kind: str) -> None:
    def body(blk: Block) -> None:
        g.pool.extend(blk.indices)
        load_natural(g, blk)
        signature = [f for f in SIGNATURES[kind] if f in g.families]
        if signature:
            SNIPPETS[g.choose(signature)](g, blk)
        for _ in range(g.int(1, 3)):
            SNIPPETS[g.choose(g.families)](g, blk)
        out = g.pick(lambda t: True)
        if out is not None:
            store_result(g, blk, out)

    if kind == "top":
        body(Block("top"))
        return
    domain = BLOCK_DOMAINS[kind]
    saved = len(g.pool)
    idx = g.b.begin_region((scalar(INDEX_DTYPE),) * len(domain), tuple(g.name() for _ in domain))
    body(Block(kind, idx))
    g.b.make(Yield, values=(), loc=g.loc())
    del g.pool[saved:]
    g.b.make(Parallel, domain=domain, body=g.b.end_region(), loc=g.loc())


PARAMS = ("x", "y", "xi", "idx", "offsets", "values", "seed", "alpha", "out", "outi", "outv", "segout",
          "counts", "facc")


def _param_types(fdt: DType | DTypeVar, idt: DType) -> list[tuple[str, Any]]:
    return [("x", RefType(fdt, (M, N), Role.IN)), ("y", RefType(fdt, (M, N), Role.IN)),
            ("xi", RefType(idt, (N,), Role.IN)), ("idx", RefType(DType.i64, (N,), Role.IN)),
            ("offsets", RefType(DType.i64, (DBin("+", S, DConst(1)),), Role.IN)),
            ("values", RefType(DType.f32, (E,), Role.IN)), ("seed", scalar(DType.i64)), ("alpha", scalar(fdt)),
            ("out", RefType(fdt, (M, N), Role.OUT)), ("outi", RefType(idt, (N,), Role.OUT)),
            ("outv", RefType(DType.f32, (S,), Role.OUT)), ("segout", RefType(DType.f32, (E,), Role.OUT)),
            ("counts", RefType(DType.i32, (B,), Role.INOUT)), ("facc", RefType(DType.f32, (B,), Role.INOUT))]


@functools.cache
def _solver(requires: tuple[Pred, ...], axioms: tuple[Pred, ...]) -> ShapeSolver:
    # Shared across examples: its proof cache makes the typing obligations of later kernels cheap.
    return ShapeSolver(SYMBOLS, requires, axioms)


@st.composite
def kernels(draw: Draw, families: tuple[str, ...] = FAMILIES, max_blocks: int = 3,
            generic: bool | None = None) -> Kernel:
    """A random valid kernel over the fixed parameters `PARAMS`, using the snippets of `families`."""
    use_generic = draw(st.booleans()) if generic is None else generic
    fdt: DType | DTypeVar = GENERIC if use_generic else draw(st.sampled_from(FLOATS))
    idt = draw(st.sampled_from(INTS))
    requires = tuple(p for p in REQUIRES if draw(st.booleans()))
    axioms = AXIOMS if draw(st.booleans()) else ()
    b = Builder(_solver(requires, axioms))
    spec = _param_types(fdt, idt)
    args = b.begin_region(tuple(t for _, t in spec), tuple(n for n, _ in spec))
    params = {n: a for (n, _), a in zip(spec, args)}
    g = Gen(draw, b, params, fdt, idt, families=families)
    kinds = draw(st.lists(st.sampled_from(("top", "rows", "points", "segments", "elements")), min_size=1,
                          max_size=max_blocks))
    for kind in kinds:
        block(g, kind)
    b.make(Yield, values=())
    consts = tuple(draw(st.lists(st.tuples(identifiers(), st.one_of(
        st.integers(-2**70, 2**70), st.sampled_from(SPECIAL_FLOATS), st.booleans(), st.text(max_size=6))),
        max_size=2, unique_by=lambda c: c[0])))
    name = draw(identifiers())
    loc = Loc(draw(st.sampled_from(LOC_FILES)), 1, 1) if draw(st.booleans()) else None
    return build_kernel(name, tuple(Param(n, a) for n, a in params.items()), SYMBOLS, b.end_region(),
                        requires=requires, axioms=axioms, dtype_vars=(GENERIC,) if use_generic else (),
                        consts=consts, checks=draw(st.booleans()), loc=loc)


def refinements() -> st.SearchStrategy[tuple[Pred, ...]]:
    return st.lists(st.sampled_from(REQUIRES)).map(tuple)
