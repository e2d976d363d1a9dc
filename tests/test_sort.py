"""intent.sort / argsort / topk along an axis: the oracle, the launcher on CPU (the generated bitonic network under
Triton's interpreter) and the StableHLO exit, against torch.sort(stable=True) and torch.topk, at row lengths that
are not powers of two, for every dtype family; the KIR op's typing, text round trip and refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intent
import kir
from intent import Out, dims, f32, i64, parallel
from kir.text import parse_kernel, print_kernel
from tests.breadth_support import three_ways
from tests.frontend_support import diagnostic

M, N, R, B = dims("M N R B")
g = torch.Generator().manual_seed(5)


def special_rows(m: int, n: int) -> torch.Tensor:
    """Random rows with ties, NaN, infinities and signed zeros in the first rows."""
    x = torch.randn(m, n, generator=g)
    x[0, : n // 2] = 1.0                                  # ties keep index order
    if m > 1:
        x[1, ::3] = float("nan")                          # NaN last ascending, first descending
        x[1, -1] = -float("inf")
    if m > 2:
        x[2, ::2] = 0.0                                   # -0.0 and 0.0 are equal: index order
        x[2, 1::4] = -0.0
    return x


def assert_sorted_like_torch(values: np.ndarray, indices: np.ndarray, x: torch.Tensor, descending: bool,
                             axis: int = -1, k: int | None = None) -> None:
    want = torch.sort(x, dim=axis, descending=descending, stable=True)
    wv, wi = want.values.numpy(), want.indices.numpy()
    if k is not None:
        wv, wi = np.take(wv, range(k), axis=axis), np.take(wi, range(k), axis=axis)
    np.testing.assert_array_equal(indices, wi)
    np.testing.assert_array_equal(values.astype(np.float64), wv.astype(np.float64))  # NaN equals NaN here
    # the values are the elements themselves, bit for bit (signed zeros included)
    np.testing.assert_array_equal(np.signbit(values.astype(np.float64)), np.signbit(wv.astype(np.float64)))


@intent.kernel
def rows(x: f32[M, N], up: Out[f32[M, N]], up_ix: Out[i64[M, N]], down: Out[f32[M, N]], down_ix: Out[i64[M, N]]):
    for i in parallel(M):
        v, ix = intent.sort(x[i, :], return_indices=True)
        up[i, :] = v
        up_ix[i, :] = ix
        down[i, :] = intent.sort(x[i, :], descending=True)
        down_ix[i, :] = intent.argsort(x[i, :], descending=True)


@pytest.mark.parametrize("n", [1, 5, 37])
def test_rows_sort_as_torch(n: int) -> None:
    x = special_rows(4, n)
    args = {"x": x, "up": torch.empty(4, n), "up_ix": torch.empty(4, n, dtype=torch.int64),
            "down": torch.empty(4, n), "down_ix": torch.empty(4, n, dtype=torch.int64)}
    got = three_ways(rows, args, ("up", "up_ix", "down", "down_ix"), rtol=0, atol=0)
    assert_sorted_like_torch(got["up"], got["up_ix"], x, False)
    assert_sorted_like_torch(got["down"], got["down_ix"], x, True)


@intent.kernel
def along_axis0(x: f32[R, N], up: Out[f32[R, N]], ix: Out[i64[R, N]]):
    v, i = intent.sort(x, axis=0, return_indices=True)
    up[:, :] = v
    ix[:, :] = i


def test_whole_tensor_sort_along_a_leading_axis() -> None:
    """Outside `parallel`: the columns are the instances, each sorted along axis 0."""
    x = special_rows(6, 3).T.contiguous()
    args = {"x": x, "up": torch.empty(3, 6), "ix": torch.empty(3, 6, dtype=torch.int64)}
    got = three_ways(along_axis0, args, ("up", "ix"), rtol=0, atol=0)
    assert_sorted_like_torch(got["up"], got["ix"], x, False, axis=0)


@intent.kernel
def columns_in_a_tile(x: f32[B, R, N], up: Out[f32[B, R, N]], ix: Out[i64[B, R, N]]):
    for b in parallel(B):
        v, j = intent.sort(x[b, :, :], axis=0, return_indices=True)
        up[b, :, :] = v
        ix[b, :, :] = j


def test_sort_along_the_leading_axis_of_a_tile() -> None:
    """Each instance sorts the columns of its [R, N] tile: the sorted axis is not the tile's last."""
    x = special_rows(5, 6).reshape(2, 5, 3)
    args = {"x": x, "up": torch.empty(2, 5, 3), "ix": torch.empty(2, 5, 3, dtype=torch.int64)}
    got = three_ways(columns_in_a_tile, args, ("up", "ix"), rtol=0, atol=0)
    assert_sorted_like_torch(got["up"], got["ix"], x, False, axis=1)


