"""One test group per op family: targeted assertions on the emitted text, then numerics through XLA.

References are NumPy written here (the semantics of SPEC 3.3 and the kir op docstrings) and, where
it applies, the NumPy oracle.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

import oracle
import oracle.stablehlo as shlo
from kir import AtomicKind, BinaryFn, CmpFn, ReduceKind, ScanKind, UnaryFn
from kir.core import Kernel
from kir.dims import DConst, dim_bin
from kir.dtypes import DType
from kir.errors import IntentError
from kir.layout import Concat, ExpandDims, Reshape, SliceOp, Squeeze, Transpose
from kir.pointwise import Bitcast, Cast, Compare, Select
from kir.region import RegionFold
from tests import samples
from tests import stablehlo_kernels as K
from tests.stablehlo_kernels import KB, E, M, N, S, full, out, ref

pytest.importorskip("jax")

rng = np.random.default_rng(99)


def close(got: np.ndarray, want: np.ndarray, tol: float = 1e-6) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def run_both(kernel: Kernel, args: dict) -> dict[str, np.ndarray]:
    """The exit's result, checked against the oracle too."""
    got = shlo.run(kernel, args)
    want = oracle.run(kernel, args)
    for name in want:
        close(got[name], want[name], 1e-5)
    return got


# ---------------------------------------------------------------------------------------------- pointwise


def _binop(fn: BinaryFn):
    return lambda k, x, y: k.bin(fn, x, y)


def test_integer_division_truncates_toward_zero() -> None:
    x = np.array([7, -7, 7, -7, 0, 9], np.int32)
    y = np.array([2, 2, -2, -2, 3, -4], np.int32)
    div, mod = K.elementwise(K.i32, _binop(BinaryFn.floordiv)), K.elementwise(K.i32, _binop(BinaryFn.mod))
    assert re.search(r"stablehlo.divide %x, %\S+ : tensor<6xi32>", shlo.emit(div, {"x": x, "y": y}))
    assert re.search(r"stablehlo.remainder %x, %\S+ : tensor<6xi32>", shlo.emit(mod, {"x": x, "y": y}))
    close(run_both(div, {"x": x, "y": y})["out"], np.array([3, -3, -3, 3, 0, -2], np.int32))
    close(run_both(mod, {"x": x, "y": y})["out"], np.array([1, -1, 1, -1, 0, 1], np.int32))


