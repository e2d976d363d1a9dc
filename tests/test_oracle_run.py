"""oracle.run: argument binding (torch, NumPy, scalars), results, untouched arguments, and launch errors."""

import numpy as np
import pytest
import torch

import oracle
from kir import Binary, BinaryFn, Broadcast, Store, scalar
from kir.core import new_value
from kir.dims import DConst, DSym, PCmp, dim_bin
from kir.dtypes import DType
from kir.errors import IntentError, LaunchError
from tests import samples
from tests.oracle_kit import LOC, const, kernel, load_all, out, store_all, tensor

f32, bf16, i32, i64, pred = DType.f32, DType.bf16, DType.i32, DType.i64, DType.pred


def test_every_sample_against_a_reference() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 33)).astype(np.float32) * 5
    np.testing.assert_allclose(oracle.run(samples.softmax(), {"x": x})["out"],
                               torch.softmax(torch.from_numpy(x), 1).numpy(), rtol=1e-6, atol=1e-7)
    a, c = rng.standard_normal(10).astype(np.float32), rng.standard_normal(10).astype(np.float32)
    np.testing.assert_array_equal(oracle.run(samples.vector_add(), {"x": a, "y": c})["out"], a + c)
    offs = np.array([0, 4, 4, 10])
    np.testing.assert_allclose(oracle.run(samples.segment_sum(), {"values": a, "offsets": offs})["out"],
                               [a[0:4].sum(), 0.0, a[4:10].sum()], rtol=1e-6)


def test_torch_and_numpy_arguments_give_the_same_results() -> None:
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    r_torch = oracle.run(samples.softmax(), {"x": x, "out": torch.empty(3, 5)})
    r_numpy = oracle.run(samples.softmax(), {"x": x.numpy()})
    np.testing.assert_array_equal(r_torch["out"], r_numpy["out"])
    assert isinstance(r_torch["out"], np.ndarray) and r_torch["out"].dtype == np.float32
    assert set(r_torch) == {"out"}


def test_arguments_are_never_modified() -> None:
    x = np.array([1, 2, 2, 0], np.int32)
    counts = torch.tensor([5, 5, 5], dtype=torch.int32)
    r = oracle.run(samples.histogram(), {"x": x, "counts": counts})
    assert r["counts"].tolist() == [6, 6, 7]
    assert counts.tolist() == [5, 5, 5]
    r["counts"][0] = 99  # the result is the caller's own array
    assert oracle.run(samples.histogram(), {"x": x, "counts": counts})["counts"].tolist() == [6, 6, 7]


def test_an_omitted_out_tensor_is_allocated_from_the_symbols() -> None:
    offs = np.array([0, 2, 5])  # `offsets: i64[S + 1]` binds S = 2
    r = oracle.run(samples.segment_sum(), {"values": np.ones(5, np.float32), "offsets": offs})
    assert r["out"].tolist() == [2.0, 3.0]


def test_bf16_arguments_and_results() -> None:
    def body(b, p):
        store_all(b, p["out"], b.add(Binary, fn=BinaryFn.add, lhs=load_all(b, p["x"]), rhs=load_all(b, p["x"])))

    k = kernel({"x": tensor(bf16, "N"), "out": out(bf16, "N")}, body, symbols=("N",))
    x = torch.tensor([1.0, 0.1, 3.3]).bfloat16()
    got = oracle.run(k, {"x": x})["out"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, (x + x).float().numpy())
    # NumPy has no bf16: a float32 array stands for one, its values rounded to bf16
    np.testing.assert_array_equal(oracle.run(k, {"x": np.array([1.0, 0.1, 3.3], np.float32)})["out"], got)


def scalar_kernel():
    """out = x * eps; n_out[0] = n; flag_out[0] = flag."""
    def body(b, p):
        eps = b.add(Broadcast, x=p["eps"], shape=(DSym("N"),), dims=())
        store_all(b, p["out"], b.add(Binary, fn=BinaryFn.mul, lhs=load_all(b, p["x"]), rhs=eps))
        zero = const(b, 0, i64)
        b.make(Store, dst=p["n_out"], index=(zero,), value=p["n"])
        b.make(Store, dst=p["flag_out"], index=(zero,), value=p["flag"])

    return kernel({"x": tensor(f32, "N"), "n": scalar(i32), "eps": scalar(f32), "flag": scalar(pred),
                   "out": out(f32, "N"), "n_out": out(i32, 1), "flag_out": out(pred, 1)}, body, symbols=("N",))


X3 = np.array([1.0, 2.0, 4.0], np.float32)


@pytest.mark.parametrize("n,eps,flag", [(5, 0.5, True), (np.int64(5), np.float32(0.5), 1),
                                        (torch.tensor(5), torch.tensor(0.5), torch.tensor(True))])
def test_scalar_arguments(n, eps, flag) -> None:
    r = oracle.run(scalar_kernel(), {"x": X3, "n": n, "eps": eps, "flag": flag})
    assert r["out"].tolist() == [0.5, 1.0, 2.0]
    assert r["n_out"].tolist() == [5] and r["n_out"].dtype == np.int32
    assert r["flag_out"].tolist() == [True]


