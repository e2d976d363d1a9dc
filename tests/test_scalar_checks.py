"""Arguments are checked by one implementation (`intent.runtime.checks`: check_scalar, check_tensor,
common_device) for the compiler's launcher, its cached plans and loaded kernels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from emit_triton.fast_launch import _REJECT, _scalar_check
from intent.runtime.checks import FLOAT_MAX, INT_RANGES, check_scalar
from kir import LaunchError
from kir.dtypes import DType


def test_the_runtime_tables_agree_with_the_compilers_dtypes() -> None:
    for dt in DType:
        if dt.is_int:
            assert INT_RANGES[str(dt)] == dt.int_range, dt
        elif dt.is_float:
            assert FLOAT_MAX[str(dt)] == float(torch.finfo(dt.torch).max), dt
    assert set(INT_RANGES) | set(FLOAT_MAX) | {"pred"} == {str(dt) for dt in DType}


@pytest.mark.parametrize("dtype,value,message", [
    ("i8", 128, "parameter a: 128 does not fit i8 (range -128..127)"),
    ("i32", True, "parameter a: expected an int (i32 scalar), got bool"),
    ("i32", 1.0, "parameter a: expected an int (i32 scalar), got float"),
    ("pred", 1, "parameter a: expected a bool (pred scalar), got int"),
    ("f16", 1e5, "parameter a: 100000.0 does not fit f16 (largest finite value 65504)"),
    ("f32", "1", "parameter a: expected a float or int (f32 scalar), got str"),
    ("f32", None, "parameter a: expected a f32 scalar, got None"),
    ("u8", np.int64(-1), "parameter a: -1 does not fit u8 (range 0..255)"),
])
def test_refusals_name_the_parameter_and_the_rule(dtype: str, value: object, message: str) -> None:
    with pytest.raises(LaunchError) as info:
        check_scalar("a", dtype, value)
    assert str(info.value) == message


def test_python_and_numpy_scalars_pass_as_python_values() -> None:
    assert check_scalar("a", "i16", np.int16(-5)) == -5 and type(check_scalar("a", "i16", np.int16(-5))) is int
    assert check_scalar("a", "pred", np.bool_(True)) is True
    assert check_scalar("a", "f32", float("inf")) == float("inf")
    assert check_scalar("a", "bf16", 3) == 3.0 and type(check_scalar("a", "bf16", 3)) is float


@pytest.mark.parametrize("dt", list(DType))
def test_cached_plans_accept_exactly_what_the_check_accepts(dt: DType) -> None:
    values = [True, False, 0, -1, 1 << 31, -(1 << 63), 255, 256, 7, -8, -9, 0.5, 1e5, 70000.0, 1e39, float("inf"),
              float("nan"), 448.0, 449.0]
    for value in values:
        fast = _scalar_check(dt, type(value))(value)
        try:
            full = check_scalar("a", str(dt), value)
        except LaunchError:
            full = _REJECT
        if dt is DType.f64 and full is not _REJECT:
            continue  # the plan passes an f64 as its bit pattern (`abi.scalar_argument`)
        if isinstance(full, float) and full != full:
            assert fast != fast
        else:
            assert fast == full and type(fast) is type(full), (dt, value)


def test_tensor_checks_are_the_launchers_and_the_loaded_kernels() -> None:
    from intent.runtime.checks import check_tensor, common_device

    def names(t: torch.Tensor) -> str | None:
        found = DType.from_torch(t.dtype)
        return None if found is None else str(found)

    x = torch.zeros(4, 6)
    assert check_tensor("x", "f32[M, N]", "f32", 2, x, names) is x
    for value, dtype, rank, message in [
        (np.zeros(3), "f32", 1, "parameter x: expected a tensor (T), got numpy.ndarray"),
        (x, "f16", 2, "parameter x: expected f16, got torch.float32"),
        (x, "f32", 1, "parameter x: expected rank 1 (T), got a tensor of shape (4, 6)"),
        (x, "i4", 2, "parameter x: expected i4 values packed two per byte in an int8 or uint8 tensor of rank 2 "
                     "(the last axis holds N // 2 bytes), got a tensor of torch.float32 and shape (4, 6)"),
        (x.to_sparse(), "f32", 2, "parameter x: expected a dense (strided) tensor (T), got a tensor with layout "
                                  "torch.sparse_coo"),
    ]:
        with pytest.raises(LaunchError) as info:
            check_tensor("x", "T", dtype, rank, value, names)
        assert str(info.value) == message
    assert check_tensor("x", "T", "i4", 2, torch.zeros(4, 3, dtype=torch.uint8), names).dtype == torch.uint8
    assert common_device({}) == torch.device("cpu") and common_device({"x": x}) == x.device
    with pytest.raises(LaunchError, match="parameter y: tensors on meta cannot be launched"):
        common_device({"y": torch.empty(1, device="meta")})
