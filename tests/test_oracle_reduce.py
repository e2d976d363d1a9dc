"""Reductions against torch: NaN/inf, ties, keepdims, accumulators, integer wrap, custom combines, empty axes."""

import numpy as np
import pytest
import torch

import oracle
from kir import (
    Binary,
    BinaryFn,
    Broadcast,
    Builder,
    CmpFn,
    Compare,
    Load,
    Reduce,
    ReduceKind,
    Select,
    Store,
    Yield,
    scalar,
)
from kir.dims import DConst, DSym, PCmp
from kir.dtypes import DType
from tests.oracle_kit import as_torch, const, kernel, load_all, out, parallel, row, store_all, store_row, tensor

f16, bf16, f32, i8, i32, i64, pred = DType.f16, DType.bf16, DType.f32, DType.i8, DType.i32, DType.i64, DType.pred
M, N = DSym("M"), DSym("N")


def reduce_rows(kind: ReduceKind, dtype: DType, x: np.ndarray, result: DType | None = None, **attrs) -> np.ndarray:
    """`out[i] = reduce(x[i, :])` inside parallel."""
    res = result or (i64 if kind in (ReduceKind.argmax, ReduceKind.argmin) else dtype)

    def body(b, p):
        def inst(b, i):
            r = b.add(Reduce, inputs=(row(b, p["x"], i),), axes=(0,), kind=kind, **attrs)
            b.make(Store, dst=p["out"], index=(i,), value=r)
        parallel(b, [M], inst)

    k = kernel({"x": tensor(dtype, "M", "N"), "out": out(res, "M")}, body, symbols=("M", "N"),
               requires=[PCmp(">=", N, DConst(0))])
    return oracle.run(k, {"x": x})["out"]


NASTY = np.array([[1.0, 3.0, 3.0, -2.0, 0.5],
                  [np.nan, 1.0, 7.0, np.nan, 7.0],
                  [-np.inf, -np.inf, 2.0, np.inf, np.inf],
                  [0.0, -0.0, 0.0, -0.0, 0.0]], np.float32)

TORCH = {ReduceKind.sum: lambda t: t.sum(1), ReduceKind.prod: lambda t: t.prod(1), ReduceKind.max: lambda t: t.amax(1),
         ReduceKind.min: lambda t: t.amin(1), ReduceKind.argmax: lambda t: t.argmax(1),
         ReduceKind.argmin: lambda t: t.argmin(1)}


@pytest.mark.parametrize("kind", list(TORCH))
def test_builtin_kinds_match_torch_with_nan_inf_and_ties(kind: ReduceKind) -> None:
    got = reduce_rows(kind, f32, NASTY)
    np.testing.assert_array_equal(got, TORCH[kind](torch.from_numpy(NASTY)).numpy())


def test_any_all() -> None:
    x = np.array([[True, False], [False, False], [True, True]])
    assert reduce_rows(ReduceKind.any, pred, x).tolist() == [True, False, True]
    assert reduce_rows(ReduceKind.all, pred, x).tolist() == [False, False, True]


def test_integer_sums_and_products_wrap_at_the_declared_width() -> None:
    x = np.array([[100, 100, 100], [-128, -1, 0]], np.int8)
    assert reduce_rows(ReduceKind.sum, i8, x).tolist() == [44, 127]
    y = np.array([[65536, 65536, 3]], np.int32)
    assert reduce_rows(ReduceKind.prod, i32, y).tolist() == [0]
    assert reduce_rows(ReduceKind.sum, i8, x, result=i8, acc_dtype=i32).tolist() == [44, 127]


def test_f16_and_bf16_sums_accumulate_in_f32() -> None:
    ones = np.ones((1, 3000), np.float16)
    assert reduce_rows(ReduceKind.sum, f16, ones).tolist() == [3000.0]  # f16 accumulation would stop at 2048
    rng = np.random.default_rng(0)
    x = oracle.numerics.round_bf16(rng.standard_normal((4, 999)).astype(np.float32))
    got = reduce_rows(ReduceKind.sum, bf16, x)
    want = as_torch(x, bf16).sum(1).float().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(got, oracle.numerics.round_bf16(got))


