"""Regression cases written as Python source, as authors write kernels: each runs through the oracle,
the launcher on CPU tensors (Triton's interpreter) and, where expressible, the StableHLO exit."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch

import emit_triton
import oracle
from kir.errors import NotExpressible
from tests.frontend_support import kernel


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CACHE_DIR", str(tmp_path / "cache"))


def three_ways(k, args: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray],
                                                   dict[str, np.ndarray] | None]:
    """The oracle's, the launcher's and the StableHLO exit's outputs (None where not expressible)."""
    import oracle.stablehlo as shlo

    want = oracle.run(k.kir, {n: (v.clone() if isinstance(v, torch.Tensor) else v) for n, v in args.items()})
    launched = {n: (v.clone() if isinstance(v, torch.Tensor) else v) for n, v in args.items()}
    k(**launched)
    got = {p.name: (launched[p.name].float() if launched[p.name].dtype == torch.bfloat16 else launched[p.name]).numpy()
           for p in k.kir.outputs}
    try:
        xla = shlo.run(k.kir, {n: (v.clone() if isinstance(v, torch.Tensor) else v) for n, v in args.items()})
    except NotExpressible:
        xla = None
    return want, got, xla


# ---------------------------------------------------------------------------------------------- masks

MASKS = """
@intent.kernel
def masked(c: f32[N], s: i32, out: Out[f32[N]]):
    for i in parallel(N):
        if (c[i] >= 0.5) & (~(s != 3)):
            out[i] = c[i]
        else:
            out[i] = -1.0

@intent.kernel
def mixed(c: f32[N], s: i32, t: i32, out: Out[f32[N]]):
    for i in parallel(N):
        p = (s > 0) | (t == 2)
        q = ~((s < 5) & True) | (c[i] < 0.25)
        if (p & ~q) | ((t != t) & (c[i] > 0.0)):
            out[i] = c[i]
        else:
            out[i] = 0.0
"""


@pytest.mark.parametrize("s", [3, 4])
def test_compound_mask_of_zero_d_compares_launches(tmp_path, s):
    k = kernel(tmp_path, MASKS.split("@intent.kernel\ndef mixed")[0])
    c = torch.tensor([0.1, 0.5, 0.7, 0.2, 0.9])
    want, got, xla = three_ways(k, {"c": c, "s": s, "out": torch.empty(5)})
    expect = np.where((c.numpy() >= 0.5) & (s == 3), c.numpy(), -1.0).astype(np.float32)
    np.testing.assert_array_equal(want["out"], expect)
    np.testing.assert_array_equal(got["out"], expect)
    assert xla is not None
    np.testing.assert_array_equal(xla["out"], expect)


@pytest.mark.parametrize(("s", "t"), [(1, 2), (7, 2), (0, 0), (6, 1)])
def test_masks_from_every_combination_of_compares_not_and_or_constants(tmp_path, s, t):
    k = kernel(tmp_path, "@intent.kernel\ndef mixed" + MASKS.split("@intent.kernel\ndef mixed")[1])
    c = torch.tensor([0.1, 0.5, 0.7, 0.2, -0.9, 0.3])
    want, got, xla = three_ways(k, {"c": c, "s": s, "t": t, "out": torch.empty(6)})
    x = c.numpy()
    p = (s > 0) | (t == 2)
    q = (not (s < 5)) | (x < 0.25)
    expect = np.where(p & ~q, x, 0.0).astype(np.float32)
    np.testing.assert_array_equal(want["out"], expect)
    np.testing.assert_array_equal(got["out"], expect)
    assert xla is not None
    np.testing.assert_array_equal(xla["out"], expect)


COMPACT = """
@intent.kernel
def compact(x: f32[N], count: Out[i32[1]], out: Out[f32[N]]):
    for i in parallel(N):
        v = x[i]
        if v > 0:
            slot = intent.atomic_add(count, 0, 1)
            intent.store(out, slot, v, unique=True)
"""


@pytest.mark.parametrize("n", [7, 300])
def test_stream_compaction_with_an_atomic_counter_at_a_constant_index(tmp_path, n):
    k = kernel(tmp_path, COMPACT)
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g)
    x[0] = 0.0  # not > 0: not kept
    args = {"x": x, "count": torch.zeros(1, dtype=torch.int32), "out": torch.zeros(n)}
    kept = np.sort(x.numpy()[x.numpy() > 0])
    want = oracle.run(k.kir, {a: v.clone() for a, v in args.items()})
    launched = {a: v.clone() for a, v in args.items()}
    k(**launched)
    for result in (want, {a: v.numpy() for a, v in launched.items()}):
        count = int(result["count"][0])
        assert count == len(kept)
        # the slots are taken in an unspecified order: compare the kept values as a sorted set
        np.testing.assert_array_equal(np.sort(result["out"][:count]), kept)
        np.testing.assert_array_equal(result["out"][count:], np.zeros(n - count, np.float32))


