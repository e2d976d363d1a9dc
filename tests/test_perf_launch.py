"""Cached launch plans: the same results and the same errors as the full path, and no file system on the way."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

import emit_triton
from emit_triton import fast_launch, launcher, targets
from kir import LaunchError
from tests import launch_fixtures as lf
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.samples import vector_add


@pytest.fixture(autouse=True)
def fixtures(monkeypatch, isolated_cache):  # noqa: F811
    lf.install(monkeypatch, {vector_add(): lf.vadd_emitted(), lf.axpy_kernel(): lf.axpy_emitted(),
                             lf.add2d_kernel(): lf.add2d_emitted(), lf.workspace_kernel(): lf.workspace_emitted()})
    fast_launch.clear()
    yield
    fast_launch.clear()


def vec(n: int, dtype=torch.float32) -> torch.Tensor:
    return torch.arange(n, dtype=dtype)


def planned(kernel, args) -> bool:
    """Whether a cached plan covers `args` (checked without launching: Triton is stubbed)."""
    calls = []
    original = targets.run
    targets.run = lambda *a: calls.append(a)
    try:
        found = fast_launch.try_launch(kernel, args)
    finally:
        targets.run = original
    return found is not fast_launch.NOT_PLANNED


def full_path_error(kernel, args) -> str:
    with pytest.raises(LaunchError) as info:
        launcher.plan_launch(kernel, args, materialise=False)
    return str(info.value)


def cached_launch_error(kernel, good, bad) -> str:
    """Launch `good` (making the plan), then `bad`: the error must be the full path's, word for word."""
    emit_triton.launch(kernel, good)
    assert planned(kernel, good)
    assert not planned(kernel, bad)
    with pytest.raises(LaunchError) as info:
        emit_triton.launch(kernel, bad)
    assert str(info.value) == full_path_error(kernel, bad)
    return str(info.value)


# ---------------------------------------------------------------------------------------------- results


def test_second_launch_takes_the_plan_and_gives_the_same_result(monkeypatch):
    k = vector_add()
    x, y = vec(40), vec(40) * 3
    first = emit_triton.launch(k, {"x": x, "y": y})

    def refuse(*args, **kwargs):
        raise AssertionError("the full path must not run for a planned launch")

    monkeypatch.setattr(launcher, "plan_launch", refuse)
    second = emit_triton.launch(k, {"x": x, "y": y})
    assert torch.equal(first, x + y) and torch.equal(second, x + y)
    assert second is not first  # omitted outputs are allocated afresh on every call


def test_given_output_and_scalars_on_the_plan():
    k = lf.axpy_kernel()
    x, y, out = vec(33), vec(33) + 1, torch.zeros(33)
    emit_triton.launch(k, {"a": 2.0, "x": x, "y": y, "out": out})
    out2 = torch.zeros(33)
    assert planned(k, {"a": 0.5, "x": x, "y": y, "out": out2})
    emit_triton.launch(k, {"a": 0.5, "x": x, "y": y, "out": out2})
    assert torch.equal(out2, 0.5 * x + y)


def test_int_for_a_float_scalar_is_converted_as_on_the_full_path():
    k = lf.axpy_kernel()
    x, y = vec(8), vec(8)
    args = {"a": 3, "x": x, "y": y, "out": torch.zeros(8)}
    emit_triton.launch(k, args)
    out = torch.zeros(8)
    emit_triton.launch(k, dict(args, out=out))
    assert torch.equal(out, 3.0 * x + y)


def test_new_geometry_takes_the_full_path_then_is_planned():
    k = vector_add()
    emit_triton.launch(k, {"x": vec(8), "y": vec(8)})
    assert not planned(k, {"x": vec(9), "y": vec(9)})
    assert torch.equal(emit_triton.launch(k, {"x": vec(9), "y": vec(9)}), vec(9) * 2)
    assert planned(k, {"x": vec(9), "y": vec(9)})
    assert planned(k, {"x": vec(8), "y": vec(8)})