def test_float_floordiv_mod_and_ieee_division() -> None:
    x = np.array([7.5, -7.5, 1.0, 3.0], np.float32)
    y = np.array([2.0, 2.0, 3.0, 0.7], np.float32)
    text = shlo.emit(K.elementwise(K.f32, _binop(BinaryFn.div)), {"x": x, "y": y})
    assert "stablehlo.optimization_barrier %y" in text  # keeps XLA from multiplying by a reciprocal
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)  # torch's and Python's rule (kir.float_rules)
    close(run_both(K.elementwise(K.f32, _binop(BinaryFn.floordiv)), {"x": x, "y": y})["out"], (tx // ty).numpy())
    close(run_both(K.elementwise(K.f32, _binop(BinaryFn.mod)), {"x": x, "y": y})["out"],
          torch.remainder(tx, ty).numpy())
    np.testing.assert_array_equal(run_both(K.elementwise(K.f32, _binop(BinaryFn.div)), {"x": x, "y": y})["out"],
                                  x / y)


def test_maximum_minimum_propagate_nan() -> None:
    x = np.array([1.0, np.nan, 3.0, -np.inf], np.float32)
    y = np.array([np.nan, 2.0, 1.0, 5.0], np.float32)
    close(run_both(K.elementwise(K.f32, _binop(BinaryFn.maximum)), {"x": x, "y": y})["out"],
          np.array([np.nan, np.nan, 3.0, 5.0], np.float32))
    close(run_both(K.elementwise(K.f32, _binop(BinaryFn.minimum)), {"x": x, "y": y})["out"],
          np.array([np.nan, np.nan, 1.0, -np.inf], np.float32))


def test_shifts_follow_signedness() -> None:
    xi = np.array([-16, 16, -1], np.int32)
    yi = np.array([2, 2, 31], np.int32)
    k = K.elementwise(K.i32, _binop(BinaryFn.shr))
    assert "stablehlo.shift_right_arithmetic" in shlo.emit(k, {"x": xi, "y": yi})
    close(run_both(k, {"x": xi, "y": yi})["out"], xi >> yi)
    xu = np.array([0xFFFFFFF0, 16, 1], np.uint32)
    yu = np.array([4, 2, 0], np.uint32)
    k = K.elementwise(K.u32, _binop(BinaryFn.shr))
    text = shlo.emit(k, {"x": xu, "y": yu})
    assert re.search(r"stablehlo.shift_right_logical %x, %\S+ : tensor<3xui32>", text)
    close(run_both(k, {"x": xu, "y": yu})["out"], xu >> yu)


def test_signed_integer_results_wrap_where_xla_assumes_them_non_negative() -> None:
    """`abs(x * x)`, `abs(x ** 2)` and `abs(x) < 0` of i32 values that wrap (campaign case 9500400/17: XLA
    folded `abs((r ** 2) ** 2)` to `(r ** 2) ** 2` and gave -2118184960 for 2118184960)."""
    x = np.array([50000, 60000, 46341, 3, -(2 ** 31), 40002], np.int32)
    y = np.array([2, 2, 2, 2, 2, 4], np.int32)
    x64 = x.astype(np.int64)

    def wrapped(v: np.ndarray) -> np.ndarray:
        return ((v + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)

    square = K.elementwise(K.i32, lambda k, a, b: k.un(UnaryFn.abs, k.bin(BinaryFn.mul, a, a)))
    text = shlo.emit(square, {"x": x, "y": y})
    assert "stablehlo.abs" not in text and "stablehlo.multiply %x, %x : tensor<6xi32>" not in text
    close(run_both(square, {"x": x, "y": y})["out"], wrapped(np.abs(wrapped(x64 * x64).astype(np.int64))))
    power = K.elementwise(K.i32, lambda k, a, b: k.un(UnaryFn.abs, k.bin(BinaryFn.pow, a, b)))
    close(run_both(power, {"x": x, "y": y})["out"], wrapped(np.abs(wrapped(x64 ** y).astype(np.int64))))

    def below_zero(k: KB, a, b):
        return k.add(Compare, lhs=k.un(UnaryFn.abs, a), rhs=k.bcast(k.const(0, K.i32), (N,)), fn=CmpFn.lt)

    negative_abs = K.elementwise(K.i32, below_zero, out_dtype=DType.pred)
    close(run_both(negative_abs, {"x": x, "y": y})["out"], x == -(2 ** 31))


def test_the_logarithm_of_a_power_of_a_negative_base_stays_nan() -> None:
    """`log(x ** y)` (campaign case 9401027/11): XLA's algebraic simplifier rewrites `log(power(a, b))` as
    `b * log(abs(a))`, a number where `a ** b` is negative (`(-2.0) ** 3`) or NaN (`(-1.5) ** -1.5`); the
    exit spells out C's NaN for a negative finite base and a non-integer exponent, which keeps the rewrite
    away, so every case keeps the oracle's meaning."""
    x = np.float32([-2.0, -1.5, -0.5, 2.0, 0.0, -0.0, -np.inf, -np.inf, -2.0, 3.0])
    y = np.float32([3.0, -1.5, 2.0, 0.5, 0.0, 0.5, 0.5, 3.0, np.inf, np.nan])
    k = K.elementwise(K.f32, lambda k, a, b: k.un(UnaryFn.log, k.bin(BinaryFn.pow, a, b)))
    with np.errstate(all="ignore"):
        want = np.log(np.power(x.astype(np.float64), y)).astype(np.float32)
    assert np.isnan(want).tolist() == [True, True, False, False, False, False, False, True, False, True]
    close(run_both(k, {"x": x, "y": y})["out"], want)
    power = K.elementwise(K.f32, lambda k, a, b: k.bin(BinaryFn.pow, a, b))
    with np.errstate(all="ignore"):
        close(run_both(power, {"x": x, "y": y})["out"], np.power(x, y))


def test_float_identities_xla_would_rewrite_keep_their_ieee_results() -> None:
    """Beside `log(pow(a, b))` (above), XLA's simplifier rewrites `log(exp(a))` to `a`, `log(exp2(a))` to
    `a * log(2)`, `log(rsqrt(a))` to `-0.5 * log(a)`, `exp(a) * exp(b)` to `exp(a + b)`, `pow(exp(a), b)` to
    `exp(a * b)` and `sqrt(a * a)` to `abs(a)`, which overflow and signed zeros contradict (`exp(100) *
    exp(-110)` is inf * 0 = NaN, `sqrt(1e30 * 1e30)` is inf)."""
    x = np.array([-1.2272545, 100.0, -0.0, 1e30, 2.0], np.float32)
    y = np.array([-1.2272545, -110.0, 0.01, 0.5, 3.0], np.float32)
    cases = {
        "log of exp2": lambda k, a, b: k.un(UnaryFn.log, k.un(UnaryFn.exp2, k.bin(BinaryFn.mul, a, a))),
        "log of exp": lambda k, a, b: k.un(UnaryFn.log, k.un(UnaryFn.exp, a)),
        "log of rsqrt": lambda k, a, b: k.un(UnaryFn.log, k.un(UnaryFn.rsqrt, a)),
        "product of exps": lambda k, a, b: k.bin(BinaryFn.mul, k.un(UnaryFn.exp, a), k.un(UnaryFn.exp, b)),
        "pow of exp": lambda k, a, b: k.bin(BinaryFn.pow, k.un(UnaryFn.exp, a), b),
        "sqrt of a square": lambda k, a, b: k.un(UnaryFn.sqrt, k.bin(BinaryFn.mul, a, a)),
    }
    with np.errstate(all="ignore"):
        want = {"log of exp2": np.log(np.exp2(x * x)), "log of exp": np.log(np.exp(x)),
                "log of rsqrt": np.log(np.float32(1) / np.sqrt(x)), "product of exps": np.exp(x) * np.exp(y),
                "pow of exp": np.power(np.exp(x), y), "sqrt of a square": np.sqrt(x * x)}
    for name, fn in cases.items():
        got = shlo.run(K.elementwise(K.f32, fn), {"x": x, "y": y})["out"]
        assert np.array_equal(np.isnan(got), np.isnan(want[name])), (name, got, want[name])
        close(got, want[name], 1e-5)
    assert shlo.emit(K.elementwise(K.f32, cases["log of exp"]), {"x": x, "y": y}).count(
        "stablehlo.optimization_barrier") == 1


NARROWED_BITWISE = """
import numpy as np
import intent
import oracle
import oracle.stablehlo as shlo
from intent import Out, dims, i8, i16, i32, i64
N = dims("N")


@intent.kernel
def k(w: i64[N], x: i32[N], v: i32[N], y: i16[N], u: i16[N], z: i8[N], a: Out[i32[N]], b: Out[i16[N]],
      c: Out[i8[N]]):
    a[:] = w.to(i32) | x
    b[:] = v.to(i16) & y
    c[:] = u.to(i8) | z


rng = np.random.default_rng(5)
args = {n: rng.integers(-2 ** 40, 2 ** 40, 9).astype(t) for n, t in
        (("w", np.int64), ("x", np.int32), ("v", np.int32), ("y", np.int16), ("u", np.int16), ("z", np.int8))}
args.update(a=np.zeros(9, np.int32), b=np.zeros(9, np.int16), c=np.zeros(9, np.int8))
got, want = shlo.run(k.kir, args), oracle.run(k.kir, args)
assert all((got[n] == want[n]).all() for n in "abc"), (got, want)
assert (want["a"] == (args["w"].astype(np.int32) | args["x"])).all()
print("agree")
"""


def test_a_signed_narrowing_convert_feeding_and_or_compiles(tmp_path) -> None:
    """`y.to(i32) | x` with y an i64 crashed XLA's CPU compiler (a segfault, campaign batch 9500417, case 23);
    the exit truncates signed integers through the unsigned types. Run apart: a regression kills the process."""
    import os
    import subprocess
    import sys

    (tmp_path / "narrowed.py").write_text(NARROWED_BITWISE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-W", "ignore", str(tmp_path / "narrowed.py")], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0 and "agree" in done.stdout, (done.returncode, done.stdout, done.stderr[-2000:])


def test_compare_types_and_unsigned_order() -> None:
    x = np.array([0xFFFFFFFF, 1], np.uint32)
    y = np.array([1, 2], np.uint32)
    k = K.elementwise(K.u32, lambda kb, a, b: kb.add(Compare, fn=CmpFn.gt, lhs=a, rhs=b), out_dtype=K.pred)
    assert "stablehlo.compare GT, %x, %y, UNSIGNED" in shlo.emit(k, {"x": x, "y": y})
    close(run_both(k, {"x": x, "y": y})["out"], np.array([True, False]))
    kf = K.elementwise(K.f32, lambda kb, a, b: kb.add(Compare, fn=CmpFn.ne, lhs=a, rhs=b), out_dtype=K.pred)
    xf = np.array([np.nan, 1.0], np.float32)
    assert ", FLOAT :" in shlo.emit(kf, {"x": xf, "y": xf})
    close(run_both(kf, {"x": xf, "y": xf})["out"], np.array([True, False]))


def _unary(fn: UnaryFn, dtype: DType = K.f32, out_dtype: DType | None = None) -> Kernel:
    return K.elementwise(dtype, lambda k, x, y: k.un(fn, x), out_dtype=out_dtype, name=f"unary_{fn}")


@pytest.mark.parametrize("fn,ref", [
    (UnaryFn.exp2, np.exp2), (UnaryFn.log2, np.log2), (UnaryFn.log1p, np.log1p), (UnaryFn.sigmoid,
                                                                                  lambda x: 1 / (1 + np.exp(-x))),
    (UnaryFn.rsqrt, lambda x: 1 / np.sqrt(x)), (UnaryFn.tanh, np.tanh), (UnaryFn.erf,
                                                                         np.vectorize(math.erf, otypes=[np.float64])),
])
def test_float_unary_functions(fn: UnaryFn, ref) -> None:
    x = np.abs(randn := rng.standard_normal(16).astype(np.float32)) + 0.1
    x = np.where(np.arange(16) % 2 == 0, x, -x if fn in (UnaryFn.erf, UnaryFn.tanh, UnaryFn.sigmoid) else x)
    got = run_both(_unary(fn), {"x": x, "y": x})["out"]
    close(got, ref(x.astype(np.float64)).astype(np.float32), 2e-6)
    del randn


def test_erf_f64_is_accurate() -> None:
    x = np.linspace(-7, 7, 57)
    got = shlo.run(_unary(UnaryFn.erf, K.f64), {"x": x, "y": x})["out"]
    close(got, np.array([math.erf(v) for v in x]), 1e-14)


def test_round_half_to_even_isnan_isinf() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, np.inf, -np.inf, np.nan], np.float32)
    k = _unary(UnaryFn.round)
    assert "stablehlo.round_nearest_even" in shlo.emit(k, {"x": x, "y": x})
    close(run_both(k, {"x": x, "y": x})["out"], np.round(x))
    close(run_both(_unary(UnaryFn.isnan, out_dtype=K.pred), {"x": x, "y": x})["out"], np.isnan(x))
    close(run_both(_unary(UnaryFn.isinf, out_dtype=K.pred), {"x": x, "y": x})["out"], np.isinf(x))


def test_casts_truncate_and_test_nonzero() -> None:
    x = np.array([2.7, -2.7, 0.0, -0.0, np.nan, 1e-40], np.float32)  # 1e-40 is subnormal
    to_int = K.elementwise(K.f32, lambda k, a, b: k.add(Cast, x=a, dtype=K.i32), out_dtype=K.i32)
    close(shlo.run(to_int, {"x": x[:4], "y": x[:4]})["out"], np.array([2, -2, 0, 0], np.int32))
    to_pred = K.elementwise(K.f32, lambda k, a, b: k.add(Cast, x=a, dtype=K.pred), out_dtype=K.pred)
    text = shlo.emit(to_pred, {"x": x, "y": x})
    # the bits without the sign: XLA's CPU runtime would flush the subnormal to zero in a float compare
    assert "stablehlo.bitcast_convert %x" in text and "UNSIGNED" in text
    close(run_both(to_pred, {"x": x, "y": x})["out"], np.array([True, True, False, False, True, True]))
    wrap = K.elementwise(K.i64, lambda k, a, b: k.add(Cast, x=a, dtype=K.i32), out_dtype=K.i32)
    xi = np.array([2**32 + 5, -1, 2**31], np.int64)
    close(run_both(wrap, {"x": xi, "y": xi})["out"], xi.astype(np.int32))


def test_bitcast_and_select() -> None:
    x = np.array([1.0, -2.0], np.float32)
    k = K.elementwise(K.f32, lambda kb, a, b: kb.add(Bitcast, x=a, dtype=K.i32), out_dtype=K.i32)
    assert "stablehlo.bitcast_convert %x : (tensor<2xf32>) -> tensor<2xi32>" in shlo.emit(k, {"x": x, "y": x})
    close(run_both(k, {"x": x, "y": x})["out"], x.view(np.int32))

    def pick(kb: KB, a, b):
        return kb.add(Select, cond=kb.add(Compare, fn=CmpFn.lt, lhs=a, rhs=b), on_true=a, on_false=b)

    y = np.array([0.0, 3.0], np.float32)
    close(run_both(K.elementwise(K.f32, pick), {"x": x, "y": y})["out"], np.minimum(x, y))


def test_constants_are_exact_literals() -> None:
    def body(k: KB, a, b):
        return k.bin(BinaryFn.add, k.bin(BinaryFn.mul, a, k.bcast(k.const(0.1, K.f32), (N,))),
                     k.bcast(k.const(-math.inf, K.f32), (N,)))

    text = shlo.emit(K.elementwise(K.f32, body), {"x": np.ones(2, np.float32), "y": np.ones(2, np.float32)})
    assert "dense<0.10000000149011612> : tensor<f32>" in text  # 0.1 rounded to f32, printed exactly
    assert "dense<0xFF800000> : tensor<f32>" in text  # -inf as its bits


# ---------------------------------------------------------------------------------------------- layout


def test_layout_ops() -> None:
    half = dim_bin("//", dim_bin("+", N, 1), 2)
    k = KB("layout", "M N", [("x", ref(K.f32, M, N)), ("t", out(K.f32, N, M)), ("flat", out(K.f32, 1, M, N)),
                             ("evens", out(K.f32, M, half)), ("cat", out(K.f32, M, dim_bin("+", N, N)))])
    x = k.load("x", full(M), full(N))
    k.store("t", (full(N), full(M)), k.add(Transpose, x=x, perm=(1, 0)))
    e = k.add(ExpandDims, x=k.add(Reshape, x=x, shape=(M, N)), axis=0)
    k.store("flat", (full(DConst(1)), full(M), full(N)),
            k.add(Squeeze, x=k.add(ExpandDims, x=e, axis=0), axis=0))
    k.store("evens", (full(M), full(half)),
            k.add(SliceOp, x=x, starts=(DConst(0), DConst(0)), stops=(M, N), steps=(1, 2)))
    k.store("cat", (full(M), full(dim_bin("+", N, N))), k.add(Concat, inputs=(x, x), axis=1))
    kernel = k.done()
    xv = np.arange(15, dtype=np.float32).reshape(3, 5)
    text = shlo.emit(kernel, {"x": xv})
    assert "stablehlo.transpose %x, dims = [1, 0] : (tensor<3x5xf32>) -> tensor<5x3xf32>" in text
    assert "strides = array<i64: 1, 2>" in text
    assert '"stablehlo.concatenate"(%x, %x) {dimension = 1 : i64}' in text
    got = run_both(kernel, {"x": xv})
    close(got["t"], xv.T)
    close(got["flat"], xv[None])
    close(got["evens"], xv[:, ::2])
    close(got["cat"], np.concatenate([xv, xv], 1))


def test_broadcast_lifts_into_parallel_batch_axes() -> None:
    text = shlo.emit(samples.softmax(), {"x": np.zeros((3, 5), np.float32)})
    assert "stablehlo.broadcast_in_dim %max.2, dims = [0] : (tensor<3xf32>) -> tensor<3x5xf32>" in text


# ---------------------------------------------------------------------------------------------- access


def test_row_load_is_the_whole_tensor_and_offset_loads_are_slices() -> None:
    text = shlo.emit(samples.segment_sum(), {"values": np.zeros(4, np.float32), "offsets": np.array([0, 2, 4])})
    assert 'start_indices = array<i64: 0>, limit_indices = array<i64: 2>' in text  # offsets[s]
    assert 'start_indices = array<i64: 1>, limit_indices = array<i64: 3>' in text  # offsets[s + 1]


def test_partial_store_keeps_prior_contents_of_out() -> None:
    k = KB("partial", "N", [("x", ref(K.f32, N)), ("out", out(K.f32, dim_bin("+", N, 2)))])
    with k.parallel(N) as (n,):
        k.store("out", (k.bin(BinaryFn.add, n, k.const(1, K.i64)),), k.load("x", n))
    kernel = k.done()
    x = np.array([1.0, 2.0, 3.0], np.float32)
    prior = np.full(5, -9.0, np.float32)
    text = shlo.emit(kernel, {"x": x, "out": prior})
    assert "func.func @main(%x: tensor<3xf32>, %out: tensor<5xf32>)" in text  # prior contents are an input
    assert '"stablehlo.dynamic_update_slice"(%out' in text
    close(run_both(kernel, {"x": x, "out": prior})["out"], np.array([-9, 1, 2, 3, -9], np.float32))


def test_strided_affine_store_goes_through_coordinates() -> None:
    k = KB("strided", "N", [("x", ref(K.f32, N)), ("out", out(K.f32, dim_bin("*", 2, N)))])
    with k.parallel(N) as (n,):
        k.store("out", (k.bin(BinaryFn.mul, n, k.const(2, K.i64)),), k.load("x", n))
    kernel = k.done()
    x = np.array([1.0, 2.0, 3.0], np.float32)
    assert '"stablehlo.scatter"' in shlo.emit(kernel, {"x": x})
    close(run_both(kernel, {"x": x, "out": np.zeros(6, np.float32)})["out"],
          np.array([1, 0, 2, 0, 3, 0], np.float32))


def test_gather_fill_for_out_of_range() -> None:
    x = np.array([10.0, 20.0, 30.0], np.float32)
    idx = np.array([2, -1, 0, 3, 1], np.int32)
    text = shlo.emit(K.gather_fill(-1.0), {"x": x, "idx": idx})
    assert '"stablehlo.gather"(%x' in text and "stablehlo.select" in text
    close(run_both(K.gather_fill(-1.0), {"x": x, "idx": idx})["out"], np.array([30, -1, 10, -1, 20], np.float32))


def test_scatter_last_writer_wins_and_drops_out_of_range() -> None:
    idx = np.array([1, 3, 1, 7, -2, 3], np.int32)
    v = np.arange(6, dtype=np.float32) + 1
    got = run_both(K.scatter_rows(), {"idx": idx, "v": v, "out": np.zeros(4, np.float32)})["out"]
    close(got, np.array([0, 3, 0, 6], np.float32))


def test_checks_turn_out_of_range_gathers_into_the_oracles_error() -> None:
    x = np.array([10.0, 20.0], np.float32)
    idx = np.array([0, 5, 1], np.int32)
    with pytest.raises(IntentError) as got:
        shlo.run(K.gather_fill(), {"x": x, "idx": idx}, checks=True)
    with pytest.raises(IntentError) as want:
        oracle.run(K.gather_fill(), {"x": x, "idx": idx}, checks=True)
    assert str(got.value) == str(want.value) == "gather out of range: index 5 on axis 0 of x with extent 2"
    close(shlo.run(K.gather_fill(), {"x": x, "idx": np.array([1, 0, 1], np.int32)}, checks=True)["out"],
          np.array([20, 10, 20], np.float32))


# ---------------------------------------------------------------------------------------------- reduce


@pytest.mark.parametrize("kind,np_fn", [(ReduceKind.sum, np.sum), (ReduceKind.prod, np.prod),
                                        (ReduceKind.max, np.max), (ReduceKind.min, np.min)])
def test_builtin_reductions(kind: ReduceKind, np_fn) -> None:
    x = rng.standard_normal((3, 6)).astype(np.float32)
    x[1, 2] = np.nan
    got = run_both(K.reduce_rows(K.f32, kind), {"x": x})["out"]
    close(got, np_fn(x, axis=1), 1e-5)


def test_f16_sum_accumulates_in_f32() -> None:
    x = np.full((2, 3000), 1.0, np.float16)
    kernel = K.reduce_rows(K.f16, ReduceKind.sum)
    text = shlo.emit(kernel, {"x": x})
    assert "-> tensor<2x3000xf32>" in text and '"stablehlo.reduce"' in text
    close(run_both(kernel, {"x": x})["out"], np.array([3000, 3000], np.float16))  # 2048 + 1 stays 2048 in f16


def test_any_all_and_keepdims() -> None:
    x = np.array([[True, False], [False, False]])
    close(run_both(K.reduce_rows(K.pred, ReduceKind.any), {"x": x})["out"], np.array([True, False]))
    close(run_both(K.reduce_rows(K.pred, ReduceKind.all, axes=(0,)), {"x": x})["out"], np.array([False, False]))
    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    close(run_both(K.reduce_rows(K.i32, ReduceKind.sum, keepdims=True), {"x": xi})["out"], xi.sum(1, keepdims=True))


def test_argmax_first_index_nan_is_extreme_and_several_axes() -> None:
    x = np.array([[1.0, 5.0, 5.0, 2.0], [1.0, np.nan, 7.0, np.nan], [-np.inf, -np.inf, -np.inf, -np.inf]],
                 np.float32)
    kernel = K.reduce_rows(K.f32, ReduceKind.argmax, out_dtype=K.i64)
    assert 'stablehlo.reduce"(%' in shlo.emit(kernel, {"x": x})
    close(run_both(kernel, {"x": x})["out"], np.array([1, 1, 0]))
    close(run_both(K.reduce_rows(K.f32, ReduceKind.argmin, out_dtype=K.i64), {"x": x})["out"], np.array([0, 1, 0]))
    both = K.reduce_rows(K.i32, ReduceKind.argmax, axes=(0, 1), out_dtype=K.i64)
    xi = np.array([[1, 9, 3], [9, 2, 0]], np.int32)
    close(run_both(both, {"x": xi})["out"], np.array(1))


def test_custom_reduce_is_the_oracles_pairwise_tree() -> None:
    # (a, b) . (c, d) = (a*c, b*c + d) is associative but not commutative: order matters.
    k = KB("compose", "N", [("a", ref(K.f64, N)), ("b", ref(K.f64, N)), ("oa", out(K.f64)), ("ob", out(K.f64))])

    def comb(a1, b1, a2, b2):
        return [k.bin(BinaryFn.mul, a1, a2), k.bin(BinaryFn.add, k.bin(BinaryFn.mul, b1, a2), b2)]

    from kir import Reduce
    ra, rb = k.make(Reduce, inputs=(k.load("a", full(N)), k.load("b", full(N))), axes=(0,), kind=ReduceKind.custom,
                    identity=(1.0, 0.0), combine=k.region([K.f64] * 4, comb))
    k.store("oa", (), ra)
    k.store("ob", (), rb)
    kernel = k.done()
    a, b = rng.uniform(0.5, 1.5, 11), rng.standard_normal(11)
    assert '"stablehlo.while"' in shlo.emit(kernel, {"a": a, "b": b})
    got = run_both(kernel, {"a": a, "b": b})
    wa, wb = 1.0, 0.0
    for x, y in zip(a, b):
        wa, wb = wa * x, wb * x + y
    close(got["oa"], np.array(wa), 1e-12)
    close(got["ob"], np.array(wb), 1e-12)


# ---------------------------------------------------------------------------------------------- scan


@pytest.mark.parametrize("kind,np_fn", [(ScanKind.prod, np.cumprod), (ScanKind.max, np.maximum.accumulate),
                                        (ScanKind.min, np.minimum.accumulate)])
def test_builtin_scans(kind: ScanKind, np_fn) -> None:
    from kir import Scan
    k = KB("scan", "N", [("x", ref(K.i32, N)), ("out", out(K.i32, N))])
    (r,) = k.make(Scan, inputs=(k.load("x", full(N)),), axis=0, kind=kind)
    k.store("out", (full(N),), r)
    x = rng.integers(-3, 4, 13).astype(np.int32)
    close(run_both(k.done(), {"x": x})["out"], np_fn(x).astype(np.int32))


@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, False), (False, True), (True, True)])
def test_custom_scan_keeps_operand_order(reverse: bool, exclusive: bool) -> None:
    kernel = K.custom_scan(reverse, exclusive)
    a, b = rng.uniform(0.5, 1.5, 9), rng.standard_normal(9)
    text = shlo.emit(kernel, {"a": a, "b": b})
    assert ('"stablehlo.reverse"' in text) == reverse
    got = run_both(kernel, {"a": a, "b": b})
    order = range(8, -1, -1) if reverse else range(9)
    wa, wb = np.zeros(9), np.zeros(9)
    acc = (1.0, 0.0)
    for i in order:
        step = (a[i], b[i])
        new = (acc[0] * step[0], acc[1] * step[0] + step[1]) if not reverse else \
            (step[0] * acc[0], step[1] * acc[0] + acc[1])
        wa[i], wb[i] = acc if exclusive else new
        acc = new
    close(got["oa"], wa, 1e-12)
    close(got["ob"], wb, 1e-12)


