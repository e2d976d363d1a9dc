"""Scans against torch/NumPy: kinds, reverse/exclusive, NaN, integer wrap, f16 accumulation, custom order."""

import numpy as np
import pytest
import torch

import oracle
from kir import Binary, BinaryFn, Builder, Scan, ScanKind, Yield, scalar
from kir.dims import DSym
from kir.dtypes import DType
from tests.oracle_kit import kernel, load_all, out, parallel, row, store_all, store_row, tensor

f16, f32, i8, i32, i64 = DType.f16, DType.f32, DType.i8, DType.i32, DType.i64
M = DSym("M")


def scan_rows(kind: ScanKind, dtype: DType, x: np.ndarray, **attrs) -> np.ndarray:
    def body(b, p):
        def inst(b, i):
            (r,) = b.make(Scan, inputs=(row(b, p["x"], i),), axis=0, kind=kind, **attrs).results
            store_row(b, p["out"], i, r)
        parallel(b, [M], inst)

    k = kernel({"x": tensor(dtype, "M", "N"), "out": out(dtype, "M", "N")}, body, symbols=("M", "N"))
    return oracle.run(k, {"x": x})["out"]


X = np.array([[1.0, -2.0, 3.0, 0.5, 4.0], [2.0, np.nan, -1.0, 5.0, 1.0], [np.inf, 1.0, -np.inf, 2.0, 0.0]],
             np.float32)


def test_cumsum_and_cumprod_match_torch() -> None:
    t = torch.from_numpy(X)
    np.testing.assert_allclose(scan_rows(ScanKind.sum, f32, X), torch.cumsum(t, 1).numpy(), equal_nan=True)
    np.testing.assert_allclose(scan_rows(ScanKind.prod, f32, X), torch.cumprod(t, 1).numpy(), equal_nan=True)


def test_cummax_and_cummin_propagate_nan() -> None:
    t = torch.from_numpy(X)
    np.testing.assert_array_equal(scan_rows(ScanKind.max, f32, X), torch.cummax(t, 1).values.numpy())
    np.testing.assert_array_equal(scan_rows(ScanKind.min, f32, X), torch.cummin(t, 1).values.numpy())


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
def test_reverse_and_exclusive(reverse: bool, exclusive: bool) -> None:
    x = np.random.default_rng(3).integers(-50, 50, (4, 9)).astype(np.int32)
    t = torch.from_numpy(x)
    src = torch.flip(t, [1]) if reverse else t
    inc = torch.cumsum(src, 1)
    res = inc - src if exclusive else inc
    want = (torch.flip(res, [1]) if reverse else res).to(torch.int32).numpy()
    np.testing.assert_array_equal(scan_rows(ScanKind.sum, i32, x, reverse=reverse, exclusive=exclusive), want)


def test_exclusive_max_starts_from_the_identity() -> None:
    x = np.array([[3, 1, 4, 1, 5]], np.int8)
    assert scan_rows(ScanKind.max, i8, x, exclusive=True).tolist() == [[-128, 3, 3, 4, 4]]
    assert scan_rows(ScanKind.max, i8, x, exclusive=True, identity=(2,)).tolist() == [[2, 3, 3, 4, 4]]


def test_integer_scans_wrap_at_the_declared_width() -> None:
    x = np.array([[100, 100, 100, -128]], np.int8)
    assert scan_rows(ScanKind.sum, i8, x).tolist() == [[100, -56, 44, -84]]


def test_f16_cumsum_accumulates_in_f32() -> None:
    ones = np.ones((1, 3000), np.float16)
    got = scan_rows(ScanKind.sum, f16, ones)
    np.testing.assert_array_equal(got, np.cumsum(ones.astype(np.float32), axis=1).astype(np.float16))
    assert got[0, -1] == 3000.0


def test_scan_along_the_first_axis_at_top_level() -> None:
    x = np.arange(12, dtype=np.int64).reshape(3, 4)

    def body(b, p):
        (r,) = b.make(Scan, inputs=(load_all(b, p["x"]),), axis=0, kind=ScanKind.sum).results
        store_all(b, p["out"], r)

    k = kernel({"x": tensor(i64, 3, 4), "out": out(i64, 3, 4)}, body)
    np.testing.assert_array_equal(oracle.run(k, {"x": x})["out"], np.cumsum(x, axis=0))


def compose(b: Builder):
    """Affine maps x -> a*x + c composed left to right: associative, not commutative."""
    a1, c1, a2, c2 = b.begin_region((scalar(i64),) * 4)
    a = b.add(Binary, fn=BinaryFn.mul, lhs=a1, rhs=a2)
    c = b.add(Binary, fn=BinaryFn.add, lhs=b.add(Binary, fn=BinaryFn.mul, lhs=a2, rhs=c1), rhs=c2)
    b.make(Yield, values=(a, c))
    return b.end_region()


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
def test_custom_scan_keeps_the_combine_order(reverse: bool, exclusive: bool) -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, (2, 11))
    c = rng.integers(-5, 6, (2, 11))

    def body(b, p):
        def inst(b, i):
            ra, rc = b.make(Scan, inputs=(row(b, p["a"], i), row(b, p["c"], i)), axis=0, kind=ScanKind.custom,
                            reverse=reverse, exclusive=exclusive, identity=(1, 0), combine=compose(b)).results
            store_row(b, p["oa"], i, ra)
            store_row(b, p["oc"], i, rc)
        parallel(b, [M], inst)

    k = kernel({"a": tensor(i64, "M", "N"), "c": tensor(i64, "M", "N"), "oa": out(i64, "M", "N"),
                "oc": out(i64, "M", "N")}, body, symbols=("M", "N"))
    r = oracle.run(k, {"a": a, "c": c})
    want_a, want_c = np.empty_like(a), np.empty_like(c)
    for m in range(2):
        order = range(10, -1, -1) if reverse else range(11)
        acc = (1, 0)
        for n in order:
            if exclusive:
                want_a[m, n], want_c[m, n] = acc
            # forward: acc then element; reverse: element then acc (x_k combined with the rest after it)
            acc = (acc[0] * a[m, n], a[m, n] * acc[1] + c[m, n]) if not reverse else \
                (a[m, n] * acc[0], acc[0] * c[m, n] + acc[1])
            if not exclusive:
                want_a[m, n], want_c[m, n] = acc
    np.testing.assert_array_equal(r["oa"], want_a)
    np.testing.assert_array_equal(r["oc"], want_c)
