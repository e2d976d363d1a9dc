"""Reductions and scans with combines other than Triton's native ones: whole-tile steps in element order.

Every kernel runs under Triton's interpreter and is compared with the oracle: exactly for integer
combines that do not commute (only an order-keeping fold or scan gets them right), within a tolerance
for floats. Sizes are odd on purpose (1, primes, 2^k +- 1), so that padding meets every level.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import emit_triton
from tests import perf_reduce_kernels as K
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)

SIZES = (1, 2, 7, 31, 33, 64, 65, 129)


@pytest.fixture(autouse=True)
def private_cache(isolated_cache):  # noqa: F811
    return isolated_cache


def outputs(kernel, args: dict) -> tuple[dict, dict]:
    """(launched outputs, oracle outputs) for the Out parameters of `kernel`."""
    want = kernel.oracle(**{n: v.numpy() if isinstance(v, torch.Tensor) else v for n, v in args.items()})
    kernel(**args)
    return {n: args[n].numpy() for n in want}, want


def assert_matches(kernel, args: dict, tol: float | None = None) -> None:
    got, want = outputs(kernel, args)
    for name, w in want.items():
        g = got[name]
        if tol is None:
            np.testing.assert_array_equal(g, w, err_msg=f"{kernel.__name__}: {name}")
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True, err_msg=f"{kernel.__name__}: {name}")


def sparse_ints(rng: np.random.Generator, shape: tuple[int, ...], density: float = 0.15) -> torch.Tensor:
    values = rng.integers(-9, 10, shape) * (rng.random(shape) < density)
    return torch.tensor(values, dtype=torch.int32)


@pytest.mark.parametrize("n", SIZES)
def test_a_reduction_that_does_not_commute_keeps_the_element_order(n: int) -> None:
    x = sparse_ints(np.random.default_rng(n), (3, n))
    assert_matches(K.first_nz, {"x": x, "out": torch.empty(3, dtype=torch.int32)})


@pytest.mark.parametrize("n", (1, 3, 31, 65, 129))
def test_welford_tuples_on_odd_sizes_with_nan_and_inf(n: int) -> None:
    rng = np.random.default_rng(n)
    x = torch.tensor(rng.standard_normal((4, n)) + 100.0, dtype=torch.float32)
    x[1, n // 2] = float("nan")
    x[2, n - 1] = float("inf")
    assert_matches(K.welford, {"x": x, "mean": torch.empty(4), "var": torch.empty(4)}, tol=1e-3)


@pytest.mark.parametrize("kernel", [K.affine_scan, K.affine_scan_reverse_exclusive], ids=lambda k: k.__name__)
@pytest.mark.parametrize("n", (1, 2, 7, 33, 64, 129))
def test_tuple_scans_that_do_not_commute_are_exact(kernel, n: int) -> None:
    rng = np.random.default_rng(n)
    a = torch.tensor(rng.integers(-3, 4, (2, n)), dtype=torch.int32)
    b = torch.tensor(rng.integers(-50, 50, (2, n)), dtype=torch.int32)
    assert_matches(kernel, {"a": a, "b": b, "oa": torch.empty(2, n, dtype=torch.int32),
                            "ob": torch.empty(2, n, dtype=torch.int32)})


@pytest.mark.parametrize("kernel", [K.last_nz_scan, K.last_nz_scan_reverse, K.last_nz_scan_exclusive],
                         ids=lambda k: k.__name__)
@pytest.mark.parametrize("n", (1, 31, 65))
def test_single_component_scans_in_every_direction(kernel, n: int) -> None:
    x = sparse_ints(np.random.default_rng(n), (3, n))
    assert_matches(kernel, {"x": x, "out": torch.empty(3, n, dtype=torch.int32)})


@pytest.mark.parametrize("kernel", [K.cummax_rows, K.cummin_reverse], ids=lambda k: k.__name__)
@pytest.mark.parametrize("n", (1, 7, 65))
def test_running_extremes_propagate_nan_and_keep_infinities(kernel, n: int) -> None:
    x = torch.tensor(np.random.default_rng(n).standard_normal((3, n)), dtype=torch.float32)
    x[0, n // 2] = float("nan")
    x[1, 0] = float("inf")
    x[2, n - 1] = float("-inf")
    assert_matches(kernel, {"x": x, "out": torch.empty(3, n)})


@pytest.mark.parametrize("kernel", [K.exclusive_cumsum, K.reverse_exclusive_cumsum], ids=lambda k: k.__name__)
@pytest.mark.parametrize("n", (1, 17, 64, 129))
def test_exclusive_float_sums_start_from_the_identity_exactly(kernel, n: int) -> None:
    x = torch.tensor(np.random.default_rng(n).standard_normal((2, n)), dtype=torch.float32)
    args = {"x": x, "out": torch.full((2, n), 7.0)}
    assert_matches(kernel, args, tol=1e-5)
    edge = 0 if kernel is K.exclusive_cumsum else n - 1
    assert args["out"][:, edge].tolist() == [0.0, 0.0]
    if n > 1:  # the next prefix is the neighbour itself, not (prefix + x) - x
        nxt = 1 if kernel is K.exclusive_cumsum else n - 2
        assert args["out"][:, nxt].tolist() == x[:, edge].tolist()


@pytest.mark.parametrize("n", (1, 33, 128))
def test_products_and_argmax_over_two_axes(n: int) -> None:
    rng = np.random.default_rng(n)
    x = torch.tensor(rng.uniform(0.98, 1.02, (3, n)), dtype=torch.float32)
    assert_matches(K.prod_rows, {"x": x, "out": torch.empty(3)}, tol=1e-5)
    planes = torch.tensor(rng.standard_normal((3, n, 5)), dtype=torch.float32)
    planes[1, n // 2, 3] = float("nan")
    planes[1, n - 1, 4] = float("nan")  # the first NaN wins
    planes[2] = 1.0  # ties: the first position
    assert_matches(K.argmax_planes, {"x": planes, "out": torch.empty(3, dtype=torch.int64)})


def offsets(lengths: list[int]) -> torch.Tensor:
    return torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.tensor(lengths), 0)])


@pytest.mark.parametrize("lengths", [[1], [0, 3, 0], [300, 1, 0, 257], [513]])
def test_region_folds_and_scans_keep_the_element_order_across_chunks(lengths: list[int]) -> None:
    offs = offsets(lengths)
    e = max(int(offs[-1]), 1)
    s = len(lengths)
    values = sparse_ints(np.random.default_rng(e), (e,), density=0.02)
    assert_matches(K.seg_first_nz, {"values": values, "offsets": offs, "out": torch.empty(s, dtype=torch.int32)})
    for kernel in (K.seg_last_nz_scan, K.seg_last_nz_scan_reverse_exclusive):
        assert_matches(kernel, {"values": values, "offsets": offs, "out": torch.zeros(e, dtype=torch.int32)})


def test_region_fold_of_maxima_keeps_nan() -> None:
    offs = offsets([5, 0, 300])
    values = torch.tensor(np.random.default_rng(1).standard_normal(305), dtype=torch.float32)
    values[2] = float("nan")
    values[200] = float("inf")
    assert_matches(K.seg_max, {"values": values, "offsets": offs, "out": torch.empty(3)})


def kir_text_kernel(text: str):
    from kir.text import parse_kernel

    return parse_kernel(text, "identities.kir")


IDENTITY_KERNELS = """\
kernel seeded(x: in f32[M, N], s: out f32[M], p: out f32[M, N]) symbols(M, N) {
  parallel (%i: i64) in (M) {
    %0: f32[N] = load %x[%i, 0:N]
    %1: f32 = reduce sum(%0) axes=(0) identity=(5.0)
    store %s[%i] = %1
    %2: f32[N] = scan prod(%0) axis=0 identity=(2.0)
    store %p[%i, 0:N] = %2
    yield
  }
  yield
}
"""


@pytest.mark.parametrize("n", (1, 3, 5))
def test_an_identity_given_to_a_built_in_kind_is_folded_in_once(n: int) -> None:
    # the row is padded to a power of two: padding must fold the neutral element, not the given identity
    k = kir_text_kernel(IDENTITY_KERNELS)
    x = np.arange(1, n + 1, dtype=np.float32).reshape(1, n)
    s, p = torch.empty(1), torch.empty(1, n)
    emit_triton.launch(k, {"x": torch.tensor(x), "s": s, "p": p})
    assert s.tolist() == [5.0 + x.sum()]
    assert p[0].tolist() == (2.0 * np.cumprod(x[0])).tolist()


@pytest.mark.parametrize("kernel,probe", [
    (K.welford, {"x": torch.zeros(2, 5), "mean": torch.empty(2), "var": torch.empty(2)}),
    (K.affine_scan_reverse_exclusive, {n: torch.zeros(2, 5, dtype=torch.int32) for n in ("a", "b", "oa", "ob")}),
    (K.cummax_rows, {"x": torch.zeros(2, 5), "out": torch.empty(2, 5)}),
    (K.seg_first_nz, {"values": torch.zeros(4, dtype=torch.int32), "offsets": offsets([4]),
                      "out": torch.empty(1, dtype=torch.int32)}),
    (K.seg_last_nz_scan, {"values": torch.zeros(4, dtype=torch.int32), "offsets": offsets([4]),
                          "out": torch.empty(4, dtype=torch.int32)}),
], ids=lambda k: getattr(k, "__name__", ""))
def test_no_combine_runs_one_element_at_a_time(kernel, probe: dict) -> None:
    # Triton's interpreter runs tl.reduce / tl.associative_scan with a user combine per element
    src = kernel.triton_source(**probe)
    assert "tl.reduce(" not in src and "tl.associative_scan(" not in src
    assert "tl.static_range(" in src  # the whole-tile levels


def test_welford_folds_adjacent_pairs_with_the_combine_written_out() -> None:
    src = K.welford.triton_source(x=torch.zeros(2, 5), mean=torch.empty(2), var=torch.empty(2))
    assert "tl.split(tl.reshape(" in src
    assert "def _combine" not in src  # written in place: no per-level call of a jit helper
