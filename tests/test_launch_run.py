"""Launching hand-written emitted kernels on CPU tensors (Triton's interpreter)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from triton.runtime.interpreter import InterpretedFunction

import emit_triton
from emit_triton import targets
from emit_triton.launcher import plan_launch
from kir import DType, Role
from kir.dims import DConst, DSym, PCmp
from tests import launch_fixtures as lf
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.samples import segment_sum, vector_add


@pytest.fixture(autouse=True)
def fixtures(monkeypatch, isolated_cache):  # noqa: F811
    lf.install(monkeypatch, {
        vector_add(): lf.vadd_emitted(), lf.add2d_kernel(): lf.add2d_emitted(), lf.axpy_kernel(): lf.axpy_emitted(),
        lf.sum_diff_kernel(): lf.sum_diff_emitted(), segment_sum(): lf.segment_sum_emitted(),
        lf.workspace_kernel(): lf.workspace_emitted(), lf.total_kernel(): lf.total_emitted(),
        empty_kernel(): lf.vadd_emitted(), lf.first_kernel(): lf.first_emitted(),
        bf16_add(): lf.vadd_via_f32_emitted()})


def bf16_add():
    t = lf.ref(DType.bf16, ("N",))
    return lf.signature_kernel("add_bf16", [("x", t), ("y", t), ("out", lf.ref(DType.bf16, ("N",), Role.OUT))],
                               ("N",))


def empty_kernel():
    """vector_add's signature where N may be 0."""
    req = (PCmp(">=", DSym("N"), DConst(0)),)
    return lf.signature_kernel("add0", [("x", lf.ref(DType.f32, ("N",))), ("y", lf.ref(DType.f32, ("N",))),
                                        ("out", lf.ref(DType.f32, ("N",), Role.OUT))], ("N",), requires=req)


class LaunchRecorder:
    """Counts calls into Triton's launch (`run` of the interpreted jit function) and their arguments."""

    def __init__(self, monkeypatch, execute: bool = True) -> None:
        self.calls: list[tuple[tuple, dict]] = []
        original = InterpretedFunction.run
        recorder = self

        def run(self, *args, grid, warmup, **kwargs):
            recorder.calls.append(((grid, *args), kwargs))
            return original(self, *args, grid=grid, warmup=warmup, **kwargs) if execute else None

        monkeypatch.setattr(InterpretedFunction, "run", run)


