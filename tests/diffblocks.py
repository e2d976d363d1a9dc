"""The blocks differential kernels are made of; each is one top-level group of the kernel.

    rows      parallel over M: a row of x, pointwise chains, reductions (custom combines too), scans,
              ordered loops with carries, local buffers, gathers, random numbers
    points    parallel over (M, N): scalar code, affine index maps, if/while, random numbers
    segments  parallel over S: region folds (built-in, custom, mapped) and region scans over monotone
              offsets into values[E] (empty segments included)
    elements  parallel over K: gathers with out-of-range indices, integer atomics into shared bins,
              atomics and scatters at unique indices
    tensor    whole-tensor code outside `parallel`: layout, reductions over axes, scans, contractions,
              histograms
    loop      an ordered top-level loop over the columns with a carried vector (a recurrence)

Every block writes its results to fresh output parameters, so each output element is written once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from kir import (
    INDEX_DTYPE,
    Alloc,
    Atomic,
    AtomicCAS,
    AtomicKind,
    Binary,
    BinaryFn,
    Broadcast,
    Cast,
    CmpFn,
    Compare,
    Concat,
    DimValue,
    Dot,
    DType,
    DynSlice,
    ExpandDims,
    For,
    Gather,
    Histogram,
    If,
    InitMode,
    Iota,
    Load,
    MemOrder,
    Precision,
    Random,
    Reduce,
    ReduceKind,
    RegionFold,
    RegionScan,
    Reshape,
    RngKind,
    Role,
    Scan,
    ScanKind,
    Scatter,
    Slice,
    SliceOp,
    Sort,
    Squeeze,
    Store,
    TensorType,
    Transpose,
    Value,
    While,
    scalar,
)
from kir.contract import default_dot_acc
from kir.dims import DBin, DConst, Dim, DSym
from tests.diffexact import region_inexact
from tests.diffgen import (
    FLOATS,
    INTS,
    Combine,
    Gen,
    argmax_combine,
    binary,
    combine_region,
    elementwise_combine,
    pointwise,
    welford_combine,
)
from tests.diffinputs import InputSpec

M, N, K, S, E, B = (DSym(s) for s in ("M", "N", "K", "S", "E", "B"))
ATOMIC_INTS = (DType.i32, DType.i64, DType.u32, DType.u64)
# Triton has no 8- or 16-bit atomics: lowering refuses them (a tested refusal), so they are drawn rarely
# enough that the kernels around them are still exercised.
NARROW_ATOMIC_INTS = (DType.i16, DType.u8)


def atomic_int(g: Gen) -> DType:
    return g.choose(NARROW_ATOMIC_INTS) if g.flip(0.05) else g.choose(ATOMIC_INTS)


def full(d: Dim) -> Slice:
    return Slice(DConst(0), d)


def rank(v: Value) -> int:
    return len(v.type.shape)


# ---------------------------------------------------------------------------------------------- shared steps


def storable(g: Gen, v: Value, out_shape: tuple[Dim, ...]) -> Value:
    """`v`, or its cast to i8 where an i4 output of `out_shape` could not be passed (an odd last extent)."""
    dt = v.type.dtype
    return v if g.packable(dt, out_shape) else g.add(Cast, x=v, dtype=DType.i8)  # type: ignore[arg-type]


def store_new(g: Gen, shape: tuple[Dim, ...], out_shape: tuple[Dim, ...], index: tuple, newest: bool = True) -> None:
    """Store a value of `shape` (the newest, or a random one) into a fresh output parameter."""
    options = [v for v in g.pool if isinstance(v.type, TensorType) and v.type.shape == shape]
    if not options:
        return
    v = options[-1] if newest else g.choose(options)
    dt = v.type.dtype
    if g.flip(0.15) and (g.is_exact(v) or not dt.is_float):
        target = g.dtype()
        if target != dt:
            v = g.add(Cast, x=v, dtype=target)
    v = storable(g, v, out_shape)
    out = g.output(v.type.dtype, out_shape)  # type: ignore[arg-type]
    g.effect(Store, dst=out, index=index, value=v)


def builtin_reduce_kinds(g: Gen, x: Value) -> tuple[ReduceKind, ...]:
    dt = x.type.dtype
    if dt == DType.pred:
        return (ReduceKind.any, ReduceKind.all)
    kinds = (ReduceKind.sum, ReduceKind.max, ReduceKind.min, ReduceKind.prod)
    if g.is_exact(x) or not dt.is_float:
        kinds += (ReduceKind.argmax, ReduceKind.argmin)
    return kinds


def acc_dtype_for(g: Gen, kind: ReduceKind, dt: DType) -> DType | None:
    if kind not in (ReduceKind.sum, ReduceKind.prod) or not g.flip(0.25):
        return None
    if dt.is_float:
        return g.choose((DType.f32, DType.f64, dt))
    return g.choose((DType.i64, dt))


def custom_combine(g: Gen, inputs: list[Value]) -> tuple[Combine, tuple[Value, ...]]:
    """A custom combine over `inputs` (maybe with extra components it adds): elementwise, argmax pair
    (exact values with an index iota), or Welford."""
    x = inputs[0]
    dt = x.type.dtype
    shape = x.type.shape
    roll = g.int(0, 9)
    if roll >= 7 and rank(x) == 1 and dt.is_int:
        # Compare-based pairs need NaN-free values to be associative: integers only.
        idt = g.choose((DType.i32, DType.i64))
        iota = g.add(Iota, extent=shape[0], dtype=idt)
        return argmax_combine(g, dt, idt, smallest=g.flip()), (x, iota)  # type: ignore[arg-type]
    if roll >= 6 and dt in (DType.f32, DType.f64):
        zeros, ones = g.constant(dt, shape, 0.0), g.constant(dt, shape, 1.0)
        return welford_combine(), (x, zeros, ones)
    dts = tuple(v.type.dtype for v in inputs)
    return elementwise_combine(g, dts), tuple(inputs)  # type: ignore[arg-type]


def step_reduce(g: Gen, x: Value | None = None, axes: tuple[int, ...] | None = None) -> None:
    x = x or g.pick(ok=lambda v: rank(v) >= 1)
    if x is None:
        return
    r = rank(x)
    if axes is None:
        axes = tuple(a for a in range(r) if g.flip(0.6)) or (g.int(0, r - 1),)
    keepdims = g.flip(0.2)
    if g.flip(0.35):
        others = [v for v in g.pool if isinstance(v.type, TensorType) and v.type.shape == x.type.shape
                  and v is not x]
        inputs = [x] + ([g.choose(others)] if others and g.flip(0.4) else [])
        combine, values = custom_combine(g, inputs)
        dts = tuple(v.type.dtype for v in values)
        g.make(Reduce, inputs=values, axes=axes, kind=ReduceKind.custom, keepdims=keepdims,
               identity=combine.identity, combine=combine_region(g, combine, dts))  # type: ignore[arg-type]
        g.features.add(f"reduce:{combine.name}")
        return
    kind = g.choose(builtin_reduce_kinds(g, x))
    g.add(Reduce, inputs=(x,), axes=axes, kind=kind, keepdims=keepdims,
          acc_dtype=acc_dtype_for(g, kind, x.type.dtype))  # type: ignore[arg-type]
    g.features.add(f"reduce:{kind}")


def step_scan(g: Gen, x: Value | None = None) -> None:
    x = x or g.pick(ok=lambda v: rank(v) >= 1)
    if x is None:
        return
    dt = x.type.dtype
    axis = g.int(0, rank(x) - 1)
    flags = {"reverse": g.flip(0.4), "exclusive": g.flip(0.4)}
    if dt == DType.pred or g.flip(0.3):
        combine = elementwise_combine(g, (dt,))  # type: ignore[arg-type]
        g.make(Scan, inputs=(x,), axis=axis, kind=ScanKind.custom, identity=combine.identity,
               combine=combine_region(g, combine, (dt,)), **flags)  # type: ignore[arg-type]
        g.features.add("scan:custom")
        return
    kind = g.choose((ScanKind.sum, ScanKind.max, ScanKind.min, ScanKind.prod))
    identity = (g.literal(dt),) if g.flip(0.15) else None  # type: ignore[arg-type]
    acc = acc_dtype_for(g, kind.as_reduce, dt) if kind in (ScanKind.sum, ScanKind.prod) else None  # type: ignore
    g.add(Scan, inputs=(x,), axis=axis, kind=kind, identity=identity, acc_dtype=acc, **flags)
    g.features.add(f"scan:{kind}")


def step_if(g: Gen, shape: tuple[Dim, ...] = ()) -> None:
    a = g.pick((), exact=True, ok=lambda v: v.type.dtype != DType.pred)
    cond = g.pick((), DType.pred)
    if a is not None and (cond is None or g.flip()):
        cond = g.add(Compare, fn=g.choose(tuple(CmpFn)), lhs=a, rhs=g.like(a, exact=True))
    if cond is None:
        return
    result = g.pick(shape)
    if result is None:
        return

    def then(args: tuple[Value, ...]) -> tuple[Value, ...]:
        return (pointwise(g, shape) if g.flip(0.7) else result,)

    def other(args: tuple[Value, ...]) -> tuple[Value, ...]:
        return (g.like(result),)

    then_r, else_r = g.region((), then), g.region((), other)
    want = result.type
    if then_r.yielded[0].type != want or else_r.yielded[0].type != want:
        then_r = g.region((), lambda a: (result,))
        else_r = g.region((), lambda a: (g.like(result),))
    g.make(If, cond=cond, then_=then_r, else_=else_r)


def step_loop(g: Gen, element: Callable[[Value], Value | None], stop_dims: tuple[Dim, ...]) -> None:
    """An ordered `for` with one or two carried scalars; `element(iv)` loads an element at the index."""
    init = g.pick(()) or g.constant(g.dtype())
    dt = init.type.dtype
    start = g.index(g.choose((0, 1)))
    stop = g.add(DimValue, dim=g.choose(stop_dims)) if stop_dims else g.index(g.int(0, 4))
    step = g.index(g.choose((1, 2, 3)))
    counter = g.flip(0.3)
    inits = (init, g.index(0)) if counter else (init,)

    def body(args: tuple[Value, ...]) -> tuple[Value, ...]:
        iv, acc, *rest = args
        e = element(iv)
        if e is not None and e.type.dtype != dt:
            e = g.add(Cast, x=e, dtype=dt) if g.is_exact(e) or not e.type.dtype.is_float else None
        new = binary(g, acc) if e is None else g.add(Binary, fn=g.choose(_ordered_fns(dt)), lhs=acc, rhs=e)
        if e is not None and g.flip(0.25) and (g.is_exact(e) or not dt.is_float) and dt != DType.pred:
            cond = g.add(Compare, fn=g.choose(tuple(CmpFn)), lhs=e, rhs=g.like(e, exact=True))
            ops = g.make(If, cond=cond, then_=g.region((), lambda a: (new,)), else_=g.region((), lambda a: (acc,)))
            new = ops[0]
        extra = [g.add(Binary, fn=BinaryFn.add, lhs=rest[0], rhs=iv)] if rest else []
        return (new, *extra)

    region = g.region((scalar(INDEX_DTYPE),) + tuple(v.type for v in inits), body)  # type: ignore[misc]
    g.make(For, start=start, stop=stop, step=step, inits=inits, body=region)
    g.features.add("for")


def _ordered_fns(dt: DType) -> tuple[BinaryFn, ...]:
    if dt == DType.pred:
        return (BinaryFn.and_, BinaryFn.or_, BinaryFn.xor)
    if dt.is_float:
        return (BinaryFn.add, BinaryFn.mul, BinaryFn.sub, BinaryFn.maximum, BinaryFn.minimum)
    return (BinaryFn.add, BinaryFn.sub, BinaryFn.mul, BinaryFn.xor, BinaryFn.maximum, BinaryFn.minimum, BinaryFn.or_)


def step_while(g: Gen) -> None:
    """`while c < limit`: a data-dependent trip count (a clamped input value) and a carried scalar."""
    acc = g.pick(()) or g.constant(g.dtype())
    limit_src = g.pick((), exact=True, ok=lambda v: v.type.dtype.is_int)  # type: ignore[union-attr]
    if limit_src is not None and g.flip(0.7):
        wide = g.add(Cast, x=limit_src, dtype=DType.i64) if limit_src.type.dtype != DType.i64 else limit_src
        limit = g.add(Binary, fn=BinaryFn.minimum, lhs=wide, rhs=g.index(g.int(0, 4)))
    else:
        limit = g.index(g.int(0, 4))
    inits = (g.index(0), acc)

    def cond(args: tuple[Value, ...]) -> tuple[Value, ...]:
        return (g.add(Compare, fn=CmpFn.lt, lhs=args[0], rhs=limit),)

    def body(args: tuple[Value, ...]) -> tuple[Value, ...]:
        c, a = args
        return g.add(Binary, fn=BinaryFn.add, lhs=c, rhs=g.index(1)), binary(g, a)

    types = tuple(v.type for v in inits)
    c_region, b_region = g.region(types, cond), g.region(types, body)  # type: ignore[arg-type]
    if b_region.yielded[1].type != acc.type:
        return
    g.make(While, inits=inits, cond=c_region, body=b_region)
    g.features.add("while")


def step_rng(g: Gen, offset: Value) -> None:
    seed = next((v for v in g.pool if v.type == scalar(DType.i64) and v.name and v.name.startswith("seed")), None)
    if seed is None:
        seed = g.scalar_input("seed", DType.i64)
    kind = g.choose((RngKind.rand, RngKind.randint, RngKind.randn))
    g.add(Random, kind=kind, seed=seed, offset=offset)
    g.features.add(f"rng:{kind}")


# ---------------------------------------------------------------------------------------------- rows


def block_rows(g: Gen) -> None:
    x = g.input("x", g.dtype(), (M, N))
    y = g.input("x", g.dtype(), (M, N)) if g.flip(0.3) else None
    idx = g.input("idx", g.choose((DType.i32, DType.i64)), (M,), InputSpec("index", "N")) if g.flip(0.2) else None
    # A vector every row reads (a layernorm's weight): its programs load it once and walk their rows.
    shared = g.input("w", x.type.dtype, (N,)) if g.flip(0.3) else None  # type: ignore[union-attr]
    with g.parallel((M,)) as (i,):
        row_of = i
        if g.flip(0.2):  # rows in reverse: M - 1 - i
            row_of = g.add(Binary, fn=BinaryFn.sub, lhs=g.add(DimValue, dim=DBin("-", M, DConst(1))), rhs=i)
        g.add(Load, src=x, index=(row_of, full(N)))
        if y is not None:
            g.add(Load, src=y, index=(i, full(N)))
        if shared is not None:
            g.add(Load, src=shared, index=(full(N),))
            g.features.add("rows:shared-vector")
        if idx is not None:
            col = g.add(Load, src=idx, index=(i,))
            g.add(Gather, src=x, indices=(i, col), fill=g.literal(x.type.dtype))  # type: ignore[arg-type]
        for _ in range(g.int(1, 4)):
            step = g.weighted({"pointwise": 2, "reduce": 2, "scan": 1, "scalar": 1, "loop": 1, "buffer": 1, "rng": 1,
                               "if": 1})
            if step == "pointwise":
                pointwise(g, (N,))
            elif step == "scalar":
                pointwise(g, ())
            elif step == "reduce":
                step_reduce(g, g.pick((N,)), (0,))
            elif step == "scan":
                step_scan(g, g.pick((N,)))
            elif step == "loop":
                step_loop(g, lambda iv: g.add(Load, src=x, index=(i, iv)), (N, DBin("//", N, DConst(2))))
            elif step == "buffer":
                step_buffer(g)
            elif step == "rng":
                base = g.add(Binary, fn=BinaryFn.mul, lhs=i, rhs=g.add(DimValue, dim=N))
                offs = g.add(Binary, fn=BinaryFn.add, lhs=g.add(Iota, extent=N, dtype=INDEX_DTYPE),
                             rhs=g.add(Broadcast, x=base, shape=(N,), dims=()))
                step_rng(g, offs)
            else:
                step_if(g, g.choose(((), (N,))))
        scalars = [v for v in g.pool if isinstance(v.type, TensorType) and v.type.shape == () and v is not i]
        if scalars and g.flip(0.6):
            value = storable(g, scalars[-1], (M,))
            out = g.output(value.type.dtype, (M,))  # type: ignore[arg-type]
            g.effect(Store, dst=out, index=(i,), value=value)
        store_new(g, (N,), (M, N), (i, full(N)))


def step_buffer(g: Gen) -> None:
    v = g.pick((N,))
    if v is None:
        return
    dt = v.type.dtype
    init = g.choose((InitMode.full, InitMode.empty))
    buf = g.b.add(Alloc, dtype=dt, shape=(N,), init=init, fill=g.literal(dt) if init is InitMode.full else 0)
    g.features.add("alloc")
    half = DBin("//", N, DConst(2))
    if init is InitMode.full and g.flip(0.5):
        # Only the upper half is written: the lower half must read the fill value.
        part = g.constant(dt, (DBin("-", N, half),))  # type: ignore[arg-type]
        g.effect(Store, dst=buf, index=(Slice(half, N),), value=part)
        g.add(Load, src=buf, index=(full(N),))
    else:
        g.effect(Store, dst=buf, index=(full(N),), value=v)
        g.add(Load, src=buf, index=(Slice(g.choose((DConst(0), half)), N),))
    g.features.add(f"buffer:{init}")


# ---------------------------------------------------------------------------------------------- points


def block_points(g: Gen) -> None:
    x = g.input("x", g.dtype(), (M, N))
    with g.parallel((M, N)) as (i, j):
        col = g.choose(("j", "mirror", "half"))
        if col == "mirror":
            col_v = g.add(Binary, fn=BinaryFn.sub, lhs=g.add(DimValue, dim=DBin("-", N, DConst(1))), rhs=j)
        elif col == "half":
            col_v = g.add(Binary, fn=BinaryFn.floordiv, lhs=j, rhs=g.index(2))
        else:
            col_v = j
        g.add(Load, src=x, index=(i, col_v))
        if g.flip(0.3):
            g.scalar_input("alpha", g.dtype())
        for _ in range(g.int(1, 4)):
            step = g.choose(("pointwise", "if", "while", "loop", "rng"))
            if step == "pointwise":
                pointwise(g, ())
            elif step == "if":
                step_if(g)
            elif step == "while":
                step_while(g)
            elif step == "loop":
                step_loop(g, lambda iv: None, ())
            else:
                flat = g.add(Binary, fn=BinaryFn.add, lhs=g.add(Binary, fn=BinaryFn.mul, lhs=i,
                                                                rhs=g.add(DimValue, dim=N)), rhs=j)
                step_rng(g, flat if g.flip() else g.add(Cast, x=flat, dtype=DType.i32))
        store_new(g, (), (M, N), (i, j))


# ---------------------------------------------------------------------------------------------- segments


def block_segments(g: Gen) -> None:
    offs = g.input("offs", g.choose((DType.i64, DType.i32)), (DBin("+", S, DConst(1)),), InputSpec("offsets", "E"))
    vals = g.input("vals", g.dtype(), (E,))
    scanned = False
    with g.parallel((S,)) as (s,):
        begin = g.add(Load, src=offs, index=(s,))
        end = g.add(Load, src=offs, index=(g.add(Binary, fn=BinaryFn.add, lhs=s, rhs=g.index(1)),))
        sub = (DynSlice(begin, end),)
        for _ in range(g.int(1, 2)):
            if not scanned and g.flip(0.35):
                scanned = True
                region_scan(g, vals, sub)
            else:
                region_fold(g, vals, sub)
        if g.flip(0.3):
            pointwise(g, ())
        store_new(g, (), (S,), (s,))


def region_fold(g: Gen, vals: Value, sub: tuple) -> None:
    dt = vals.type.dtype
    map_region = None
    comps: tuple[DType, ...] = (dt,)  # type: ignore[assignment]
    if g.flip(0.35):
        def body(args: tuple[Value, ...]) -> tuple[Value, ...]:
            (v,) = args
            outs = [pointwise(g, ()) if g.flip() else v]
            if g.flip(0.4):
                outs.append(g.constant(g.choose((DType.f32, DType.i32)), (), 1))
            return tuple(outs)

        map_region = g.region((scalar(dt),), body)  # type: ignore[arg-type]
        comps = tuple(v.type.dtype for v in map_region.yielded)  # type: ignore[misc]
    mapped_exact = map_region is None or not region_inexact(map_region, g.is_inexact)
    if len(comps) > 1 or g.flip(0.3):
        combine = elementwise_combine(g, comps)
        results = g.make(RegionFold, src=vals, index=sub, kind=ReduceKind.custom, identity=combine.identity,
                         map=map_region, combine=combine_region(g, combine, comps))
        g.features.add(f"region_fold:custom:{combine.name}")
    else:
        c = comps[0]
        if c == DType.pred:
            kinds: tuple[ReduceKind, ...] = (ReduceKind.any, ReduceKind.all)
        else:
            kinds = (ReduceKind.sum, ReduceKind.max, ReduceKind.min, ReduceKind.prod)
            if mapped_exact and vals.id not in g.inexact_refs:
                kinds += (ReduceKind.argmax, ReduceKind.argmin)
        kind = g.choose(kinds)
        results = g.make(RegionFold, src=vals, index=sub, kind=kind, map=map_region,
                         acc_dtype=acc_dtype_for(g, kind, c))
        g.features.add(f"region_fold:{kind}")
    del results


def region_scan(g: Gen, vals: Value, sub: tuple) -> None:
    dt = vals.type.dtype
    out = g.output(dt, (E,))  # type: ignore[arg-type]
    flags = {"reverse": g.flip(0.4), "exclusive": g.flip(0.4)}
    if dt == DType.pred or g.flip(0.3):
        combine = elementwise_combine(g, (dt,))  # type: ignore[arg-type]
        g.effect(RegionScan, dst=out, dst_index=sub, src=vals, src_index=sub, kind=ScanKind.custom,
                 identity=combine.identity, combine=combine_region(g, combine, (dt,)), **flags)  # type: ignore
        g.features.add("region_scan:custom")
        return
    kind = g.choose((ScanKind.sum, ScanKind.max, ScanKind.min, ScanKind.prod))
    g.effect(RegionScan, dst=out, dst_index=sub, src=vals, src_index=sub, kind=kind, **flags)
    g.features.add(f"region_scan:{kind}")


# ---------------------------------------------------------------------------------------------- elements


def block_elements(g: Gen) -> None:
    keys = g.input("keys", g.choose((DType.i32, DType.i64, DType.i16, DType.u8)), (K,), InputSpec("index", "B"))
    vals = g.input("x", g.dtype(), (K,)) if g.flip(0.6) else None
    with g.parallel((K,)) as (k,):
        key = g.add(Load, src=keys, index=(k,))
        if vals is not None:
            g.add(Load, src=vals, index=(k,))
        for _ in range(g.int(1, 3)):
            step = g.choose(("gather", "atomic", "unique_atomic", "scatter", "pointwise"))
            if step == "gather":
                table = g.input("table", g.dtype(), (B,))
                g.add(Gather, src=table, indices=(key,), fill=g.literal(table.type.dtype))  # type: ignore[arg-type]
                g.features.add("gather")
            elif step == "atomic":
                shared_atomic(g, key)
            elif step == "unique_atomic":
                unique_atomic(g, k)
            elif step == "scatter":
                perm = g.input("perm", g.choose((DType.i32, DType.i64)), (K,), InputSpec("perm", "K"))
                where = g.add(Load, src=perm, index=(k,))
                value = storable(g, g.pick((), exact=True) or g.constant(g.dtype()), (K,))
                dst = g.output(value.type.dtype, (K,))  # type: ignore[arg-type]
                g.effect(Scatter, dst=dst, indices=(where,), value=value, unique=True)
                g.features.add("scatter")
            else:
                pointwise(g, ())
        store_new(g, (), (K,), (k,))


def _int_operand(g: Gen, dt: DType) -> Value:
    v = g.pick((), exact=True, ok=lambda u: u.type.dtype != DType.pred)
    if v is None or g.flip(0.2):
        return g.constant(dt)
    return v if v.type.dtype == dt else g.add(Cast, x=v, dtype=dt)


def shared_atomic(g: Gen, key: Value) -> None:
    """Integer atomics whose final memory does not depend on order; the old value is not used."""
    dt = atomic_int(g)
    acc = g.output(dt, (B,), Role.INOUT)
    kind = g.choose((AtomicKind.add, AtomicKind.max, AtomicKind.min, AtomicKind.and_, AtomicKind.or_,
                     AtomicKind.xor))
    # The old value depends on the order of the instances: it is not put in the pool.
    g.b.make(Atomic, kind=kind, dst=acc, indices=(key,), value=_int_operand(g, dt), order=g.choose(tuple(MemOrder)))
    g.features.update(("atomic", f"atomic:{kind}"))


def unique_atomic(g: Gen, k: Value) -> None:
    """Atomics at the instance's own index: deterministic, so the old value may be used."""
    dt = g.choose((DType.f32, DType.f32, DType.f16, DType.bf16)) if g.flip(0.25) else atomic_int(g)
    arr = g.output(dt, (K,), Role.INOUT)
    order = g.choose(tuple(MemOrder))
    if g.flip(0.3):
        expected = g.add(Load, src=arr, index=(k,)) if g.flip() else _int_operand(g, dt)
        g.make(AtomicCAS, dst=arr, indices=(k,), expected=expected, value=_int_operand(g, dt), order=order)
        g.features.add("atomic_cas")
        return
    kinds = (AtomicKind.add, AtomicKind.max, AtomicKind.min, AtomicKind.xchg)
    if dt in (DType.f16, DType.bf16):  # Triton's only 16-bit float read-modify-write
        kinds = (AtomicKind.add,)
    elif not dt.is_float:
        kinds += (AtomicKind.and_, AtomicKind.or_, AtomicKind.xor)
    kind = g.choose(kinds)
    g.make(Atomic, kind=kind, dst=arr, indices=(k,), value=_int_operand(g, dt), order=order)
    g.features.add(f"atomic:{kind}:unique")


