"""Control: parallel domains (nested too), ordered loops with carries and per-instance bounds, while and if
with diverging instances, effects inside branches."""

import numpy as np
import pytest

import oracle
from kir import (
    Binary,
    BinaryFn,
    CmpFn,
    Compare,
    DimValue,
    If,
    Load,
    Store,
    While,
    Yield,
    scalar,
)
from kir.dims import DConst, DSym, PCmp, dim_bin
from kir.dtypes import DType
from kir.errors import IntentError
from tests import samples
from tests.oracle_kit import LOC, const, for_loop, inout, kernel, out, parallel, tensor

f32, i32, i64, pred = DType.f32, DType.i32, DType.i64, DType.pred
M, N = DSym("M"), DSym("N")


def add(b, x, y):
    return b.add(Binary, fn=BinaryFn.add, lhs=x, rhs=y)


def test_linear_recurrence_sample() -> None:
    a = np.random.default_rng(0).random((4, 9)).astype(np.float32)
    x = np.random.default_rng(1).standard_normal((4, 9)).astype(np.float32)
    h = oracle.run(samples.recurrence(), {"a": a, "x": x})["h"]
    acc = np.zeros(4, np.float32)
    for t in range(9):
        acc = a[:, t] * acc + x[:, t]
        np.testing.assert_array_equal(h[:, t], acc)


def test_nested_parallel_and_a_three_dimensional_domain() -> None:
    def body(b, p):
        def outer(b, i):
            def inner(b, j, k):
                v = b.add(Load, src=p["x"], index=(i, j, k))
                b.make(Store, dst=p["out"], index=(k, j, i), value=add(b, v, v))
            parallel(b, [3, 4], inner)
        parallel(b, [2], outer)

    k = kernel({"x": tensor(f32, 2, 3, 4), "out": out(f32, 4, 3, 2)}, body)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(oracle.run(k, {"x": x})["out"], 2 * x.transpose(2, 1, 0))


def test_loop_with_different_trip_counts_per_instance() -> None:
    def body(b, p):
        def inst(b, r):
            lo = b.add(Load, src=p["offs"], index=(r,))
            hi = b.add(Load, src=p["offs"], index=(add(b, r, const(b, 1, i64)),))

            def step(b, t, acc, n):
                v = b.add(Load, src=p["values"], index=(t,))
                return add(b, acc, v), add(b, n, const(b, 1, i32))
            tot, n = for_loop(b, lo, hi, const(b, 1, i64), [const(b, 0.0, f32), const(b, 0, i32)], step)
            b.make(Store, dst=p["out"], index=(r,), value=tot)
            b.make(Store, dst=p["count"], index=(r,), value=n)
        parallel(b, [M], inst)

    k = kernel({"values": tensor(f32, "E"), "offs": tensor(i64, dim_bin("+", M, 1)), "out": out(f32, "M"),
                "count": out(i32, "M")}, body, symbols=("M", "E"))
    offs = np.array([0, 3, 3, 7, 8])
    v = np.arange(1, 9, dtype=np.float32)
    r = oracle.run(k, {"values": v, "offs": offs})
    assert r["out"].tolist() == [6.0, 0.0, 4 + 5 + 6 + 7, 8.0]
    assert r["count"].tolist() == [3, 0, 4, 1]


def test_negative_step_and_zero_step() -> None:
    def make(step_value):
        def body(b, p):
            def step(b, t, acc):
                b.make(Store, dst=p["order"], index=(t,), value=acc)
                return (add(b, acc, const(b, 1, i64)),)
            for_loop(b, const(b, 4, i64), const(b, -1, i64), const(b, step_value, i64), [const(b, 0, i64)], step)
        return kernel({"order": out(i64, 5)}, body)

    assert oracle.run(make(-1), {})["order"].tolist() == [4, 3, 2, 1, 0]
    assert oracle.run(make(-2), {})["order"].tolist() == [2, 0, 1, 0, 0]
    assert oracle.run(make(1), {})["order"].tolist() == [0, 0, 0, 0, 0]  # no trips
    with pytest.raises(IntentError, match="for: the step is 0"):
        oracle.run(make(0), {})


