"""Cold start: `import intent` and decorating import nothing heavy; a new process launches a kernel whose
emitted form is on disk without lowering it again (no networkx, no passes, no emitter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import emit_triton.compile as compile_mod
from emit_triton import emitted_cache
from kir import DType
from tests import launch_fixtures as lf
from tests import samples

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "triton", "numpy", "z3", "networkx", "jax", "oracle", "physical", "emit_triton")
LOWERING = ("networkx", "physical.construct", "physical.passes", "physical.lowering", "emit_triton.emit")

KERNEL_FILE = '''
import sys

import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel
def row_sums(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.sum(x[i, :])
'''

CALL = '''
import torch

x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
out = torch.empty(3)
row_sums(x, out)
assert torch.equal(out, x.sum(1)), out
'''


def run_python(code: str, cwd: Path, cache: Path | None = None) -> list[str]:
    """Run `code` in a new interpreter; returns the heavy modules it left imported (printed as JSON)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    if cache is not None:
        env["INTENT_CACHE_DIR"] = str(cache)
    probe = code + f"\nimport json, sys\nprint(json.dumps([m for m in {HEAVY + LOWERING!r} if m in sys.modules]))\n"
    done = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_intent_imports_nothing_heavy(tmp_path: Path) -> None:
    assert run_python("import intent", tmp_path) == []


def test_decorating_a_kernel_imports_nothing_heavy(tmp_path: Path) -> None:
    (tmp_path / "kern.py").write_text(KERNEL_FILE, encoding="utf-8")
    assert run_python("import kern\nassert kern.row_sums.kir.name == 'row_sums'", tmp_path) == []


def test_a_new_process_launches_from_the_disk_cache_without_lowering(tmp_path: Path) -> None:
    (tmp_path / "kern.py").write_text(KERNEL_FILE, encoding="utf-8")
    cache = tmp_path / "cache"
    first = run_python("from kern import row_sums\n" + CALL, tmp_path, cache)
    assert set(LOWERING) <= set(first)  # the cache was empty: lowered and emitted
    assert len(list((cache / emitted_cache.ENTRY).glob("*.json"))) == 1
    second = run_python("from kern import row_sums\n" + CALL, tmp_path, cache)
    assert not set(LOWERING) & set(second), second
    assert {"torch", "triton"} <= set(second)


def test_lazy_packages_keep_their_functions_when_submodules_load_first(tmp_path: Path) -> None:
    code = textwrap.dedent('''
        import sys
        import physical.construct
        import emit_triton.emit
        import physical, emit_triton
        assert physical.construct is sys.modules["physical.construct"].construct
        assert emit_triton.emit is sys.modules["emit_triton.emit"].emit
        from physical import ops
        assert physical.model.Load is ops.Load and physical.lower.__module__ == "physical.lowering"
    ''')
    run_python(code, tmp_path)


# ---------------------------------------------------------------------------------------------- records


@pytest.mark.parametrize("make", [samples.softmax, samples.segment_sum, samples.two_groups,
                                  lambda: samples.matmul(DType.f32)], ids=["softmax", "segment_sum", "two_groups",
                                                                            "matmul"])
def test_an_emitted_kernel_survives_its_json_record(make) -> None:
    emitted = compile_mod._lower_and_emit(make())[0]
    record = json.loads(json.dumps(emitted_cache.encode(emitted)))
    assert emitted_cache.decode(record) == emitted


def test_records_name_only_known_classes() -> None:
    with pytest.raises(KeyError):
        emitted_cache.decode({"@": "Popen", "args": ["true"]})
    with pytest.raises(TypeError, match="cannot record a object in an emitted kernel"):
        emitted_cache.encode(object())


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CACHE_DIR", str(tmp_path / "cache"))
    compile_mod.clear_emitted()
    yield tmp_path / "cache"
    compile_mod.clear_emitted()


def test_a_recorded_kernel_is_read_back_instead_of_lowered(private_cache, monkeypatch) -> None:
    k = samples.vector_add()
    emitted = compile_mod.emitted_for(k)
    compile_mod.clear_emitted()
    monkeypatch.setattr(compile_mod, "_lower_and_emit", lambda kernel: pytest.fail("lowered again"))
    assert compile_mod.emitted_for(k) == emitted


def test_an_edited_compiler_or_loop_budget_misses_the_record(private_cache, monkeypatch) -> None:
    k = samples.vector_add()
    text = compile_mod.kernel_text(k)
    key = emitted_cache.kernel_key(text, "0.1.0")
    monkeypatch.setenv(emitted_cache.LOOP_BUDGET_VARIABLE, "3")
    assert emitted_cache.kernel_key(text, "0.1.0") != key
    monkeypatch.delenv(emitted_cache.LOOP_BUDGET_VARIABLE)
    monkeypatch.setattr(emitted_cache, "_fingerprint", "another compiler")
    assert emitted_cache.kernel_key(text, "0.1.0") != key


def test_a_corrupted_record_is_dropped_and_the_kernel_lowered_again(private_cache) -> None:
    k = samples.vector_add()
    emitted = compile_mod.emitted_for(k)
    (record,) = (private_cache / emitted_cache.ENTRY).glob("*.json")
    record.write_text(record.read_text().replace('"add"', '"evil"'), encoding="utf-8")
    compile_mod.clear_emitted()
    assert compile_mod.emitted_for(k) == emitted


def test_stand_in_stages_are_never_recorded(private_cache, monkeypatch) -> None:
    monkeypatch.setattr(compile_mod, "_lower_and_emit", lambda kernel: (lf.vadd_emitted(), False))
    compile_mod.emitted_for(samples.vector_add())
    assert not (private_cache / emitted_cache.ENTRY).exists()
