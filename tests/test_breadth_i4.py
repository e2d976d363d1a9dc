"""i4: signed 4-bit values packed two per byte (kir.dtypes.I4_PACKING), unpacked by the generated loads,
wrapping at 4 bits in arithmetic; the W4A16 example against torch."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest
import torch

import intent
from intent import Out, dims, f32, i4, i8, i32, parallel
from kir.dtypes import i4_packed, i4_unpacked
from kir.errors import LaunchError
from tests.breadth_support import three_ways

M, N, K = dims("M N K")
rng = np.random.default_rng(4)


@intent.kernel
def unpack(w: i4[K, N], out: Out[i8[K, N]], dbl: Out[i8[K, N]], neg: Out[i8[K, N]], total: Out[i8[K]],
           wide: Out[i32[K]], scaled: Out[f32[K, N]]):
    for k in parallel(K):
        row = w[k, :]
        out[k, :] = row.to(i8)
        dbl[k, :] = (row * 2 + 1).to(i8)
        neg[k, :] = (-row).to(i8)
        total[k] = intent.sum(row).to(i8)
        wide[k] = intent.sum(row.to(i32))
        scaled[k, :] = row.to(f32) * 0.5


def test_nibble_order_and_wrapping() -> None:
    vals = rng.integers(-8, 8, (5, 8))
    vals[0, :] = [-8, -1, 0, 7, 1, -2, 3, -4]
    packed = torch.from_numpy(i4_packed(vals))
    assert packed.shape == (5, 4) and int(packed[0, 0]) == 0xF8  # -8 low nibble, -1 high nibble
    np.testing.assert_array_equal(i4_unpacked(packed.numpy()), vals)
    outs = {"out": torch.empty(5, 8, dtype=torch.int8), "dbl": torch.empty(5, 8, dtype=torch.int8),
            "neg": torch.empty(5, 8, dtype=torch.int8), "total": torch.empty(5, dtype=torch.int8),
            "wide": torch.empty(5, dtype=torch.int32), "scaled": torch.empty(5, 8)}
    got = three_ways(unpack, {"w": packed, **outs}, tuple(outs), rtol=0, atol=0)
    wrap = lambda v: (v + 8) % 16 - 8  # noqa: E731
    np.testing.assert_array_equal(got["out"], vals)
    np.testing.assert_array_equal(got["dbl"], wrap(vals * 2 + 1))
    np.testing.assert_array_equal(got["neg"], wrap(-vals))
    np.testing.assert_array_equal(got["total"], wrap(vals.sum(axis=1)))
    np.testing.assert_array_equal(got["wide"], vals.sum(axis=1))
    np.testing.assert_array_equal(got["scaled"], vals * 0.5)
    # a uint8 tensor and a strided view of the bytes are accepted alike
    both = torch.from_numpy(np.concatenate([i4_packed(vals), i4_packed(vals)], axis=1))
    again = {k: torch.empty_like(v) for k, v in outs.items()}
    unpack(both[:, 4:], **again)
    np.testing.assert_array_equal(again["out"].numpy(), vals)


def test_an_i4_argument_must_be_packed_bytes() -> None:
    with pytest.raises(LaunchError) as info:
        unpack(torch.zeros(2, 3), **{n: None for n in ()})
    assert str(info.value).startswith("parameter w: expected i4 values packed two per byte in an int8 or uint8 "
                                      "tensor of rank 2")


def _example():
    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "w4a16_matmul.py"
    spec = importlib.util.spec_from_file_location("w4a16_matmul", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_w4a16_matmul_against_torch() -> None:
    ex = _example()
    m, k, n, g = 4, 16, 8, 4
    x = torch.randn(m, k).half()
    q = rng.integers(-8, 8, (k, n))
    scales = (torch.rand(k // g, n) * 0.1 + 0.01).half()
    w = torch.from_numpy(i4_packed(q))
    out = torch.empty(m, n, dtype=torch.float16)
    ex.w4a16_matmul(x, w, scales, out)
    deq = (torch.from_numpy(q).half() * scales.repeat_interleave(g, dim=0)).float()
    want = (x.float() @ deq).half()
    torch.testing.assert_close(out, want, rtol=2e-3, atol=2e-3)
    oracle = ex.w4a16_matmul.oracle(x, w, scales, out.clone())["out"]
    np.testing.assert_allclose(out.float().numpy(), oracle.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_w4a16_ptx_for_sm90() -> None:
    ex = _example()
    x = torch.zeros(4, 16).half()
    w = torch.zeros(16, 4, dtype=torch.uint8)
    ptx = ex.w4a16_matmul.ptx(x, w, torch.ones(4, 8).half(), torch.empty(4, 8, dtype=torch.float16), arch=90)
    assert ".target sm_90" in ptx and "ld.global" in ptx and "shr" in ptx
