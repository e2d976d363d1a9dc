"""Pointwise ops against torch/NumPy references: floats with NaN/inf, f16/bf16, integer wrap-around."""

import numpy as np
import pytest
import torch

import oracle
from kir import (
    Binary,
    BinaryFn,
    Bitcast,
    Cast,
    CmpFn,
    Compare,
    DimValue,
    Iota,
    Select,
    Store,
    Unary,
    UnaryFn,
)
from kir.dims import DSym
from kir.dtypes import DType
from tests.oracle_kit import as_torch, const, kernel, out, run_both, store_all, tensor

f16, bf16, f32, f64 = DType.f16, DType.bf16, DType.f32, DType.f64
i8, i32, i64, u8, u32, pred = DType.i8, DType.i32, DType.i64, DType.u8, DType.u32, DType.pred

SPECIALS = [0.0, -0.0, 1.0, -1.5, 2.5, 0.5, 3.7, -3.7, np.inf, -np.inf, np.nan, 1e-3, 100.0, -100.0]


def floats(dtype: DType, shape=(3, 14)) -> np.ndarray:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape) * 3
    x[0] = SPECIALS[: shape[1]]
    out = x.astype(np.float32 if dtype in (bf16, f32) else dtype.np)
    return oracle.numerics.round_bf16(out) if dtype is bf16 else out


def unary(fn: UnaryFn, dtype: DType, x: np.ndarray, result: DType | None = None) -> np.ndarray:
    shape = ("M", "N")
    return run_both(lambda b, v: b.add(Unary, fn=fn, x=v[0]), [tensor(dtype, *shape)], out(result or dtype, *shape),
                    [x], symbols=("M", "N"))


TORCH_UNARY = {
    UnaryFn.neg: torch.neg, UnaryFn.abs: torch.abs, UnaryFn.exp: torch.exp, UnaryFn.exp2: torch.exp2,
    UnaryFn.log: torch.log, UnaryFn.log2: torch.log2, UnaryFn.log1p: torch.log1p, UnaryFn.sqrt: torch.sqrt,
    UnaryFn.rsqrt: torch.rsqrt, UnaryFn.sin: torch.sin, UnaryFn.cos: torch.cos, UnaryFn.tanh: torch.tanh,
    UnaryFn.sigmoid: torch.sigmoid, UnaryFn.erf: torch.erf, UnaryFn.floor: torch.floor, UnaryFn.ceil: torch.ceil,
    UnaryFn.round: torch.round,
}


@pytest.mark.parametrize("fn", list(TORCH_UNARY))
@pytest.mark.parametrize("dtype", [f32, f16, bf16, f64])
def test_float_unary_matches_torch(fn: UnaryFn, dtype: DType) -> None:
    x = floats(dtype)
    got = unary(fn, dtype, x)
    want = TORCH_UNARY[fn](as_torch(x, dtype)).float().numpy() if dtype is bf16 else \
        TORCH_UNARY[fn](as_torch(x, dtype)).numpy()
    tol = {f16: 2e-3, bf16: 1e-2, f32: 2e-6, f64: 1e-12}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, equal_nan=True)
    if dtype is bf16:  # every bf16 result is a bf16 value
        np.testing.assert_array_equal(got, oracle.numerics.round_bf16(got))


def test_isnan_isinf_and_not() -> None:
    x = floats(f32)
    np.testing.assert_array_equal(unary(UnaryFn.isnan, f32, x, pred), np.isnan(x))
    np.testing.assert_array_equal(unary(UnaryFn.isinf, f32, x, pred), np.isinf(x))
    b = np.array([[True, False, True]])
    np.testing.assert_array_equal(unary(UnaryFn.not_, pred, b), ~b)
    i = np.array([[0, -1, 5, 127]], np.int8)
    np.testing.assert_array_equal(unary(UnaryFn.not_, i8, i), np.invert(i))