# ---------------------------------------------------------------------------------------------- tensor


def block_tensor(g: Gen) -> None:
    x = g.input("x", g.dtype(), (M, N))
    g.add(Load, src=x, index=(full(M), full(N)))
    if g.flip(0.3):
        v = g.input("v", g.dtype(), (N,))
        g.add(Load, src=v, index=(full(N),))
    for _ in range(g.int(1, 4)):
        step = g.weighted({"pointwise": 2, "layout": 3, "reduce": 2, "scan": 1, "dot": 1, "histogram": 1})
        if step == "pointwise":
            shapes = sorted({v.type.shape for v in g.pool if isinstance(v.type, TensorType)}, key=str)
            pointwise(g, g.choose(shapes))
        elif step == "layout":
            step_layout(g)
        elif step == "reduce":
            step_reduce(g)
        elif step == "scan":
            step_scan(g)
        elif step == "dot":
            step_dot(g)
        else:
            keys = g.input("keys", g.choose((DType.i32, DType.i64, DType.u8, DType.i16)), (N,),
                           InputSpec("index", "B"))
            g.add(Histogram, values=g.add(Load, src=keys, index=(full(N),)), bins=B)
            g.features.add("histogram")
    shapes = sorted({v.type.shape for v in g.pool if isinstance(v.type, TensorType) and v.type.shape}, key=str)
    for shape in shapes[:2] if g.flip(0.3) else shapes[-1:]:
        store_new(g, shape, shape, tuple(full(d) for d in shape))