def test_given_identity_is_the_accumulator_start() -> None:
    x = np.array([[-3.0, -1.0], [2.0, 5.0]], np.float32)
    assert reduce_rows(ReduceKind.max, f32, x, identity=(0.0,)).tolist() == [0.0, 5.0]


def test_empty_axis_gives_the_identity() -> None:
    x = np.zeros((2, 0), np.float32)
    assert reduce_rows(ReduceKind.sum, f32, x).tolist() == [0.0, 0.0]
    assert reduce_rows(ReduceKind.max, f32, x).tolist() == [-np.inf, -np.inf]
    assert reduce_rows(ReduceKind.min, i32, x.astype(np.int32)).tolist() == [2**31 - 1] * 2
    assert reduce_rows(ReduceKind.argmax, f32, x).tolist() == [-1, -1]


def test_multi_axis_and_keepdims_at_top_level() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10

    def run(kind, keepdims, result):
        def body(b, p):
            store_all(b, p["out"], b.add(Reduce, inputs=(load_all(b, p["x"]),), axes=(0, 2), kind=kind,
                                         keepdims=keepdims))
        shape = (1, 3, 1) if keepdims else (3,)
        return oracle.run(kernel({"x": tensor(f32, 2, 3, 4), "out": out(result, *shape)}, body), {"x": x})["out"]

    np.testing.assert_array_equal(run(ReduceKind.sum, False, f32), x.sum(axis=(0, 2)))
    np.testing.assert_array_equal(run(ReduceKind.max, True, f32), x.max(axis=(0, 2), keepdims=True))
    # argmax over several axes indexes them flattened in row-major order
    want = x.transpose(1, 0, 2).reshape(3, 8).argmax(1)
    np.testing.assert_array_equal(run(ReduceKind.argmax, False, i64), want)


def test_reduce_of_a_value_shared_by_all_instances() -> None:
    def body(b, p):
        def inst(b, i):
            s = b.add(Reduce, inputs=(load_all(b, p["w"]),), axes=(0,), kind=ReduceKind.sum)
            b.make(Store, dst=p["out"], index=(i,), value=s)
        parallel(b, [M], inst)

    k = kernel({"w": tensor(f32, "N"), "out": out(f32, "M")}, body, symbols=("M", "N"))
    got = oracle.run(k, {"w": np.arange(4, dtype=np.float32), "out": np.zeros(3, np.float32)})["out"]
    assert got.tolist() == [6.0, 6.0, 6.0]


# ---------------------------------------------------------------------------------------------- custom combines


def welford_combine(b: Builder):
    (ma, qa, na, mb, qb, nb) = b.begin_region((scalar(f32),) * 6)
    n = b.add(Binary, fn=BinaryFn.add, lhs=na, rhs=nb)
    zero, one = const(b, 0.0, f32), const(b, 1.0, f32)
    frac = b.add(Select, cond=b.add(Compare, fn=CmpFn.eq, lhs=n, rhs=zero), on_true=zero,
                 on_false=b.add(Binary, fn=BinaryFn.div, lhs=nb,
                                rhs=b.add(Binary, fn=BinaryFn.maximum, lhs=n, rhs=one)))
    delta = b.add(Binary, fn=BinaryFn.sub, lhs=mb, rhs=ma)
    mean = b.add(Binary, fn=BinaryFn.add, lhs=ma, rhs=b.add(Binary, fn=BinaryFn.mul, lhs=delta, rhs=frac))
    dd = b.add(Binary, fn=BinaryFn.mul, lhs=b.add(Binary, fn=BinaryFn.mul, lhs=delta, rhs=delta), rhs=na)
    m2 = b.add(Binary, fn=BinaryFn.add, lhs=b.add(Binary, fn=BinaryFn.add, lhs=qa, rhs=qb),
               rhs=b.add(Binary, fn=BinaryFn.mul, lhs=dd, rhs=frac))
    b.make(Yield, values=(mean, m2, n))
    return b.end_region()


