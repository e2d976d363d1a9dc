"""Typing rules of every op family through the Builder: accepted types, and rejections with exact messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

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
    Load,
    Parallel,
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
    scalar,
)
from kir.dims import DBin, DConst, DSym, PCmp
from kir.errors import DiagnosticError
from kir.solver import ShapeSolver

M, N, K, K2 = DSym("M"), DSym("N"), DSym("K"), DSym("K2")
f16, f32, f64, i8, i32, i64, u32, pred = (DType.f16, DType.f32, DType.f64, DType.i8, DType.i32, DType.i64, DType.u32,
                                          DType.pred)
T = DTypeVar("T", (DType.f16, DType.f32))
C0 = DConst(0)


def t(dtype: Any, *shape: Any) -> TensorType:
    return TensorType(dtype, tuple(shape))


def ref(dtype: Any, role: Role, *shape: Any) -> RefType:
    return RefType(dtype, tuple(shape), role)


def values(*types: Any, requires: tuple = ()) -> tuple[Builder, tuple[Value, ...]]:
    b = Builder(ShapeSolver(("M", "N", "K", "K2"), requires))
    return b, b.begin_region(tuple(types))


def rejected(fn: Callable[[], Any]) -> str:
    with pytest.raises(DiagnosticError) as info:
        fn()
    return info.value.message


def region(b: Builder, arg_types: tuple, body: Callable[[tuple[Value, ...]], tuple[Value, ...]]):
    args = b.begin_region(arg_types)
    b.make(Yield, values=body(args))
    return b.end_region()


# ---------------------------------------------------------------------------------------------- pointwise


def test_constants_and_index_values() -> None:
    b, _ = values()
    assert b.add(Constant, value=1.5, dtype=f32).type == scalar(f32)
    assert b.add(Constant, value=255, dtype=DType.u8).type == scalar(DType.u8)
    assert b.add(Constant, value=True, dtype=pred).type == scalar(pred)
    assert b.add(Iota, extent=N).type == t(i64, N)
    assert b.add(DimValue, dim=DBin("+", N, DConst(1)), dtype=i32).type == scalar(i32)
    assert rejected(lambda: b.add(Constant, value=300, dtype=i8)) == "constant 300 does not fit i8"
    assert rejected(lambda: b.add(Constant, value=1.5, dtype=i32)) == "constant 1.5 does not fit i32"
    assert rejected(lambda: b.add(Constant, value=-1, dtype=u32)) == "constant -1 does not fit u32"
    assert rejected(lambda: b.add(Constant, value=True, dtype=T)) == "constant True does not fit T"
    assert rejected(lambda: b.add(Iota, extent=N, dtype=f32)) == "iota needs an integer dtype, got f32"


def test_unary() -> None:
    b, (x, n, p) = values(t(f32, N), t(i32, N), t(pred, N))
    assert b.add(Unary, fn=UnaryFn.exp, x=x).type == t(f32, N)
    assert b.add(Unary, fn=UnaryFn.isnan, x=x).type == t(pred, N)
    assert b.add(Unary, fn=UnaryFn.not_, x=n).type == t(i32, N)
    assert b.add(Unary, fn=UnaryFn.abs, x=n).type == t(i32, N)
    assert rejected(lambda: b.add(Unary, fn=UnaryFn.exp, x=n)) == "exp needs a floating-point operand, got i32"
    assert rejected(lambda: b.add(Unary, fn=UnaryFn.not_, x=x)) == "not needs a pred or integer operand, got f32"
    assert rejected(lambda: b.add(Unary, fn=UnaryFn.neg, x=p)) == "neg is not defined on pred"


def test_binary_compare_select() -> None:
    b, (x, h, n, p, r) = values(t(f32, N), t(f16, N), t(i32, N), t(pred, N), ref(f32, Role.IN, N))
    assert b.add(Binary, fn=BinaryFn.add, lhs=x, rhs=x).type == t(f32, N)
    assert b.add(Binary, fn=BinaryFn.shl, lhs=n, rhs=n).type == t(i32, N)
    assert b.add(Binary, fn=BinaryFn.and_, lhs=p, rhs=p).type == t(pred, N)
    assert b.add(Compare, fn=CmpFn.lt, lhs=x, rhs=x).type == t(pred, N)
    assert b.add(Select, cond=p, on_true=x, on_false=x).type == t(f32, N)
    assert rejected(lambda: b.add(Binary, fn=BinaryFn.add, lhs=x, rhs=h)) == \
        "add: operand dtypes differ (f32 vs f16); KIR never promotes, insert a cast"
    assert rejected(lambda: b.add(Binary, fn=BinaryFn.div, lhs=n, rhs=n)) == \
        "div needs floating-point operands, got i32; use floordiv for integers"
    assert rejected(lambda: b.add(Binary, fn=BinaryFn.xor, lhs=x, rhs=x)) == \
        "xor needs pred or integer operands, got f32"
    assert rejected(lambda: b.add(Binary, fn=BinaryFn.shr, lhs=p, rhs=p)) == "shr needs integer operands, got pred"
    assert rejected(lambda: b.add(Binary, fn=BinaryFn.mul, lhs=p, rhs=p)) == "mul is not defined on pred"
    assert rejected(lambda: b.add(Binary, fn=BinaryFn.add, lhs=r, rhs=x)) == \
        "add lhs must be a tensor value, got memory in f32[N]"
    assert rejected(lambda: b.add(Compare, fn=CmpFn.eq, lhs=x, rhs=n)) == \
        "compare eq: operand dtypes differ (f32 vs i32); KIR never promotes, insert a cast"
    assert rejected(lambda: b.add(Select, cond=x, on_true=x, on_false=x)) == "select condition must be pred, got f32"


def test_cast_and_bitcast() -> None:
    b, (x, s) = values(t(f32, N), t(T, N))
    assert b.add(Cast, x=x, dtype=i8).type == t(i8, N)
    assert b.add(Cast, x=s, dtype=f32).type == t(f32, N)
    assert b.add(Bitcast, x=x, dtype=u32).type == t(u32, N)
    assert rejected(lambda: b.add(Bitcast, x=x, dtype=f16)) == \
        "bitcast between different widths: f32 (32 bits) to f16 (16 bits)"
    assert rejected(lambda: b.add(Bitcast, x=s, dtype=i32)) == "bitcast needs concrete dtypes"


# ---------------------------------------------------------------------------------------------- layout


def test_layout() -> None:
    b, (x, v, one, h) = values(t(f32, M, N), t(f32, N), t(f32, DConst(1)), t(f16, N))
    assert b.add(Broadcast, x=v, shape=(M, N), dims=(1,)).type == t(f32, M, N)
    assert b.add(Broadcast, x=one, shape=(M, N), dims=(0,)).type == t(f32, M, N)
    assert b.add(Reshape, x=v, shape=(N, DConst(1))).type == t(f32, N, DConst(1))
    assert b.add(Transpose, x=x, perm=(1, 0)).type == t(f32, N, M)
    assert b.add(SliceOp, x=v, starts=(DConst(1),), stops=(N,), steps=(2,)).type == \
        t(f32, DBin("//", N, DConst(2)))  # (N - 1 + 2 - 1) // 2, folded
    assert b.add(Concat, inputs=(v, v), axis=0).type == t(f32, DBin("+", N, N))
    assert b.add(ExpandDims, x=v, axis=1).type == t(f32, N, DConst(1))
    assert b.add(Squeeze, x=one, axis=0).type == t(f32)
    assert rejected(lambda: b.add(Broadcast, x=v, shape=(M, N), dims=())) == \
        "broadcast maps 0 axes but the operand has rank 1"
    assert rejected(lambda: b.add(Broadcast, x=x, shape=(M, N), dims=(1, 0))) == \
        "broadcast dims [1, 0] must be increasing and within rank 2"
    assert rejected(lambda: b.add(Transpose, x=x, perm=(0, 0))) == \
        "transpose permutation [0, 0] is not a permutation of rank 2"
    assert rejected(lambda: b.add(SliceOp, x=v, starts=(C0,), stops=(N,), steps=(0,))) == \
        "slice step must be a positive constant, got 0 on axis 0"
    assert rejected(lambda: b.add(SliceOp, x=v, starts=(C0,), stops=(N,), steps=())) == \
        "slice needs start/stop/step for each of 1 axes"
    assert rejected(lambda: b.add(Concat, inputs=(), axis=0)) == "concat needs at least one input"
    assert rejected(lambda: b.add(Concat, inputs=(v,), axis=1)) == "concat axis 1 out of range for rank 1"
    assert rejected(lambda: b.add(Concat, inputs=(v, h), axis=0)) == "concat inputs differ: f32[N] vs f16[N]"
    assert rejected(lambda: b.add(ExpandDims, x=v, axis=3)) == "expand_dims axis 3 out of range for rank 1"
    assert rejected(lambda: b.add(Squeeze, x=v, axis=1)) == "squeeze axis 1 out of range for rank 1"


# ---------------------------------------------------------------------------------------------- access


def test_load_and_store() -> None:
    b, (x, o, i, fi, v, h) = values(ref(f32, Role.IN, M, N), ref(f32, Role.OUT, M, N), scalar(i64), scalar(f32),
                                    t(f32, N), t(f16, N))
    row = (i, Slice(C0, N))
    assert b.add(Load, src=x, index=row).type == t(f32, N)
    assert b.add(Load, src=x, index=(i, i)).type == t(f32)
    assert b.make(Store, dst=o, index=row, value=v).results == ()
    assert rejected(lambda: b.add(Load, src=x, index=(i,))) == "load indexes 1 axes of a rank-2 tensor [M, N]"
    assert rejected(lambda: b.add(Load, src=v, index=(i,))) == \
        "load source must be a tensor parameter or buffer, got value f32[N]"
    assert rejected(lambda: b.add(Load, src=x, index=(fi, i))) == \
        "load index on axis 0 must be an integer scalar, got f32[]"
    assert rejected(lambda: b.add(Load, src=x, index=(i, DynSlice(i, i)))) == \
        "load: a data-dependent subregion (b:e) is only allowed in region folds/scans"
    assert rejected(lambda: b.make(Store, dst=x, index=row, value=v)) == \
        "store to an `in` parameter; declare it Out[...] or InOut[...]"
    assert rejected(lambda: b.make(Store, dst=o, index=row, value=h)) == \
        "stored value is f16 but the target is f32; insert a cast"
    assert rejected(lambda: b.make(Store, dst=o, index=(i, i), value=v)) == \
        "rank mismatch (stored value and target slice): [N] vs []"


def test_gather_and_scatter() -> None:
    b, (x, o, ids, fids, v, n) = values(ref(f32, Role.IN, M, N), ref(i32, Role.OUT, N), t(i64, N), t(f32, N),
                                        t(f32, N), t(i32, N))
    assert b.add(Gather, src=x, indices=(ids, ids), fill=float("-inf")).type == t(f32, N)
    assert b.make(Scatter, dst=o, indices=(ids,), value=n, unique=True).results == ()
    assert rejected(lambda: b.add(Gather, src=x, indices=(ids,))) == "gather needs 2 indices for [M, N], got 1"
    assert rejected(lambda: b.add(Gather, src=x, indices=(ids, fids))) == \
        "gather index 1 must be an integer tensor, got f32[N]"
    assert rejected(lambda: b.add(Gather, src=o, indices=(ids,), fill=0.5)) == "gather fill 0.5 does not fit i32"
    assert rejected(lambda: b.make(Scatter, dst=o, indices=(ids, ids), value=n)) == "scatter needs 1 indices, got 2"
    assert rejected(lambda: b.make(Scatter, dst=o, indices=(ids,), value=v)) == \
        "scattered value is f32 but the target is i32; insert a cast"
    assert rejected(lambda: b.make(Scatter, dst=x, indices=(ids, ids), value=v)) == \
        "scatter to an `in` parameter; declare it Out[...] or InOut[...]"


def test_atomics() -> None:
    b, (c, fc, src, idx, one, fone, h) = values(ref(i32, Role.INOUT, N), ref(f32, Role.OUT, N), ref(i32, Role.IN, N),
                                                scalar(i64), scalar(i32), scalar(f32), scalar(f16))
    assert b.make(Atomic, kind=AtomicKind.add, dst=c, indices=(idx,), value=one).results[0].type == scalar(i32)
    assert b.make(Atomic, kind=AtomicKind.max, dst=fc, indices=(idx,), value=fone).results[0].type == scalar(f32)
    assert b.make(AtomicCAS, dst=c, indices=(idx,), expected=one, value=one).results[0].type == scalar(i32)
    assert rejected(lambda: b.make(Atomic, kind=AtomicKind.and_, dst=fc, indices=(idx,), value=fone)) == \
        "atomic_and needs an integer target, got f32"
    assert rejected(lambda: b.make(Atomic, kind=AtomicKind.add, dst=src, indices=(idx,), value=one)) == \
        "atomic_add to an `in` parameter; declare it Out[...] or InOut[...]"
    assert rejected(lambda: b.make(AtomicCAS, dst=fc, indices=(idx,), expected=h, value=fone)) == \
        "atomic_cas operand is f16 but the target is f32; insert a cast"
    assert rejected(lambda: b.make(Atomic, kind=AtomicKind.xchg, dst=c, indices=(), value=one)) == \
        "atomic_xchg needs 1 indices, got 0"


def test_local_buffers() -> None:
    b, _ = values()
    assert b.add(Alloc, dtype=f32, shape=(N,)).type == ref(f32, Role.LOCAL, N)
    assert b.add(Alloc, dtype=i32, shape=(N,), init=InitMode.full, fill=7).type == ref(i32, Role.LOCAL, N)
    assert rejected(lambda: b.add(Alloc, dtype=i32, shape=(N,), init=InitMode.full, fill=1.5)) == \
        "buffer fill 1.5 does not fit i32"


# ------------------------------------------------------------------------------------- contract, histogram, rng


def test_dot() -> None:
    b, (a, bb, a3, b3, h, p, c) = values(t(f16, M, K), t(f16, K, N), t(f32, M, N, K), t(f32, M, K, N), t(f32, K, N),
                                         t(pred, M, K), t(f32, K2, N))
    mm = dict(lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,))
    assert b.add(Dot, lhs=a, rhs=bb, acc_dtype=f32, **mm).type == t(f32, M, N)
    assert b.add(Dot, lhs=a3, rhs=b3, lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(1,),
                 acc_dtype=f32, precision=Precision.tf32).type == t(f32, M, N, N)
    assert rejected(lambda: b.add(Dot, lhs=a, rhs=h, acc_dtype=f32, **mm)) == \
        "dot operand dtypes differ (f16 vs f32); insert a cast"
    assert rejected(lambda: b.add(Dot, lhs=p, rhs=p, acc_dtype=f32, **mm)) == "dot is not defined on pred"
    assert rejected(lambda: b.add(Dot, lhs=a, rhs=bb, acc_dtype=f32, lhs_batch=(0,), rhs_batch=(),
                                  lhs_contract=(1,), rhs_contract=(0,))) == \
        "dot needs as many lhs as rhs batch dims and contracting dims"
    assert rejected(lambda: b.add(Dot, lhs=a, rhs=bb, acc_dtype=f32, lhs_batch=(), rhs_batch=(),
                                  lhs_contract=(2,), rhs_contract=(0,))) == \
        "dot lhs dims [2] are not distinct axes of rank 2"
    assert rejected(lambda: b.add(Dot, lhs=a, rhs=bb, acc_dtype=f32, precision=Precision.tf32, **mm)) == \
        "precision tf32 applies to f32 operands only"
    message = rejected(lambda: b.add(Dot, lhs=h, rhs=c, acc_dtype=f32, **mm))
    assert message.startswith("cannot prove N == K2 (contraction dims lhs 1 / rhs 0): counterexample ")


def test_histogram_and_random() -> None:
    b, (v, f, seed, fseed, offs) = values(t(i32, N), t(f32, N), scalar(i64), scalar(f32), t(i64, N))
    assert b.add(Histogram, values=v, bins=M).type == t(i32, M)
    assert b.add(Random, kind=RngKind.rand, seed=seed, offset=offs).type == t(f32, N)
    assert b.add(Random, kind=RngKind.randint, seed=seed, offset=offs).type == t(u32, N)
    assert rejected(lambda: b.add(Histogram, values=f, bins=M)) == "histogram needs integer values, got f32"
    assert rejected(lambda: b.add(Random, kind=RngKind.randn, seed=fseed, offset=offs)) == \
        "random seed must be an integer scalar, got f32[]"
    assert rejected(lambda: b.add(Random, kind=RngKind.randn, seed=seed, offset=f)) == \
        "random offset must be integer, got f32"


# ---------------------------------------------------------------------------------------------- reduce, scan, regions


def add_combine(b: Builder, dtype: Any, k: int = 1):
    return region(b, (scalar(dtype),) * (2 * k),
                  lambda args: tuple(b.add(Binary, fn=BinaryFn.add, lhs=args[n], rhs=args[n + k]) for n in range(k)))


def test_reduce() -> None:
    b, (x, p, n) = values(t(f32, M, N), t(pred, N), t(i32, M, N))
    assert b.add(Reduce, inputs=(x,), axes=(1,), kind=ReduceKind.sum).type == t(f32, M)
    assert b.add(Reduce, inputs=(x,), axes=(0, 1), kind=ReduceKind.max, keepdims=True).type == \
        t(f32, DConst(1), DConst(1))
    assert b.add(Reduce, inputs=(x,), axes=(1,), kind=ReduceKind.argmax).type == t(i64, M)
    assert b.add(Reduce, inputs=(p,), axes=(0,), kind=ReduceKind.any).type == t(pred)
    custom = b.make(Reduce, inputs=(x, n), axes=(1,), kind=ReduceKind.custom, identity=(0.0, 0),
                    combine=region(b, (scalar(f32), scalar(i32)) * 2, lambda a: (
                        b.add(Binary, fn=BinaryFn.add, lhs=a[0], rhs=a[2]),
                        b.add(Binary, fn=BinaryFn.maximum, lhs=a[1], rhs=a[3]))))
    assert [v.type for v in custom.results] == [t(f32, M), t(i32, M)]
    assert rejected(lambda: b.add(Reduce, inputs=(), axes=(), kind=ReduceKind.sum)) == "reduce needs at least one input"
    assert rejected(lambda: b.add(Reduce, inputs=(x,), axes=(2,), kind=ReduceKind.sum)) == \
        "reduce axes [2] are not distinct axes of rank 2"
    assert rejected(lambda: b.make(Reduce, inputs=(x, x), axes=(0,), kind=ReduceKind.sum)) == \
        "reduce sum takes one input, got 2"
    assert rejected(lambda: b.add(Reduce, inputs=(x,), axes=(0,), kind=ReduceKind.all)) == \
        "reduce all needs pred values, got f32"
    assert rejected(lambda: b.add(Reduce, inputs=(p,), axes=(0,), kind=ReduceKind.sum)) == \
        "reduce sum is not defined on pred; cast to an integer first"
    assert rejected(lambda: b.add(Reduce, inputs=(x,), axes=(0,), kind=ReduceKind.sum, acc_dtype=pred)) == \
        "accumulator dtype pred is not numeric"
    assert rejected(lambda: b.add(Reduce, inputs=(x,), axes=(0,), kind=ReduceKind.custom,
                                  combine=add_combine(b, f32))) == \
        "reduce: the custom combine needs an identity with 1 component(s)"
    assert rejected(lambda: b.add(Reduce, inputs=(x,), axes=(0,), kind=ReduceKind.custom, identity=(0.0,))) == \
        "reduce with a custom combine needs a combine region"
    assert rejected(lambda: b.add(Reduce, inputs=(x,), axes=(0,), kind=ReduceKind.custom, identity=(0.0,),
                                  combine=add_combine(b, i32))) == \
        "reduce: combine region takes (i32[], i32[]) but the components need (f32[], f32[])"
    assert rejected(lambda: b.add(Reduce, inputs=(n,), axes=(0,), kind=ReduceKind.custom, identity=(0.5,),
                                  combine=add_combine(b, i32))) == "reduce: identity 0.5 does not fit i32"
    assert rejected(lambda: b.add(Reduce, inputs=(x,), axes=(0,), kind=ReduceKind.max,
                                  combine=add_combine(b, f32))) == "reduce max takes no combine region"


def test_scan() -> None:
    b, (x, p) = values(t(f32, M, N), t(pred, N))
    assert b.add(Scan, inputs=(x,), axis=1, kind=ScanKind.sum, reverse=True, exclusive=True).type == t(f32, M, N)
    assert b.add(Scan, inputs=(x,), axis=0, kind=ScanKind.custom, identity=(0.0,),
                 combine=add_combine(b, f32)).type == t(f32, M, N)
    assert rejected(lambda: b.add(Scan, inputs=(x,), axis=2, kind=ScanKind.sum)) == \
        "scan axis 2 out of range for rank 2"
    assert rejected(lambda: b.add(Scan, inputs=(p,), axis=0, kind=ScanKind.max)) == \
        "scan max is not defined on pred; cast to an integer first"
    assert rejected(lambda: b.add(Scan, inputs=(x,), axis=0, kind=ScanKind.sum, identity=(0.0, 1.0))) == \
        "scan identity (0.0, 1.0) does not fit f32"
    assert rejected(lambda: b.add(Scan, inputs=(), axis=0, kind=ScanKind.sum)) == "scan needs at least one input"


def test_region_fold_and_scan() -> None:
    b, (vals, out, ivals, lo, hi, flo) = values(ref(f32, Role.IN, N), ref(f32, Role.OUT, N), ref(i32, Role.IN, N),
                                                scalar(i64), scalar(i64), scalar(f32))
    sub = (DynSlice(lo, hi),)
    assert b.add(RegionFold, src=vals, index=sub, kind=ReduceKind.sum).type == scalar(f32)
    assert b.add(RegionFold, src=vals, index=sub, kind=ReduceKind.argmin).type == scalar(i64)
    sq = region(b, (scalar(f32),), lambda a: (b.add(Binary, fn=BinaryFn.mul, lhs=a[0], rhs=a[0]),
                                              b.add(Cast, x=a[0], dtype=f64)))
    fold = b.make(RegionFold, src=vals, index=sub, kind=ReduceKind.custom, identity=(0.0, 0.0), map=sq,
                  combine=region(b, (scalar(f32), scalar(f64)) * 2, lambda a: (
                      b.add(Binary, fn=BinaryFn.add, lhs=a[0], rhs=a[2]),
                      b.add(Binary, fn=BinaryFn.add, lhs=a[1], rhs=a[3]))))
    assert [v.type for v in fold.results] == [scalar(f32), scalar(f64)]
    assert b.make(RegionScan, dst=out, dst_index=sub, src=vals, src_index=sub, kind=ScanKind.sum).results == ()
    assert rejected(lambda: b.add(RegionFold, src=vals, index=(Slice(C0, N),), kind=ReduceKind.sum)) == \
        "region fold needs exactly one data-dependent subregion b:e, got 0"
    assert rejected(lambda: b.add(RegionFold, src=vals, index=(DynSlice(lo, flo),), kind=ReduceKind.sum)) == \
        "region fold subregion end must be an integer scalar, got f32[]"
    assert rejected(lambda: b.add(RegionFold, src=vals, index=sub, kind=ReduceKind.any)) == \
        "region fold any needs pred values, got f32"
    assert rejected(lambda: b.add(RegionFold, src=vals, index=sub, kind=ReduceKind.sum,
                                  map=region(b, (scalar(i32),), lambda a: a))) == \
        "region fold map takes one f32 element (and optionally its i64 position)"
    assert rejected(lambda: b.make(RegionScan, dst=vals, dst_index=sub, src=vals, src_index=sub,
                                   kind=ScanKind.sum)) == \
        "region scan to an `in` parameter; declare it Out[...] or InOut[...]"
    assert rejected(lambda: b.make(RegionScan, dst=out, dst_index=sub, src=ivals, src_index=sub,
                                   kind=ScanKind.sum)) == "region scan source is i32 but the target is f32"


# ---------------------------------------------------------------------------------------------- control


def test_parallel_for_while_if() -> None:
    b, (x, lo, hi, st, flo, p, one32) = values(t(f32, N), scalar(i64), scalar(i64), scalar(i64), scalar(f32),
                                               scalar(pred), scalar(i32))
    idx = scalar(INDEX_DTYPE)
    assert b.make(Parallel, domain=(M, N), body=region(b, (idx, idx), lambda a: ())).results == ()
    loop = b.make(For, start=lo, stop=hi, step=st, inits=(x,),
                  body=region(b, (idx, t(f32, N)), lambda a: (b.add(Unary, fn=UnaryFn.neg, x=a[1]),)))
    assert loop.results[0].type == t(f32, N)
    w = b.make(While, inits=(lo,), cond=region(b, (idx,), lambda a: (b.add(Compare, fn=CmpFn.lt, lhs=a[0], rhs=hi),)),
               body=region(b, (idx,), lambda a: (b.add(Binary, fn=BinaryFn.add, lhs=a[0], rhs=st),)))
    assert w.results[0].type == scalar(i64)
    branch = b.make(If, cond=p, then_=region(b, (), lambda a: (x,)), else_=region(b, (), lambda a: (x,)))
    assert branch.results[0].type == t(f32, N)
    assert rejected(lambda: b.make(Parallel, domain=(), body=region(b, (), lambda a: ()))) == \
        "parallel needs at least one axis"
    assert rejected(lambda: b.make(Parallel, domain=(M,), body=region(b, (idx, idx), lambda a: ()))) == \
        "parallel body takes 1 i64 indices"
    assert rejected(lambda: b.make(Parallel, domain=(M,), body=region(b, (idx,), lambda a: a))) == \
        "parallel body yields no values; write results with stores"
    assert rejected(lambda: b.make(For, start=flo, stop=hi, step=st, inits=(), body=region(b, (idx,), lambda a: ()))) \
        == "for start must be an integer scalar, got f32[]"
    assert rejected(lambda: b.make(For, start=lo, stop=hi, step=one32, inits=(),
                                   body=region(b, (idx,), lambda a: ()))) == \
        "for start/stop/step must have one integer dtype"
    assert rejected(lambda: b.make(For, start=lo, stop=hi, step=st, inits=(x,),
                                   body=region(b, (idx, t(f32, N)), lambda a: ()))) == \
        "for body yields (), expected (f32[N])"
    assert rejected(lambda: b.make(For, start=lo, stop=hi, step=st, inits=(),
                                   body=region(b, (scalar(i32),), lambda a: ()))) == \
        "for body's first argument is the i64[] induction variable"
    assert rejected(lambda: b.make(While, inits=(lo,), cond=region(b, (idx,), lambda a: a),
                                   body=region(b, (idx,), lambda a: a))) == "while condition must yield one scalar pred"
    assert rejected(lambda: b.make(If, cond=x, then_=region(b, (), lambda a: ()), else_=region(b, (), lambda a: ()))) \
        == "if condition must be a scalar pred, got f32[N]"
    assert rejected(lambda: b.make(If, cond=p, then_=region(b, (), lambda a: (x,)),
                                   else_=region(b, (), lambda a: (lo,)))) == \
        "if branches yield different types: (f32[N]) vs (i64[])"


def test_missing_terminator_is_a_typing_error() -> None:
    from kir.core import Region

    b, _ = values()
    assert rejected(lambda: b.make(Parallel, domain=(M,), body=Region((Value(10**9, scalar(i64)),), ()))) == \
        "parallel region does not end with yield"


def test_refinements_discharge_obligations() -> None:
    """With `requires(K == K2)` the same obligation that fails above is proven."""
    b, (a, c) = values(t(f32, K), t(f32, K2), requires=(PCmp("==", K, K2),))
    assert b.add(Binary, fn=BinaryFn.add, lhs=a, rhs=c).type == t(f32, K)
