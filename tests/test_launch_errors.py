"""Every argument the launcher refuses gets a LaunchError naming the parameter and the expectation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import emit_triton
from kir import DType, LaunchError, Role
from kir.dims import DConst, DSym, PCmp, dim_bin
from tests import launch_fixtures as lf
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.samples import segment_sum, softmax, vector_add


@pytest.fixture(autouse=True)
def fixtures(monkeypatch, isolated_cache):  # noqa: F811
    lf.install(monkeypatch, {vector_add(): lf.vadd_emitted(), lf.axpy_kernel(): lf.axpy_emitted(),
                             segment_sum(): lf.segment_sum_emitted(), lf.add2d_kernel(): lf.add2d_emitted()})


def launch_error(kernel, args) -> str:
    with pytest.raises(LaunchError) as info:
        emit_triton.launch(kernel, args)
    return str(info.value)


def vec(n: int, dtype=torch.float32) -> torch.Tensor:
    return torch.arange(n, dtype=dtype)


# ---------------------------------------------------------------------------------------------- names


def test_extra_argument():
    msg = launch_error(vector_add(), {"x": vec(4), "y": vec(4), "out": vec(4), "z": vec(4)})
    assert msg == "unexpected argument z: kernel add has no parameter z (parameters: x, y, out)"


def test_missing_input_argument():
    assert launch_error(vector_add(), {"x": vec(4), "out": vec(4)}) == \
        "missing argument y: expected a tensor (in f32[N])"


def test_missing_scalar_argument():
    assert launch_error(lf.axpy_kernel(), {"x": vec(4), "y": vec(4)}) == \
        "missing argument a: expected a f32 scalar"


def test_omitted_inout_is_missing():
    k = lf.signature_kernel("acc", [("x", lf.ref(DType.f32, ("N",))), ("acc", lf.ref(DType.f32, ("N",), Role.INOUT))],
                            ("N",))
    assert launch_error(k, {"x": vec(3)}) == "missing argument acc: expected a tensor (inout f32[N])"


def test_arguments_must_be_a_mapping():
    assert launch_error(vector_add(), [vec(3), vec(3)]) == \
        "kernel add: arguments must be a mapping from parameter name to value, got list"


# ---------------------------------------------------------------------------------------------- tensors


def test_none_for_a_tensor():
    assert launch_error(vector_add(), {"x": None, "y": vec(4)}) == \
        "parameter x: expected a tensor (in f32[N]), got None"


def test_not_a_tensor():
    assert launch_error(vector_add(), {"x": [1.0, 2.0], "y": vec(2)}) == \
        "parameter x: expected a tensor (in f32[N]), got list"


def test_dtype_mismatch():
    assert launch_error(vector_add(), {"x": vec(4, torch.float16), "y": vec(4)}) == \
        "parameter x: expected f32, got torch.float16"


def test_dtype_mismatch_of_numpy_array():
    assert launch_error(vector_add(), {"x": np.zeros(4, np.float64), "y": vec(4)}) == \
        "parameter x: expected f32, got torch.float64"


def test_unusable_numpy_array():
    assert launch_error(vector_add(), {"x": np.zeros(8, np.float32)[::-1], "y": vec(8)}).startswith(
        "parameter x: cannot use this NumPy array as in f32[N]: ")


def test_rank_mismatch():
    assert launch_error(vector_add(), {"x": torch.zeros(2, 3), "y": vec(6)}) == \
        "parameter x: expected rank 1 (in f32[N]), got a tensor of shape (2, 3)"


def test_shape_symbol_mismatch():
    assert launch_error(vector_add(), {"x": vec(5), "y": vec(7)}) == \
        "parameter y: axis 0 has extent 7 but N = 5 from parameter x"


def test_shape_symbol_mismatch_on_output():
    assert launch_error(vector_add(), {"x": vec(5), "y": vec(5), "out": vec(6)}) == \
        "parameter out: axis 0 has extent 6 but N = 5 from parameter x"


def test_constant_extent_mismatch():
    k = lf.signature_kernel("rgb", [("x", lf.ref(DType.f32, ("N", 3)))], ("N",))
    assert launch_error(k, {"x": torch.zeros(2, 4)}) == "parameter x: axis 1 has extent 4 but the kernel expects 3"


def test_expression_extent_mismatch():
    # S is bound by `out` (3 segments); `offsets` must then have S + 1 = 4 entries.
    args = {"values": vec(10), "offsets": torch.tensor([0, 2, 4, 6, 10]), "out": vec(3)}
    assert launch_error(segment_sum(), args) == \
        "parameter offsets: axis 0 has extent 5 but S + 1 = 4 (S = 3 from parameter out)"


def test_expression_that_does_not_determine_its_symbol():
    k = lf.signature_kernel("halves", [("x", lf.ref(DType.f32, (dim_bin("//", DSym("N"), 2),)))], ("N",))
    assert launch_error(k, {"x": vec(3)}) == (
        "parameter x: axis 0 has extent 3 = N // 2, which does not determine N; "
        "pass a parameter whose shape gives it directly")


def test_symbol_bound_by_no_argument():
    k = lf.signature_kernel("free", [("x", lf.ref(DType.f32, ("N",)))], ("N", "K"))
    assert launch_error(k, {"x": vec(3)}) == "shape symbol K of kernel free is not bound by any argument"


def test_omitted_output_whose_shape_is_not_inferable():
    k = lf.signature_kernel("outer", [("a", lf.ref(DType.f32, ("M",))), ("c", lf.ref(DType.f32, ("M", "N"), Role.OUT))],
                            ("M", "N"))
    assert launch_error(k, {"a": vec(3)}) == \
        "out parameter c was omitted and its shape [M, N] cannot be inferred: N is not bound by any input"


def test_omitted_output_with_a_negative_extent():
    k = lf.signature_kernel("shrink", [("a", lf.ref(DType.f32, ("M",))),
                                       ("c", lf.ref(DType.f32, (dim_bin("-", DSym("M"), 2),), Role.OUT))], ("M",))
    assert launch_error(k, {"a": vec(1)}) == \
        "out parameter c was omitted and its shape [M - 2] evaluates to (-1,), which has a negative extent"


# ---------------------------------------------------------------------------------------------- refinements


def test_refinement_failure():
    assert launch_error(softmax(), {"x": torch.zeros(1, 70000)}) == \
        "requires N <= 65536 failed: N = 70000 (N from parameter x)"


def test_default_lower_bound_of_a_symbol():
    assert launch_error(vector_add(), {"x": vec(0), "y": vec(0)}) == \
        "N >= 1 failed: N = 0 (N from parameter x; a shape symbol is >= 1 unless the kernel states N >= 0)"


def test_derived_symbol_below_its_lower_bound():
    args = {"values": vec(1), "offsets": torch.zeros(0, dtype=torch.int64)}
    assert launch_error(segment_sum(), args) == \
        "S >= 1 failed: S = -1 (S from parameter offsets; a shape symbol is >= 1 unless the kernel states S >= 0)"


def test_refinement_over_two_symbols():
    req = (PCmp("<=", DSym("M"), DSym("N")),)
    k = lf.signature_kernel("tri", [("x", lf.ref(DType.f32, ("M", "N")))], ("M", "N"), requires=req)
    assert launch_error(k, {"x": torch.zeros(3, 2)}) == \
        "requires M <= N failed: M = 3, N = 2 (M from parameter x; N from parameter x)"


# ---------------------------------------------------------------------------------------------- devices


def test_device_mismatch():
    assert launch_error(vector_add(), {"x": vec(4), "y": torch.zeros(4, device="meta")}) == \
        "parameter y: on meta but parameter x is on cpu; all tensors of one launch must be on one device"


def test_unsupported_device():
    meta = torch.zeros(4, device="meta")
    assert launch_error(vector_add(), {"x": meta, "y": meta.clone()}) == \
        "parameter x: tensors on meta cannot be launched; expected cpu tensors (Triton interpreter) or cuda tensors"


# ---------------------------------------------------------------------------------------------- memory


def test_output_aliasing_an_input():
    x = vec(8)
    assert launch_error(vector_add(), {"x": x, "y": vec(8), "out": x}) == (
        "parameter out: its memory overlaps parameter x; memory the kernel writes may be reached through one "
        "parameter only (pass the tensor once, as an inout parameter, to read and write it)")


def test_output_partially_overlapping_an_input():
    base = vec(12)
    msg = launch_error(vector_add(), {"x": base[:8], "y": vec(8), "out": base[4:]})
    assert msg.startswith("parameter out: its memory overlaps parameter x;")


def test_output_overlapping_a_reinterpreted_input():
    base = vec(8)
    msg = launch_error(vector_add(), {"x": base, "y": vec(8), "out": base.view(torch.int32).view(torch.float32)})
    assert msg.startswith("parameter out: its memory overlaps parameter x;")


def test_broadcast_output():
    out = torch.zeros(1).expand(6)
    assert launch_error(vector_add(), {"x": vec(6), "y": vec(6), "out": out}) == (
        "parameter out: axis 0 has stride 0 (a broadcast view); the elements of a parameter that the kernel "
        "writes must not share memory")


def test_self_overlapping_output():
    out = torch.zeros(10).as_strided((3, 4), (2, 1))
    msg = launch_error(lf.add2d_kernel(), {"x": torch.zeros(3, 4), "y": torch.zeros(3, 4), "out": out})
    assert msg == ("parameter out: axis 0 has stride 2, which revisits elements of the faster axes; the elements "
                   "of a parameter that the kernel writes must not share memory")


def test_disjoint_views_of_one_storage_are_accepted():
    base = vec(16)
    out = emit_triton.launch(vector_add(), {"x": base[:8], "y": base[8:]})
    assert torch.equal(out, base[:8] + base[8:])


# ---------------------------------------------------------------------------------------------- scalars


@pytest.mark.parametrize("value, expected", [
    (None, "parameter a: expected a f32 scalar, got None"),
    ("2", "parameter a: expected a float or int (f32 scalar), got str"),
    (True, "parameter a: expected a float or int (f32 scalar), got bool"),
    (torch.tensor(2.0), "parameter a: expected a float or int (f32 scalar), got torch.Tensor"),
    (1e300, "parameter a: 1e+300 does not fit f32 (largest finite value 3.40282e+38)"),
])
def test_float_scalar(value, expected):
    assert launch_error(lf.axpy_kernel(), {"a": value, "x": vec(4), "y": vec(4)}) == expected


def _int_kernel(dtype: DType):
    return lf.signature_kernel("shift", [("k", dtype), ("x", lf.ref(DType.f32, ("N",)))], ("N",))


@pytest.mark.parametrize("dtype, value, expected", [
    (DType.i32, 2.0, "parameter k: expected an int (i32 scalar), got float"),
    (DType.i32, False, "parameter k: expected an int (i32 scalar), got bool"),
    (DType.i8, 300, "parameter k: 300 does not fit i8 (range -128..127)"),
    (DType.u32, -1, "parameter k: -1 does not fit u32 (range 0..4294967295)"),
    (DType.pred, 1, "parameter k: expected a bool (pred scalar), got int"),
    (DType.i64, np.float32(1), "parameter k: expected an int (i64 scalar), got numpy.float32"),
])
def test_integer_and_pred_scalars(dtype, value, expected):
    assert launch_error(_int_kernel(dtype), {"k": value, "x": vec(4)}) == expected


def test_accepted_scalar_forms():
    from emit_triton.arguments import bind_arguments

    assert bind_arguments(_int_kernel(DType.i64), {"k": np.int16(-5), "x": vec(2)}).scalars == {"k": -5}
    assert bind_arguments(_int_kernel(DType.pred), {"k": np.bool_(True), "x": vec(2)}).scalars == {"k": True}
    assert bind_arguments(lf.axpy_kernel(), {"a": 3, "x": vec(2), "y": vec(2)}).scalars == {"a": 3.0}
    assert bind_arguments(lf.axpy_kernel(), {"a": float("inf"), "x": vec(2), "y": vec(2)}).scalars["a"] == \
        float("inf")


# ---------------------------------------------------------------------------------------------- AOT arguments


def test_ptx_arch_must_be_supported():
    with pytest.raises(LaunchError) as info:
        emit_triton.ptx(vector_add(), {"x": vec(4), "y": vec(4)}, arch=75)
    assert str(info.value) == "parameter arch: expected one of 80, 90, got 75"


def test_errors_come_before_emission(monkeypatch):
    import emit_triton.compile as compile_mod

    def refuse(kernel):
        raise AssertionError("emission must not be reached")

    monkeypatch.setattr(compile_mod, "emitted_for", refuse)
    assert launch_error(vector_add(), {"x": vec(4), "y": vec(5)}).startswith("parameter y:")


def test_constant_dims_need_no_binding():
    k = lf.signature_kernel("fixed", [("x", lf.ref(DType.f32, (DConst(2), "N")))], ("N",))
    from emit_triton.arguments import bind_arguments

    assert bind_arguments(k, {"x": torch.zeros(2, 5)}).env == {"N": 5}
