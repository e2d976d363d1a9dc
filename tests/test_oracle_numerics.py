"""The oracle's element numerics against torch: bf16 rounding, casts, C division, argmax."""

import numpy as np
import pytest
import torch

from kir.dtypes import DType
from kir.errors import IntentError
from kir.reduce import ReduceKind
from oracle.numerics import argextreme, cast, int_floordiv, int_mod, np_dtype, reduce_identity, round_bf16


def test_round_bf16_matches_torch_on_random_bits() -> None:
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    got = round_bf16(x)
    want = torch.from_numpy(x.copy()).bfloat16().float().numpy()
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan], want[~nan])


def test_round_bf16_ties_to_even_and_overflow_to_inf() -> None:
    one = np.float32(1.0)
    ulp = np.float32(2.0**-7)
    x = np.array([one + ulp / 2, one + ulp * 1.5, np.finfo(np.float32).max, -np.inf, np.nan], np.float32)
    got = round_bf16(x)
    assert got[0] == 1.0  # tie to even (down)
    assert got[1] == one + 2 * ulp  # tie to even (up)
    assert got[2] == np.inf and got[3] == -np.inf and np.isnan(got[4])


def test_c_division_on_all_sign_combinations() -> None:
    a = np.array([-9, -9, 9, 9, -1, 0], np.int64)
    b = np.array([4, -4, 4, -4, 7, -3], np.int64)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    np.testing.assert_array_equal(int_floordiv(a, b), torch.div(ta, tb, rounding_mode="trunc").numpy())
    np.testing.assert_array_equal(int_mod(a, b), torch.fmod(ta, tb).numpy())
    u = np.array([9, 200], np.uint8)
    np.testing.assert_array_equal(int_floordiv(u, np.array([4, 3], np.uint8)), [2, 66])


def test_float_to_unsigned_64_saturates() -> None:
    got = cast(np.array([1e30, -5.0, 2.0**63 + 2.0**12, np.nan]), DType.f64, DType.u64)
    assert got.tolist() == [2**64 - 1, 0, 2**63 + 2**12, 0]


def test_argextreme_first_index_and_nan() -> None:
    x = np.array([[1.0, 3.0, 3.0, 0.0], [np.nan, 5.0, np.nan, 1.0], [2.0, -np.inf, -np.inf, np.nan]])
    assert argextreme(x, ReduceKind.argmax).tolist() == torch.from_numpy(x).argmax(1).tolist()
    assert argextreme(x, ReduceKind.argmin).tolist() == torch.from_numpy(x).argmin(1).tolist()
    assert argextreme(np.zeros((2, 0)), ReduceKind.argmax).tolist() == [-1, -1]


def test_identities() -> None:
    assert reduce_identity(ReduceKind.max, DType.f16) == -np.inf
    assert reduce_identity(ReduceKind.min, DType.i8) == 127
    assert reduce_identity(ReduceKind.max, DType.u32) == 0
    assert reduce_identity(ReduceKind.prod, DType.i32) == 1
    with pytest.raises(IntentError, match="reduce custom has no built-in identity"):
        reduce_identity(ReduceKind.custom, DType.f32)


def test_dtype_variables_are_refused() -> None:
    from kir.dtypes import DTypeVar

    with pytest.raises(IntentError, match="the oracle runs specialised kernels only; dtype variable T is "
                                          "unassigned"):
        np_dtype(DTypeVar("T", (DType.f16, DType.f32)))
