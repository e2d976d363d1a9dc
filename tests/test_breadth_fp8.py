"""fp8 (f8e4m3 = torch.float8_e4m3fn, f8e5m2 = torch.float8_e5m2): the oracle rounds with ml_dtypes, the
generated code with integer and exact float operations on the f32 bit pattern, so the two agree bit for bit
under Triton's interpreter; torch's conversions are matched exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intent
from intent import Out, dims, f8e4m3, f8e5m2, f32, i32, parallel
from kir.dtypes import DType, fp8_rounded
from tests.breadth_support import three_ways

M, N, K = dims("M N K")
TORCH = {DType.f8e4m3: torch.float8_e4m3fn, DType.f8e5m2: torch.float8_e5m2}


def _specials() -> torch.Tensor:
    """f32 values around every fp8 boundary: ties, subnormals, the largest finite values, infinities, NaN."""
    base = [0.0, -0.0, 1.0, -1.0, 1.0625, 1.1875, 448.0, 464.0, 465.0, 479.0, 480.0, 500.0, 1e6, 57344.0, 61439.0,
            61440.0, 70000.0, 2.0 ** -6, 2.0 ** -7, 2.0 ** -9, 2.0 ** -10, 1.5 * 2.0 ** -10, 3 * 2.0 ** -10,
            2.0 ** -14, 2.0 ** -16, 2.0 ** -17, 1.5 * 2.0 ** -17, 3 * 2.0 ** -17, 1e-30, 1e-45, 3.4e38,
            float("inf"), float("-inf"), float("nan")]
    g = torch.Generator().manual_seed(5)
    rnd = torch.randn(200, generator=g) * torch.exp2(torch.randint(-20, 18, (200,), generator=g).float())
    return torch.cat([torch.tensor(base), -torch.tensor(base), rnd])


@intent.kernel
def convert(x: f32[N], a: Out[f8e4m3[N]], b: Out[f8e5m2[N]], a_sat: Out[f8e4m3[N]], a_raw: Out[f8e4m3[N]],
            b_sat: Out[f8e5m2[N]]):
    for n in parallel(N):
        a[n] = x[n].to(f8e4m3)
        b[n] = x[n].to(f8e5m2)
        a_sat[n] = x[n].to(f8e4m3, saturate=True)
        a_raw[n] = x[n].to(f8e4m3, saturate=False)
        b_sat[n] = x[n].to(f8e5m2, saturate=True)


def test_conversions_match_torch_bit_for_bit() -> None:
    x = _specials()
    n = x.shape[0]
    outs = {"a": torch.empty(n, dtype=torch.float8_e4m3fn), "b": torch.empty(n, dtype=torch.float8_e5m2),
            "a_sat": torch.empty(n, dtype=torch.float8_e4m3fn), "a_raw": torch.empty(n, dtype=torch.float8_e4m3fn),
            "b_sat": torch.empty(n, dtype=torch.float8_e5m2)}
    args = {"x": x, **outs}
    want = convert.oracle(**{k: v.clone() for k, v in args.items()})
    convert(**args)
    shlo = convert.stablehlo_run(x=x)
    for name, t in outs.items():
        np.testing.assert_array_equal(t.float().numpy(), want[name], err_msg=name)
        np.testing.assert_array_equal(np.asarray(shlo[name]), want[name], err_msg=f"StableHLO {name}")
    # torch's own conversions: f8e4m3 saturates (to +-448, infinities too), f8e5m2 does not
    np.testing.assert_array_equal(outs["a"].float().numpy(), x.to(torch.float8_e4m3fn).float().numpy())
    np.testing.assert_array_equal(outs["b"].float().numpy(), x.to(torch.float8_e5m2).float().numpy())
    assert np.isnan(outs["a_raw"].float().numpy()[x.numpy() == 1e6]).all()  # non-saturating: NaN
    assert (outs["b_sat"].float().numpy()[x.numpy() == float("inf")] == 57344.0).all()
    assert np.isnan(outs["a_sat"].float().numpy()[np.isnan(x.numpy())]).all()


@pytest.mark.parametrize("dtype", [DType.f8e4m3, DType.f8e5m2], ids=str)
def test_every_bit_pattern_decodes_and_encodes(dtype: DType) -> None:
    bits = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    x8 = bits.view(TORCH[dtype])
    k = widen_e4m3 if dtype is DType.f8e4m3 else widen_e5m2
    wide, back = torch.empty(256), torch.empty(256, dtype=TORCH[dtype])
    k(x8, wide, back)
    want = x8.float().numpy()
    np.testing.assert_array_equal(wide.numpy(), want)
    nan = np.isnan(want)
    np.testing.assert_array_equal(back.view(torch.uint8).numpy()[~nan], bits.numpy()[~nan])
    assert np.isnan(back.float().numpy()[nan]).all()


@intent.kernel
def widen_e4m3(x: f8e4m3[N], wide: Out[f32[N]], back: Out[f8e4m3[N]]):
    for n in parallel(N):
        wide[n] = x[n].to(f32)
        back[n] = x[n]


@intent.kernel
def widen_e5m2(x: f8e5m2[N], wide: Out[f32[N]], back: Out[f8e5m2[N]]):
    for n in parallel(N):
        wide[n] = x[n].to(f32)
        back[n] = x[n]


@intent.kernel
def arith(a: f8e4m3[M, N], b: f8e4m3[M, N], c: f8e5m2[M, N], s: Out[f8e4m3[M, N]], p: Out[f8e5m2[M, N]],
          total: Out[f32[M]], rowmax: Out[f8e4m3[M]], ints: Out[i32[M, N]]):
    for i in parallel(M):
        s[i, :] = a[i, :] + b[i, :] * 0.5
        p[i, :] = c[i, :] * c[i, :] - intent.exp(a[i, :]).to(f8e5m2)
        total[i] = intent.sum(a[i, :]).to(f32) + intent.sum(a[i, :].to(f32) * c[i, :].to(f32))
        rowmax[i] = intent.max(a[i, :] - b[i, :])
        ints[i, :] = a[i, :].to(i32)


def test_arithmetic_computes_in_f32_and_rounds_to_the_result() -> None:
    g = torch.Generator().manual_seed(7)
    a = (torch.randn(4, 24, generator=g) * 8).to(torch.float8_e4m3fn)
    b = (torch.randn(4, 24, generator=g) * 8).to(torch.float8_e4m3fn)
    c = (torch.randn(4, 24, generator=g) * 300).to(torch.float8_e5m2)
    args = {"a": a, "b": b, "c": c, "s": torch.empty(4, 24, dtype=torch.float8_e4m3fn),
            "p": torch.empty(4, 24, dtype=torch.float8_e5m2), "total": torch.empty(4),
            "rowmax": torch.empty(4, dtype=torch.float8_e4m3fn), "ints": torch.empty(4, 24, dtype=torch.int32)}
    # sums accumulate in f32 in both; their order differs, within the f32 tolerance
    got = three_ways(arith, args, ("s", "p", "rowmax", "ints"), rtol=0, atol=0)
    af, bf, cf = a.float().numpy(), b.float().numpy(), c.float().numpy()
    np.testing.assert_array_equal(got["s"], fp8_rounded(af + fp8_rounded(bf * 0.5, DType.f8e4m3), DType.f8e4m3))
    np.testing.assert_array_equal(got["rowmax"], fp8_rounded(af - bf, DType.f8e4m3).max(axis=1))
    np.testing.assert_array_equal(got["ints"], np.trunc(af).astype(np.int32))
    total = arith.oracle(**{k: v.clone() for k, v in args.items()})["total"]
    want = fp8_rounded(af.sum(axis=1), DType.f8e4m3) + (af * cf).sum(axis=1)
    np.testing.assert_allclose(total, want, rtol=1e-5)


M2 = dims("M2")


@intent.kernel
def fp8_floor_rules(x: f8e5m2[M2], y: f8e4m3[M2], q: Out[f8e5m2[M2]], r: Out[f8e5m2[M2]], qy: Out[f8e4m3[M2]]):
    for i in parallel(M2):
        q[i] = x[i] // 0.1
        r[i] = x[i] % 0.1
        qy[i] = y[i] // 0.1


def test_fp8_floor_division_and_remainder_agree_in_every_backend() -> None:
    """Found by the source campaign: the StableHLO exit evaluated the floor-division rule's steps at fp8
    precision (-2.25 // 0.1 in f8e5m2 gave -20 where the oracle and the launch give -24, the constant being
    0.09375); like f16/bf16 it computes in f32 and rounds once."""
    vals = torch.tensor([-2.25, -1.0, -0.5, 0.0, 0.75, 1.5, 3.0, 7.0, -7.0, 12.0, 0.09375, -0.1875])
    args = {"x": vals.to(torch.float8_e5m2), "y": vals.to(torch.float8_e4m3fn),
            "q": torch.empty(12, dtype=torch.float8_e5m2), "r": torch.empty(12, dtype=torch.float8_e5m2),
            "qy": torch.empty(12, dtype=torch.float8_e4m3fn)}
    got = three_ways(fp8_floor_rules, args, ("q", "r", "qy"), rtol=0, atol=0)
    assert got["q"][0] == -24.0


# ---------------------------------------------------------------------------------------------- the example


def _example():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "fp8_quant.py"
    spec = importlib.util.spec_from_file_location("fp8_quant", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_quantize_dequantize_and_scaled_matmul_against_torch() -> None:
    ex = _example()
    g = torch.Generator().manual_seed(11)
    x = torch.randn(6, 40, generator=g) * torch.linspace(0.01, 50, 6)[:, None]
    q, s = ex.quantize_rows(x)
    s_ref = x.abs().amax(dim=1).clamp(min=1e-12) / 448.0
    torch.testing.assert_close(s, s_ref, rtol=0, atol=0)
    q_ref = (x / s_ref[:, None]).to(torch.float8_e4m3fn)
    assert q.dtype == torch.float8_e4m3fn and torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
    back = ex.dequantize_rows(q, s)
    torch.testing.assert_close(back, q_ref.float() * s_ref[:, None], rtol=0, atol=0)
    assert (back - x).abs().max() <= x.abs().amax() / 16  # 3 mantissa bits
    amax = x.abs().max()
    qt = ex.quantize_tensor(x, amax)
    qt_ref = (x * (448.0 / amax)).to(torch.float8_e4m3fn)
    assert torch.equal(qt.view(torch.uint8), qt_ref.view(torch.uint8))
    shlo = ex.quantize_rows.stablehlo_run(x=x)
    np.testing.assert_array_equal(shlo["q"], q.float().numpy())
    np.testing.assert_array_equal(ex.dequantize_rows.stablehlo_run(q=q, scale=s)["out"], back.numpy())


def test_fp8_dot_accumulates_in_f32() -> None:
    ex = _example()
    g = torch.Generator().manual_seed(12)
    a = (torch.randn(24, 48, generator=g) * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(48, 20, generator=g) * 4).to(torch.float8_e4m3fn)
    sa, sb = torch.rand(24, generator=g), torch.rand(20, generator=g)
    args = {"a": a, "b": b, "sa": sa, "sb": sb, "out": torch.empty(24, 20)}
    got = three_ways(ex.scaled_mm, args, ("out",), rtol=1e-5, atol=1e-5)
    want = (a.float().double() @ b.float().double()) * sa.double()[:, None] * sb.double()[None, :]
    np.testing.assert_allclose(got["out"], want.numpy(), rtol=1e-5, atol=1e-5)
    assert "tl.dot" in ex.scaled_mm.triton_source(**args)


def test_fp8_ptx_for_sm90() -> None:
    """On sm_90 the conversions are the generated integer code and the matmul runs on tensor cores."""
    import re

    ex = _example()
    a = torch.zeros(128, 64, dtype=torch.float8_e4m3fn)
    b = torch.zeros(64, 128, dtype=torch.float8_e4m3fn)
    ptx = ex.scaled_mm.ptx(a, b, torch.ones(128), torch.ones(128), arch=90)
    assert ".target sm_90" in ptx
    assert re.search(r"\bw?gmma\.|\bmma\.sync", ptx), "no tensor-core instruction"
    ptx_q = ex.quantize_rows.ptx(torch.zeros(4, 64), arch=90)
    assert ".target sm_90" in ptx_q and "st.global" in ptx_q


@intent.kernel
def call_form(x: f32[N], a: Out[f8e4m3[N]]):
    for n in parallel(N):
        a[n] = f8e4m3(x[n])


def test_the_call_form_converts_as_to() -> None:
    x = torch.tensor([1e6, -1e6, 3.3, float("inf")])
    a = torch.empty(4, dtype=torch.float8_e4m3fn)
    call_form(x, a)
    assert torch.equal(a.view(torch.uint8), x.to(torch.float8_e4m3fn).view(torch.uint8))


@intent.kernel
def mixed_mm(a: f8e4m3[M, K], b: f8e5m2[K, N], out: Out[f32[M, N]], row: Out[f32[M]]):
    out[:, :] = intent.dot(a, b)
    for i in parallel(M):
        row[i] = intent.dot(a[i, :], b[:, 0])  # the per-lane form


def test_mixed_fp8_dot_multiplies_each_format_exactly_in_f32() -> None:
    """f8e4m3 x f8e5m2 (e4m3 activations times e5m2 gradients): each operand in its own format, every product
    exact in f32 and accumulated there, in the oracle, the launch and the StableHLO exit."""
    g = torch.Generator().manual_seed(13)
    a = (torch.randn(40, 48, generator=g) * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(48, 24, generator=g) * 300).to(torch.float8_e5m2)
    args = {"a": a, "b": b, "out": torch.empty(40, 24), "row": torch.empty(40)}
    got = three_ways(mixed_mm, args, ("out", "row"), rtol=1e-6, atol=1e-3)
    want = a.double() @ b.double()
    np.testing.assert_allclose(got["out"], want.numpy(), rtol=1e-6, atol=1e-3)
    np.testing.assert_allclose(got["row"], (a.double() @ b.double()[:, 0]).numpy(), rtol=1e-6, atol=1e-3)
    assert mixed_mm.kir.outputs[0].type.dtype is DType.f32
    source = mixed_mm.triton_source(**args)
    assert "tl.dot(" in source and ".to(tl.float8e4nv)" in source and ".to(tl.float8e5)" in source


def test_mixed_fp8_dot_ptx_for_sm90() -> None:
    import re

    a, b = torch.zeros(128, 64, dtype=torch.float8_e4m3fn), torch.zeros(64, 128, dtype=torch.float8_e5m2)
    ptx = mixed_mm.ptx(a, b, torch.empty(128, 128), torch.empty(128), arch=90)
    assert ".target sm_90" in ptx
    assert re.search(r"\bw?gmma\.[\w.]*f32|\bmma\.sync\.[\w.]*\.f32\.", ptx), "no tensor-core instruction into f32"


def test_mixed_fp8_dot_takes_an_f32_accumulator_only() -> None:
    from intent import f16

    with pytest.raises(intent.DiagnosticError, match="a dot of f8e4m3 and f8e5m2 accumulates in f32, not f16"):
        @intent.kernel
        def bad(a: f8e4m3[M, K], b: f8e5m2[K, N], out: Out[f16[M, N]]):
            out[:, :] = intent.dot(a, b, acc=f16)


def test_the_launcher_takes_numpy_fp8_arrays_as_the_oracle_does() -> None:
    """ml_dtypes fp8 arrays share their bits; float32 arrays stand for fp8 values (rounded as the oracle rounds
    them); outputs given as NumPy arrays get the results written back."""
    import ml_dtypes

    x = np.array([1.0, 3.3, -500.0, 0.01], np.float32)
    xe = x.astype(ml_dtypes.float8_e4m3fn)
    for given in (x, xe):
        wide, back = np.zeros(4, np.float32), np.zeros(4, ml_dtypes.float8_e4m3fn)
        widen_e4m3(given, wide, back)
        want = widen_e4m3.oracle(x=given, wide=np.zeros(4, np.float32), back=np.zeros(4, np.float32))
        np.testing.assert_array_equal(wide, want["wide"])
        np.testing.assert_array_equal(back.astype(np.float32), want["back"])
    assert np.isnan(wide[2])  # -500 rounds (without saturation) to NaN, as the oracle's rounding does
