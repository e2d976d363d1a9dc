"""KIR kernels (built with `kir.Builder`) for the StableHLO exit tests: the acceptance kernels' KIR and
small kernels that exercise one op family each."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kir import (
    INDEX_DTYPE,
    Alloc,
    Atomic,
    AtomicKind,
    Binary,
    BinaryFn,
    Broadcast,
    Builder,
    CmpFn,
    Compare,
    Constant,
    DimValue,
    Dot,
    DSym,
    DType,
    DynSlice,
    For,
    Gather,
    Histogram,
    If,
    Load,
    Parallel,
    Param,
    Random,
    Reduce,
    ReduceKind,
    RefType,
    RegionFold,
    RegionScan,
    RngKind,
    Role,
    Scan,
    ScanKind,
    Scatter,
    Select,
    Slice,
    Store,
    Unary,
    UnaryFn,
    While,
    Yield,
    build_kernel,
    dim_bin,
    scalar,
)
from kir.core import Kernel, Region, TensorType, Value
from kir.dims import DConst, Dim, Pred
from kir.solver import ShapeSolver

f16, bf16, f32, f64 = DType.f16, DType.bf16, DType.f32, DType.f64
i8, i32, i64, u8, u32, pred = DType.i8, DType.i32, DType.i64, DType.u8, DType.u32, DType.pred
M, N, K, B, S, E, P, C, T = (DSym(n) for n in "MNKBSEPCT")


class KB:
    """A thin helper over `kir.Builder` that keeps test kernels short."""

    def __init__(self, name: str, symbols: str, params: Sequence[tuple[str, Any]], requires: Sequence[Pred] = ()
                 ) -> None:
        self.name = name
        self.symbols = tuple(symbols.split())
        self.requires = tuple(requires)
        self.b = Builder(ShapeSolver(self.symbols, self.requires))
        types = tuple(t if isinstance(t, RefType) else scalar(t) for _, t in params)
        args = self.b.begin_region(types, tuple(n for n, _ in params))
        self.params = tuple(Param(n, a) for (n, _), a in zip(params, args))
        self.p = {pp.name: pp.value for pp in self.params}

    def add(self, cls: type, **fields: Any) -> Value:
        return self.b.add(cls, **fields)

    def make(self, cls: type, **fields: Any) -> tuple[Value, ...]:
        return self.b.make(cls, **fields).results

    def const(self, value: Any, dtype: DType) -> Value:
        return self.add(Constant, value=value, dtype=dtype)

    def bin(self, fn: BinaryFn, a: Value, b: Value) -> Value:
        return self.add(Binary, fn=fn, lhs=a, rhs=b)

    def un(self, fn: UnaryFn, x: Value) -> Value:
        return self.add(Unary, fn=fn, x=x)

    def load(self, ref: str | Value, *index: Any) -> Value:
        src = self.p[ref] if isinstance(ref, str) else ref
        return self.add(Load, src=src, index=tuple(index))

    def store(self, ref: str | Value, index: tuple, value: Value) -> None:
        dst = self.p[ref] if isinstance(ref, str) else ref
        self.b.make(Store, dst=dst, index=index, value=value)

    def bcast(self, x: Value, shape: tuple[Dim, ...], dims: tuple[int, ...] = ()) -> Value:
        return self.add(Broadcast, x=x, shape=shape, dims=dims)

    def reduce(self, x: Value, kind: ReduceKind, axes: tuple[int, ...] = (0,), **kw: Any) -> Value:
        return self.add(Reduce, inputs=(x,), axes=axes, kind=kind, **kw)

    @contextmanager
    def parallel(self, *domain: Dim) -> Iterator[tuple[Value, ...]]:
        idx = self.b.begin_region((scalar(INDEX_DTYPE),) * len(domain), tuple(f"i{n}" for n in range(len(domain))))
        yield idx
        self.b.make(Yield, values=())
        self.b.make(Parallel, domain=tuple(domain), body=self.b.end_region())

    def region(self, types: Sequence[Any], body: Callable[..., Sequence[Value]]) -> Region:
        args = self.b.begin_region(tuple(t if isinstance(t, TensorType) else scalar(t) for t in types))
        outs = body(*args)
        self.b.make(Yield, values=tuple(outs))
        return self.b.end_region()

    def done(self) -> Kernel:
        self.b.make(Yield, values=())
        return build_kernel(self.name, self.params, self.symbols, self.b.end_region(), requires=self.requires)


def ref(dtype: DType, *shape: Dim | int, role: Role = Role.IN) -> RefType:
    return RefType(dtype, tuple(DConst(d) if isinstance(d, int) else d for d in shape), role)


def out(dtype: DType, *shape: Dim | int) -> RefType:
    return ref(dtype, *shape, role=Role.OUT)


def inout(dtype: DType, *shape: Dim | int) -> RefType:
    return ref(dtype, *shape, role=Role.INOUT)


def full(d: Dim) -> Slice:
    return Slice(DConst(0), d)


# ---------------------------------------------------------------------------------------------- acceptance


def axpy() -> Kernel:
    k = KB("axpy", "N", [("a", f32), ("x", ref(f32, N)), ("y", ref(f32, N)), ("out", out(f32, N))])
    with k.parallel(N) as (n,):
        v = k.bin(BinaryFn.add, k.bin(BinaryFn.mul, k.p["a"], k.load("x", n)), k.load("y", n))
        k.store("out", (n,), v)
    return k.done()


def layernorm() -> Kernel:
    k = KB("layernorm", "M N", [("x", ref(f32, M, N)), ("w", ref(f32, N)), ("b", ref(f32, N)), ("eps", f32),
                                ("out", out(f32, M, N)), ("mean", out(f32, M)), ("rstd", out(f32, M))])
    with k.parallel(M) as (i,):
        row = k.load("x", i, full(N))
        n = k.add(DimValue, dim=N, dtype=f32)
        mu = k.bin(BinaryFn.div, k.reduce(row, ReduceKind.sum), n)
        d = k.bin(BinaryFn.sub, row, k.bcast(mu, (N,)))
        var = k.bin(BinaryFn.div, k.reduce(k.bin(BinaryFn.mul, d, d), ReduceKind.sum), n)
        r = k.un(UnaryFn.rsqrt, k.bin(BinaryFn.add, var, k.p["eps"]))
        y = k.bin(BinaryFn.add, k.bin(BinaryFn.mul, k.bin(BinaryFn.mul, d, k.bcast(r, (N,))), k.load("w", full(N))),
                  k.load("b", full(N)))
        k.store("out", (i, full(N)), y)
        k.store("mean", (i,), mu)
        k.store("rstd", (i,), r)
    return k.done()


def cumsum_rows(dtype: DType = f32, reverse: bool = False, exclusive: bool = False) -> Kernel:
    k = KB("cumsum_rows", "M N", [("x", ref(dtype, M, N)), ("out", out(dtype, M, N))])
    with k.parallel(M) as (i,):
        row = k.load("x", i, full(N))
        (c,) = k.make(Scan, inputs=(row,), axis=0, kind=ScanKind.sum, reverse=reverse, exclusive=exclusive)
        k.store("out", (i, full(N)), c)
    return k.done()


def segment_fold(kind: ReduceKind = ReduceKind.sum) -> Kernel:
    k = KB(f"segment_{kind}", "S E", [("values", ref(f32, E)), ("offsets", ref(i64, dim_bin("+", S, 1))),
                                      ("out", out(f32 if kind not in (ReduceKind.argmax,) else i64, S))])
    with k.parallel(S) as (s,):
        beg = k.load("offsets", s)
        end = k.load("offsets", k.bin(BinaryFn.add, s, k.const(1, i64)))
        tot = k.add(RegionFold, src=k.p["values"], index=(DynSlice(beg, end),), kind=kind)
        k.store("out", (s,), tot)
    return k.done()


def matmul(dtype: DType = f16) -> Kernel:
    k = KB("matmul", "M N K", [("a", ref(dtype, M, K)), ("b", ref(dtype, K, N)), ("c", out(f32, M, N))])
    a, b = k.load("a", full(M), full(K)), k.load("b", full(K), full(N))
    c = k.add(Dot, lhs=a, rhs=b, lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,), acc_dtype=f32)
    k.store("c", (full(M), full(N)), c)
    return k.done()


def bmm() -> Kernel:
    k = KB("bmm", "B M N K", [("a", ref(f32, B, M, K)), ("b", ref(f32, B, K, N)), ("c", out(f32, B, M, N))])
    a, b = k.load("a", full(B), full(M), full(K)), k.load("b", full(B), full(K), full(N))
    c = k.add(Dot, lhs=a, rhs=b, lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(1,),
              acc_dtype=f32)
    k.store("c", (full(B), full(M), full(N)), c)
    return k.done()


def welford_combine(k: KB) -> Region:
    def body(mean_a: Value, m2_a: Value, n_a: Value, mean_b: Value, m2_b: Value, n_b: Value) -> list[Value]:
        n = k.bin(BinaryFn.add, n_a, n_b)
        zero, one = k.const(0.0, f32), k.const(1.0, f32)
        frac = k.add(Select, cond=k.add(Compare, fn=CmpFn.eq, lhs=n, rhs=zero), on_true=zero,
                     on_false=k.bin(BinaryFn.div, n_b, k.bin(BinaryFn.maximum, n, one)))
        delta = k.bin(BinaryFn.sub, mean_b, mean_a)
        mean = k.bin(BinaryFn.add, mean_a, k.bin(BinaryFn.mul, delta, frac))
        m2 = k.bin(BinaryFn.add, k.bin(BinaryFn.add, m2_a, m2_b),
                   k.bin(BinaryFn.mul, k.bin(BinaryFn.mul, k.bin(BinaryFn.mul, delta, delta), n_a), frac))
        return [mean, m2, n]

    return k.region([f32] * 6, body)


def welford() -> Kernel:
    k = KB("welford", "M N", [("x", ref(f32, M, N)), ("mean", out(f32, M)), ("var", out(f32, M))])
    with k.parallel(M) as (i,):
        row = k.load("x", i, full(N))
        zeros = k.bcast(k.const(0.0, f32), (N,))
        ones = k.bcast(k.const(1.0, f32), (N,))
        mu, m2, n = k.make(Reduce, inputs=(row, zeros, ones), axes=(0,), kind=ReduceKind.custom,
                           identity=(0.0, 0.0, 0.0), combine=welford_combine(k))
        k.store("mean", (i,), mu)
        k.store("var", (i,), k.bin(BinaryFn.div, m2, n))
    return k.done()


def two_groups() -> Kernel:
    k = KB("row_sums_and_scale", "M N P", [("x", ref(f32, M, N)), ("v", ref(f32, P)), ("s", f32),
                                           ("sums", out(f32, M)), ("scaled", out(f32, P))])
    with k.parallel(M) as (i,):
        k.store("sums", (i,), k.reduce(k.load("x", i, full(N)), ReduceKind.sum))
    with k.parallel(P) as (p,):
        k.store("scaled", (p,), k.bin(BinaryFn.mul, k.load("v", p), k.p["s"]))
    return k.done()


def scaled_row_max(dtype: DType) -> Kernel:
    k = KB("scaled_row_max", "M N", [("x", ref(dtype, M, N)), ("out", out(dtype, M))])
    with k.parallel(M) as (i,):
        mx = k.reduce(k.load("x", i, full(N)), ReduceKind.max)
        k.store("out", (i,), k.bin(BinaryFn.mul, mx, k.const(2, dtype)))
    return k.done()


def dropout() -> Kernel:
    k = KB("dropout", "N", [("x", ref(f32, N)), ("p", f32), ("seed", i64), ("out", out(f32, N))])
    with k.parallel(N) as (n,):
        r = k.add(Random, kind=RngKind.rand, seed=k.p["seed"], offset=n)
        keep = k.add(Compare, fn=CmpFn.ge, lhs=r, rhs=k.p["p"])
        scale = k.bin(BinaryFn.sub, k.const(1.0, f32), k.p["p"])
        v = k.add(Select, cond=keep, on_true=k.bin(BinaryFn.div, k.load("x", n), scale), on_false=k.const(0.0, f32))
        k.store("out", (n,), v)
    return k.done()


# ---------------------------------------------------------------------------------------------- families


def elementwise(dtype: DType, fn: Callable[[KB, Value, Value], Value], out_dtype: DType | None = None,
                name: str = "elementwise") -> Kernel:
    """out[:] = fn(x, y) over whole tensors at top level."""
    k = KB(name, "N", [("x", ref(dtype, N)), ("y", ref(dtype, N)), ("out", out(out_dtype or dtype, N))])
    v = fn(k, k.load("x", full(N)), k.load("y", full(N)))
    k.store("out", (full(N),), v)
    return k.done()


def reduce_rows(dtype: DType, kind: ReduceKind, axes: tuple[int, ...] = (1,), keepdims: bool = False,
                out_dtype: DType | None = None) -> Kernel:
    """Whole-tensor reduction of x[M, N] at top level."""
    shape: tuple[Dim, ...] = (M, N)
    kept = tuple(DConst(1) if a in axes else d for a, d in enumerate(shape)) if keepdims else \
        tuple(d for a, d in enumerate(shape) if a not in axes)
    k = KB(f"reduce_{kind}", "M N", [("x", ref(dtype, M, N)), ("out", out(out_dtype or dtype, *kept))])
    r = k.add(Reduce, inputs=(k.load("x", full(M), full(N)),), axes=axes, kind=kind, keepdims=keepdims)
    k.store("out", tuple(full(d) for d in kept), r)
    return k.done()


def gather_fill(fill: float = -1.0) -> Kernel:
    k = KB("gather", "N E", [("x", ref(f32, N)), ("idx", ref(i32, E)), ("out", out(f32, E))])
    g = k.add(Gather, src=k.p["x"], indices=(k.load("idx", full(E)),), fill=fill)
    k.store("out", (full(E),), g)
    return k.done()


def scatter_rows(unique: bool = False) -> Kernel:
    k = KB("scatter", "N E", [("idx", ref(i32, E)), ("v", ref(f32, E)), ("out", inout(f32, N))])
    with k.parallel(E) as (e,):
        k.b.make(Scatter, dst=k.p["out"], indices=(k.load("idx", e),), value=k.load("v", e), unique=unique)
    return k.done()


def atomic_kernel(kind: AtomicKind, use_old: bool = False) -> Kernel:
    k = KB(f"atomic_{kind}", "E B", [("idx", ref(i32, E)), ("v", ref(i32, E)), ("acc", inout(i32, B)),
                                     ("old", out(i32, E))])
    with k.parallel(E) as (e,):
        old = k.add(Atomic, kind=kind, dst=k.p["acc"], indices=(k.load("idx", e),), value=k.load("v", e))
        if use_old:
            k.store("old", (e,), old)
    return k.done()


def histogram_op() -> Kernel:
    k = KB("histogram_op", "E B", [("x", ref(i64, E)), ("counts", out(i32, B))])
    h = k.add(Histogram, values=k.load("x", full(E)), bins=B)
    k.store("counts", (full(B),), h)
    return k.done()


def masked_update() -> Kernel:
    """out[i] = x[i] * 2 where x[i] > 0; other elements keep their prior contents (an `if` without else)."""
    k = KB("masked_update", "N", [("x", ref(f32, N)), ("out", out(f32, N))])
    with k.parallel(N) as (n,):
        xn = k.load("x", n)
        cond = k.add(Compare, fn=CmpFn.gt, lhs=xn, rhs=k.const(0.0, f32))

        def then() -> list[Value]:
            k.store("out", (n,), k.bin(BinaryFn.mul, xn, k.const(2.0, f32)))
            return []

        k.b.make(If, cond=cond, then_=k.region([], then), else_=k.region([], lambda: []))
    return k.done()


def collatz() -> Kernel:
    """A per-instance `while`: steps[n] = Collatz steps of x[n] (x >= 1)."""
    k = KB("collatz", "N", [("x", ref(i64, N)), ("steps", out(i64, N))])
    with k.parallel(N) as (n,):
        x0 = k.load("x", n)

        def cond(v: Value, c: Value) -> list[Value]:
            return [k.add(Compare, fn=CmpFn.ne, lhs=v, rhs=k.const(1, i64))]

        def body(v: Value, c: Value) -> list[Value]:
            odd = k.add(Compare, fn=CmpFn.eq, lhs=k.bin(BinaryFn.mod, v, k.const(2, i64)), rhs=k.const(1, i64))
            up = k.bin(BinaryFn.add, k.bin(BinaryFn.mul, v, k.const(3, i64)), k.const(1, i64))
            down = k.bin(BinaryFn.floordiv, v, k.const(2, i64))
            return [k.add(Select, cond=odd, on_true=up, on_false=down), k.bin(BinaryFn.add, c, k.const(1, i64))]

        _, steps = k.make(While, inits=(x0, k.const(0, i64)), cond=k.region([i64, i64], cond),
                          body=k.region([i64, i64], body))
        k.store("steps", (n,), steps)
    return k.done()


def ragged_for() -> Kernel:
    """A `for` whose trip count differs per instance: out[n] = sum_{t < len[n]} x[n, t] (sequentially)."""
    k = KB("ragged_for", "N T", [("x", ref(f32, N, T)), ("lens", ref(i64, N)), ("out", out(f32, N))])
    with k.parallel(N) as (n,):
        ln = k.load("lens", n)

        def body(t: Value, acc: Value) -> list[Value]:
            xt = k.add(Gather, src=k.p["x"], indices=(n, t))
            return [k.bin(BinaryFn.add, acc, xt)]

        (tot,) = k.make(For, start=k.const(0, i64), stop=ln, step=k.const(1, i64), inits=(k.const(0.0, f32),),
                        body=k.region([i64, f32], body))
        k.store("out", (n,), tot)
    return k.done()


def custom_scan(reverse: bool = False, exclusive: bool = False) -> Kernel:
    """A non-commutative custom scan: the affine map composition (a, b) . (c, d) = (a*c, b*c + d)."""
    k = KB("affine_scan", "N", [("a", ref(f64, N)), ("b", ref(f64, N)), ("oa", out(f64, N)), ("ob", out(f64, N))])

    def comb(a1: Value, b1: Value, a2: Value, b2: Value) -> list[Value]:
        return [k.bin(BinaryFn.mul, a1, a2), k.bin(BinaryFn.add, k.bin(BinaryFn.mul, b1, a2), b2)]

    ra, rb = k.make(Scan, inputs=(k.load("a", full(N)), k.load("b", full(N))), axis=0, kind=ScanKind.custom,
                    reverse=reverse, exclusive=exclusive, identity=(1.0, 0.0), combine=k.region([f64] * 4, comb))
    k.store("oa", (full(N),), ra)
    k.store("ob", (full(N),), rb)
    return k.done()


def segment_cumsum(reverse: bool = False, exclusive: bool = False) -> Kernel:
    k = KB("segment_cumsum", "S E", [("values", ref(i32, E)), ("offsets", ref(i64, dim_bin("+", S, 1))),
                                     ("out", inout(i32, E))])
    with k.parallel(S) as (s,):
        beg = k.load("offsets", s)
        end = k.load("offsets", k.bin(BinaryFn.add, s, k.const(1, i64)))
        k.b.make(RegionScan, dst=k.p["out"], dst_index=(DynSlice(beg, end),), src=k.p["values"],
                 src_index=(DynSlice(beg, end),), kind=ScanKind.sum, reverse=reverse, exclusive=exclusive)
    return k.done()


def local_buffer() -> Kernel:
    """A per-instance local buffer written then read: out[i, :] = reversed(x[i, :]) via a zeros buffer."""
    k = KB("local_buffer", "M N", [("x", ref(f32, M, N)), ("out", out(f32, M, N))])
    with k.parallel(M) as (i,):
        buf = k.add(Alloc, dtype=f32, shape=(N,))

        def body(j: Value) -> list[Value]:
            last = k.bin(BinaryFn.sub, k.add(DimValue, dim=N, dtype=i64), k.const(1, i64))
            v = k.add(Gather, src=k.p["x"], indices=(i, k.bin(BinaryFn.sub, last, j)))
            k.b.make(Scatter, dst=buf, indices=(j,), value=v)
            return []

        k.make(For, start=k.const(0, i64), stop=k.add(DimValue, dim=N, dtype=i64), step=k.const(1, i64), inits=(),
               body=k.region([i64], body))
        k.store("out", (i, full(N)), k.load(buf, full(N)))
    return k.done()




def ranged_fold(kind: ReduceKind = ReduceKind.sum) -> Kernel:
    """out[s] = fold(values[begin[s]:end[s]]): subregions in any order, possibly overlapping."""
    k = KB("ranged_fold", "S E", [("values", ref(f32, E)), ("begin", ref(i64, S)), ("end", ref(i64, S)),
                                  ("out", out(f32, S))])
    with k.parallel(S) as (s,):
        tot = k.add(RegionFold, src=k.p["values"], index=(DynSlice(k.load("begin", s), k.load("end", s)),), kind=kind)
        k.store("out", (s,), tot)
    return k.done()
