"""KIR's numeric rules in the generated Triton (emit_triton/numerics.py), bit for bit against the oracle.

bf16 values live in f32 registers and round after every op; float -> integer casts saturate; integer
pow is exact; f16 division and pow compute in f32; f64 division and fills stay f64. Each kernel runs
under Triton's interpreter (which computes on bf16 bit patterns as if they were integers, so any bf16
value reaching Triton arithmetic shows up here) and through the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import emit_triton
import oracle
from emit_triton.numerics import round_bf16_value
from kir.text import parse_kernel
from oracle.numerics import round_bf16

SPECIALS = [0.0, -0.0, 1.0, -1.5, 0.1, 3.0e38, -3.0e38, 1e-40, -1e-41, float("inf"), float("-inf"), float("nan"),
            1.00390625, 1.01171875, 65504.0, 2.5, -2.5, 7.0, 1e-3]


def _torch(x: np.ndarray, dtype: str) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(x))
    return t.to(torch.bfloat16) if dtype == "bf16" else t


def _same(got: torch.Tensor, want: np.ndarray, rtol: float = 0.0) -> None:
    """Bit for bit (signed zeros too), or within `rtol` where the device's libm or summation order may
    round differently (transcendentals, f32 accumulation)."""
    g = got.float().numpy() if got.dtype == torch.bfloat16 else got.numpy()
    w = np.asarray(want, dtype=g.dtype)
    if g.dtype.kind != "f":
        assert np.array_equal(g, w), (g, w)
        return
    assert np.array_equal(np.isnan(g), np.isnan(w)), (g, w)
    ok = ~np.isnan(g)
    if rtol:
        np.testing.assert_allclose(g[ok], w[ok], rtol=rtol, atol=0)
        assert np.array_equal(np.signbit(g[ok]), np.signbit(w[ok])), (g, w)
    else:
        assert np.array_equal(g[ok].view(np.uint8 if g.itemsize == 1 else f"u{g.itemsize}"),
                              w[ok].view(np.uint8 if w.itemsize == 1 else f"u{w.itemsize}")), (g, w)


def _run(text: str, inputs: dict[str, np.ndarray], outputs: dict[str, tuple[tuple[int, ...], str]],
         rtol: dict[str, float] | None = None) -> None:
    kernel = parse_kernel(text)
    np_dtypes = {"bf16": np.float32, "f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
                 "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
                 "u64": np.uint64, "i16": np.int16, "pred": np.bool_}
    ref_args = dict(inputs)
    ref_args.update({k: np.zeros(s, np_dtypes[d]) for k, (s, d) in outputs.items()})
    want = oracle.run(kernel, ref_args)
    bf16 = {p.name for p in kernel.params if str(getattr(p.type, "dtype", "")) == "bf16"}
    targs = {k: _torch(v, "bf16" if k in bf16 else "") for k, v in inputs.items()}
    for k, (s, d) in outputs.items():
        targs[k] = torch.zeros(s, dtype=torch.bfloat16) if d == "bf16" else torch.from_numpy(np.zeros(s, np_dtypes[d]))
    emit_triton.launch(kernel, targs)
    for k in outputs:
        _same(targs[k], want[k], (rtol or {}).get(k, 0.0))


def _bf16(values: list[float]) -> np.ndarray:
    return round_bf16(np.array(values, np.float32))


@pytest.mark.parametrize("fn", ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "floordiv", "mod"])
def test_bf16_binary_rounds_like_the_oracle(fn: str) -> None:
    n = len(SPECIALS)
    a = _bf16(SPECIALS)
    b = _bf16(SPECIALS[::-1])
    _run(f"""kernel k(ba: in bf16[N], bb: in bf16[N], out: out bf16[N]) symbols(N) {{
  %a: bf16[N] = load %ba[0:N]
  %b: bf16[N] = load %bb[0:N]
  %c: bf16[N] = binary {fn} %a, %b
  store %out[0:N] = %c
  yield
}}""", {"ba": a, "bb": b}, {"out": ((n,), "bf16")})


@pytest.mark.parametrize("fn", ["exp", "sqrt", "neg", "abs", "tanh", "floor", "round"])
def test_bf16_unary_rounds_like_the_oracle(fn: str) -> None:
    a = _bf16([abs(v) if fn == "sqrt" else v for v in SPECIALS])
    _run(f"""kernel k(ba: in bf16[N], out: out bf16[N]) symbols(N) {{
  %a: bf16[N] = load %ba[0:N]
  %c: bf16[N] = unary {fn} %a
  store %out[0:N] = %c
  yield
}}""", {"ba": a}, {"out": ((len(SPECIALS),), "bf16")}, {"out": 2 ** -7 if fn in ("exp", "tanh") else 0.0})


@pytest.mark.parametrize("fn", ["eq", "lt", "ge"])
def test_bf16_comparisons_order_values_not_bit_patterns(fn: str) -> None:
    a, b = _bf16(SPECIALS), _bf16([0.0, 0.0, -1.0, 1.0, 0.1, -3e38, 3e38, 0.0, 0.0, 1.0, 1.0, float("nan"), 1.0,
                                  1.0, 1.0, -2.5, 2.5, 7.0, 0.0])
    _run(f"""kernel k(ba: in bf16[N], bb: in bf16[N], out: out pred[N]) symbols(N) {{
  %a: bf16[N] = load %ba[0:N]
  %b: bf16[N] = load %bb[0:N]
  %c: pred[N] = compare {fn} %a, %b
  store %out[0:N] = %c
  yield
}}""", {"ba": a, "bb": b}, {"out": ((len(SPECIALS),), "pred")})


def test_casts_to_bf16_round_to_nearest_even_and_keep_subnormals() -> None:
    # ties both ways, a carry into the exponent, overflow to inf, f32 and bf16 subnormals
    x = np.array([1.00390625, 1.01171875, 1.0078125 + 2 ** -20, 3.3961514e38, 3.4e38, 1e-39, -4e-40, 9.2e-41,
                  0.1, -0.0, float("nan"), float("-inf")], np.float32)
    x64 = np.array([1.0 + 2 ** -8 + 2 ** -30, 1e300, -1e-300, 0.1, 5e-324, 1.00390625, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    i32 = np.array([16777217, -16777219, 257, 2 ** 31 - 1, -(2 ** 31), 0, 1, 2, 3, 4, 5, 6], np.int32)
    _run("""kernel k(x: in f32[N], y: in f64[N], z: in i32[N], o1: out bf16[N], o2: out bf16[N], o3: out bf16[N],
         back: out f32[N]) symbols(N) {
  %a: f32[N] = load %x[0:N]
  %b: bf16[N] = cast %a to bf16
  store %o1[0:N] = %b
  %c: f64[N] = load %y[0:N]
  %d: bf16[N] = cast %c to bf16
  store %o2[0:N] = %d
  %e: i32[N] = load %z[0:N]
  %f: bf16[N] = cast %e to bf16
  store %o3[0:N] = %f
  %g: f32[N] = cast %b to f32
  store %back[0:N] = %g
  yield
}""", {"x": x, "y": x64, "z": i32}, {"o1": ((12,), "bf16"), "o2": ((12,), "bf16"), "o3": ((12,), "bf16"),
                                       "back": ((12,), "f32")})


def test_bf16_bits_round_trip_through_bitcast() -> None:
    bits = np.array([0x0001, 0x8001, 0x7F80, 0xFF80, 0x7FC1, 0x3F80, 0x0080, 0xFFFF], np.uint16)
    _run("""kernel k(x: in u16[N], out: out u16[N], signed: out i16[N], value: out f32[N]) symbols(N) {
  %a: u16[N] = load %x[0:N]
  %b: bf16[N] = bitcast %a to bf16
  %c: u16[N] = bitcast %b to u16
  store %out[0:N] = %c
  %d: i16[N] = bitcast %b to i16
  store %signed[0:N] = %d
  %e: f32[N] = cast %b to f32
  store %value[0:N] = %e
  yield
}""", {"x": bits}, {"out": ((8,), "u16"), "signed": ((8,), "i16"), "value": ((8,), "f32")})


def test_bf16_reductions_and_scans_accumulate_in_f32_and_round_once() -> None:
    rng = np.random.default_rng(3)
    x = _bf16(list(rng.standard_normal(3 * 37) * 100)).reshape(3, 37)
    _run("""kernel k(bx: in bf16[M, N], s: out bf16[M], m: out bf16[M], c: out bf16[M, N]) symbols(M, N) {
  parallel (%i: i64) in (M) {
    %a: bf16[N] = load %bx[%i, 0:N]
    %t: bf16 = reduce sum(%a) axes=(0)
    store %s[%i] = %t
    %u: bf16 = reduce max(%a) axes=(0)
    store %m[%i] = %u
    %v: bf16[N] = scan sum(%a) axis=0
    store %c[%i, 0:N] = %v
    yield
  }
  yield
}""", {"bx": x}, {"s": ((3,), "bf16"), "m": ((3,), "bf16"), "c": ((3, 37), "bf16")},
         {"s": 2 ** -7, "c": 2 ** -7})  # f32 sums in another order: at most one bf16 step apart


def test_a_bf16_constant_is_the_nearest_bf16() -> None:
    assert round_bf16_value(0.1) == 0.10009765625
    assert round_bf16_value(1e39) == float("inf")
    _run("""kernel k(bx: in bf16[N], out: out bf16[N]) symbols(N) {
  %a: bf16[N] = load %bx[0:N]
  %c: bf16 = constant 0.1 : bf16
  %d: bf16[N] = binary mul %a, %c
  store %out[0:N] = %d
  yield
}""", {"bx": _bf16([1.0, 3.0, -7.5])}, {"out": ((3,), "bf16")})


@pytest.mark.parametrize("dst", ["i8", "u8", "i32", "u32", "i64", "u64"])
def test_float_to_integer_casts_truncate_and_saturate(dst: str) -> None:
    x = np.array([0.0, -0.9, 0.9, 127.5, -128.7, 300.0, -300.0, 2.0 ** 31, -(2.0 ** 31) - 4096.0, 2.0 ** 32,
                  2.0 ** 63, -(2.0 ** 64), 1e30, -1e30, float("inf"), float("-inf"), float("nan"), 42.99], np.float32)
    _run(f"""kernel k(x: in f32[N], y: in f64[N], out: out {dst}[N], wide: out {dst}[N]) symbols(N) {{
  %a: f32[N] = load %x[0:N]
  %b: {dst}[N] = cast %a to {dst}
  store %out[0:N] = %b
  %c: f64[N] = load %y[0:N]
  %d: {dst}[N] = cast %c to {dst}
  store %wide[0:N] = %d
  yield
}}""", {"x": x, "y": x.astype(np.float64) * 1.5}, {"out": ((18,), dst), "wide": ((18,), dst)})


@pytest.mark.parametrize("dtype", ["i8", "i32", "i64", "u8", "u32"])
def test_integer_pow_is_exact_and_wraps(dtype: str) -> None:
    signed = dtype[0] == "i"
    base = np.array([2, 3, -2, -1, 1, 0, 7, 5, 2, -3, 10, 0], np.int64)
    exp = np.array([10, 5, 3, 7, -3, 0, 2, 0, 70, -1, 20, -2], np.int64)
    if not signed:
        base, exp = np.abs(base), np.abs(exp)
    np_dt = np.dtype({"i8": np.int8, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u32": np.uint32}[dtype])
    _run(f"""kernel k(x: in {dtype}[N], y: in {dtype}[N], out: out {dtype}[N]) symbols(N) {{
  %a: {dtype}[N] = load %x[0:N]
  %b: {dtype}[N] = load %y[0:N]
  %c: {dtype}[N] = binary pow %a, %b
  store %out[0:N] = %c
  yield
}}""", {"x": base.astype(np_dt), "y": exp.astype(np_dt)}, {"out": ((12,), dtype)})


def test_f16_division_and_pow_are_correctly_rounded() -> None:
    a = np.array([1.0, 2.0, 3.0, -7.0, 1e-4, 65504.0, 0.5, 3.3], np.float16)
    b = np.array([3.0, 7.0, 0.1, 2.5, 3.0, 0.5, -1.5, 1.7], np.float16)
    _run("""kernel k(x: in f16[N], y: in f16[N], q: out f16[N], p: out f16[N]) symbols(N) {
  %a: f16[N] = load %x[0:N]
  %b: f16[N] = load %y[0:N]
  %c: f16[N] = binary div %a, %b
  store %q[0:N] = %c
  %d: f16[N] = binary pow %a, %b
  store %p[0:N] = %d
  yield
}""", {"x": a, "y": b}, {"q": ((8,), "f16"), "p": ((8,), "f16")})


def test_f64_division_and_gather_fill_stay_f64() -> None:
    a = np.array([1.0, 2.0, 1e300, -7.0, 0.1], np.float64)
    b = np.array([3.0, 7.0, 1e-10, 0.0, 0.3], np.float64)
    keys = np.array([0, 9, 4, -1, 2], np.int32)
    _run("""kernel k(x: in f64[N], y: in f64[N], keys: in i32[N], q: out f64[N], g: out f64[N]) symbols(N) {
  %a: f64[N] = load %x[0:N]
  %b: f64[N] = load %y[0:N]
  %c: f64[N] = binary div %a, %b
  store %q[0:N] = %c
  parallel (%i: i64) in (N) {
    %k: i32 = load %keys[%i]
    %v: f64 = gather %x[%k] fill=0.001
    store %g[%i] = %v
    yield
  }
  yield
}""", {"x": a, "y": b, "keys": keys}, {"q": ((5,), "f64"), "g": ((5,), "f64")})


@pytest.mark.parametrize("dtype", ["i8", "u8", "i16"])
def test_narrow_integer_sums_and_scans_wrap_at_their_width(dtype: str) -> None:
    np_dt = {"i8": np.int8, "u8": np.uint8, "i16": np.int16}[dtype]
    x = np.full((2, 40), 100 if dtype != "i16" else 30000, np_dt)
    _run(f"""kernel k(x: in {dtype}[M, N], s: out {dtype}[M], c: out {dtype}[M, N], big: out pred[M]) symbols(M, N) {{
  parallel (%i: i64) in (M) {{
    %a: {dtype}[N] = load %x[%i, 0:N]
    %t: {dtype} = reduce sum(%a) axes=(0)
    store %s[%i] = %t
    %z: {dtype} = constant 0 : {dtype}
    %g: pred = compare lt %t, %z
    store %big[%i] = %g
    %v: {dtype}[N] = scan sum(%a) axis=0
    store %c[%i, 0:N] = %v
    yield
  }}
  yield
}}""", {"x": x}, {"s": ((2,), dtype), "c": ((2, 40), dtype), "big": ((2,), "pred")})


def test_pow_special_cases_follow_c() -> None:
    pairs = [(1.0, float("nan")), (-1.0, float("inf")), (-1.0, float("-inf")), (float("nan"), 0.0), (-0.0, 3.0),
             (-0.0, -3.0), (-0.0, 0.5), (-0.0, -2.0), (float("-inf"), 0.5), (float("-inf"), -0.5),
             (float("-inf"), 3.0), (-2.0, 0.5), (-2.0, 3.0), (0.5, float("inf")), (2.0, float("-inf")), (3.0, 2.0)]
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    _run("""kernel k(x: in f32[N], y: in f32[N], out: out f32[N], wide: out f64[N]) symbols(N) {
  %a: f32[N] = load %x[0:N]
  %b: f32[N] = load %y[0:N]
  %c: f32[N] = binary pow %a, %b
  store %out[0:N] = %c
  %d: f64[N] = cast %a to f64
  %e: f64[N] = cast %b to f64
  %f: f64[N] = binary pow %d, %e
  store %wide[0:N] = %f
  yield
}""", {"x": a, "y": b}, {"out": ((len(pairs),), "f32"), "wide": ((len(pairs),), "f64")},
         {"out": 1e-6, "wide": 1e-12})


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_pow_by_a_constant_half_follows_c_not_sqrt(dtype: str) -> None:
    # NumPy takes a constant exponent of 0.5 as sqrt (NaN for -inf, -0.0 for -0.0); C's pow, the device
    # and XLA give +inf and +0.0, and so must the oracle.
    np_dt = np.float32 if dtype == "f32" else np.float64
    x = np.array([float("-inf"), -0.0, 0.0, 4.0, -4.0, float("inf"), float("nan"), 2.0], np_dt)
    text = f"""kernel k(x: in {dtype}[N], out: out {dtype}[N]) symbols(N) {{
  %a: {dtype}[N] = load %x[0:N]
  %h: {dtype} = constant 0.5 : {dtype}
  %b: {dtype}[N] = broadcast %h shape=(N) dims=()
  %c: {dtype}[N] = binary pow %a, %b
  store %out[0:N] = %c
  yield
}}"""
    want = oracle.run(parse_kernel(text), {"x": x, "out": np.zeros(8, np_dt)})["out"]
    assert want[0] == np.inf and want[1] == 0.0 and not np.signbit(want[1]) and np.isnan(want[4])
    _run(text, {"x": x}, {"out": ((8,), dtype)}, {"out": 1e-6})


@pytest.mark.parametrize("alpha", [0.1, 1.0 + 2.0 ** -40, -1e300, 5e-324, float("inf"), 0.0])
def test_f64_scalars_keep_every_bit_through_the_first_and_the_cached_launch(alpha: float) -> None:
    kernel = parse_kernel("""kernel k(x: in f64[N], alpha: f64, out: out f64[N]) symbols(N) {
  %a: f64[N] = load %x[0:N]
  %b: f64[N] = broadcast %alpha shape=(N) dims=()
  %c: f64[N] = binary add %a, %b
  store %out[0:N] = %c
  yield
}""")
    x = torch.tensor([0.0, 1.0, -2.5], dtype=torch.float64)
    for _ in range(2):  # the second launch takes the cached fast path
        out = torch.zeros(3, dtype=torch.float64)
        emit_triton.launch(kernel, {"x": x, "alpha": alpha, "out": out})
        assert out.tolist() == [v + alpha for v in x.tolist()]


UNARY_FLOAT = ["neg", "abs", "exp", "exp2", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
               "erf", "floor", "ceil", "round", "isnan", "isinf"]


@pytest.mark.parametrize("dtype", ["f16", "f64"])
@pytest.mark.parametrize("fn", UNARY_FLOAT)
def test_every_float_unary_runs_at_every_width(fn: str, dtype: str) -> None:
    np_dt = np.float16 if dtype == "f16" else np.float64
    x = np.array([0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 3.0, 100.0, float("inf"), float("nan"), 1e-3, 0.75], np_dt)
    if fn in ("log", "log2", "log1p", "sqrt", "rsqrt"):
        x = np.abs(x)
    rt = "pred" if fn in ("isnan", "isinf") else dtype
    _run(f"""kernel k(x: in {dtype}[N], out: out {rt}[N]) symbols(N) {{
  %a: {dtype}[N] = load %x[0:N]
  %c: {rt}[N] = unary {fn} %a
  store %out[0:N] = %c
  yield
}}""", {"x": x}, {"out": ((12,), rt)}, {"out": 2e-3 if dtype == "f16" else 1e-12})


def test_index_arithmetic_written_by_the_kernel_keeps_its_kir_width() -> None:
    _run("""kernel k(x: in f32[N], out: out i64[N], flat: out i64[N]) symbols(N) {
  parallel (%i: i64) in (N) {
    %s: i64 = constant 31 : i64
    %a: i64 = binary shl %i, %s
    store %out[%i] = %a
    %m: i64 = constant 3000000000 : i64
    %b: i64 = binary mul %i, %m
    store %flat[%i] = %b
    yield
  }
  yield
}""", {"x": np.zeros(4, np.float32)}, {"out": ((4,), "i64"), "flat": ((4,), "i64")})


def test_integer_ops_on_constants_wrap_and_truncate_as_kir() -> None:
    _run("""kernel k(x: in i32[N], out: out i64[N], q: out i32[N], r: out i32[N], w: out i32[N]) symbols(N) {
  %one: i64 = constant 1 : i64
  %s: i64 = constant 31 : i64
  %big: i64 = binary shl %one, %s
  %b: i64[N] = broadcast %big shape=(N) dims=()
  store %out[0:N] = %b
  %m7: i32 = constant -7 : i32
  %two: i32 = constant 2 : i32
  %d: i32 = binary floordiv %m7, %two
  %e: i32[N] = broadcast %d shape=(N) dims=()
  store %q[0:N] = %e
  %f: i32 = binary mod %m7, %two
  %g: i32[N] = broadcast %f shape=(N) dims=()
  store %r[0:N] = %g
  %h: i32 = constant 2147483647 : i32
  %i: i32 = binary add %h, %two
  %j: i32[N] = broadcast %i shape=(N) dims=()
  store %w[0:N] = %j
  yield
}""", {"x": np.zeros(2, np.int32)}, {"out": ((2,), "i64"), "q": ((2,), "i32"), "r": ((2,), "i32"), "w": ((2,), "i32")})


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_float_atomic_max_and_min_propagate_nan(kind: str, dtype: str) -> None:
    np_dt = np.float32 if dtype == "f32" else np.float64
    # one NaN operand, NaN already in memory, and plain values of both signs
    vals = np.array([np.nan, 1.5, -2.0, 3.0, -0.5, 2.0], np_dt)
    acc = np.array([1.0, np.nan, np.nan, -1.0, 0.25, -3.0], np_dt)
    text = f"""kernel k(v: in {dtype}[N], acc: inout {dtype}[N]) symbols(N) {{
  parallel (%i: i64) in (N) {{
    %x: {dtype} = load %v[%i]
    %o: {dtype} = atomic {kind} %acc[%i], %x order=relaxed
    yield
  }}
  yield
}}"""
    k = parse_kernel(text)
    want = oracle.run(k, {"v": vals, "acc": acc.copy()})["acc"]
    got = torch.from_numpy(acc.copy())
    emit_triton.launch(k, {"v": torch.from_numpy(vals), "acc": got})
    assert np.array_equal(got.numpy(), want, equal_nan=True), (got, want)
    assert ".entry" in emit_triton.ptx(k, {"v": torch.from_numpy(vals), "acc": torch.from_numpy(acc.copy())}, arch=90)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_float_atomic_extremes_retry_when_members_race_for_one_address(kind: str) -> None:
    rng = np.random.default_rng(11)
    vals = rng.standard_normal(300).astype(np.float32)
    keys = (np.arange(300) % 3).astype(np.int32)  # a hundred members per address, in every program
    text = f"""kernel k(v: in f32[N], keys: in i32[N], acc: inout f32[B]) symbols(N, B) {{
  parallel (%i: i64) in (N) {{
    %x: f32 = load %v[%i]
    %k: i32 = load %keys[%i]
    %o: f32 = atomic {kind} %acc[%k], %x order=relaxed
    yield
  }}
  yield
}}"""
    k = parse_kernel(text)
    acc = np.array([0.0, np.nan, -np.inf if kind == "max" else np.inf], np.float32)
    want = oracle.run(k, {"v": vals, "keys": keys, "acc": acc.copy()})["acc"]
    got = torch.from_numpy(acc.copy())
    emit_triton.launch(k, {"v": torch.from_numpy(vals), "keys": torch.from_numpy(keys), "acc": got})
    assert np.array_equal(got.numpy(), want, equal_nan=True), (got, want)
    assert np.isnan(want[1])


def test_bf16_atomic_add_rounds_each_sum_and_races_safely() -> None:
    # Small integers: every partial sum is exact in bf16, so any order of the adds gives the oracle's bits.
    rng = np.random.default_rng(5)
    vals = rng.integers(-4, 5, 300).astype(np.float32)
    keys = (np.arange(300) % 3).astype(np.int32)  # a hundred members per address, in every program
    text = """kernel k(v: in bf16[N], keys: in i32[N], acc: inout bf16[B]) symbols(N, B) {
  parallel (%i: i64) in (N) {
    %x: bf16 = load %v[%i]
    %k: i32 = load %keys[%i]
    %o: bf16 = atomic add %acc[%k], %x order=relaxed
    yield
  }
  yield
}"""
    k = parse_kernel(text)
    acc = np.array([0.0, -0.0, 256.0], np.float32)
    want = oracle.run(k, {"v": vals, "keys": keys, "acc": acc.copy()})["acc"]
    got = torch.from_numpy(acc).to(torch.bfloat16)
    emit_triton.launch(k, {"v": torch.from_numpy(vals).to(torch.bfloat16), "keys": torch.from_numpy(keys),
                           "acc": got})
    _same(got, want)
    assert ".entry" in emit_triton.ptx(k, {"v": torch.from_numpy(vals).to(torch.bfloat16),
                                           "keys": torch.from_numpy(keys), "acc": got.clone()}, arch=90)


def test_bf16_atomic_add_old_values_and_rounding_at_unique_addresses() -> None:
    # One member per address: the old value is what was there, the new one the rounded f32 sum.
    acc = _bf16([1.0, -0.0, 3.0e38, 1.00390625, float("nan"), 256.0])
    vals = _bf16([0.00390625, -0.0, 3.0e38, 1.00390625, 1.0, 1.0])
    text = """kernel k(v: in bf16[N], acc: inout bf16[N], old: out bf16[N]) symbols(N) {
  parallel (%i: i64) in (N) {
    %x: bf16 = load %v[%i]
    %o: bf16 = atomic add %acc[%i], %x order=acq_rel
    store %old[%i] = %o
    yield
  }
  yield
}"""
    k = parse_kernel(text)
    want = oracle.run(k, {"v": vals, "acc": acc.copy(), "old": np.zeros(6, np.float32)})
    targs = {"v": torch.from_numpy(vals).to(torch.bfloat16), "acc": torch.from_numpy(acc).to(torch.bfloat16),
             "old": torch.zeros(6, dtype=torch.bfloat16)}
    emit_triton.launch(k, targs)
    _same(targs["acc"], want["acc"])
    _same(targs["old"], want["old"])


def test_a_comparison_of_two_literals_meets_tensors_as_int1() -> None:
    # `0.0 == 0.0` is a constexpr bool on the device and a 0-d tensor of its operands' dtype under the
    # interpreter: broadcast, and combined with an int1 tensor, it must be a real int1 on both.
    text = """kernel k(x: in f32[N], out: out pred[N], both: out pred[N]) symbols(N) {
  parallel (%i: i64) in (N) {
    %z: f32 = constant 0.0 : f32
    %t: pred = compare eq %z, %z
    %v: f32 = load %x[%i]
    %p: pred = compare gt %v, %z
    %a: pred = binary and %p, %t
    %b: pred = binary xor %p, %t
    store %out[%i] = %a
    store %both[%i] = %b
    yield
  }
  yield
}"""
    x = np.array([1.0, -1.0, 0.0, 2.0, np.nan], np.float32)
    _run(text, {"x": x}, {"out": ((5,), "pred"), "both": ((5,), "pred")})
    k = parse_kernel(text)
    args = {"x": torch.from_numpy(x), "out": torch.zeros(5, dtype=torch.bool), "both": torch.zeros(5, dtype=torch.bool)}
    assert ".entry" in emit_triton.ptx(k, args, arch=90)