def rand(*shape, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------- results


def test_vector_add_into_a_given_output():
    x, y, out = rand(1000), rand(1000, seed=1), torch.zeros(1000)
    assert emit_triton.launch(vector_add(), {"x": x, "y": y, "out": out}) is None
    assert torch.equal(out, x + y)


def test_non_contiguous_inputs():
    x, y = rand(2 * 300)[::2], rand(3 * 300, seed=1)[1::3]
    out = emit_triton.launch(vector_add(), {"x": x, "y": y})
    assert torch.equal(out, x + y)


def test_broadcast_input():
    x, y = torch.tensor([2.5]).expand(300), rand(300, seed=1)
    assert x.stride() == (0,)
    assert torch.equal(emit_triton.launch(vector_add(), {"x": x, "y": y}), x + y)


def test_non_contiguous_output():
    x, y, base = rand(200), rand(200, seed=1), torch.zeros(400)
    emit_triton.launch(vector_add(), {"x": x, "y": y, "out": base[1::2]})
    assert torch.equal(base[1::2], x + y)
    assert torch.equal(base[::2], torch.zeros(200))


def test_transposed_and_broadcast_2d_inputs():
    x = rand(7, 5).t()  # (5, 7) with strides (1, 5)
    y = rand(7, seed=1).expand(5, 7)  # strides (0, 1)
    out = emit_triton.launch(lf.add2d_kernel(), {"x": x, "y": y})
    assert out.shape == (5, 7) and out.is_contiguous()
    assert torch.equal(out, x + y)


def test_transposed_output():
    x, y = rand(4, 6), rand(4, 6, seed=1)
    out = torch.zeros(6, 4).t()
    emit_triton.launch(lf.add2d_kernel(), {"x": x, "y": y, "out": out})
    assert torch.equal(out, x + y)


def test_numpy_arrays_are_shared():
    x, y, out = np.arange(5, dtype=np.float32), np.ones(5, np.float32), np.zeros(5, np.float32)
    emit_triton.launch(vector_add(), {"x": x, "y": y, "out": out})
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_the_same_tensor_for_two_inputs():
    x = rand(100)
    assert torch.equal(emit_triton.launch(vector_add(), {"x": x, "y": x}), x + x)


def test_runtime_scalar():
    x, y = rand(50), rand(50, seed=1)
    out = emit_triton.launch(lf.axpy_kernel(), {"a": 0.5, "x": x, "y": y})
    assert torch.allclose(out, 0.5 * x + y)
    out = emit_triton.launch(lf.axpy_kernel(), {"a": 3, "x": x, "y": y})
    assert torch.allclose(out, 3 * x + y)


def test_launch_expressions_read_integer_scalars():
    x, out = rand(6), torch.zeros(6)
    emit_triton.launch(lf.first_kernel(), {"count": 4, "x": x, "out": out})
    assert torch.equal(out[:4], x[:4]) and torch.equal(out[4:], torch.zeros(2))


def test_bf16_tensors():
    x, y = rand(40).to(torch.bfloat16), rand(40, seed=1).to(torch.bfloat16)
    out = emit_triton.launch(bf16_add(), {"x": x, "y": y})
    # Triton's interpreter rounds f32 -> bf16 toward zero (the GPU rounds to nearest): one bf16 ulp.
    assert out.dtype == torch.bfloat16
    assert torch.allclose(out.float(), x.float() + y.float(), rtol=2**-7, atol=0)


def test_bf16_numpy_arrays_are_converted_and_written_back():
    x, y = np.arange(8, dtype=np.float32), np.full(8, 0.5, np.float32)
    out = np.zeros(8, np.float32)
    emit_triton.launch(bf16_add(), {"x": x, "y": y, "out": out})
    assert out.tolist() == (x + y).tolist()


def test_omitted_outputs_are_returned_in_parameter_order():
    x, y = rand(10), rand(10, seed=1)
    s, d = emit_triton.launch(lf.sum_diff_kernel(), {"x": x, "y": y})
    assert torch.equal(s, x + y) and torch.equal(d, x - y)


def test_given_and_omitted_outputs_mixed():
    x, y, s = rand(10), rand(10, seed=1), torch.zeros(10)
    d = emit_triton.launch(lf.sum_diff_kernel(), {"x": x, "y": y, "s": s})
    assert torch.equal(s, x + y) and torch.equal(d, x - y)


def test_symbol_solved_from_an_affine_extent():
    values, offsets = rand(20), torch.tensor([0, 3, 3, 11, 20])
    out = emit_triton.launch(segment_sum(), {"values": values, "offsets": offsets})
    want = torch.stack([values[offsets[i]:offsets[i + 1]].sum() for i in range(4)])
    assert out.shape == (4,)
    assert torch.allclose(out, want)


def test_workspaces_with_a_given_output():
    out = torch.zeros(5, dtype=torch.int64)
    emit_triton.launch(lf.workspace_kernel(), {"out": out})
    assert out.tolist() == [7, 8, 9, 10, 11]


def test_library_functions_run_interpreted_and_leave_no_trace():
    x = rand(300)
    before = os.environ.get("TRITON_INTERPRET")
    out = emit_triton.launch(lf.total_kernel(), {"x": x})
    assert torch.allclose(out, x.sum().reshape(1), atol=1e-4)
    assert os.environ.get("TRITON_INTERPRET") == before
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    assert isinstance(tl.sum, JITFunction)
    with pytest.raises(RuntimeError, match="outside of the scope of a kernel"):
        tl.sum(x)


# ---------------------------------------------------------------------------------------------- one launch


def test_exactly_one_launch_per_call(monkeypatch):
    recorder = LaunchRecorder(monkeypatch)
    x, y = rand(1000), rand(1000, seed=1)
    emit_triton.launch(vector_add(), {"x": x, "y": y})
    assert len(recorder.calls) == 1
    emit_triton.launch(lf.sum_diff_kernel(), {"x": x, "y": y})
    assert len(recorder.calls) == 2
    (grid, *_), kwargs = recorder.calls[1]
    assert grid == (8,)  # cdiv(1000, 128) programs in one launch
    assert kwargs["BLOCK"] == 128 and kwargs["INDEX_64"] is False


def test_empty_program_space_launches_nothing(monkeypatch):
    recorder = LaunchRecorder(monkeypatch)
    out = torch.full((0,), 5.0)
    assert emit_triton.launch(empty_kernel(), {"x": torch.zeros(0), "y": torch.zeros(0), "out": out}) is None
    allocated = emit_triton.launch(empty_kernel(), {"x": torch.zeros(0), "y": torch.zeros(0)})
    assert recorder.calls == []
    assert allocated.shape == (0,)


def test_empty_segment_leaves_outputs_untouched(monkeypatch):
    k = lf.signature_kernel("accumulate", [("x", lf.ref(DType.f32, ("N",))),
                                           ("acc", lf.ref(DType.f32, ("M",), Role.INOUT))], ("N", "M"),
                            requires=(PCmp(">=", DSym("N"), DConst(0)),))
    lf.install(monkeypatch, {k: lf.accumulate_emitted()})
    acc = torch.arange(4.0)
    emit_triton.launch(k, {"x": torch.ones(5), "acc": acc})
    assert acc.tolist() == [5.0, 1.0, 2.0, 3.0]
    recorder = LaunchRecorder(monkeypatch)
    assert emit_triton.launch(k, {"x": torch.zeros(0), "acc": acc}) is None
    assert recorder.calls == []
    assert acc.tolist() == [5.0, 1.0, 2.0, 3.0]


# ---------------------------------------------------------------------------------------------- index width


def test_32_bit_indexing_for_small_sizes():
    plan = plan_launch(vector_add(), {"x": rand(10), "y": rand(10)}, materialise=False)
    assert plan.keywords["INDEX_64"] is False
    assert plan.index_width.reason.startswith("every offset and launch value fits in 32 bits")


def test_64_bit_indexing_detected_from_sizes_alone(monkeypatch):
    recorder = LaunchRecorder(monkeypatch, execute=False)
    n = 2**31 + 5
    x = torch.zeros(1).expand(n)  # no memory beyond one element
    out = torch.zeros(1)
    assert emit_triton.launch(lf.total_kernel(), {"x": x, "out": out}) is None
    assert len(recorder.calls) == 1
    (grid, *args), kwargs = recorder.calls[0]
    assert kwargs["INDEX_64"] is True
    assert args[-1] == n  # N
    width = emit_triton.index_width_for(lf.total_kernel(), {"x": x, "out": out})
    assert width.index64 and width.reason == f"parameter x has extent {n} (shape ({n},)), which does not fit in 32 bits"


def test_64_bit_indexing_runs_correctly():
    x = rand(300)
    out = torch.zeros(1)
    monkey = {"x": x, "out": out}
    emit_triton.launch(lf.total_kernel(), monkey)
    assert torch.allclose(out, x.sum().reshape(1), atol=1e-4)


# ---------------------------------------------------------------------------------------------- targets


def test_cpu_tensors_run_under_the_interpreter():
    assert targets.target_for(torch.device("cpu")).mode is targets.Mode.INTERPRETED


def test_cuda_tensors_compile_for_the_device(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    target = targets.target_for(torch.device("cuda", 1))
    assert target.mode is targets.Mode.COMPILED and target.name == "cuda:1"


def test_user_requested_interpreter_applies_to_cuda_tensors(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert targets.target_for(torch.device("cuda", 0)).mode is targets.Mode.INTERPRETED


def test_interpreted_and_compiled_functions_from_one_source(isolated_cache):  # noqa: F811
    from triton.runtime.jit import JITFunction

    x, y = rand(10), rand(10)
    plan = plan_launch(vector_add(), {"x": x, "y": y}, materialise=False)
    interpreted = plan.function(targets.Mode.INTERPRETED)
    compiled = plan.function(targets.Mode.COMPILED)
    assert isinstance(interpreted, InterpretedFunction) and isinstance(compiled, JITFunction)
    assert interpreted.fn.__code__.co_filename == compiled.fn.__code__.co_filename == \
        str(isolated_cache / plan.key / "kernel.py")
    assert plan.function(targets.Mode.COMPILED) is compiled
