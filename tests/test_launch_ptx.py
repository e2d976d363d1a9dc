"""Ahead-of-time PTX/cubin with the specialisation a real launch gets, and the generated source."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import emit_triton
from emit_triton import targets
from emit_triton.abi import ConstexprArg
from emit_triton.launcher import plan_launch
from kir import IntentError
from tests import launch_fixtures as lf
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.samples import segment_sum, vector_add


def vadd_one_warp():
    """vadd where each of 32 threads owns 4 consecutive elements, so aligned data loads as 128-bit vectors."""
    return dataclasses.replace(lf.vadd_emitted(), num_warps=1, constexprs=(ConstexprArg("BLOCK", lf.Const(128)),))


@pytest.fixture(autouse=True)
def fixtures(monkeypatch, isolated_cache):  # noqa: F811
    lf.install(monkeypatch, {vector_add(): vadd_one_warp(), segment_sum(): lf.segment_sum_emitted()})


def vector_loads(ptx: str) -> list[str]:
    return [line.strip() for line in ptx.splitlines() if "ld.global" in line]


def test_ptx_for_sm90_and_sm80():
    args = {"x": torch.zeros(256), "y": torch.zeros(256)}
    for arch in (90, 80):
        text = emit_triton.ptx(vector_add(), args, arch=arch)
        assert ".entry vadd" in text
        assert f".target sm_{arch}" in text


def test_cubin():
    blob = emit_triton.cubin(vector_add(), {"x": torch.zeros(256), "y": torch.zeros(256)})
    assert blob[:4] == b"\x7fELF"


def test_aligned_contiguous_inputs_get_vector_loads():
    text = emit_triton.ptx(vector_add(), {"x": torch.zeros(256), "y": torch.zeros(256)})
    loads = vector_loads(text)
    assert len(loads) == 2 and all(".v4." in line for line in loads)


def test_misaligned_input_loses_its_vector_loads():
    base = torch.zeros(257)
    text = emit_triton.ptx(vector_add(), {"x": base[1:], "y": torch.zeros(256)})
    loads = vector_loads(text)
    assert sum(".v4." in line for line in loads) == 1  # only y keeps 128-bit loads
    assert len(loads) == 5  # x is read element by element


def test_specialisation_matches_a_real_launch():
    base = torch.zeros(257)
    plan = plan_launch(vector_add(), {"x": base[1:], "y": base[:256].clone(), "out": torch.zeros(256)},
                       materialise=False)
    fn = plan.function(targets.Mode.COMPILED)
    spec = targets.compile_ahead_of_time(plan.emitted, fn, plan.key, 90, plan.positional, plan.keywords,
                                         owner=plan.owner).specialisation
    # x misaligned; y, out aligned; unit strides become constants; N = 256 is divisible by 16.
    assert spec["signature"] == {"x": "*fp32", "x_stride_0": "constexpr", "y": "*fp32", "y_stride_0": "constexpr",
                                 "out": "*fp32", "out_stride_0": "constexpr", "N": "i32", "BLOCK": "constexpr",
                                 "INDEX_64": "constexpr"}
    divisible = sorted(k for k, v in spec["attrs"].items() if v == [["tt.divisibility", 16]])
    assert divisible == ["(2,)", "(4,)", "(6,)"]
    assert spec["constexprs"] == {"(1,)": 1, "(3,)": 1, "(5,)": 1, "(7,)": 128, "(8,)": False}
    assert spec["options"]["enable_fp_fusion"] is False and spec["options"]["num_warps"] == 1


def test_omitted_outputs_are_specialised_as_fresh_allocations():
    plan = plan_launch(vector_add(), {"x": torch.zeros(256), "y": torch.zeros(256)}, materialise=False)
    assert plan.outputs == ()
    text = emit_triton.ptx(vector_add(), {"x": torch.zeros(256), "y": torch.zeros(256)})
    assert sum(".v4." in line for line in text.splitlines() if "st.global" in line) == 1


def test_ptx_is_cached_on_disk(isolated_cache, monkeypatch):  # noqa: F811
    args = {"values": torch.zeros(8), "offsets": torch.tensor([0, 3, 8])}
    first = emit_triton.ptx(segment_sum(), args)
    targets.clear_loaded()

    def no_compile(*a, **k):
        raise AssertionError("the cached PTX should have been used")

    import triton

    monkeypatch.setattr(triton, "compile", no_compile)
    assert emit_triton.ptx(segment_sum(), args) == first
    assert len(list(isolated_cache.glob("*/sm90-*.json"))) == 1


def test_compiling_after_interpreting_library_calls(monkeypatch):
    lf.install(monkeypatch, {lf.total_kernel(): lf.total_emitted()})
    x = torch.arange(10.0)
    assert emit_triton.launch(lf.total_kernel(), {"x": x}).tolist() == [45.0]  # tl.sum, interpreted
    assert ".entry total" in emit_triton.ptx(lf.total_kernel(), {"x": x})  # tl.sum, compiled


HELPER_SOURCE = lf.VADD_SOURCE.replace("@triton.jit\ndef vadd", """@triton.jit
def combine(a, b):
    return a + tl.sum(b, axis=0) * 0 + b