def test_strided_views_are_a_different_geometry():
    k = vector_add()
    emit_triton.launch(k, {"x": vec(8), "y": vec(8)})
    x = vec(16)[::2]
    assert not planned(k, {"x": x, "y": vec(8)})
    assert torch.equal(emit_triton.launch(k, {"x": x, "y": vec(8)}), x + vec(8))


def test_workspaces_are_allocated_on_every_call():
    k = lf.workspace_kernel()
    first = torch.zeros(5, dtype=torch.int64)
    emit_triton.launch(k, {"out": first})
    second = torch.zeros(5, dtype=torch.int64)
    assert planned(k, {"out": second})
    emit_triton.launch(k, {"out": second})
    assert torch.equal(second, torch.arange(5) + 7) and torch.equal(first, second)


def test_numpy_arguments_always_take_the_full_path():
    k = vector_add()
    x, y = np.arange(6, dtype=np.float32), np.ones(6, np.float32)
    emit_triton.launch(k, {"x": x, "y": y})
    assert not planned(k, {"x": x, "y": y})
    assert np.array_equal(emit_triton.launch(k, {"x": x, "y": y}).numpy(), x + y)


def test_plans_go_stale_when_loaded_modules_are_dropped():
    k = vector_add()
    args = {"x": vec(8), "y": vec(8)}
    emit_triton.launch(k, args)
    assert planned(k, args)
    targets.clear_loaded()
    assert not planned(k, args)
    emit_triton.launch(k, args)
    assert planned(k, args)


def test_plans_go_stale_when_emission_is_replaced(monkeypatch):
    k = vector_add()
    args = {"x": vec(8), "y": vec(8)}
    emit_triton.launch(k, args)
    lf.install(monkeypatch, {vector_add(): lf.vadd_emitted()})
    assert not planned(k, args)


# ---------------------------------------------------------------------------------------------- errors


def test_dtype_error_on_a_planned_signature():
    good = {"x": vec(8), "y": vec(8)}
    assert cached_launch_error(vector_add(), good, {"x": vec(8, torch.float16), "y": vec(8)}) == \
        "parameter x: expected f32, got torch.float16"


def test_rank_error_on_a_planned_signature():
    good = {"x": vec(6), "y": vec(6)}
    assert cached_launch_error(vector_add(), good, {"x": torch.zeros(2, 3), "y": vec(6)}) == \
        "parameter x: expected rank 1 (in f32[N]), got a tensor of shape (2, 3)"


def test_shape_error_on_a_planned_signature():
    good = {"x": vec(5), "y": vec(5)}
    assert cached_launch_error(vector_add(), good, {"x": vec(5), "y": vec(7)}) == \
        "parameter y: axis 0 has extent 7 but N = 5 from parameter x"


def test_refinement_error_on_a_planned_signature():
    good = {"x": vec(5), "y": vec(5)}
    assert cached_launch_error(vector_add(), good, {"x": vec(0), "y": vec(0)}) == \
        "N >= 1 failed: N = 0 (N from parameter x; a shape symbol is >= 1 unless the kernel states N >= 0)"


def test_alias_error_on_a_planned_signature():
    x, y, out = vec(8), vec(8), torch.zeros(8)
    msg = cached_launch_error(vector_add(), {"x": x, "y": y, "out": out}, {"x": x, "y": y, "out": x})
    assert msg.startswith("parameter out: its memory overlaps parameter x;")


def test_partial_overlap_error_on_a_planned_geometry():
    base = vec(12)
    good = {"x": vec(8), "y": vec(8), "out": torch.zeros(8)}
    msg = cached_launch_error(vector_add(), good, {"x": base[:8], "y": vec(8), "out": base[4:]})
    assert msg.startswith("parameter out: its memory overlaps parameter x;")


