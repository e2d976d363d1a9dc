"""Identities of fp8 folds and scans, and fp8 cases found by the source-level campaign.

f8e4m3 (torch.float8_e4m3fn) has no infinities: -inf rounds to NaN, which wins every max and min. Its max
and min start from -448 and 448 (kir.reduce.identity), exactly neutral over f8e4m3 values, so chunked
folds, padding, empty ranges, exclusive scans and selections in registers all see a value of the dtype.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intent
from intent import Out, dims, f8e4m3, f8e5m2, i32, i64, parallel, pred, u8
from kir.dtypes import DType
from kir.reduce import ReduceKind, identity
from tests.breadth_support import three_ways

M, N, S, E = dims("M N S E")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CACHE_DIR", str(tmp_path / "cache"))


def _e4m3(values, seed: int, scale: float = 8.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*values, generator=g) * scale).to(torch.float8_e4m3fn)


def test_the_identity_table_gives_values_of_the_dtype() -> None:
    assert identity(ReduceKind.max, DType.f8e4m3) == -448.0
    assert identity(ReduceKind.min, DType.f8e4m3) == 448.0
    assert identity(ReduceKind.argmax, DType.f8e4m3) == -448.0
    assert identity(ReduceKind.max, DType.f8e5m2) == -np.inf  # f8e5m2 has infinities
    assert identity(ReduceKind.min, DType.f32) == np.inf


@intent.kernel
def column_min(x: f8e4m3[M, N], lo: Out[f8e4m3[N]], hi: Out[f8e4m3[N]]):
    for i in parallel(N):
        lo[i] = intent.min(-x[:, i])
        hi[i] = intent.max(x[:, i])


def test_a_chunked_min_over_a_strided_f8e4m3_column() -> None:
    """Campaign seed 9200032: the chunked (looped) fold started its carry from +inf rendered as f8e4m3, a NaN,
    so every column's min came back NaN."""
    x = _e4m3((1100, 2), 1)
    args = {"x": x, "lo": torch.empty(2, dtype=torch.float8_e4m3fn), "hi": torch.empty(2, dtype=torch.float8_e4m3fn)}
    got = three_ways(column_min, args, ("lo", "hi"), rtol=0, atol=0)
    xf = x.float().numpy()
    np.testing.assert_array_equal(got["lo"], (-xf).min(axis=0))
    np.testing.assert_array_equal(got["hi"], xf.max(axis=0))


@intent.kernel
def region_folds(x: f8e4m3[E], off: i64[S + 1], mx: Out[f8e4m3[S]], mn: Out[f8e4m3[S]], am: Out[i64[S]]):
    for s in parallel(S):
        b, e = off[s], off[s + 1]
        mx[s] = intent.max(x[b:e])
        mn[s] = intent.min(x[b:e])
        am[s] = intent.argmax(x[b:e])


def test_region_max_min_of_f8e4m3_with_empty_ranges() -> None:
    x = _e4m3((12,), 2)
    x[3] = -448.0  # the identity's own value, as an element: argmax still finds it
    x[4] = -448.0
    off = torch.tensor([0, 3, 5, 5, 9, 12])  # ranges of 3, 2, 0, 4, 3 elements
    e4 = torch.float8_e4m3fn
    args = {"x": x, "off": off, "mx": torch.empty(5, dtype=e4), "mn": torch.empty(5, dtype=e4),
            "am": torch.empty(5, dtype=torch.int64)}
    got = three_ways(region_folds, args, ("mx", "mn", "am"), rtol=0, atol=0)
    xf = x.float().numpy()
    ranges = [(0, 3), (3, 5), (5, 5), (5, 9), (9, 12)]
    want_max = [xf[b:e].max() if e > b else -448.0 for b, e in ranges]
    want_min = [xf[b:e].min() if e > b else 448.0 for b, e in ranges]
    np.testing.assert_array_equal(got["mx"], want_max)
    np.testing.assert_array_equal(got["mn"], want_min)
    np.testing.assert_array_equal(got["am"], [int(np.argmax(xf[b:e])) if e > b else -1 for b, e in ranges])


@intent.kernel
def region_scans(x: f8e4m3[E], off: i64[S + 1], up: Out[f8e4m3[E]], down: Out[f8e4m3[E]],
                 ex: Out[f8e4m3[E]]):
    for s in parallel(S):
        b, e = off[s], off[s + 1]
        up[b:e] = intent.cummax(x[b:e])
        down[b:e] = intent.cummin(x[b:e], reverse=True)
        ex[b:e] = intent.cummax(x[b:e], exclusive=True)