def test_integer_neg_and_abs_wrap_at_the_width() -> None:
    i = np.array([[-128, -1, 0, 127]], np.int8)
    np.testing.assert_array_equal(unary(UnaryFn.neg, i8, i), np.array([[-128, 1, 0, -127]], np.int8))
    np.testing.assert_array_equal(unary(UnaryFn.abs, i8, i), np.array([[-128, 1, 0, 127]], np.int8))


def binary(fn: BinaryFn, dtype: DType, a: np.ndarray, c: np.ndarray) -> np.ndarray:
    shape = ("M", "N")
    return run_both(lambda b, v: b.add(Binary, fn=fn, lhs=v[0], rhs=v[1]), [tensor(dtype, *shape)] * 2,
                    out(dtype, *shape), [a, c], symbols=("M", "N"))


def test_integer_arithmetic_wraps_at_declared_width() -> None:
    a = np.array([[127, -128, 100, 3]], np.int8)
    c = np.array([[1, -1, 100, -7]], np.int8)
    np.testing.assert_array_equal(binary(BinaryFn.add, i8, a, c), np.array([[-128, 127, -56, -4]], np.int8))
    np.testing.assert_array_equal(binary(BinaryFn.sub, i8, a, c), np.array([[126, -127, 0, 10]], np.int8))
    np.testing.assert_array_equal(binary(BinaryFn.mul, i8, a, c), np.array([[127, -128, 16, -21]], np.int8))
    big = np.array([[2**31 - 1, -2**31]], np.int32)
    np.testing.assert_array_equal(binary(BinaryFn.add, i32, big, np.array([[1, -1]], np.int32)),
                                  np.array([[-2**31, 2**31 - 1]], np.int32))
    u = np.array([[0, 255]], np.uint8)
    np.testing.assert_array_equal(binary(BinaryFn.sub, u8, u, np.array([[1, 255]], np.uint8)),
                                  np.array([[255, 0]], np.uint8))


def test_integer_floordiv_and_mod_truncate_toward_zero() -> None:
    a = np.array([[7, -7, 7, -7, 0, -2**31, 5]], np.int32)
    c = np.array([[2, 2, -2, -2, 3, -1, 0]], np.int32)
    ta, tc = torch.from_numpy(a[:, :5]), torch.from_numpy(c[:, :5])
    got_q = binary(BinaryFn.floordiv, i32, a, c)
    np.testing.assert_array_equal(got_q[0], [3, -3, -3, 3, 0, -2**31, 0])  # INT_MIN // -1 wraps; x // 0 gives 0
    np.testing.assert_array_equal(got_q[:, :5], torch.div(ta, tc, rounding_mode="trunc").numpy())
    got_r = binary(BinaryFn.mod, i32, a, c)
    np.testing.assert_array_equal(got_r[0], [1, -1, 1, -1, 0, 0, 0])
    np.testing.assert_array_equal(got_r[:, :5], torch.fmod(ta, tc).numpy())