def welford_kernel():
    def body(b, p):
        def inst(b, i):
            x = row(b, p["x"], i)
            zeros = b.add(Broadcast, x=const(b, 0.0, f32), shape=(N,), dims=())
            ones = b.add(Broadcast, x=const(b, 1.0, f32), shape=(N,), dims=())
            mu, m2, n = b.make(Reduce, inputs=(x, zeros, ones), axes=(0,), kind=ReduceKind.custom,
                               identity=(0.0, 0.0, 0.0), combine=welford_combine(b)).results
            b.make(Store, dst=p["mean"], index=(i,), value=mu)
            b.make(Store, dst=p["var"], index=(i,), value=b.add(Binary, fn=BinaryFn.div, lhs=m2, rhs=n))
        parallel(b, [M], inst)

    return kernel({"x": tensor(f32, "M", "N"), "mean": out(f32, "M"), "var": out(f32, "M")}, body,
                  symbols=("M", "N"), requires=[PCmp(">=", N, DConst(0))])


@pytest.mark.parametrize("n", [1, 2, 7, 129, 1000])
def test_welford_custom_combine(n: int) -> None:
    x = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32) + 100
    r = oracle.run(welford_kernel(), {"x": x})
    np.testing.assert_allclose(r["mean"], x.astype(np.float64).mean(1), rtol=1e-6)
    np.testing.assert_allclose(r["var"], x.astype(np.float64).var(1), rtol=1e-3, atol=1e-4)


def test_custom_combine_over_an_empty_axis_gives_its_identity() -> None:
    r = oracle.run(welford_kernel(), {"x": np.zeros((2, 0), np.float32)})
    assert r["mean"].tolist() == [0.0, 0.0]
    assert np.isnan(r["var"]).all()  # 0 / 0


def test_custom_combine_keeps_the_order_of_elements() -> None:
    # "first non-zero" is associative but not commutative: only an order-keeping fold finds the first.
    def first_nonzero(b):
        a, c = b.begin_region((scalar(i32),) * 2)
        nz = b.add(Compare, fn=CmpFn.ne, lhs=a, rhs=const(b, 0, i32))
        b.make(Yield, values=(b.add(Select, cond=nz, on_true=a, on_false=c),))
        return b.end_region()

    def body(b, p):
        def inst(b, i):
            (r,) = b.make(Reduce, inputs=(row(b, p["x"], i),), axes=(0,), kind=ReduceKind.custom, identity=(0,),
                          combine=first_nonzero(b)).results
            store_row(b, p["out"], i, b.add(Broadcast, x=r, shape=(DConst(1),), dims=()))
        parallel(b, [M], inst)

    k = kernel({"x": tensor(i32, "M", "N"), "out": out(i32, "M", 1)}, body, symbols=("M", "N"))
    x = np.zeros((4, 13), np.int32)
    x[0, [5, 7, 12]] = [3, 4, 5]
    x[1, [12]] = [9]
    x[2, [0, 1]] = [6, 8]
    assert oracle.run(k, {"x": x})["out"][:, 0].tolist() == [3, 9, 6, 0]


def test_a_combine_reading_a_value_of_its_instance() -> None:
    # Instances with mode > 0 sum, the others take the max: the combine reads its instance's `mode`.
    def body(b, p):
        def inst(b, i):
            mode = b.add(Load, src=p["mode"], index=(i,))
            positive = b.add(Compare, fn=CmpFn.gt, lhs=mode, rhs=const(b, 0, i32))
            x, y = b.begin_region((scalar(f32),) * 2)
            b.make(Yield, values=(b.add(Select, cond=positive, on_true=b.add(Binary, fn=BinaryFn.add, lhs=x, rhs=y),
                                        on_false=b.add(Binary, fn=BinaryFn.maximum, lhs=x, rhs=y)),))
            combine = b.end_region()
            (r,) = b.make(Reduce, inputs=(row(b, p["x"], i),), axes=(0,), kind=ReduceKind.custom, identity=(0.0,),
                          combine=combine).results
            b.make(Store, dst=p["out"], index=(i,), value=r)
        parallel(b, [M], inst)

    k = kernel({"x": tensor(f32, "M", "N"), "mode": tensor(i32, "M"), "out": out(f32, "M")}, body,
               symbols=("M", "N"))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = oracle.run(k, {"x": x, "mode": np.array([1, 0, 1], np.int32)})["out"]
    assert got.tolist() == [6.0, 7.0, 38.0]