# ---------------------------------------------------------------------------------------------- region


def test_region_fold_kinds_clip_and_index_from_begin() -> None:
    values = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0], np.float32)
    offsets = np.array([0, 3, 3, 8], np.int64)
    got = run_both(K.segment_fold(ReduceKind.argmax), {"values": values, "offsets": offsets})["out"]
    close(got, np.array([2, -1, 2]))
    # Subregions reaching outside the source are clipped to it.
    offsets = np.array([-2, 2, 6, 12], np.int64)
    close(run_both(samples.segment_sum(), {"values": values, "offsets": offsets})["out"],
          np.array([4.0, 19.0, 8.0], np.float32))


def test_region_fold_custom_combine_with_map() -> None:
    k = KB("segment_sumsq", "S E", [("values", ref(K.f32, E)), ("offsets", ref(K.i64, dim_bin("+", S, 1))),
                                    ("out", out(K.f32, S))])
    with k.parallel(S) as (s,):
        beg = k.load("offsets", s)
        end = k.load("offsets", k.bin(BinaryFn.add, s, k.const(1, K.i64)))
        from kir import DynSlice
        sq = k.region([K.f32], lambda v: [k.bin(BinaryFn.mul, v, v)])
        comb = k.region([K.f32, K.f32], lambda a, b: [k.bin(BinaryFn.add, a, b)])
        tot = k.add(RegionFold, src=k.p["values"], index=(DynSlice(beg, end),), kind=ReduceKind.custom,
                    identity=(0.0,), map=sq, combine=comb)
        k.store("out", (s,), tot)
    kernel = k.done()
    values = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    offsets = np.array([0, 1, 1, 4], np.int64)
    close(run_both(kernel, {"values": values, "offsets": offsets})["out"], np.array([1.0, 0.0, 29.0], np.float32))