def step_layout(g: Gen) -> None:
    kind = g.choose(("transpose", "broadcast", "reshape", "slice", "concat", "expand", "sort"))
    if kind == "sort":  # an order: only of exact values (an allowed ulp must not reorder)
        x = g.pick(exact=True, ok=lambda v: rank(v) >= 1 and v.type.dtype != DType.pred)  # type: ignore[union-attr]
    elif kind == "transpose":  # 3-D and 4-D permutes first, where a broadcast made such values
        x = g.pick(ok=lambda v: rank(v) >= 3) if g.flip(0.7) else None
        x = x or g.pick(ok=lambda v: rank(v) >= 2)
    else:  # up to 4-D: a broadcast adds a leading axis to a value of rank 3 at most
        x = g.pick(ok=lambda v: rank(v) >= 1 and (kind != "broadcast" or rank(v) <= 3))
    if x is None:
        return
    t = x.type
    shape = t.shape
    if kind == "transpose":
        perms = [p for p in itertools.permutations(range(rank(x))) if p != tuple(range(rank(x)))]
        g.add(Transpose, x=x, perm=g.choose(perms))
        g.features.add(f"layout:transpose rank {rank(x)}")
    elif kind == "broadcast":
        lead = g.choose((M, DConst(3), N))
        g.add(Broadcast, x=x, shape=(lead, *shape), dims=tuple(range(1, rank(x) + 1)))
    elif kind == "reshape":
        form = g.choose(("merge", "regroup", "unit")) if rank(x) >= 2 else "unit"
        if form == "merge":  # two neighbouring axes into one (a head merge after a transpose, flattening)
            a = g.int(0, rank(x) - 2)
            g.add(Reshape, x=x, shape=(*shape[:a], DBin("*", shape[a], shape[a + 1]), *shape[a + 2:]))
        elif form == "regroup":  # (A, B) -> (B, A): the same count, not a transpose
            g.add(Reshape, x=x, shape=(*shape[:-2], shape[-1], shape[-2]))
        else:
            g.add(Reshape, x=x, shape=(*shape, DConst(1)) if g.flip() else (DConst(1), *shape))
        g.features.add(f"layout:reshape {form}")
    elif kind == "sort":
        axis = g.int(0, rank(x) - 1)
        k = 1 if g.flip(0.3) else None  # topk: 1 is within every extent the generator draws
        g.make(Sort, x=x, axis=axis, descending=g.flip(), k=k)
        g.features.add(f"sort{' topk' if k else ''} rank {rank(x)}")
    elif kind == "slice":
        starts, stops, steps = [], [], []
        for d in shape:
            start = g.choose((DConst(0), DBin("//", d, DConst(2)))) if not d.is_const else DConst(0)
            starts.append(start)
            stops.append(d)
            steps.append(g.choose((1, 2, 3)))
        g.add(SliceOp, x=x, starts=tuple(starts), stops=tuple(stops), steps=tuple(steps))
    elif kind == "concat":
        other = g.pick(shape, t.dtype) or x  # type: ignore[arg-type]
        g.add(Concat, inputs=(x, other), axis=g.int(0, rank(x) - 1))
    else:
        e = g.add(ExpandDims, x=x, axis=g.int(0, rank(x)))
        if g.flip():
            g.add(Squeeze, x=e, axis=e.type.shape.index(DConst(1)))  # type: ignore[union-attr]
    g.features.add(f"layout:{kind}")