def test_disjoint_views_of_one_storage_stay_on_the_plan():
    base = vec(16)
    k = vector_add()
    emit_triton.launch(k, {"x": vec(8), "y": vec(8)})
    assert planned(k, {"x": base[:8], "y": base[8:]})
    assert torch.equal(emit_triton.launch(k, {"x": base[:8], "y": base[8:]}), base[:8] + base[8:])


def test_broadcast_output_error_on_a_planned_signature():
    good = {"x": vec(6), "y": vec(6), "out": torch.zeros(6)}
    assert cached_launch_error(vector_add(), good, {"x": vec(6), "y": vec(6), "out": torch.zeros(1).expand(6)}) == (
        "parameter out: axis 0 has stride 0 (a broadcast view); the elements of a parameter that the kernel "
        "writes must not share memory")


def test_device_error_on_a_planned_signature():
    good = {"x": vec(4), "y": vec(4)}
    assert cached_launch_error(vector_add(), good, {"x": vec(4), "y": torch.zeros(4, device="meta")}) == \
        "parameter y: on meta but parameter x is on cpu; all tensors of one launch must be on one device"


def test_layout_error_on_a_planned_signature():
    good = {"x": vec(4), "y": vec(4)}
    msg = cached_launch_error(vector_add(), good, {"x": vec(4), "y": vec(4).to_sparse()})
    assert msg == ("parameter y: expected a dense (strided) tensor (in f32[N]), got a tensor with layout "
                   "torch.sparse_coo")


def test_missing_argument_on_a_planned_signature():
    good = {"x": vec(4), "y": vec(4)}
    assert cached_launch_error(vector_add(), good, {"x": vec(4)}) == \
        "missing argument y: expected a tensor (in f32[N])"


def test_extra_argument_on_a_planned_signature():
    good = {"x": vec(4), "y": vec(4)}
    assert cached_launch_error(vector_add(), good, {"x": vec(4), "y": vec(4), "z": vec(4)}) == \
        "unexpected argument z: kernel add has no parameter z (parameters: x, y, out)"


def test_arguments_in_another_order_are_another_signature():
    k = vector_add()
    emit_triton.launch(k, {"x": vec(4), "y": vec(4)})
    assert not planned(k, {"y": vec(4), "x": vec(4)})


@pytest.mark.parametrize("value, expected", [
    (None, "parameter a: expected a f32 scalar, got None"),
    ("2", "parameter a: expected a float or int (f32 scalar), got str"),
    (True, "parameter a: expected a float or int (f32 scalar), got bool"),
    (torch.tensor(2.0), "parameter a: expected a float or int (f32 scalar), got torch.Tensor"),
    (1e300, "parameter a: 1e+300 does not fit f32 (largest finite value 3.40282e+38)"),
])
def test_scalar_errors_on_a_planned_signature(value, expected):
    good = {"a": 2.0, "x": vec(4), "y": vec(4), "out": torch.zeros(4)}
    bad = dict(good, a=value, out=torch.zeros(4))
    assert cached_launch_error(lf.axpy_kernel(), good, bad) == expected


def test_a_non_dict_mapping_takes_the_full_path():
    from types import MappingProxyType

    k = vector_add()
    args = {"x": vec(4), "y": vec(4)}
    emit_triton.launch(k, args)
    assert not planned(k, MappingProxyType(args))
    assert torch.equal(emit_triton.launch(k, MappingProxyType(args)), vec(4) * 2)


# ---------------------------------------------------------------------------------------------- no file system


def test_a_planned_launch_touches_no_file_system(monkeypatch):
    k = vector_add()
    args = {"x": vec(8), "y": vec(8), "out": torch.zeros(8)}
    emit_triton.launch(k, args)
    launched = []

    def forbidden(*a, **kw):
        raise AssertionError("the file system was consulted on a planned launch")

    monkeypatch.setattr(targets, "run", lambda fn, target, grid, positional, keywords, info=None: launched.append(grid))
    monkeypatch.setattr(os, "stat", forbidden)
    monkeypatch.setattr(Path, "home", forbidden)
    monkeypatch.setattr(Path, "stat", forbidden)
    monkeypatch.setattr(os.environ.__class__, "get", forbidden)
    emit_triton.launch(k, args)
    monkeypatch.undo()
    assert launched == [1]