def test_float_floordiv_and_mod_are_torchs() -> None:
    a = np.array([[7.5, -7.5, 1.0, np.inf, 1.0, -0.0]], np.float32)
    c = np.array([[2.0, 2.0, 0.0, 2.0, 0.1, 3.0]], np.float32)
    want_q = (torch.from_numpy(a) // torch.from_numpy(c)).numpy()
    want_r = torch.remainder(torch.from_numpy(a), torch.from_numpy(c)).numpy()
    np.testing.assert_array_equal(binary(BinaryFn.floordiv, f32, a, c), want_q)
    np.testing.assert_array_equal(binary(BinaryFn.mod, f32, a, c), want_r)
    assert want_q[0, 4] == 9.0 and want_r[0, 1] == 0.5 and np.signbit(want_r[0, 5])


def test_integer_pow_wraps_and_negative_exponents_truncate() -> None:
    a = np.array([[2, 3, -2, 1, -1, -1, 2, 0]], np.int32)
    c = np.array([[10, 21, 3, -5, -3, -4, -1, 0]], np.int32)
    wrapped = (3**21 + 2**31) % 2**32 - 2**31
    want = [1024, wrapped, -8, 1, -1, 1, 0, 1]
    np.testing.assert_array_equal(binary(BinaryFn.pow, i32, a, c)[0], want)


def test_maximum_minimum_propagate_nan() -> None:
    a = np.array([[1.0, np.nan, 3.0, -np.inf, 0.0]], np.float32)
    c = np.array([[np.nan, 2.0, 1.0, 5.0, -0.0]], np.float32)
    ta, tc = torch.from_numpy(a), torch.from_numpy(c)
    np.testing.assert_array_equal(binary(BinaryFn.maximum, f32, a, c), torch.maximum(ta, tc).numpy())
    np.testing.assert_array_equal(binary(BinaryFn.minimum, f32, a, c), torch.minimum(ta, tc).numpy())


def test_float_binary_matches_torch_in_low_precision() -> None:
    for dtype in (f16, bf16):
        a, c = floats(dtype), floats(dtype)[:, ::-1].copy()
        for fn, ref in ((BinaryFn.add, torch.add), (BinaryFn.sub, torch.sub), (BinaryFn.mul, torch.mul),
                        (BinaryFn.div, torch.div)):
            # Correctly rounded ops: f32 arithmetic rounded once to the narrow type, as torch does.
            got = binary(fn, dtype, a, c)
            np.testing.assert_array_equal(got.astype(np.float32), ref(as_torch(a, dtype), as_torch(c, dtype)).float())
        got = binary(BinaryFn.pow, dtype, a, c)
        want = torch.pow(as_torch(a, dtype), as_torch(c, dtype)).float().numpy()
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, equal_nan=True)


def test_bf16_results_are_rounded_to_bf16_each_op() -> None:
    a = oracle.numerics.round_bf16(np.array([[1.0, 256.0, 3.0]], np.float32))
    c = oracle.numerics.round_bf16(np.array([[2.0**-9, 1.0, 2.0**-8 * 3]], np.float32))
    got = binary(BinaryFn.add, bf16, a, c)
    want = (as_torch(a, bf16) + as_torch(c, bf16)).float().numpy()
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32


def test_bitwise_and_shifts() -> None:
    a = np.array([[0b1100, -8, 1, -1, 5, 1]], np.int32)
    c = np.array([[0b1010, 1, 31, 40, -1, 32]], np.int32)
    np.testing.assert_array_equal(binary(BinaryFn.and_, i32, a, c), a & c)
    np.testing.assert_array_equal(binary(BinaryFn.or_, i32, a, c), a | c)
    np.testing.assert_array_equal(binary(BinaryFn.xor, i32, a, c), a ^ c)
    # Shifts by an amount outside [0, 32) give 0 / the sign fill, as PTX's clamped shifts do.
    np.testing.assert_array_equal(binary(BinaryFn.shl, i32, a, c)[0], [0b11000000000000, -16, -2**31, 0, 0, 0])
    np.testing.assert_array_equal(binary(BinaryFn.shr, i32, a, c)[0], [0, -4, 0, -1, 0, 0])
    u = np.array([[0x80000000, 16]], np.uint32)
    np.testing.assert_array_equal(binary(BinaryFn.shr, u32, u, np.array([[31, 2]], np.uint32))[0], [1, 4])


@pytest.mark.parametrize("fn", list(CmpFn))
def test_compare_with_nan(fn: CmpFn) -> None:
    a = np.array([[1.0, np.nan, 2.0, np.nan, -0.0]], np.float32)
    c = np.array([[1.0, 1.0, 3.0, np.nan, 0.0]], np.float32)
    got = run_both(lambda b, v: b.add(Compare, fn=fn, lhs=v[0], rhs=v[1]), [tensor(f32, "M", "N")] * 2,
                   out(pred, "M", "N"), [a, c], symbols=("M", "N"))
    ref = {CmpFn.eq: np.equal, CmpFn.ne: np.not_equal, CmpFn.lt: np.less, CmpFn.le: np.less_equal,
           CmpFn.gt: np.greater, CmpFn.ge: np.greater_equal}[fn]
    np.testing.assert_array_equal(got, ref(a, c))