# ---------------------------------------------------------------------------------------------- local buffers

LOCAL = """
@intent.kernel
def rows(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        buf = intent.zeros((N,), f32)
        for j in range(N):
            buf[j] = buf[j] + x[i, j] * 2.0
        out[i, :] = buf + 1.0
"""


@pytest.mark.parametrize(("m", "n"), [(1025, 1), (1025, 2), (3000, 3), (5, 1500)])
def test_per_instance_local_buffers_of_many_short_rows_launch(tmp_path, m, n):
    k = kernel(tmp_path, LOCAL)
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(m + n))
    want, got, _ = three_ways(k, {"x": x, "out": torch.empty(m, n)})
    expect = x.numpy() * 2.0 + 1.0
    np.testing.assert_array_equal(want["out"], expect)
    np.testing.assert_array_equal(got["out"], expect)


def test_initialisation_tiles_fit_triton_for_every_lanes_block(tmp_path):
    """Every power-of-two lanes block up to 2**20 gets a lanes x chunk tile of at most 2**20 elements, and
    the tile of the largest block sizes compiles for sm_90."""
    for lanes in (1 << e for e in range(21)):
        chunk = 1024 // ((lanes + 1023) // 1024)
        assert chunk >= 1 and lanes * chunk <= 1 << 20 and chunk & (chunk - 1) == 0
    k = kernel(tmp_path, LOCAL)
    args = {"x": torch.zeros(1025, 1), "out": torch.zeros(1025, 1)}
    source = k.triton_source(**args)
    assert "(1024 // ((BLOCK_I0 + 1023) // 1024))" in source
    text = emit_triton.ptx(k.kir, args, arch=90)
    assert ".target sm_90" in text


# ---------------------------------------------------------------------------------------------- float // and %

DIVMOD = """
@intent.kernel
def divmod_{w}(a: {w}[N], b: {w}[N], q: Out[{w}[N]], r: Out[{w}[N]]):
    for i in parallel(N):
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]
"""

_TORCH = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 3.0, float("inf"), float("-inf"), float("nan")]


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return np.where(np.isnan(x), np.nan, x).view({8: np.uint64, 4: np.uint32, 2: np.uint16}[x.itemsize])


