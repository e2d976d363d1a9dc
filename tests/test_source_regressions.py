"""Regression cases written as Python source, as authors write kernels: each runs through the oracle,
the launcher on CPU tensors (Triton's interpreter) and, where expressible, the StableHLO exit."""

from __future__ import annotations

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
    got = {p.name: launched[p.name].numpy() for p in k.kir.outputs}
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