def test_select() -> None:
    cond = np.array([[True, False, True]])
    a, c = np.array([[1, 2, 3]], np.int64), np.array([[-1, -2, -3]], np.int64)
    got = run_both(lambda b, v: b.add(Select, cond=v[0], on_true=v[1], on_false=v[2]),
                   [tensor(pred, "M", "N"), tensor(i64, "M", "N"), tensor(i64, "M", "N")], out(i64, "M", "N"),
                   [cond, a, c], symbols=("M", "N"))
    np.testing.assert_array_equal(got, [[1, -2, 3]])


def cast(src: DType, dst: DType, x: np.ndarray) -> np.ndarray:
    return run_both(lambda b, v: b.add(Cast, x=v[0], dtype=dst), [tensor(src, "M", "N")], out(dst, "M", "N"),
                    [x], symbols=("M", "N"))


def test_cast_float_to_int_truncates_and_saturates() -> None:
    x = np.array([[2.7, -2.7, 1e10, -1e10, np.nan, np.inf, -np.inf, 127.9, -128.9]], np.float32)
    np.testing.assert_array_equal(cast(f32, i32, x)[0], [2, -2, 2**31 - 1, -2**31, 0, 2**31 - 1, -2**31, 127, -128])
    np.testing.assert_array_equal(cast(f32, i8, x)[0], [2, -2, 127, -128, 0, 127, -128, 127, -128])
    np.testing.assert_array_equal(cast(f32, u8, x)[0], [2, 0, 255, 0, 0, 255, 0, 127, 0])
    np.testing.assert_array_equal(cast(f64, i64, np.array([[1e30, -1e30, 3.5]]))[0], [2**63 - 1, -2**63, 3])


def test_cast_to_pred_int_wrap_and_float_rounding() -> None:
    np.testing.assert_array_equal(cast(f32, pred, np.array([[0.0, -0.0, 0.5, np.nan]], np.float32))[0],
                                  [False, False, True, True])
    np.testing.assert_array_equal(cast(i32, i8, np.array([[300, -129, 127]], np.int32))[0], [44, 127, 127])
    np.testing.assert_array_equal(cast(pred, f32, np.array([[True, False]]))[0], [1.0, 0.0])
    x = np.array([[1.0 + 2**-10, 3.14159, 65520.0, 1e-8]], np.float32)
    np.testing.assert_array_equal(cast(f32, f16, x), torch.from_numpy(x).half().numpy())
    np.testing.assert_array_equal(cast(f32, bf16, x), torch.from_numpy(x).bfloat16().float().numpy())
    y = np.array([[1.0 + 2**-12, 1e40, -3.0000001]], np.float64)
    np.testing.assert_array_equal(cast(f64, bf16, y), torch.from_numpy(y).bfloat16().float().numpy())
    np.testing.assert_array_equal(cast(bf16, f16, oracle.numerics.round_bf16(x)),
                                  torch.from_numpy(x).bfloat16().half().numpy())


def test_bitcast() -> None:
    x = np.array([[1.0, -2.0, np.inf]], np.float32)
    got = run_both(lambda b, v: b.add(Bitcast, x=v[0], dtype=i32), [tensor(f32, "M", "N")], out(i32, "M", "N"),
                   [x], symbols=("M", "N"))
    np.testing.assert_array_equal(got, x.view(np.int32))
    h = oracle.numerics.round_bf16(np.array([[1.0, -2.5, 3e38]], np.float32))
    bits = run_both(lambda b, v: b.add(Bitcast, x=v[0], dtype=DType.i16), [tensor(bf16, "M", "N")],
                    out(DType.i16, "M", "N"), [h], symbols=("M", "N"))
    np.testing.assert_array_equal(bits, torch.from_numpy(h).bfloat16().view(torch.int16).numpy())
    back = run_both(lambda b, v: b.add(Bitcast, x=v[0], dtype=bf16), [tensor(DType.i16, "M", "N")],
                    out(bf16, "M", "N"), [bits], symbols=("M", "N"))
    np.testing.assert_array_equal(back, h)


