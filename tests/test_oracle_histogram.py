"""Histogram: counts into bins, out-of-range values ignored, at top level and per instance."""

import numpy as np
import torch

import oracle
from kir import Histogram
from kir.dims import DSym
from kir.dtypes import DType
from tests.oracle_kit import kernel, load_all, out, parallel, row, store_all, store_row, tensor

B, M = DSym("B"), DSym("M")


def test_whole_tensor_histogram_ignores_out_of_range_values() -> None:
    def body(b, p):
        store_all(b, p["counts"], b.add(Histogram, values=load_all(b, p["x"]), bins=B))

    k = kernel({"x": tensor(DType.i64, "N"), "counts": out(DType.i32, "B")}, body, symbols=("N", "B"))
    x = np.random.default_rng(0).integers(-3, 12, 500)
    got = oracle.run(k, {"x": x, "counts": np.zeros(8, np.int32)})["counts"]
    inside = torch.from_numpy(x[(x >= 0) & (x < 8)])
    np.testing.assert_array_equal(got, torch.bincount(inside, minlength=8).numpy())
    assert got.dtype == np.int32


def test_a_histogram_per_instance() -> None:
    def body(b, p):
        def inst(b, i):
            h = b.add(Histogram, values=row(b, p["x"], i), bins=B)
            store_row(b, p["counts"], i, h)
        parallel(b, [M], inst)

    k = kernel({"x": tensor(DType.u8, "M", "N"), "counts": out(DType.i32, "M", "B")}, body, symbols=("M", "N", "B"))
    x = np.array([[0, 1, 1, 9], [3, 3, 3, 3], [255, 0, 2, 2]], np.uint8)
    got = oracle.run(k, {"x": x, "counts": np.zeros((3, 4), np.int32)})["counts"]
    assert got.tolist() == [[1, 2, 0, 0], [0, 0, 0, 4], [1, 0, 2, 0]]