@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True)])
def test_region_scan(reverse: bool, exclusive: bool) -> None:
    values = np.array([1, 2, 3, 4, 5, 6], np.int32)
    offsets = np.array([0, 2, 2, 6], np.int64)
    got = run_both(K.segment_cumsum(reverse, exclusive), {"values": values, "offsets": offsets,
                                                          "out": np.full(6, -1, np.int32)})["out"]
    segs = [values[0:2], values[2:6]]
    want = []
    for seg in segs:
        r = seg[::-1] if reverse else seg
        c = np.cumsum(r) - (r if exclusive else 0)
        want.append(c[::-1] if reverse else c)
    close(got, np.concatenate(want).astype(np.int32))


def test_region_scan_length_mismatch_is_the_oracles_error() -> None:
    from kir import DynSlice, RegionScan
    k = KB("shifted", "E", [("values", ref(K.i32, E)), ("out", out(K.i32, E))])
    with k.parallel(DConst(1)) as (i,):
        zero, two = k.const(0, K.i64), k.const(2, K.i64)
        k.b.make(RegionScan, dst=k.p["out"], dst_index=(DynSlice(zero, two),), src=k.p["values"],
                 src_index=(DynSlice(zero, k.const(3, K.i64)),), kind=ScanKind.sum)
    kernel = k.done()
    args = {"values": np.arange(4, dtype=np.int32)}
    with pytest.raises(IntentError) as got:
        shlo.run(kernel, args)
    with pytest.raises(IntentError) as want:
        oracle.run(kernel, args)
    assert str(got.value) == str(want.value)
    del i


