"""`emitted_for`: lowering and emission once per kernel, and a clear error when a stage is missing."""

from __future__ import annotations

import sys
import types

import pytest

import emit_triton
import emit_triton.compile as compile_mod
from kir import IntentError
from tests import launch_fixtures as lf
from tests.samples import softmax, vector_add


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CACHE_DIR", str(tmp_path / "cache"))  # no emitted kernel recorded on disk
    compile_mod.clear_emitted()
    yield
    compile_mod.clear_emitted()


def fake_stages(monkeypatch, lower=True, emit=True, emit_as_module=False) -> list[str]:
    calls: list[str] = []
    physical = types.ModuleType("physical")
    if lower:
        def lower_fn(kernel):
            calls.append(f"lower {kernel.name}")
            return ("program", kernel.name)

        physical.lower = lower_fn

    def emit_fn(program):
        calls.append(f"emit {program[1]}")
        return lf.vadd_emitted()

    if emit_as_module:
        submodule = types.ModuleType("emit_triton.emit")
        submodule.emit = emit_fn
        monkeypatch.setattr(emit_triton, "emit", submodule, raising=False)
    elif emit:
        monkeypatch.setattr(emit_triton, "emit", emit_fn, raising=False)
    else:
        monkeypatch.delattr(emit_triton, "emit", raising=False)
        monkeypatch.setitem(sys.modules, "emit_triton.emit", None)  # importing it fails
    # after the emitter's attributes: reading `emit_triton.emit` first may import the real emitter, which
    # needs the real physical package
    monkeypatch.setitem(sys.modules, "physical", physical)
    return calls


def test_lowers_and_emits_once_per_kernel(monkeypatch):
    calls = fake_stages(monkeypatch)
    k = vector_add()
    assert compile_mod.emitted_for(k) == lf.vadd_emitted()
    assert compile_mod.emitted_for(k) is compile_mod.emitted_for(k)
    assert compile_mod.emitted_for(vector_add()) is compile_mod.emitted_for(k)  # equal kernel, same entry
    compile_mod.emitted_for(softmax())
    assert calls == ["lower add", "emit add", "lower softmax", "emit softmax"]


def test_emit_may_be_the_submodule(monkeypatch):
    calls = fake_stages(monkeypatch, emit_as_module=True)
    compile_mod.emitted_for(vector_add())
    assert calls == ["lower add", "emit add"]


def test_missing_physical_lower(monkeypatch):
    fake_stages(monkeypatch, lower=False)
    with pytest.raises(IntentError, match=r"^cannot emit Triton for kernel add: physical.lower is not available$"):
        compile_mod.emitted_for(vector_add())


def test_missing_emitter(monkeypatch):
    fake_stages(monkeypatch, emit=False)
    with pytest.raises(IntentError, match=r"^cannot emit Triton for kernel add: emit_triton.emit is not available$"):
        compile_mod.emitted_for(vector_add())


def test_kernel_text_is_the_kir_printer():
    assert compile_mod.kernel_text(vector_add()).startswith("kernel add(x: in f32[N], y: in f32[N], out: out f32[N])")
