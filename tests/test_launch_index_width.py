"""The 32/64-bit index choice from concrete sizes, strides and launch values."""

from __future__ import annotations

from emit_triton.index_width import INT32_MAX, IndexWidth, TensorExtent, choose_index_width, reachable_offset


def test_reachable_offset_of_a_contiguous_tensor():
    assert reachable_offset(TensorExtent("x", (4, 5), (5, 1)), tile=1) == 19


def test_reachable_offset_counts_rounded_up_tiles():
    # Lanes of a tile of 8 that starts at the last element reach coordinate 9 + 7.
    assert reachable_offset(TensorExtent("x", (10,), (1,)), tile=8) == 16
    assert reachable_offset(TensorExtent("x", (10,), (3,)), tile=8) == 48


def test_broadcast_axes_and_empty_tensors_reach_nothing():
    assert reachable_offset(TensorExtent("x", (2**40,), (0,)), tile=128) == 0
    assert reachable_offset(TensorExtent("x", (0, 2**40), (2**40, 1)), tile=128) == 0


def test_small_launch_fits():
    width = choose_index_width([TensorExtent("x", (1000,), (1,))], {"N": 1000}, grid=8, tile=128)
    assert width == IndexWidth(False, "every offset and launch value fits in 32 bits; largest offset 1126 "
                                      "(parameter x, shape (1000,), strides (1,))")
    assert width.bits == 32


def test_large_tensor_offset_needs_64_bits():
    n = 2**31 - 100
    width = choose_index_width([TensorExtent("x", (n,), (1,))], {}, grid=1, tile=128)
    assert width.index64 and width.bits == 64
    assert width.reason == f"parameter x can reach element offset {n + 126} (shape ({n},), strides (1,), tile 128)"


def test_large_stride_needs_64_bits():
    width = choose_index_width([TensorExtent("x", (3, 2), (2**30, 1))], {"M": 3, "N": 2}, grid=1)
    assert width.index64 and width.reason.startswith("parameter x can reach element offset 2147483649 ")


def test_large_launch_value_needs_64_bits():
    width = choose_index_width([TensorExtent("x", (4,), (0,))], {"N": 2**31}, grid=1)
    assert width == IndexWidth(True, "N = 2147483648 does not fit in 32 bits")


def test_large_grid_times_tile_needs_64_bits():
    width = choose_index_width([], {}, grid=2**24, tile=128)
    assert width == IndexWidth(True, "grid 16777216 x tile 128 = 2147483648 does not fit in 32 bits")


def test_large_extent_needs_64_bits_even_when_broadcast():
    width = choose_index_width([TensorExtent("x", (2**31,), (0,))], {}, grid=1)
    assert width == IndexWidth(True, "parameter x has extent 2147483648 (shape (2147483648,)), which does not fit "
                                     "in 32 bits")


def test_boundary_is_strict():
    just_below = choose_index_width([TensorExtent("x", (INT32_MAX - 1,), (1,))], {}, grid=1)
    at_limit = choose_index_width([TensorExtent("x", (INT32_MAX,), (1,))], {}, grid=1)
    assert not just_below.index64 and at_limit.index64