# ---------------------------------------------------------------------------------------------- contract


def test_dot_precision_and_batching() -> None:
    a, b = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((2, 4, 5)).astype(np.float32)
    text = shlo.emit(K.bmm(), {"a": a, "b": b})
    assert "lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], " \
           "rhs_contracting_dimensions = [1]" in text
    assert "#stablehlo<precision HIGHEST>" in text


def test_dot_inside_parallel_uses_the_batch_axes() -> None:
    from kir import Dot
    depth_k = K.K
    k = KB("rowvec", "M N K", [("x", ref(K.f32, M, depth_k)), ("w", ref(K.f32, depth_k, N)), ("out", out(K.f32, M, N))])
    with k.parallel(M) as (i,):
        row = k.load("x", i, full(depth_k))
        y = k.add(Dot, lhs=row, rhs=k.load("w", full(depth_k), full(N)), lhs_batch=(), rhs_batch=(), lhs_contract=(0,),
                  rhs_contract=(0,), acc_dtype=K.f32)
        k.store("out", (i, full(N)), y)
    kernel = k.done()
    x, w = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    assert "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]" in shlo.emit(kernel, {"x": x, "w": w})
    close(run_both(kernel, {"x": x, "w": w})["out"], x @ w, 1e-5)


# ---------------------------------------------------------------------------------------------- histogram, atomics