@pytest.mark.parametrize("w", ["f16", "bf16", "f32", "f64"])
def test_float_floordiv_and_mod_follow_torch_at_every_width(tmp_path, w):
    k = kernel(tmp_path, DIVMOD.format(w=w))
    g = torch.Generator().manual_seed(7)
    n = 64
    a = torch.cat([torch.tensor([1.0, -1.0, 15.5625, 5.0, -7.5]), torch.randn(n, generator=g) * 50,
                   torch.tensor(_SPECIAL).repeat_interleave(len(_SPECIAL))])
    b = torch.cat([torch.tensor([0.1, 0.1, 0.86474609375, -2.0, 2.0]), torch.randn(n, generator=g) * 3,
                   torch.tensor(_SPECIAL).repeat(len(_SPECIAL))])
    a, b = a.to(_TORCH[w]), b.to(_TORCH[w])
    m = len(a)
    want, got, xla = three_ways(k, {"a": a, "b": b, "q": torch.empty(m, dtype=a.dtype),
                                    "r": torch.empty(m, dtype=a.dtype)})
    # torch evaluates the rule in the operands' dtype; f16/bf16 evaluate it in f32 and round once
    wide = torch.float32 if w in ("f16", "bf16") else a.dtype
    tq = (a.to(wide) // b.to(wide)).to(a.dtype).float().numpy() if w == "bf16" else \
        (a.to(wide) // b.to(wide)).to(a.dtype).numpy()
    tr = torch.remainder(a.to(wide), b.to(wide)).to(a.dtype)
    tr = tr.float().numpy() if w == "bf16" else tr.numpy()
    for name, result in (("oracle", want), ("launch", got), ("stablehlo", xla)):
        assert result is not None
        q = result["q"].astype(np.float32) if w == "bf16" else result["q"]
        r = result["r"].astype(np.float32) if w == "bf16" else result["r"]
        bad = np.flatnonzero(_bits(q) != _bits(tq))
        assert bad.size == 0, f"{name} //: a={a[bad[:4]].tolist()} b={b[bad[:4]].tolist()} {q[bad[:4]]} {tq[bad[:4]]}"
        bad = np.flatnonzero(_bits(r) != _bits(tr))
        assert bad.size == 0, f"{name} %: a={a[bad[:4]].tolist()} b={b[bad[:4]].tolist()} {r[bad[:4]]} {tr[bad[:4]]}"
    if w == "f32":
        assert want["q"][0] == 9.0 and want["q"][1] == -10.0
    if w == "f16":
        assert got["q"][2] == 17.0 and want["q"][2] == 17.0


def assert_self_contained(ptx: str) -> None:
    """Every function the PTX calls is defined in it (libdevice is linked in, nothing is left external)."""
    called = set(re.findall(r"call(?:\.uni)?\s+(?:\([^)]*\),\s*)?(\w+)", ptx))
    defined = set(re.findall(r"\.func\s+(?:\([^)]*\)\s*)?(\w+)", ptx))
    assert called <= defined, called - defined


def test_float_floordiv_compiles_for_sm90_with_the_exact_remainder(tmp_path):
    k = kernel(tmp_path, DIVMOD.format(w="f32"))
    args = {"a": torch.zeros(8), "b": torch.ones(8), "q": torch.zeros(8), "r": torch.zeros(8)}
    source = k.triton_source(**args)
    assert "tl.extra.cuda.libdevice.fmod" in source and "ON_DEVICE: tl.constexpr" in source
    text = emit_triton.ptx(k.kir, args, arch=90)
    assert_self_contained(text)
    assert ".target sm_90" in text


# ---------------------------------------------------------------------------------------------- float **

POWERS = """
@intent.kernel
def powers_{w}(x: {w}[N], p2: Out[{w}[N]], p3: Out[{w}[N]], p4: Out[{w}[N]], m1: Out[{w}[N]], m2: Out[{w}[N]],
               one: Out[{w}[N]], zero: Out[{w}[N]]):
    for i in parallel(N):
        v = x[i]
        p2[i] = v ** 2
        p3[i] = v ** 3.0
        p4[i] = intent.pow(v, 4)
        m1[i] = v ** -1
        m2[i] = v ** -2
        one[i] = v ** 1
        zero[i] = v ** 0
"""


@pytest.mark.parametrize("w", ["f16", "bf16", "f32", "f64"])
def test_small_integer_powers_are_multiplications_bit_for_bit(tmp_path, w):
    k = kernel(tmp_path, POWERS.format(w=w))
    g = torch.Generator().manual_seed(3)
    x = torch.cat([torch.tensor([5.0, 10.0, 3.0, -3.0, -5.0, 0.0, -0.0, 1.5, float("inf"), float("nan")]),
                   torch.randn(40, generator=g) * 4]).to(_TORCH[w])
    n = len(x)
    outs = {name: torch.empty(n, dtype=x.dtype) for name in ("p2", "p3", "p4", "m1", "m2", "one", "zero")}
    want, got, xla = three_ways(k, {"x": x, **outs})
    # the reference: the same multiplications in torch, each rounded to the dtype
    sq = x * x
    ref = {"p2": sq, "p3": sq * x, "p4": sq * sq, "m1": 1.0 / x, "m2": 1.0 / sq, "one": x,
           "zero": torch.ones_like(x)}
    ref = {name: (v.float() if w == "bf16" else v).numpy() for name, v in ref.items()}
    for backend, result in (("oracle", want), ("launch", got), ("stablehlo", xla)):
        assert result is not None
        for name, expect in ref.items():
            have = result[name].astype(np.float32) if w == "bf16" else result[name]
            bad = np.flatnonzero(_bits(have) != _bits(expect))
            assert bad.size == 0, \
                f"{backend} {name}: x={x[bad[:4]].tolist()} got {have[bad[:4]]} want {expect[bad[:4]]}"
    assert got["p2"][:3].tolist() == [25.0, 100.0, 9.0] and got["p3"][2:4].tolist() == [27.0, -27.0]


GENERAL_POW = """
@intent.kernel
def gpow_{w}(a: {w}[N], b: {w}[N], out: Out[{w}[N]]):
    for i in parallel(N):
        out[i] = a[i] ** b[i]
"""


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in units in the last place of `got`'s dtype (same-sign finite values)."""
    dt = got.dtype
    u = {8: np.int64, 4: np.int32, 2: np.int16}[dt.itemsize]
    g, w = got.view(u).astype(np.int64), want.astype(dt).view(u).astype(np.int64)
    return np.abs(g - w)


@pytest.mark.parametrize("w", ["f16", "f32"])
def test_general_float_pow_is_within_two_ulp_under_the_interpreter(tmp_path, w):
    k = kernel(tmp_path, GENERAL_POW.format(w=w))
    g = torch.Generator().manual_seed(11)
    big = 6.0 if w == "f16" else 30.0
    a = torch.cat([torch.rand(300, generator=g) * 20, torch.tensor([2.0, 10.0, 0.5, 7.0])]).to(_TORCH[w])
    b = torch.cat([(torch.rand(300, generator=g) - 0.5) * big, torch.tensor([0.5, 2.5, -3.5, 1.0 / 3.0])]).to(_TORCH[w])
    args = {"a": a, "b": b, "out": torch.empty(len(a), dtype=a.dtype)}
    out = dict(args, out=args["out"].clone())
    k(**out)
    got = out["out"].numpy()
    exact = np.power(a.numpy().astype(np.float64), b.numpy().astype(np.float64))  # f64: exact to ~1e-16
    finite = np.isfinite(exact) & (np.abs(exact) < np.finfo(got.dtype).max) & (np.abs(exact) > np.finfo(got.dtype).tiny)
    assert _ulps(got[finite], exact[finite]).max() <= 2
    oracle_out = oracle.run(k.kir, args)["out"]
    assert _ulps(oracle_out[finite], exact[finite]).max() <= 2


def test_general_float_pow_compiles_to_libdevice_pow_for_sm90(tmp_path):
    k = kernel(tmp_path, GENERAL_POW.format(w="f32"))
    args = {"a": torch.ones(8), "b": torch.ones(8), "out": torch.zeros(8)}
    assert "tl.extra.cuda.libdevice.pow" in k.triton_source(**args)
    text = emit_triton.ptx(k.kir, args, arch=90)
    assert ".target sm_90" in text and "ex2.approx" not in text  # the f64 pow, not exp2(b * log2 a)
    assert_self_contained(text)


def test_general_f64_pow_is_within_two_ulp_under_the_interpreter(tmp_path):
    mpmath = pytest.importorskip("mpmath")
    k = kernel(tmp_path, GENERAL_POW.format(w="f64"))
    g = torch.Generator().manual_seed(13)
    n = 400
    a = torch.cat([torch.rand(n, generator=g, dtype=torch.float64) * 4,
                   torch.exp(torch.randn(n, generator=g, dtype=torch.float64) * 200),  # far from 1: large b * log2 a
                   1.0 + torch.randn(n, generator=g, dtype=torch.float64) * 1e-9,     # near 1: large b
                   torch.tensor([5e-324, 2.5e-310, 1e300, 0.5, 2.0, 10.0], dtype=torch.float64)])
    b = torch.cat([(torch.rand(n, generator=g, dtype=torch.float64) - 0.5) * 60,
                   (torch.rand(n, generator=g, dtype=torch.float64) - 0.5) * 4,
                   (torch.rand(n, generator=g, dtype=torch.float64) - 0.5) * 1e9,
                   torch.tensor([0.5, -0.75, 1.0 / 3.0, 1000.5, -1074.0, 307.5], dtype=torch.float64)])
    out = torch.empty(len(a), dtype=torch.float64)
    k(a=a, b=b, out=out)
    got = out.numpy()
    mpmath.mp.prec = 160
    exact = np.array([float(mpmath.power(mpmath.mpf(float(x)), mpmath.mpf(float(y)))) for x, y in zip(a, b)])
    finite = np.isfinite(exact) & (exact != 0) & (np.abs(exact) >= np.finfo(np.float64).tiny) & \
        (np.abs(exact) < np.finfo(np.float64).max)
    assert finite.sum() > 900
    ulps = _ulps(got[finite], exact[finite])
    assert ulps.max() <= 2, (a.numpy()[finite][ulps.argmax()], b.numpy()[finite][ulps.argmax()])


KEYWORD_MASKS = """
@intent.kernel
def combos(c: f32[N], s: i32, u: u32, d: f64, out: Out[f32[N]]):
    for i in parallel(N):
        p = not ((s > 1) and (u != 3)) or (d < 0.5)
        q = ((i % 2) == 0) ^ (s == 2)
        r = ~(True & (d >= 1.0)) | False
        if (p and q) or (r & (c[i] > 0.5)) or ((p == q) & ~r):
            out[i] = c[i]
        else:
            out[i] = -1.0
"""


@pytest.mark.parametrize(("s", "u", "d"), [(0, 3, 0.25), (2, 4, 0.75), (5, 3, 1.5), (5, 4, 1.5)])
def test_masks_from_and_or_not_xor_and_equality_of_predicates(tmp_path, s, u, d):
    k = kernel(tmp_path, KEYWORD_MASKS)
    c = torch.tensor([0.1, 0.7, 0.6, 0.2, 0.9, 0.3])
    want, got, _ = three_ways(k, {"c": c, "s": s, "u": u, "d": d, "out": torch.empty(6)})
    expect = []
    for i, ci in enumerate(c.tolist()):
        p = (not ((s > 1) and (u != 3))) or (d < 0.5)
        q = ((i % 2) == 0) ^ (s == 2)
        r = not (d >= 1.0)
        expect.append(ci if (p and q) or (r and ci > 0.5) or ((p == q) and not r) else -1.0)
    np.testing.assert_array_equal(want["out"], np.float32(expect))
    np.testing.assert_array_equal(got["out"], np.float32(expect))