def collatz_kernel():
    """steps[n] = how many Collatz steps x[n] needs to reach 1: a while loop with per-instance trip counts."""
    def body(b, p):
        def inst(b, n):
            x0 = b.add(Load, src=p["x"], index=(n,))
            x, s = b.begin_region((scalar(i64), scalar(i32)))
            b.make(Yield, values=(b.add(Compare, fn=CmpFn.ne, lhs=x, rhs=const(b, 1, i64)),))
            cond = b.end_region()
            x, s = b.begin_region((scalar(i64), scalar(i32)))
            odd = b.add(Compare, fn=CmpFn.eq, lhs=b.add(Binary, fn=BinaryFn.mod, lhs=x, rhs=const(b, 2, i64)),
                        rhs=const(b, 1, i64))
            then_ = b.begin_region(())
            b.make(Yield, values=(add(b, b.add(Binary, fn=BinaryFn.mul, lhs=x, rhs=const(b, 3, i64)),
                                      const(b, 1, i64)),))
            then_ = b.end_region()
            b.begin_region(())
            b.make(Yield, values=(b.add(Binary, fn=BinaryFn.floordiv, lhs=x, rhs=const(b, 2, i64)),))
            else_ = b.end_region()
            (nx,) = b.make(If, cond=odd, then_=then_, else_=else_).results
            b.make(Yield, values=(nx, add(b, s, const(b, 1, i32))))
            loop = b.end_region()
            _, steps = b.make(While, inits=(x0, const(b, 0, i32)), cond=cond, body=loop).results
            b.make(Store, dst=p["steps"], index=(n,), value=steps)
        parallel(b, [N], inst)

    return kernel({"x": tensor(i64, "N"), "steps": out(i32, "N")}, body, symbols=("N",))


def test_while_with_diverging_instances() -> None:
    def collatz(v):
        s = 0
        while v != 1:
            v = 3 * v + 1 if v % 2 else v // 2
            s += 1
        return s

    x = np.array([1, 2, 3, 6, 7, 27, 97])
    assert oracle.run(collatz_kernel(), {"x": x})["steps"].tolist() == [collatz(v) for v in x]


def test_if_with_effects_only_on_the_instances_that_take_the_branch() -> None:
    def body(b, p):
        def inst(b, n):
            v = b.add(Load, src=p["x"], index=(n,))
            neg = b.add(Compare, fn=CmpFn.lt, lhs=v, rhs=const(b, 0.0, f32))
            b.begin_region(())
            b.make(Store, dst=p["flags"], index=(n,), value=const(b, 1, i32))
            b.make(Yield, values=(b.add(Binary, fn=BinaryFn.sub, lhs=const(b, 0.0, f32), rhs=v),))
            then_ = b.end_region()
            b.begin_region(())
            b.make(Yield, values=(v,))
            else_ = b.end_region()
            (absv,) = b.make(If, cond=neg, then_=then_, else_=else_).results
            b.make(Store, dst=p["out"], index=(n,), value=absv)
        parallel(b, [N], inst)

    k = kernel({"x": tensor(f32, "N"), "out": out(f32, "N"), "flags": inout(i32, "N")}, body, symbols=("N",))
    x = np.array([1.0, -2.0, 3.0, -4.0, -5.0], np.float32)
    r = oracle.run(k, {"x": x, "flags": np.zeros(5, np.int32)})
    assert r["out"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert r["flags"].tolist() == [0, 1, 0, 1, 1]
    r = oracle.run(k, {"x": np.abs(x), "flags": np.zeros(5, np.int32)})  # all instances take the same branch
    assert r["flags"].tolist() == [0] * 5


def test_top_level_if_and_loop_on_a_runtime_scalar() -> None:
    def body(b, p):
        def step(b, t, acc):
            return (b.add(Binary, fn=BinaryFn.mul, lhs=acc, rhs=const(b, 2, i64)),)
        (pw,) = for_loop(b, const(b, 0, i64), p["n"], const(b, 1, i64), [const(b, 1, i64)], step)
        big = b.add(Compare, fn=CmpFn.gt, lhs=pw, rhs=b.add(DimValue, dim=DSym("L")))
        b.begin_region(())
        b.make(Yield, values=(const(b, True, pred),))
        t = b.end_region()
        b.begin_region(())
        b.make(Yield, values=(const(b, False, pred),))
        e = b.end_region()
        (flag,) = b.make(If, cond=big, then_=t, else_=e).results
        zero = const(b, 0, i64)
        b.make(Store, dst=p["pw"], index=(zero,), value=pw)
        b.make(Store, dst=p["big"], index=(zero,), value=flag)

    k = kernel({"x": tensor(f32, "L"), "n": scalar(i64), "pw": out(i64, 1), "big": out(pred, 1)}, body,
               symbols=("L",))
    r = oracle.run(k, {"x": np.zeros(100, np.float32), "n": 10})
    assert r["pw"].tolist() == [1024] and r["big"].tolist() == [True]
    r = oracle.run(k, {"x": np.zeros(100, np.float32), "n": np.int64(3)})
    assert r["pw"].tolist() == [8] and r["big"].tolist() == [False]


def test_empty_parallel_domain_runs_nothing() -> None:
    def body(b, p):
        parallel(b, [N], lambda b, n: b.make(Store, dst=p["out"], index=(const(b, 0, i64),), value=const(b, 1.0, f32),
                                             loc=LOC))

    k = kernel({"x": tensor(f32, "N"), "out": inout(f32, 1)}, body, symbols=("N",), requires=[PCmp(">=", N,
                                                                                                 DConst(0))])
    assert oracle.run(k, {"x": np.zeros(0, np.float32), "out": np.zeros(1, np.float32)})["out"].tolist() == [0.0]