def test_histogram_op_is_a_scatter_add_with_a_dump_row() -> None:
    x = np.array([0, 3, 3, 9, -4, 1], np.int64)
    text = shlo.emit(K.histogram_op(), {"x": x, "counts": np.zeros(4, np.int32)})
    assert '"stablehlo.scatter"' in text and "edge_padding_high = array<i64: 1>" in text
    close(run_both(K.histogram_op(), {"x": x, "counts": np.zeros(4, np.int32)})["counts"],
          np.array([1, 1, 0, 2], np.int32))


@pytest.mark.parametrize("kind", [AtomicKind.add, AtomicKind.max, AtomicKind.min, AtomicKind.xor])
def test_atomics_without_old_value_are_scatter_reduces(kind: AtomicKind) -> None:
    idx = np.array([0, 2, 2, 5, 0, -1], np.int32)
    v = np.array([3, -1, 4, 1, 5, 9], np.int32)
    acc = np.array([1, 1, 1], np.int32)
    args = {"idx": idx, "v": v, "acc": acc}
    combine = {AtomicKind.add: "add", AtomicKind.max: "maximum", AtomicKind.min: "minimum", AtomicKind.xor: "xor"}
    text = shlo.emit(K.atomic_kernel(kind), args)
    assert re.search(r'"stablehlo.scatter"\(%t\.\d+, %t\.\d+, %v\) \(\{\n\s*\^bb0\(%arg\.\d+: tensor<i32>, '
                     r'%arg\.\d+: tensor<i32>\):\n\s*%t\.\d+ = stablehlo\.' + combine[kind], text), text
    got = run_both(K.atomic_kernel(kind), args)["acc"]
    fn = {AtomicKind.add: np.add, AtomicKind.max: np.maximum, AtomicKind.min: np.minimum,
          AtomicKind.xor: np.bitwise_xor}[kind]
    want = acc.copy()
    for i, x in zip(idx, v):
        if 0 <= i < 3:
            want[i] = fn(want[i], x)
    close(got, want)