DTYPES = {"i8": torch.int8, "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
          "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64, "f8e4m3": torch.float8_e4m3fn}


T = intent.dtype_var("T", intent.i8, intent.u8, intent.i16, intent.i32, intent.i64, intent.f16, intent.bf16,
                     intent.f64, intent.f8e4m3)


@intent.kernel(requires=[N >= 3])
def typed(x: T[M, N], up: Out[T[M, N]], ix: Out[i64[M, N]], top: Out[T[M, 3]], top_ix: Out[i64[M, 3]]):
    for i in parallel(M):
        v, j = intent.sort(x[i, :], return_indices=True)
        up[i, :] = v
        ix[i, :] = j
        t, tj = intent.topk(x[i, :], 3)
        top[i, :] = t
        top_ix[i, :] = tj


@pytest.mark.parametrize("dt", list(DTYPES))
def test_every_dtype_sorts_as_torch(dt: str) -> None:
    tdt = DTYPES[dt]
    n = 11
    if tdt.is_floating_point:
        x = (special_rows(3, n) * 100).to(tdt)
    else:
        info = torch.iinfo(tdt)
        x = torch.randint(info.min, info.max, (3, n), generator=g, dtype=torch.int64).to(tdt)
        x[0, :4] = info.min
        x[0, 4:6] = info.max
        x[1, ::2] = 7                                      # ties
    args = {"x": x, "up": torch.empty(3, n, dtype=tdt), "ix": torch.empty(3, n, dtype=torch.int64),
            "top": torch.empty(3, 3, dtype=tdt), "top_ix": torch.empty(3, 3, dtype=torch.int64)}
    got = three_ways(typed, args, ("up", "ix", "top", "top_ix"), rtol=0, atol=0)
    xs = x.float() if tdt in (torch.bfloat16, torch.float8_e4m3fn) else x.to(torch.int64) if tdt is torch.uint8 else x
    assert_sorted_like_torch(got["up"], got["ix"], xs, False)
    assert_sorted_like_torch(got["top"], got["top_ix"], xs, True, k=3)


@intent.kernel(requires=[N >= 8])
def tops(x: f32[M, N], t1: Out[f32[M, 1]], i1: Out[i64[M, 1]], t5: Out[f32[M, 5]], i5: Out[i64[M, 5]],
         s8: Out[f32[M, 8]], j8: Out[i64[M, 8]]):
    for i in parallel(M):
        a, b = intent.topk(x[i, :], 1)
        t1[i, :] = a
        i1[i, :] = b
        c, d = intent.topk(x[i, :], 5)
        t5[i, :] = c
        i5[i, :] = d
        e, f = intent.topk(x[i, :], 8, largest=False)
        s8[i, :] = e
        j8[i, :] = f


@pytest.mark.parametrize("n", [8, 37])
def test_topk_as_torch(n: int) -> None:
    """k = 1, a k that is no power of two and the k smallest: torch.topk's values; for ties, index order (the
    stable sort's first k)."""
    x = special_rows(4, n)
    args = {"x": x, "t1": torch.empty(4, 1), "i1": torch.empty(4, 1, dtype=torch.int64), "t5": torch.empty(4, 5),
            "i5": torch.empty(4, 5, dtype=torch.int64), "s8": torch.empty(4, 8),
            "j8": torch.empty(4, 8, dtype=torch.int64)}
    got = three_ways(tops, args, ("t1", "i1", "t5", "i5", "s8", "j8"), rtol=0, atol=0)
    for k, (v, i) in {1: ("t1", "i1"), 5: ("t5", "i5")}.items():
        assert_sorted_like_torch(got[v], got[i], x, True, k=k)
        np.testing.assert_array_equal(got[v], torch.topk(x, k).values.numpy())
    assert_sorted_like_torch(got["s8"], got["j8"], x, False, k=8)
    np.testing.assert_array_equal(got["s8"], torch.topk(x, 8, largest=False).values.numpy())


@intent.kernel(requires=[N >= 64])
def top64(x: f32[M, N], v: Out[f32[M, 64]], ix: Out[i64[M, 64]]):
    for i in parallel(M):
        a, b = intent.topk(x[i, :], 64)
        v[i, :] = a
        ix[i, :] = b


def test_large_k_takes_the_bitonic_top_k() -> None:
    """k = 64 of 300: the generated code keeps the earlier half of pairs of sorted blocks of 64 (no pass per
    element of k), and the result is torch's."""
    x = torch.randn(2, 300, generator=g)
    args = {"x": x, "v": torch.empty(2, 64), "ix": torch.empty(2, 64, dtype=torch.int64)}
    got = three_ways(top64, args, ("v", "ix"), rtol=0, atol=0)
    want = torch.topk(x, 64)
    np.testing.assert_array_equal(got["v"], want.values.numpy())
    np.testing.assert_array_equal(got["ix"], want.indices.numpy())
    source = top64.triton_source(**args)
    assert "_intent_sort(" in source and "BLOCK_C64" in source


def test_sort_kir_types_and_round_trips() -> None:
    k = rows.specialize({"x": torch.zeros(2, 3), "up": torch.zeros(2, 3), "up_ix": torch.zeros(2, 3, dtype=torch.int64),
                         "down": torch.zeros(2, 3), "down_ix": torch.zeros(2, 3, dtype=torch.int64)})
    text = print_kernel(k)
    assert "sort %" in text and "descending=true" in text
    again = parse_kernel(text)
    kir.verify(again)
    assert print_kernel(again) == text
    top = print_kernel(tops.kir)
    assert "descending=true k=5" in top and "k=8" in top
    kir.verify(parse_kernel(top))


def test_sort_typing_refusals() -> None:
    bad = """kernel bad(x: in f32[N], y: out f32[3]) symbols(N) {
  %0: f32[N] = load %x[0:N]
  %1: f32[3], %2: i64[3] = sort %0 axis=0 k=3
  store %y[0:3] = %1
  yield
}"""
    with pytest.raises(kir.DiagnosticError, match=r"cannot prove 3 <= N \(sort k = 3 within axis 0\)"):
        kir.verify(parse_kernel(bad))
    pred = """kernel bad(x: in pred[N], y: out pred[N]) symbols(N) {
  %0: pred[N] = load %x[0:N]
  %1: pred[N], %2: i64[N] = sort %0 axis=0
  store %y[0:N] = %1
  yield
}"""
    with pytest.raises(kir.DiagnosticError, match="sort of pred values is not supported: it orders integers and "
                                                  r"floats \(convert pred values to an integer first\)"):
        kir.verify(parse_kernel(pred))


def test_sort_refuses_pred_values(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = intent.sort(x > 0.0).to(f32)
        """, "x > 0.0", "intent.sort() orders numbers, not pred values; convert first, e.g. x.to(i32)")


def test_sort_axis_must_be_in_range(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M, N]]):
            out[:, :] = intent.sort(x, axis=-3)
        """, "-3", "intent.sort(): axis -3 is out of range for rank 2")


def test_sort_refuses_a_subregion(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[E], offsets: i64[S + 1], out: Out[f32[S]]):
            for s in parallel(S):
                out[s] = intent.max(intent.sort(x[offsets[s]:offsets[s + 1]]))
        """, "x[offsets", "intent.sort() of a data-dependent subregion x[b:e] is not supported: a sort needs a "
                          "row of launch-known length")


@intent.kernel
def nibbles(w: intent.i4[M, N], down: Out[intent.i8[M, N]], ix: Out[i64[M, N]]):
    for i in parallel(M):
        v, j = intent.sort(w[i, :], descending=True, return_indices=True)
        down[i, :] = v.to(intent.i8)
        ix[i, :] = j


def test_i4_values_sort_as_torch() -> None:
    from kir.dtypes import i4_packed

    vals = np.random.default_rng(0).integers(-8, 8, size=(3, 10)).astype(np.int8)
    args = {"w": torch.from_numpy(i4_packed(vals)), "down": torch.empty(3, 10, dtype=torch.int8),
            "ix": torch.empty(3, 10, dtype=torch.int64)}
    got = three_ways(nibbles, args, ("down", "ix"), rtol=0, atol=0)
    assert_sorted_like_torch(got["down"], got["ix"], torch.from_numpy(vals), True)


@intent.kernel(requires=[N <= 4096])
def bounded(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.sort(x[i, :])


def test_a_sort_of_an_unbounded_axis_has_a_performance_note() -> None:
    plan = rows.explain(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 3),
                        torch.zeros(2, 3, dtype=torch.int64))
    assert ("the sort along an axis of N elements holds the whole axis in one program's registers (a bitonic "
            "network); beyond 16384 elements it spills to local memory and compiles slowly: state "
            "requires=[N <= 16384] where that holds") in plan
    assert "the sort along" not in bounded.explain(torch.zeros(2, 100), torch.zeros(2, 100))


@intent.kernel(requires=[R >= 3, N >= 2])
def whole_tops(x: f32[R, N], low: Out[f32[3, N]], low_ix: Out[i64[3, N]], high: Out[f32[R, 2]],
               order: Out[i64[N]], wide: intent.u64[N]):
    low[:, :], low_ix[:, :] = intent.topk(x, 3, axis=0, largest=False)
    high[:, :] = intent.topk(x, 2)[0]
    order[:] = intent.argsort(wide, descending=True)


def test_top_level_topk_along_either_axis_and_unsigned_order() -> None:
    """Outside `parallel`: the k smallest of each column (the columns are the instances), the 2 largest of each
    row; u64 values order as unsigned numbers (2**63 and 2**64 - 1 are large, not negative)."""
    x = special_rows(7, 5)
    wide = torch.tensor([0, 2**63, 2**64 - 1, 5, 2**63], dtype=torch.uint64)
    args = {"x": x, "low": torch.empty(3, 5), "low_ix": torch.empty(3, 5, dtype=torch.int64),
            "high": torch.empty(7, 2), "order": torch.empty(5, dtype=torch.int64), "wide": wide}
    got = three_ways(whole_tops, args, ("low", "low_ix", "high", "order"), rtol=0, atol=0)
    assert_sorted_like_torch(got["low"], got["low_ix"], x, False, axis=0, k=3)
    np.testing.assert_array_equal(got["high"], torch.topk(x, 2).values.numpy())
    assert got["order"].tolist() == [2, 1, 4, 3, 0]


def test_sort_and_topk_compile_to_ptx_for_sm90() -> None:
    """The compiler (not the interpreter) accepts the network: no constexpr reassigned across unrolled steps."""
    args = {"x": torch.zeros(4, 40), "v": torch.zeros(4, 8), "ix": torch.zeros(4, 8, dtype=torch.int64)}
    assert ".target sm_90" in top8.ptx(**args, arch=90)


@intent.kernel(requires=[N >= 8])
def top8(x: f32[M, N], v: Out[f32[M, 8]], ix: Out[i64[M, 8]]):
    for i in parallel(M):
        a, b = intent.topk(x[i, :], 8)
        v[i, :] = a
        ix[i, :] = b


def test_unpacking_sort_values_suggests_return_indices(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M, N]], ix: Out[i64[M, N]]):
            for i in parallel(M):
                v, j = intent.sort(x[i, :])
                out[i, :] = v
                ix[i, :] = j
        """, "v, j", "cannot unpack a tensor value (index it instead) into 2 names; intent.sort gives the values only: "
                     "write `values, indices = intent.sort(x, return_indices=True)`")