DOT_DTYPES = (DType.f32, DType.f16, DType.bf16, DType.i8, DType.f64)


def step_dot(g: Gen) -> None:
    dt = g.choose(DOT_DTYPES)
    batched = g.flip(0.25)
    transposed = g.flip(0.3)
    lead = (B,) if batched else ()
    u = g.input("u", dt, (*lead, M, K))
    w = g.input("w", dt, (*lead, N, K) if transposed else (*lead, K, N))
    a = g.add(Load, src=u, index=tuple(full(d) for d in u.type.shape))  # type: ignore[union-attr]
    b = g.add(Load, src=w, index=tuple(full(d) for d in w.type.shape))  # type: ignore[union-attr]
    nb = len(lead)
    precision = Precision.tf32 if dt == DType.f32 and g.flip(0.2) else Precision.ieee
    g.add(Dot, lhs=a, rhs=b, lhs_batch=tuple(range(nb)), rhs_batch=tuple(range(nb)), lhs_contract=(nb + 1,),
          rhs_contract=(nb + 1,) if transposed else (nb,), acc_dtype=default_dot_acc(dt), precision=precision)
    g.features.add(f"dot:{dt}{':batched' if batched else ''}{':tf32' if precision is Precision.tf32 else ''}")


# ---------------------------------------------------------------------------------------------- loop


