"""Hand-built KIR kernels (through the builder, no frontend) used across the test suite."""

from __future__ import annotations

from kir import (
    INDEX_DTYPE,
    Atomic,
    AtomicKind,
    Binary,
    BinaryFn,
    Broadcast,
    Builder,
    Constant,
    DimValue,
    DSym,
    DType,
    DynSlice,
    For,
    Load,
    Parallel,
    Param,
    Reduce,
    ReduceKind,
    RefType,
    RegionFold,
    Role,
    Slice,
    Store,
    Unary,
    UnaryFn,
    Yield,
    build_kernel,
    dim_bin,
    scalar,
)
from kir.core import Kernel
from kir.dims import DConst, PCmp
from kir.solver import ShapeSolver

M, N, S, E = DSym("M"), DSym("N"), DSym("S"), DSym("E")
f32, i64 = DType.f32, DType.i64


def _params(b: Builder, spec: list[tuple[str, object]]) -> tuple[Param, ...]:
    types = tuple(t for _, t in spec)
    args = b.begin_region(types, tuple(n for n, _ in spec))  # type: ignore[arg-type]
    return tuple(Param(n, a) for (n, _), a in zip(spec, args))


def softmax() -> Kernel:
    req = (PCmp("<=", N, DConst(65536)),)
    b = Builder(ShapeSolver(("M", "N"), req))
    x, out = _params(b, [("x", RefType(f32, (M, N), Role.IN)), ("out", RefType(f32, (M, N), Role.OUT))])
    (i,) = b.begin_region((scalar(INDEX_DTYPE),), ("i",))
    row = b.add(Load, src=x.value, index=(i, Slice(DConst(0), N)), name="row")
    mx = b.add(Reduce, inputs=(row,), axes=(0,), kind=ReduceKind.max, name="mx")
    mxb = b.add(Broadcast, x=mx, shape=(N,), dims=())
    e = b.add(Unary, fn=UnaryFn.exp, x=b.add(Binary, fn=BinaryFn.sub, lhs=row, rhs=mxb), name="e")
    s = b.add(Reduce, inputs=(e,), axes=(0,), kind=ReduceKind.sum, name="s")
    y = b.add(Binary, fn=BinaryFn.div, lhs=e, rhs=b.add(Broadcast, x=s, shape=(N,), dims=()))
    b.make(Store, dst=out.value, index=(i, Slice(DConst(0), N)), value=y)
    b.make(Yield, values=())
    body = b.end_region()
    b.make(Parallel, domain=(M,), body=body)
    b.make(Yield, values=())
    return build_kernel("softmax", (x, out), ("M", "N"), b.end_region(), requires=req)


def vector_add() -> Kernel:
    b = Builder(ShapeSolver(("N",)))
    x, y, out = _params(b, [("x", RefType(f32, (N,), Role.IN)), ("y", RefType(f32, (N,), Role.IN)),
                            ("out", RefType(f32, (N,), Role.OUT))])
    full = (Slice(DConst(0), N),)
    s = b.add(Binary, fn=BinaryFn.add, lhs=b.add(Load, src=x.value, index=full),
              rhs=b.add(Load, src=y.value, index=full))
    b.make(Store, dst=out.value, index=full, value=s)
    b.make(Yield, values=())
    return build_kernel("add", (x, y, out), ("N",), b.end_region())


def segment_sum() -> Kernel:
    b = Builder(ShapeSolver(("S", "E")))
    vals, offs, out = _params(b, [("values", RefType(f32, (E,), Role.IN)),
                                  ("offsets", RefType(i64, (dim_bin("+", S, 1),), Role.IN)),
                                  ("out", RefType(f32, (S,), Role.OUT))])
    (s,) = b.begin_region((scalar(INDEX_DTYPE),), ("s",))
    beg = b.add(Load, src=offs.value, index=(s,))
    one = b.add(Constant, value=1, dtype=i64)
    end = b.add(Load, src=offs.value, index=(b.add(Binary, fn=BinaryFn.add, lhs=s, rhs=one),))
    tot = b.add(RegionFold, src=vals.value, index=(DynSlice(beg, end),), kind=ReduceKind.sum)
    b.make(Store, dst=out.value, index=(s,), value=tot)
    b.make(Yield, values=())
    body = b.end_region()
    b.make(Parallel, domain=(S,), body=body)
    b.make(Yield, values=())
    return build_kernel("segment_sum", (vals, offs, out), ("S", "E"), b.end_region())