def test_region_scans_of_f8e4m3() -> None:
    x = _e4m3((11,), 3)
    x[6] = float("nan")
    off = torch.tensor([0, 4, 4, 9, 11])
    e4 = torch.float8_e4m3fn
    args = {"x": x, "off": off, **{n: torch.zeros(11, dtype=e4) for n in ("up", "down", "ex")}}
    got = three_ways(region_scans, args, ("up", "down", "ex"), rtol=0, atol=0)
    xf = x.float().numpy()
    for b, e in ((0, 4), (4, 9), (9, 11)):
        seg = xf[b:e]
        np.testing.assert_array_equal(got["up"][b:e], np.maximum.accumulate(seg))  # NaN propagates
        np.testing.assert_array_equal(got["down"][b:e], np.minimum.accumulate(seg[::-1])[::-1])
        np.testing.assert_array_equal(got["ex"][b:e], np.maximum.accumulate(np.r_[-448.0, seg[:-1]]))


@intent.kernel
def row_scans(x: f8e4m3[M, N], up: Out[f8e4m3[M, N]], ex: Out[f8e4m3[M, N]], lo: Out[f8e4m3[M]]):
    for i in parallel(M):
        up[i, :] = intent.cummax(x[i, :])
        ex[i, :] = intent.cummin(x[i, :], exclusive=True)
        lo[i] = intent.min(x[i, :])


def test_scans_and_folds_of_f8e4m3_rows() -> None:
    x = _e4m3((3, 37), 4)
    e4 = torch.float8_e4m3fn
    args = {"x": x, "up": torch.empty(3, 37, dtype=e4), "ex": torch.empty(3, 37, dtype=e4),
            "lo": torch.empty(3, dtype=e4)}
    got = three_ways(row_scans, args, ("up", "ex", "lo"), rtol=0, atol=0)
    xf = x.float().numpy()
    np.testing.assert_array_equal(got["up"], np.maximum.accumulate(xf, axis=1))
    np.testing.assert_array_equal(got["ex"][:, 0], [448.0] * 3)
    np.testing.assert_array_equal(got["ex"][:, 1:], np.minimum.accumulate(xf, axis=1)[:, :-1])
    np.testing.assert_array_equal(got["lo"], xf.min(axis=1))


@intent.kernel(requires=[N >= 2])
def pick(x: f8e4m3[M, N], t: i32[M], out: Out[f8e4m3[M]], vals: Out[f8e4m3[M, 2]], idx: Out[i64[M, 2]]):
    for i in parallel(M):
        row = x[i, :] * 2.0
        out[i] = row[t[i]]
        v, j = intent.topk(-x[i, :], 2)
        vals[i, :] = v
        idx[i, :] = j


def test_selection_and_topk_of_f8e4m3_values() -> None:
    """`row[t[i]]` selects in registers as a max against the dtype's lowest value and topk masks taken
    elements with it: for f8e4m3 that value was -inf, a NaN once rounded, which won every selection."""
    g = torch.Generator().manual_seed(5)
    x = torch.stack([torch.randperm(6, generator=g) for _ in range(4)]).float().sub(2.5).to(torch.float8_e4m3fn)
    t = torch.tensor([0, 5, 2, 3], dtype=torch.int32)
    e4 = torch.float8_e4m3fn
    args = {"x": x, "t": t, "out": torch.empty(4, dtype=e4), "vals": torch.empty(4, 2, dtype=e4),
            "idx": torch.empty(4, 2, dtype=torch.int64)}
    got = three_ways(pick, args, ("out", "vals", "idx"), rtol=0, atol=0, stablehlo=False)
    xf = x.float().numpy()
    np.testing.assert_array_equal(got["out"], (xf * 2.0)[np.arange(4), t.numpy()])
    ref = torch.topk(-x.float(), 2, dim=1)
    np.testing.assert_array_equal(got["vals"], ref.values.numpy())
    np.testing.assert_array_equal(got["idx"], ref.indices.numpy())


@intent.kernel
def truth(x: f8e5m2[N], y: f8e4m3[N], a: Out[u8[N]], b: Out[pred[N]]):
    for n in parallel(N):
        a[n] = x[n].to(pred).to(u8)
        b[n] = y[n].to(pred)


def test_fp8_to_pred_in_every_backend() -> None:
    """Campaign seeds 9200020 and 9500002: the StableHLO exit's float -> pred cast compares the bits without
    the sign and had no 8-bit unsigned type for them (KeyError)."""
    vals = torch.tensor([0.0, -0.0, 2.0 ** -16, -2.0 ** -9, 1.5, -3.0, float("nan"), 448.0])
    args = {"x": vals.to(torch.float8_e5m2), "y": vals.to(torch.float8_e4m3fn),
            "a": torch.empty(8, dtype=torch.uint8), "b": torch.empty(8, dtype=torch.bool)}
    got = three_ways(truth, args, ("a", "b"), rtol=0, atol=0)
    np.testing.assert_array_equal(got["a"], [0, 0, 1, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(got["b"], [False, False, False, True, True, True, True, True])