def test_the_full_path_would_consult_the_cache_root(monkeypatch, tmp_path):
    """The check above can fail: a launch without a plan does read the cache configuration."""
    consulted = []
    original = Path.home
    monkeypatch.delenv("INTENT_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(Path, "home", lambda: consulted.append(1) or original())
    monkeypatch.setattr(targets, "run", lambda *a: None)
    emit_triton.launch(vector_add(), {"x": vec(8), "y": vec(8)})
    assert consulted


# ---------------------------------------------------------------------------------------------- the kernel object

GENERIC = """
    @intent.kernel
    def k(x: T[N], y: T[N], out: Out[T[N]], R: const[int] = 2):
        for n in parallel(N):
            out[n] = x[n] * R + y[n]
"""


def _recording_launch(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(emit_triton, "launch", lambda kernel, args: calls.append((kernel, args)) or "launched")
    return calls


def test_kernel_object_reuses_binding_and_specialisation(tmp_path, monkeypatch):
    from intent.kernel import KernelObject
    from tests.frontend_support import kernel

    calls = _recording_launch(monkeypatch)
    k = kernel(tmp_path, GENERIC)
    x, y = torch.zeros(3), torch.ones(3)
    assert k(x, y, R=5) == "launched"
    first_kernel, first_args = calls[-1]

    def refuse(self, *a, **kw):
        raise AssertionError("a call of a known form must not bind or specialise again")

    monkeypatch.setattr(KernelObject, "specialize", refuse)
    monkeypatch.setattr(KernelObject, "bind_arguments", refuse)
    assert k(x, y, R=5) == "launched"
    assert calls[-1][0] is first_kernel and calls[-1][1] == first_args == {"x": x, "y": y}
    assert list(calls[-1][1]) == ["x", "y"]
    with pytest.raises(AssertionError):  # another const value is another specialisation: the full path
        k(x, y, R=6)
    with pytest.raises(AssertionError):  # another dtype likewise
        k(x.half(), y.half(), R=5)


def test_kernel_object_keyword_and_positional_forms(tmp_path, monkeypatch):
    from tests.frontend_support import kernel

    calls = _recording_launch(monkeypatch)
    k = kernel(tmp_path, GENERIC)
    x, y, out = torch.zeros(3), torch.ones(3), torch.zeros(3)
    for _ in range(2):
        k(x=x, y=y, out=out)
        assert list(calls[-1][1]) == ["x", "y", "out"] and calls[-1][0].consts == (("R", 2),)
        k(x, y=y)
        assert calls[-1][1] == {"x": x, "y": y}
        k(x, y, out, 3)
        assert list(calls[-1][1]) == ["x", "y", "out"] and calls[-1][0].consts == (("R", 3),)


def test_kernel_object_errors_are_unchanged_after_a_cached_call(tmp_path, monkeypatch):
    from tests.frontend_support import kernel

    _recording_launch(monkeypatch)
    k = kernel(tmp_path, GENERIC)
    x = torch.zeros(3)
    k(x, x)
    with pytest.raises(LaunchError) as info:
        k(x, x.half())
    assert str(info.value) == "parameter y: dtype f16, but T = f32 from parameter x"
    with pytest.raises(LaunchError) as info:
        k(x, x.double())
    assert str(info.value) == "parameter y: dtype f64 is not one of T's choices (f16, bf16, f32)"
    with pytest.raises(LaunchError) as info:
        k(x, [1.0, 2.0])
    assert str(info.value) == ("parameter y: expected a tensor of type T[N] (a torch tensor or NumPy array), "
                               "got list")
    with pytest.raises(LaunchError) as info:
        k(x, x, R="3")
    assert str(info.value) == "parameter R: expected a compile-time int (intent.const[int]), got '3'"