def test_flush_subnormals_flushes_inside_the_computation() -> None:
    """With `flush_subnormals`, every f32 value an arithmetic op gives or reads is flushed, as XLA's CPU runtime
    computes (flush-to-zero and denormals-are-zero): exp(-95) is 0 there, so log(exp(-95)) is -inf, where the
    kernel's own meaning keeps the subnormal and gives about -95; a subnormal input reads as 0 in arithmetic."""
    from kir.text import parse_kernel

    k = parse_kernel("""kernel log_exp(x: in f32[N], out: out f32[N], twice: out f32[N]) symbols(N) {
  %a: f32[N] = load %x[0:N]
  %e: f32[N] = unary exp %a
  %l: f32[N] = unary log %e
  store %out[0:N] = %l
  %t: f32[N] = binary add %a, %a
  store %twice[0:N] = %t
  yield
}""")
    x = np.array([-95.0, -87.0, 1.0, 1e-40, -3e-39], np.float32)
    args = {"x": x, "out": np.zeros(5, np.float32), "twice": np.zeros(5, np.float32)}
    kept = oracle.run(k, args)
    np.testing.assert_allclose(kept["out"][:3], [-95.0, -87.0, 1.0], rtol=1e-5)
    np.testing.assert_array_equal(kept["twice"][3:], x[3:] * 2)
    flushed = oracle.run(k, args, flush_subnormals=True)
    assert flushed["out"][0] == -np.inf and flushed["out"][1] == kept["out"][1] and flushed["out"][2] == kept["out"][2]
    np.testing.assert_array_equal(flushed["twice"], [-190.0, -174.0, 2.0, 0.0, -0.0])
    assert np.signbit(flushed["twice"][4])


def test_flush_subnormals_models_a_consumer_that_flushes_bits_made_floats() -> None:
    """`oracle.run(..., flush_subnormals=True)` gives 0 (with its sign) for an f32 subnormal a bitcast makes, as
    XLA's CPU runtime treats it; normal values, and the kernel's own meaning (the default), keep their bits."""
    from tests.oracle_kit import elementwise

    bits = np.array([[1, 9, -2147483647, 0x3F800000]], np.int32)  # two subnormals, -1.4e-45, 1.0
    k = elementwise(lambda b, v: b.add(Bitcast, x=v[0], dtype=f32), [tensor(DType.i32, "M", "N")],
                    out(f32, "M", "N"), symbols=("M", "N"))
    kept = oracle.run(k, {"x0": bits})["out"]
    np.testing.assert_array_equal(kept.view(np.int32), bits)
    flushed = oracle.run(k, {"x0": bits}, flush_subnormals=True)["out"]
    np.testing.assert_array_equal(flushed, np.array([[0.0, 0.0, -0.0, 1.0]], np.float32))
    assert np.signbit(flushed[0, 2])


def test_constant_iota_and_dim_values() -> None:
    N = DSym("N")

    def body(b, p):
        zero = const(b, 0, i64)
        store_all(b, p["ramp"], b.add(Iota, extent=N, dtype=i32))
        b.make(Store, dst=p["n"], index=(zero,), value=b.add(DimValue, dim=N, dtype=i64))
        b.make(Store, dst=p["c"], index=(zero,), value=const(b, 0.1, bf16))

    k = kernel({"x": tensor(f32, "N"), "ramp": out(i32, "N"), "n": out(i64, 1), "c": out(bf16, 1)}, body,
               symbols=("N",))
    r = oracle.run(k, {"x": np.zeros(5, np.float32)})
    np.testing.assert_array_equal(r["ramp"], np.arange(5, dtype=np.int32))
    assert r["n"].tolist() == [5] and r["n"].dtype == np.int64
    assert r["c"].tolist() == [torch.tensor(0.1).bfloat16().float().item()]