# ---------------------------------------------------------------------------------------------- control


def test_if_masks_stores() -> None:
    x = np.array([1.0, -2.0, 3.0, 0.0], np.float32)
    prior = np.full(4, 7.0, np.float32)
    close(run_both(K.masked_update(), {"x": x, "out": prior})["out"], np.array([2.0, 7.0, 6.0, 7.0], np.float32))


def test_while_with_a_condition_per_instance() -> None:
    x = np.array([1, 2, 3, 6, 27], np.int64)
    text = shlo.emit(K.collatz(), {"x": x})
    assert text.count('"stablehlo.while"') == 1
    close(run_both(K.collatz(), {"x": x})["steps"], np.array([0, 1, 7, 8, 111]))


def test_for_with_bounds_per_instance() -> None:
    x = rng.standard_normal((3, 5)).astype(np.float32)
    lens = np.array([0, 5, 2], np.int64)
    close(run_both(K.ragged_for(), {"x": x, "lens": lens})["out"],
          np.array([0.0, x[1].sum(), x[2, :2].sum()], np.float32), 1e-6)


def test_local_buffer_per_instance() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    text = shlo.emit(K.local_buffer(), {"x": x})
    assert "stablehlo.constant dense<0.0> : tensor<2x3xf32>" in text  # one zeroed buffer row per instance
    close(run_both(K.local_buffer(), {"x": x})["out"], x[:, ::-1])


