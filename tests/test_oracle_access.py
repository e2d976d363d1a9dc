"""Loads, stores, gathers and scatters: lane placement, out-of-range semantics with and without checks."""

import numpy as np
import pytest
import torch

import oracle
from kir import Binary, BinaryFn, Gather, Load, Scatter, Slice, Store
from kir.dims import DConst, DSym
from kir.dtypes import DType
from kir.errors import IntentError
from tests.oracle_kit import LOC, const, inout, kernel, load_all, out, parallel, store_all, tensor

f32, i32, i64 = DType.f32, DType.i32, DType.i64
M, N = DSym("M"), DSym("N")


def test_column_access_puts_the_lane_axis_in_the_middle() -> None:
    def body(b, p):
        def col(b, j):
            c = b.add(Load, src=p["x"], index=(Slice(DConst(0), M), j))
            b.make(Store, dst=p["out"], index=(Slice(DConst(0), M), j), value=b.add(Binary, fn=BinaryFn.add, lhs=c,
                                                                                    rhs=c))
        parallel(b, [N], col)

    k = kernel({"x": tensor(f32, "M", "N"), "out": out(f32, "M", "N")}, body, symbols=("M", "N"))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(oracle.run(k, {"x": x})["out"], 2 * x)


def test_two_dimensional_domain_transposes() -> None:
    def body(b, p):
        def inst(b, i, j):
            b.make(Store, dst=p["out"], index=(i, j), value=b.add(Load, src=p["x"], index=(j, i)))
        parallel(b, [N, M], inst)

    k = kernel({"x": tensor(f32, "M", "N"), "out": out(f32, "N", "M")}, body, symbols=("M", "N"))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(oracle.run(k, {"x": x})["out"], x.T)


def test_non_contiguous_inputs() -> None:
    def body(b, p):
        store_all(b, p["out"], b.add(Binary, fn=BinaryFn.sub, lhs=load_all(b, p["x"]), rhs=load_all(b, p["y"])))

    k = kernel({"x": tensor(f32, "M", "N"), "y": tensor(f32, "M", "N"), "out": out(f32, "M", "N")}, body,
               symbols=("M", "N"))
    base = torch.arange(40, dtype=torch.float32).reshape(5, 8)
    x, y = base[:, ::2], base.T[:4, :5].T  # strided and transposed views
    np.testing.assert_array_equal(oracle.run(k, {"x": x, "y": y})["out"], (x - y).numpy())
    xn = base.numpy()[::-1, ::2]  # NumPy may even have negative strides
    np.testing.assert_array_equal(oracle.run(k, {"x": xn, "y": xn})["out"], np.zeros((5, 4), np.float32))