@triton.jit
def vadd""").replace("a + b, mask=mask)", "combine(a, b), mask=mask)")


def test_compiling_after_interpreting_helper_functions(monkeypatch):
    assert "combine(a, b)" in HELPER_SOURCE
    lf.install(monkeypatch, {vector_add(): dataclasses.replace(lf.vadd_emitted(), source=HELPER_SOURCE)})
    x, y = torch.arange(200.0), torch.ones(200)
    assert torch.equal(emit_triton.launch(vector_add(), {"x": x, "y": y}), x + y)
    assert ".entry vadd" in emit_triton.ptx(vector_add(), {"x": x, "y": y})


def test_compile_failure_is_reported(monkeypatch):
    broken = dataclasses.replace(lf.vadd_emitted(), source=lf.VADD_SOURCE.replace("a + b", "a + undefined_name"))
    lf.install(monkeypatch, {vector_add(): broken})
    with pytest.raises(IntentError, match=r"^Triton could not compile vadd for sm_90: "):
        emit_triton.ptx(vector_add(), {"x": torch.zeros(4), "y": torch.zeros(4)})


def test_source_is_the_emitted_module():
    assert emit_triton.source(vector_add(), {"x": torch.zeros(3), "y": torch.zeros(3)}) == lf.VADD_SOURCE


def test_source_checks_its_arguments():
    with pytest.raises(emit_triton.launcher.LaunchError, match="^parameter y: axis 0 has extent 4 but N = 3"):
        emit_triton.source(vector_add(), {"x": torch.zeros(3), "y": torch.zeros(4)})


CHILD = """
import sys, torch
import emit_triton, emit_triton.compile as compile_mod
from emit_triton import targets
from tests import launch_fixtures as lf
from tests.samples import segment_sum
assert targets.library_mode() is targets.Mode.INTERPRETED
compile_mod.emitted_for = {segment_sum(): lf.segment_sum_emitted()}.__getitem__
values, offsets = torch.arange(8.0), torch.tensor([0, 3, 8])
out = emit_triton.launch(segment_sum(), {"values": values, "offsets": offsets})
assert out.tolist() == [3.0, 25.0], out
sys.stdout.write(emit_triton.ptx(segment_sum(), {"values": values, "offsets": offsets}))
"""


def test_ptx_when_triton_was_imported_in_interpreter_mode(tmp_path):
    """With TRITON_INTERPRET=1 at import, Triton's library is interpreted for good: compile in a worker."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, TRITON_INTERPRET="1", INTENT_CACHE_DIR=str(tmp_path / "child-cache"),
               PYTHONPATH=os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    here = emit_triton.ptx(segment_sum(), {"values": torch.arange(8.0), "offsets": torch.tensor([0, 3, 8])})
    assert ".entry segment_sum" in done.stdout
    assert done.stdout == here  # the worker compiled exactly the specialisation compiled here