@pytest.mark.parametrize("begin,end", [([4, 0, 6], [6, 4, 6]),   # disjoint, unsorted: one scatter
                                       ([0, 2, 1], [5, 6, 3])])  # overlapping: the sequential walk
def test_region_fold_segments_any_order(begin: list[int], end: list[int]) -> None:
    values = np.arange(1, 7, dtype=np.float32)
    args = {"values": values, "begin": np.array(begin), "end": np.array(end)}
    assert '"stablehlo.if"' in shlo.emit(K.ranged_fold(), args)
    for kind, fn, empty in [(ReduceKind.sum, np.sum, 0.0), (ReduceKind.max, np.max, -np.inf)]:
        got = run_both(K.ranged_fold(kind), args)["out"]
        close(got, np.array([fn(values[b:e]) if e > b else empty for b, e in zip(begin, end)], np.float32))


def test_the_oracles_choices_where_kir_leaves_room() -> None:
    x = np.array([7, -7, 0, -128, 5, 2], np.int8)
    y = np.array([0, 0, 0, -1, 9, -8], np.int8)
    for fn in (BinaryFn.floordiv, BinaryFn.mod, BinaryFn.shl, BinaryFn.shr, BinaryFn.pow):
        got = run_both(K.elementwise(K.i8, _binop(fn)), {"x": x, "y": y})["out"]
        if fn in (BinaryFn.floordiv, BinaryFn.mod):
            assert got[:3].tolist() == [0, 0, 0]  # a zero divisor gives 0
    pw = run_both(K.elementwise(K.i32, _binop(BinaryFn.pow)),
                  {"x": np.array([1, -1, -1, 2, 3], np.int32), "y": np.array([-3, -3, -2, -1, 4], np.int32)})["out"]
    close(pw, np.array([1, -1, 1, 0, 81], np.int32))
    f = np.array([3e9, -3e9, np.nan, -0.9, 2.9, np.inf], np.float32)
    to_i32 = K.elementwise(K.f32, lambda k, a, b: k.add(Cast, x=a, dtype=K.i32), out_dtype=K.i32)
    close(run_both(to_i32, {"x": f, "y": f})["out"], np.array([2**31 - 1, -2**31, 0, 0, 2, 2**31 - 1], np.int32))
    to_u8 = K.elementwise(K.f32, lambda k, a, b: k.add(Cast, x=a, dtype=K.u8), out_dtype=K.u8)
    close(run_both(to_u8, {"x": f, "y": f})["out"], np.array([255, 0, 0, 0, 2, 255], np.uint8))
    d = np.array([1.0 + 2**-9 + 2**-30, 3.0e38, -1e-45], np.float64)
    to_bf16 = K.elementwise(K.f64, lambda k, a, b: k.add(Cast, x=a, dtype=K.bf16), out_dtype=K.bf16)
    run_both(to_bf16, {"x": d, "y": d})