@pytest.mark.parametrize("change,message", [
    ({"n": 2.5}, "n: expected an i32 scalar, got the float 2.5"),
    ({"n": 2**32}, "n: 4294967296 does not fit i32 (range -2147483648 to 2147483647)"),
    ({"n": True}, "n: expected an i32 scalar, got bool True"),
    ({"eps": "a"}, "eps: expected an f32 scalar, got str 'a'"),
    ({"flag": 2}, "flag: expected a pred scalar (True or False), got 2"),
])
def test_scalar_errors(change, message: str) -> None:
    args = {"x": X3, "n": 1, "eps": 1.0, "flag": False, **change}
    with pytest.raises(LaunchError) as e:
        oracle.run(scalar_kernel(), args)
    assert str(e.value) == message


def test_requires_and_undetermined_symbols() -> None:
    N = DSym("N")
    k = kernel({"x": tensor(f32, "N"), "out": out(f32, "P")}, lambda b, p: None, symbols=("N", "P"),
               requires=[PCmp("==", dim_bin("%", N, 4), DConst(0))], name="k")
    with pytest.raises(LaunchError) as e:
        oracle.run(k, {"x": np.zeros(6, np.float32), "out": np.zeros(2, np.float32)})
    assert str(e.value) == "k: N % 4 == 0 failed: N = 6"
    with pytest.raises(LaunchError) as e:
        oracle.run(k, {"x": np.zeros(8, np.float32)})
    assert str(e.value) == "k: the argument shapes do not determine P; pass the tensors whose shapes use them"
    assert oracle.run(k, {"x": np.zeros(8, np.float32), "out": np.ones(2, np.float32)})["out"].tolist() == [1.0, 1.0]


def test_checks_follow_the_argument_then_the_kernel_then_the_environment(monkeypatch) -> None:
    from tests.test_oracle_access import gather_kernel

    args = {"x": np.zeros(2, np.float32), "idx": np.array([5], np.int32)}
    monkeypatch.delenv("INTENT_CHECKS", raising=False)
    assert oracle.run(gather_kernel(), args)["out"].tolist() == [0.0]
    with pytest.raises(IntentError):
        oracle.run(gather_kernel(checks=True), args)
    monkeypatch.setenv("INTENT_CHECKS", "1")
    with pytest.raises(IntentError):
        oracle.run(gather_kernel(), args)
    assert oracle.run(gather_kernel(), args, checks=False)["out"].tolist() == [0.0]


def test_a_kernel_the_typing_rules_reject_fails_with_a_located_error() -> None:
    # Two operands of different lengths, put together without the builder's typing rule.
    def body(b, p):
        x, y = load_all(b, p["x"]), load_all(b, p["y"])
        bad = Binary(fn=BinaryFn.add, lhs=x, rhs=y, loc=LOC, results=(new_value(x.type),))
        b.current_ops().append(bad)
        store_all(b, p["out"], bad.result)

    k = kernel({"x": tensor(f32, "N"), "y": tensor(f32, "M"), "out": out(f32, "N")}, body, symbols=("N", "M"))
    with pytest.raises(IntentError) as e:
        oracle.run(k, {"x": np.zeros(3, np.float32), "y": np.zeros(4, np.float32)})
    assert str(e.value).startswith("oracle: binary at kernel.py:12:5 failed: ValueError: operands could not be "
                                   "broadcast together")


ERRORS = [
    ({"x": np.zeros((2, 3), np.float32), "y": 1}, "softmax: unknown argument 'y'; the parameters are x, out"),
    ({}, "softmax: missing argument x: expected an f32[M, N] tensor"),
    ({"x": torch.zeros(2, 3, dtype=torch.float64)}, "x: expected an f32[M, N] tensor, got a tensor of torch.float64"),
    ({"x": np.zeros((2, 3), np.int32)}, "x: expected an f32[M, N] tensor, got an array of int32"),
    ({"x": [[1.0, 2.0]]}, "x: expected an f32[M, N] tensor (a torch.Tensor or numpy.ndarray), got list"),
    ({"x": np.zeros(5, np.float32)}, "x: expected an f32[M, N] tensor (rank 2), got rank 1 with shape [5]"),
    ({"x": np.zeros((2, 3), np.float32), "out": np.zeros((2, 4), np.float32)},
     "out: expected shape [M, N] = [2, 3] (M = 2, N = 3), got [2, 4]"),
    ({"x": np.zeros((0, 3), np.float32)}, "softmax: M >= 1 failed: M = 0"),
    ({"x": np.zeros((1, 70000), np.float32)}, "softmax: N <= 65536 failed: N = 70000"),
    ({"x": np.zeros((2, 3), np.float32), "out": torch.zeros(2, 3)[:, :2]},
     "out: expected shape [M, N] = [2, 3] (M = 2, N = 3), got [2, 2]"),
]


@pytest.mark.parametrize("args,message", ERRORS)
def test_launch_errors_name_the_parameter_and_the_expectation(args, message: str) -> None:
    with pytest.raises(LaunchError) as e:
        oracle.run(samples.softmax(), args)
    assert str(e.value) == message
