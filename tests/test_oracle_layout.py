"""Layout ops on whole tensors and, per instance, on lane-batched values (same results)."""

import numpy as np

import oracle
from kir import Broadcast, Concat, ExpandDims, Reshape, SliceOp, Squeeze, Transpose
from kir.dims import DConst
from kir.dtypes import DType
from tests.oracle_kit import kernel, load_all, out, parallel, row, store_all, store_row, tensor

f32 = DType.f32


def layout(build, x: np.ndarray, out_shape: tuple[int, ...]) -> np.ndarray:
    """`build` on the whole of `x`, and on each of three instances' rows; both must agree."""
    top = kernel({"x": tensor(f32, *x.shape), "out": out(f32, *out_shape)},
                 lambda b, p: store_all(b, p["out"], build(b, load_all(b, p["x"]))))
    rows = kernel({"x": tensor(f32, 3, *x.shape), "out": out(f32, 3, *out_shape)},
                  lambda b, p: parallel(b, [3], lambda b, i: store_row(b, p["out"], i, build(b, row(b, p["x"], i)))))
    xs = np.stack([x, x + 100, -x])
    batched = oracle.run(rows, {"x": xs})["out"]
    for k in range(3):
        np.testing.assert_array_equal(batched[k], oracle.run(top, {"x": xs[k]})["out"])
    return oracle.run(top, {"x": x})["out"]


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def d(*xs: int) -> tuple[DConst, ...]:
    return tuple(DConst(v) for v in xs)


def test_broadcast_in_dim() -> None:
    v = np.arange(3, dtype=np.float32)
    got = layout(lambda b, x: b.add(Broadcast, x=x, shape=d(2, 3, 4), dims=(1,)), v, (2, 3, 4))
    np.testing.assert_array_equal(got, np.broadcast_to(v[None, :, None], (2, 3, 4)))
    one = np.ones((1, 4), np.float32) * 7
    got = layout(lambda b, x: b.add(Broadcast, x=x, shape=d(5, 4), dims=(0, 1)), one, (5, 4))
    np.testing.assert_array_equal(got, np.full((5, 4), 7, np.float32))


def test_reshape_is_row_major() -> None:
    got = layout(lambda b, x: b.add(Reshape, x=x, shape=d(4, 6)), X, (4, 6))
    np.testing.assert_array_equal(got, X.reshape(4, 6))


def test_transpose_then_reshape_reads_in_the_new_order() -> None:
    def build(b, x):
        return b.add(Reshape, x=b.add(Transpose, x=x, perm=(2, 0, 1)), shape=d(24))

    np.testing.assert_array_equal(layout(build, X, (24,)), X.transpose(2, 0, 1).reshape(24))


def test_static_slice_with_step() -> None:
    got = layout(lambda b, x: b.add(SliceOp, x=x, starts=d(0, 1, 1), stops=d(2, 3, 4), steps=(1, 1, 2)), X,
                 (2, 2, 2))
    np.testing.assert_array_equal(got, X[0:2, 1:3, 1:4:2])


def test_concat_expand_and_squeeze() -> None:
    def build(b, x):
        e = b.add(ExpandDims, x=x, axis=1)
        c = b.add(Concat, inputs=(e, e, e), axis=1)
        return b.add(Squeeze, x=b.add(ExpandDims, x=c, axis=0), axis=0)

    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(layout(build, m, (2, 3, 3)), np.concatenate([m[:, None]] * 3, axis=1))