def recurrence() -> Kernel:
    C, T = DSym("C"), DSym("T")
    b = Builder(ShapeSolver(("C", "T")))
    a, x, h = _params(b, [("a", RefType(f32, (C, T), Role.IN)), ("x", RefType(f32, (C, T), Role.IN)),
                          ("h", RefType(f32, (C, T), Role.OUT))])
    (c,) = b.begin_region((scalar(INDEX_DTYPE),), ("c",))
    zero = b.add(Constant, value=0.0, dtype=f32)
    lo = b.add(Constant, value=0, dtype=i64)
    hi = b.add(DimValue, dim=T)
    st = b.add(Constant, value=1, dtype=i64)
    t, acc = b.begin_region((scalar(i64), scalar(f32)), ("t", "acc"))
    at = b.add(Load, src=a.value, index=(c, t))
    xt = b.add(Load, src=x.value, index=(c, t))
    nacc = b.add(Binary, fn=BinaryFn.add, lhs=b.add(Binary, fn=BinaryFn.mul, lhs=at, rhs=acc), rhs=xt,
                 name="acc")
    b.make(Store, dst=h.value, index=(c, t), value=nacc)
    b.make(Yield, values=(nacc,))
    loop = b.end_region()
    b.make(For, start=lo, stop=hi, step=st, inits=(zero,), body=loop)
    b.make(Yield, values=())
    body = b.end_region()
    b.make(Parallel, domain=(C,), body=body)
    b.make(Yield, values=())
    return build_kernel("linear_recurrence", (a, x, h), ("C", "T"), b.end_region())


def histogram() -> Kernel:
    B = DSym("B")
    b = Builder(ShapeSolver(("E", "B")))
    x, counts = _params(b, [("x", RefType(DType.i32, (E,), Role.IN)),
                            ("counts", RefType(DType.i32, (B,), Role.INOUT))])
    (e,) = b.begin_region((scalar(INDEX_DTYPE),), ("e",))
    xe = b.add(Load, src=x.value, index=(e,))
    one = b.add(Constant, value=1, dtype=DType.i32)
    b.make(Atomic, kind=AtomicKind.add, dst=counts.value, indices=(xe,), value=one)
    b.make(Yield, values=())
    body = b.end_region()
    b.make(Parallel, domain=(E,), body=body)
    b.make(Yield, values=())
    return build_kernel("histogram", (x, counts), ("E", "B"), b.end_region())


ALL = [softmax, vector_add, segment_sum, recurrence, histogram]


def two_groups(allow_empty: bool = False) -> Kernel:
    """Two independent parallel blocks with different domains (rows of x; elements of v)."""
    P = DSym("P")
    req = (PCmp(">=", M, DConst(0)),) if allow_empty else ()
    b = Builder(ShapeSolver(("M", "N", "P"), req))
    x, v, s, sums, scaled = _params(b, [("x", RefType(f32, (M, N), Role.IN)), ("v", RefType(f32, (P,), Role.IN)),
                                        ("s", scalar(f32)), ("sums", RefType(f32, (M,), Role.OUT)),
                                        ("scaled", RefType(f32, (P,), Role.OUT))])
    (i,) = b.begin_region((scalar(INDEX_DTYPE),), ("i",))
    row = b.add(Load, src=x.value, index=(i, Slice(DConst(0), N)), name="row")
    b.make(Store, dst=sums.value, index=(i,), value=b.add(Reduce, inputs=(row,), axes=(0,), kind=ReduceKind.sum))
    b.make(Yield, values=())
    b.make(Parallel, domain=(M,), body=b.end_region())
    (p,) = b.begin_region((scalar(INDEX_DTYPE),), ("p",))
    vp = b.add(Load, src=v.value, index=(p,))
    b.make(Store, dst=scaled.value, index=(p,), value=b.add(Binary, fn=BinaryFn.mul, lhs=vp, rhs=s.value))
    b.make(Yield, values=())
    b.make(Parallel, domain=(P,), body=b.end_region())
    b.make(Yield, values=())
    return build_kernel("row_sums_and_scale", (x, v, s, sums, scaled), ("M", "N", "P"), b.end_region(),
                        requires=req)