def test_a_load_is_a_value_later_stores_do_not_change() -> None:
    def body(b, p):
        before = load_all(b, p["buf"])
        store_all(b, p["buf"], b.add(Binary, fn=BinaryFn.mul, lhs=before, rhs=before))
        store_all(b, p["out"], before)

    k = kernel({"buf": inout(f32, "N"), "out": out(f32, "N")}, body, symbols=("N",))
    buf = np.array([1.0, 2.0, 3.0], np.float32)
    r = oracle.run(k, {"buf": buf})
    np.testing.assert_array_equal(r["out"], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(r["buf"], [1.0, 4.0, 9.0])
    np.testing.assert_array_equal(buf, [1.0, 2.0, 3.0])  # the caller's array is untouched


def test_instances_writing_one_element_leave_the_last_instance_value() -> None:
    def body(b, p):
        parallel(b, [N], lambda b, n: b.make(Store, dst=p["out"], index=(const(b, 0, i64),),
                                                value=b.add(Load, src=p["x"], index=(n,))))

    k = kernel({"x": tensor(f32, "N"), "out": out(f32, 1)}, body, symbols=("N",))
    assert oracle.run(k, {"x": np.array([5.0, 6.0, 7.0], np.float32)})["out"].tolist() == [7.0]


def shifted_load(checks: bool):
    def body(b, p):
        def inst(b, n):
            nxt = b.add(Binary, fn=BinaryFn.add, lhs=n, rhs=const(b, 1, i64))
            b.make(Store, dst=p["out"], index=(n,), value=b.add(Load, src=p["x"], index=(nxt,), loc=LOC))
        parallel(b, [N], inst)

    return kernel({"x": tensor(f32, "N"), "out": out(f32, "N")}, body, symbols=("N",), checks=checks)


def test_an_out_of_bounds_point_load_is_an_error_never_a_wrapped_read() -> None:
    # The verifier rejects this kernel; an unverified one still gets a clear error from the oracle.
    with pytest.raises(IntentError) as e:
        oracle.run(shifted_load(False), {"x": np.zeros(5, np.float32)})
    assert str(e.value) == "load out of range at kernel.py:12:5: index 5 on axis 0 of x with extent 5"


def gather_kernel(fill=0, checks=False):
    def body(b, p):
        def inst(b, n):
            idx = b.add(Load, src=p["idx"], index=(n,))
            b.make(Store, dst=p["out"], index=(n,), value=b.add(Gather, src=p["x"], indices=(idx,), fill=fill,
                                                                loc=LOC))
        parallel(b, [DSym("K")], inst)

    return kernel({"x": tensor(f32, "N"), "idx": tensor(i32, "K"), "out": out(f32, "K")}, body,
                  symbols=("N", "K"), checks=checks)


X8 = np.arange(10, 18, dtype=np.float32)
IDX = np.array([0, 7, 8, -1, 3, 9, -8], np.int32)


def test_gather_out_of_range_reads_the_fill() -> None:
    got = oracle.run(gather_kernel(), {"x": X8, "idx": IDX})["out"]
    np.testing.assert_array_equal(got, [10, 17, 0, 0, 13, 0, 0])
    got = oracle.run(gather_kernel(fill=-1.5), {"x": X8, "idx": IDX})["out"]
    np.testing.assert_array_equal(got, [10, 17, -1.5, -1.5, 13, -1.5, -1.5])


def test_gather_out_of_range_raises_with_checks() -> None:
    with pytest.raises(IntentError) as e:
        oracle.run(gather_kernel(checks=True), {"x": X8, "idx": IDX})
    assert str(e.value) == "gather out of range at kernel.py:12:5: index 8 on axis 0 of x with extent 8"
    with pytest.raises(IntentError, match="index 8 on axis 0 of x"):
        oracle.run(gather_kernel(), {"x": X8, "idx": IDX}, checks=True)
    ok = oracle.run(gather_kernel(checks=True), {"x": X8, "idx": IDX[:2]})["out"]
    np.testing.assert_array_equal(ok, [10, 17])
    np.testing.assert_array_equal(oracle.run(gather_kernel(checks=True), {"x": X8, "idx": IDX}, checks=False)["out"],
                                  [10, 17, 0, 0, 13, 0, 0])


def test_gather_with_tensor_indices_in_two_dimensions() -> None:
    def body(b, p):
        g = b.add(Gather, src=p["x"], indices=(load_all(b, p["r"]), load_all(b, p["c"])), fill=0)
        store_all(b, p["out"], g)

    k = kernel({"x": tensor(i64, 3, 4), "r": tensor(i32, "K"), "c": tensor(i64, "K"), "out": out(i64, "K")}, body,
               symbols=("K",))
    x = np.arange(12).reshape(3, 4)
    r, c = np.array([0, 2, 1, 3], np.int32), np.array([3, 0, 4, 0])
    np.testing.assert_array_equal(oracle.run(k, {"x": x, "r": r, "c": c})["out"], [3, 8, 0, 0])


def scatter_kernel(unique=False, checks=False):
    def body(b, p):
        def inst(b, n):
            idx = b.add(Load, src=p["idx"], index=(n,))
            b.make(Scatter, dst=p["out"], indices=(idx,), value=b.add(Load, src=p["v"], index=(n,)), unique=unique,
                   loc=LOC)
        parallel(b, [DSym("K")], inst)

    return kernel({"idx": tensor(i32, "K"), "v": tensor(f32, "K"), "out": inout(f32, "N")}, body,
                  symbols=("N", "K"), checks=checks)


def test_scatter_drops_out_of_range_writes_and_the_last_instance_wins() -> None:
    idx = np.array([1, 5, -1, 1, 3, 2], np.int32)
    v = np.arange(1, 7, dtype=np.float32)
    got = oracle.run(scatter_kernel(), {"idx": idx, "v": v, "out": np.zeros(4, np.float32)})["out"]
    np.testing.assert_array_equal(got, [0, 4, 6, 5])


def test_scatter_checks() -> None:
    idx = np.array([1, 5, 0], np.int32)
    args = {"idx": idx, "v": np.ones(3, np.float32), "out": np.zeros(4, np.float32)}
    with pytest.raises(IntentError) as e:
        oracle.run(scatter_kernel(checks=True), args)
    assert str(e.value) == "scatter out of range at kernel.py:12:5: index 5 on axis 0 of out with extent 4"
    dup = {"idx": np.array([1, 2, 1], np.int32), "v": np.ones(3, np.float32), "out": np.zeros(4, np.float32)}
    with pytest.raises(IntentError) as e:
        oracle.run(scatter_kernel(unique=True, checks=True), dup)
    assert str(e.value) == "scatter declared unique at kernel.py:12:5 but several instances write one element of out"
    np.testing.assert_array_equal(oracle.run(scatter_kernel(unique=True), dup)["out"], [0, 1, 1, 0])


def test_store_declared_unique_with_colliding_instances_raises_with_checks() -> None:
    def body(b, p):
        def inst(b, n):
            two = const(b, 2, i64)
            half = b.add(Binary, fn=BinaryFn.floordiv, lhs=n, rhs=two)
            b.make(Store, dst=p["out"], index=(half,), value=b.add(Load, src=p["x"], index=(n,)), unique=True,
                   loc=LOC)
        parallel(b, [N], inst)

    k = kernel({"x": tensor(f32, "N"), "out": out(f32, "N")}, body, symbols=("N",))
    x = np.arange(4, dtype=np.float32) + 1
    np.testing.assert_array_equal(oracle.run(k, {"x": x})["out"], [2, 4, 0, 0])
    with pytest.raises(IntentError, match="store declared unique at kernel.py:12:5 but several instances write one "
                                          "element of out"):
        oracle.run(k, {"x": x}, checks=True)
