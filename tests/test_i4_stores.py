"""Writing i4 memory (kir.dtypes.I4_PACKING: two elements a byte, element 2j in the low nibble): `Out` and `InOut`
parameters and local buffers, checked against NumPy references, the oracle and the StableHLO exit, with the
nibbles a kernel does not write left as they were."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import intent
from intent import InOut, Out, dims, f32, i4, i8, i32, i64, parallel
from intent.errors import LaunchError
from kir.dtypes import i4_packed, i4_unpacked, i4_wrapped

M, N, S, E = dims("M N S E")
rng = np.random.default_rng(17)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CACHE_DIR", str(tmp_path / "cache"))


@intent.kernel
def quantize_rows(x: f32[M, N], q: Out[i4[M, N]], scale: Out[f32[M]]):
    for i in parallel(M):
        s = intent.max(intent.abs(x[i, :])) / 7.0
        scale[i] = s
        q[i, :] = intent.clamp(intent.round(x[i, :] / s), -8.0, 7.0).to(i4)


@intent.kernel
def by_element(x: i8[M, N], q: Out[i4[M, N]]):
    for i in parallel(M):
        for j in parallel(N):
            if x[i, j] > 0:
                q[i, j] = x[i, j].to(i4)
            else:
                q[i, j] = (x[i, j] * 3 - 5).to(i4)


@intent.kernel
def whole(x: i8[M, N], q: Out[i4[M, N]]):
    q[:, :] = x.to(i4)


@intent.kernel
def by_column(x: i8[M, N], q: Out[i4[M, N]]):
    for j in parallel(N):
        q[:, j] = (x[:, j] + 1).to(i4)


@intent.kernel(requires=[N % 2 == 0])
def odd_positions(q: InOut[i4[M, N]], v: i32):
    for i in parallel(M):
        q[i, 1:N:2] = q[i, 1:N:2] + v.to(i4)


@intent.kernel
def local_buffer(x: i8[M, N], out: Out[i8[M, N]]):
    for i in parallel(M):
        b = intent.zeros((N,), i4)
        b[:] = x[i, :].to(i4)
        out[i, :] = b[:].to(i8) * 2


@intent.kernel
def segment_scan(x: i4[E], off: i64[S + 1], out: Out[i4[E]]):
    for s in parallel(S):
        b, e = off[s], off[s + 1]
        out[b:e] = intent.cumsum(x[b:e])


@intent.kernel
def scatter(x: i8[N], idx: i32[N], out: Out[i4[N]]):
    for n in parallel(N):
        intent.store(out, idx[n], x[n].to(i4), unique=True)


def _check(k, args: dict[str, object], want: dict[str, np.ndarray], stablehlo: bool = True) -> dict[str, torch.Tensor]:
    """The launch (i4 outputs unpacked), the oracle and the StableHLO exit give `want`; returns the launched args."""
    def copy() -> dict[str, object]:
        return {n: (v.clone() if isinstance(v, torch.Tensor) else v) for n, v in args.items()}

    launched = copy()
    k(**launched)
    oracle = k.oracle(**copy())
    xla = k.stablehlo_run(**copy()) if stablehlo else None
    for name, expected in want.items():
        t = launched[name]
        got = i4_unpacked(t.numpy()) if k.kir.param(name).type.dtype.value == "i4" else t.numpy()
        np.testing.assert_array_equal(got, expected, err_msg=f"launch: {name}")
        np.testing.assert_array_equal(np.asarray(oracle[name]), expected, err_msg=f"oracle: {name}")
        if xla is not None:
            np.testing.assert_array_equal(np.asarray(xla[name]), expected, err_msg=f"StableHLO: {name}")
    return launched  # type: ignore[return-value]


def _garbage(m: int, n: int) -> torch.Tensor:
    """A packed output full of bytes the kernel must overwrite (or, for nibbles it does not write, keep)."""
    return torch.from_numpy(rng.integers(0, 256, (m, n // 2)).astype(np.uint8))


def test_quantizing_rows_to_i4_against_torch() -> None:
    x = torch.randn(5, 24) * torch.linspace(0.1, 20, 5)[:, None]
    s = x.abs().amax(dim=1) / 7.0
    q = torch.clamp(torch.round(x / s[:, None]), -8, 7).to(torch.int8).numpy()
    launched = _check(quantize_rows, {"x": x, "q": _garbage(5, 24), "scale": torch.empty(5)},
                      {"q": q, "scale": s.numpy()})
    assert launched["q"].dtype == torch.uint8


@pytest.mark.parametrize("m, n", [(3, 10), (7, 2), (1, 64), (33, 6)])
def test_per_element_stores_in_branches(m: int, n: int) -> None:
    x = torch.from_numpy(rng.integers(-30, 30, (m, n)).astype(np.int8))
    xv = x.numpy().astype(np.int64)
    want = i4_wrapped(np.where(xv > 0, xv, xv * 3 - 5))
    _check(by_element, {"x": x, "q": _garbage(m, n)}, {"q": want})


def test_whole_tensor_and_column_stores() -> None:
    x = torch.from_numpy(rng.integers(-30, 30, (9, 14)).astype(np.int8))
    xv = x.numpy().astype(np.int64)
    _check(whole, {"x": x, "q": _garbage(9, 14)}, {"q": i4_wrapped(xv)})
    # a column is one nibble of every byte it touches: merged into memory, the other nibble kept
    _check(by_column, {"x": x, "q": _garbage(9, 14)}, {"q": i4_wrapped(xv + 1)})


def test_a_strided_store_keeps_the_other_nibbles() -> None:
    values = rng.integers(-8, 8, (4, 10))
    want = values.copy()
    want[:, 1::2] = i4_wrapped(values[:, 1::2] + 3)
    _check(odd_positions, {"q": torch.from_numpy(i4_packed(values)), "v": 3}, {"q": want})


def test_a_transposed_i4_output_view() -> None:
    """The packed tensor may be a view with its own strides (the last axis still holds two per byte)."""
    x = torch.from_numpy(rng.integers(-30, 30, (6, 8)).astype(np.int8))
    storage = torch.zeros(8, 6, dtype=torch.uint8)
    q = storage[:4, :].T  # shape (6, 4) bytes, strides (1, 6)
    whole(x, q)
    np.testing.assert_array_equal(i4_unpacked(q.contiguous().numpy()), i4_wrapped(x.numpy()))
    assert (storage[4:, :] == 0).all()


def test_segments_of_odd_lengths_and_scatters() -> None:
    """Segments that start and end mid-byte, and a permutation scatter: nibbles owned alone, merged."""
    values = rng.integers(-8, 8, 12)
    off = torch.tensor([0, 3, 3, 8, 12])
    want = values.copy()
    for b, e in ((0, 3), (3, 8), (8, 12)):
        want[b:e] = i4_wrapped(np.cumsum(values[b:e]))
    _check(segment_scan, {"x": torch.from_numpy(i4_packed(values)), "off": off, "out": _garbage(1, 12)[0]},
           {"out": want})
    x = torch.from_numpy(values.astype(np.int8))
    idx = torch.from_numpy(rng.permutation(12).astype(np.int32))
    scattered = np.zeros(12, np.int64)
    scattered[idx.numpy()] = values
    _check(scatter, {"x": x, "idx": idx, "out": _garbage(1, 12)[0]}, {"out": scattered}, stablehlo=False)  # unique


def test_a_local_i4_buffer_wraps_its_values() -> None:
    x = torch.from_numpy(rng.integers(-30, 30, (5, 7)).astype(np.int8))
    _check(local_buffer, {"x": x, "out": torch.empty(5, 7, dtype=torch.int8)},
           {"out": (i4_wrapped(x.numpy()).astype(np.int64) * 2).astype(np.int8)})


def test_an_omitted_i4_output_is_allocated_packed() -> None:
    x = torch.from_numpy(rng.integers(-8, 8, (3, 6)).astype(np.int8))
    q = whole(x)
    assert q.dtype == torch.uint8 and q.shape == (3, 3)
    np.testing.assert_array_equal(i4_unpacked(q.numpy()), x.numpy())


def test_an_omitted_i4_output_needs_an_even_last_extent() -> None:
    with pytest.raises(LaunchError) as info:
        whole(torch.zeros(3, 5, dtype=torch.int8))
    assert str(info.value) == ("out parameter q was omitted and its shape is [3, 5]: i4 packs two elements per byte "
                               "along the last axis, which must have an even extent")


def test_the_sanitizer_reports_an_unwritten_i4_element() -> None:
    from emit_triton.sanitize import SanitizerError, launch

    x = torch.from_numpy(rng.integers(-8, 8, (2, 4)).astype(np.int8))
    q = torch.zeros(2, 2, dtype=torch.uint8)
    with pytest.raises(SanitizerError, match=r"left 8 element\(s\) of q unwritten .* the first q\[0, 0\]"):
        launch(whole.kir, {"x": x, "q": q}, lambda kernel, args: None)
    launch(whole.kir, {"x": x, "q": q}, lambda kernel, args: whole(**args))  # the real launch writes them all
    np.testing.assert_array_equal(i4_unpacked(q.numpy()), x.numpy())


def test_i4_stores_ptx_for_sm90() -> None:
    """Whole bytes where one program owns both nibbles, atomic and/or on the aligned word for any other."""
    ptx = quantize_rows.ptx(torch.zeros(64, 256), torch.zeros(64, 128, dtype=torch.uint8), torch.empty(64), arch=90)
    assert ".target sm_90" in ptx
    found = set(re.findall(r"\b(st\.global\.b8|atom\.global\.[\w.]*\.(?:and|or)\.b32)", ptx))
    assert "st.global.b8" in found and any(".and." in f for f in found) and any(".or." in f for f in found), found


def test_explain_counts_half_a_byte_per_i4_element() -> None:
    text = whole.explain(torch.zeros(4, 16, dtype=torch.int8), torch.zeros(4, 8, dtype=torch.uint8))
    assert "ideal = M * N + cdiv(M * N, 2) (" in text and "1.00x the ideal" in text