def matmul(dtype: DType = DType.f16) -> Kernel:
    """`c[:, :] = dot(a, b)` at top level: (M, N) is the workset, K stays inside each instance."""
    from kir import Dot

    K = DSym("K")
    b = Builder(ShapeSolver(("M", "N", "K")))
    a, bb, c = _params(b, [("a", RefType(dtype, (M, K), Role.IN)), ("b", RefType(dtype, (K, N), Role.IN)),
                           ("c", RefType(f32, (M, N), Role.OUT))])
    la = b.add(Load, src=a.value, index=(Slice(DConst(0), M), Slice(DConst(0), K)))
    lb = b.add(Load, src=bb.value, index=(Slice(DConst(0), K), Slice(DConst(0), N)))
    d = b.add(Dot, lhs=la, rhs=lb, lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,), acc_dtype=f32)
    b.make(Store, dst=c.value, index=(Slice(DConst(0), M), Slice(DConst(0), N)), value=d)
    b.make(Yield, values=())
    return build_kernel("matmul", (a, bb, c), ("M", "N", "K"), b.end_region())


def cumsum_rows(reverse: bool = False, exclusive: bool = False, dtype: DType = f32) -> Kernel:
    from kir import Scan, ScanKind

    b = Builder(ShapeSolver(("M", "N")))
    x, out = _params(b, [("x", RefType(dtype, (M, N), Role.IN)), ("out", RefType(dtype, (M, N), Role.OUT))])
    (i,) = b.begin_region((scalar(INDEX_DTYPE),), ("i",))
    row = b.add(Load, src=x.value, index=(i, Slice(DConst(0), N)), name="row")
    cs = b.add(Scan, inputs=(row,), axis=0, kind=ScanKind.sum, reverse=reverse, exclusive=exclusive)
    b.make(Store, dst=out.value, index=(i, Slice(DConst(0), N)), value=cs)
    b.make(Yield, values=())
    b.make(Parallel, domain=(M,), body=b.end_region())
    b.make(Yield, values=())
    return build_kernel("cumsum_rows", (x, out), ("M", "N"), b.end_region())


def dropout() -> Kernel:
    from kir import Random, RngKind, Select
    from kir.pointwise import CmpFn, Compare

    b = Builder(ShapeSolver(("N",)))
    x, p, seed, out = _params(b, [("x", RefType(f32, (N,), Role.IN)), ("p", scalar(f32)), ("seed", scalar(i64)),
                                  ("out", RefType(f32, (N,), Role.OUT))])
    (n,) = b.begin_region((scalar(INDEX_DTYPE),), ("n",))
    r = b.add(Random, kind=RngKind.rand, seed=seed.value, offset=n, name="r")
    keep = b.add(Compare, fn=CmpFn.ge, lhs=r, rhs=p.value, name="keep")
    one = b.add(Constant, value=1.0, dtype=f32)
    scale = b.add(Binary, fn=BinaryFn.sub, lhs=one, rhs=p.value)
    xn = b.add(Load, src=x.value, index=(n,))
    kept = b.add(Binary, fn=BinaryFn.div, lhs=xn, rhs=scale)
    zero = b.add(Constant, value=0.0, dtype=f32)
    b.make(Store, dst=out.value, index=(n,), value=b.add(Select, cond=keep, on_true=kept, on_false=zero))
    b.make(Yield, values=())
    b.make(Parallel, domain=(N,), body=b.end_region())
    b.make(Yield, values=())
    return build_kernel("dropout", (x, p, seed, out), ("N",), b.end_region())


def racy_store() -> Kernel:
    """Every instance writes out[0]: not provably disjoint, so it runs in order in one instance."""
    b = Builder(ShapeSolver(("N",)))
    x, out = _params(b, [("x", RefType(f32, (N,), Role.IN)), ("out", RefType(f32, (DConst(1),), Role.OUT))])
    (n,) = b.begin_region((scalar(INDEX_DTYPE),), ("n",))
    zero = b.add(Constant, value=0, dtype=i64)
    b.make(Store, dst=out.value, index=(zero,), value=b.add(Load, src=x.value, index=(n,)))
    b.make(Yield, values=())
    b.make(Parallel, domain=(N,), body=b.end_region())
    b.make(Yield, values=())
    return build_kernel("last_element", (x, out), ("N",), b.end_region())


ALL.extend([two_groups, matmul, cumsum_rows, dropout, racy_store])