def block_loop(g: Gen) -> None:
    """for t in range(0, N, step): h = h op x[:, t]; out[:, t] = h -- one ordered program."""
    x = g.input("x", g.dtype(), (M, N))
    dt = x.type.dtype
    h0 = g.value((M,), dt)  # type: ignore[arg-type]
    out = g.output(dt, (M, N))  # type: ignore[arg-type]
    step = g.index(g.choose((1, 2)))

    def body(args: tuple[Value, ...]) -> tuple[Value, ...]:
        iv, h = args
        col = g.add(Load, src=x, index=(full(M), iv))
        new = g.add(Binary, fn=g.choose(_ordered_fns(dt)), lhs=h, rhs=col)  # type: ignore[arg-type]
        if g.flip(0.3):
            new = pointwise(g, (M,)) if g.flip() else new
            if new.type != h.type:
                new = g.add(Binary, fn=g.choose(_ordered_fns(dt)), lhs=h, rhs=col)  # type: ignore[arg-type]
        g.effect(Store, dst=out, index=(full(M), iv), value=new)
        return (new,)

    region = g.region((scalar(INDEX_DTYPE), h0.type), body)  # type: ignore[arg-type]
    g.make(For, start=g.index(0), stop=g.add(DimValue, dim=N), step=step, inits=(h0,), body=region)
    store_new(g, (M,), (M,), (full(M),))
    g.features.add("loop")


BLOCK_BUILDERS: dict[str, Callable[[Gen], None]] = {
    "rows": block_rows, "points": block_points, "segments": block_segments, "elements": block_elements,
    "tensor": block_tensor, "loop": block_loop}
BLOCKS = tuple(BLOCK_BUILDERS)


def build_block(g: Gen, kind: str) -> None:
    """One block; usually its values stay inside it, sometimes later blocks may use them."""
    if g.flip(0.15):
        BLOCK_BUILDERS[kind](g)
        return
    with g.scope():
        BLOCK_BUILDERS[kind](g)


__all__ = ["BLOCKS", "BLOCK_BUILDERS", "build_block", "FLOATS", "INTS"]
