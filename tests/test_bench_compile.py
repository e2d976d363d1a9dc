"""Compile latency measurement of bench/compile.py (shape of the results, not their values)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from bench import kernels as bk
from bench.compile import (
    STAGES,
    Subject,
    acceptance_subjects,
    check_passes_match_lower,
    cold_caches,
    measure,
    summary,
    table,
)


def subject(origin: str = "acceptance") -> Subject:
    case = bk.vector_add_case(64)
    return Subject(origin, "vector_add.add", case.kernel, case.build(torch.device("cpu"), torch.Generator()))


def test_every_stage_is_timed_and_the_total_adds_the_stages_before_triton():
    row = measure(subject(), repeat=2, cubin_repeat=0)
    assert row.error is None
    assert set(row.ms) == set(STAGES)
    assert all(v >= 0 for v in row.ms.values())
    assert row.front_ms == sum(row.ms[s] for s in ("frontend", "construct", "passes", "emit"))
    assert row.wall_ms is not None and row.wall_ms > 0
    assert row.met == (row.front_ms <= 50.0)
    text = table([row])
    assert "| vector_add.add " in text
    assert summary([row]).startswith("acceptance kernels: ")


def test_bench_kernels_have_no_target_verdict():
    row = measure(subject("bench"), repeat=1, cubin_repeat=0)
    assert row.met is None


def test_timed_pass_loop_matches_physical_lower():
    check_passes_match_lower(subject())


def test_cold_cubin_compile_is_an_elf_and_caches_are_restored():
    before = os.environ.get("INTENT_CACHE_DIR")
    row = measure(subject(), repeat=1, cubin_repeat=1)
    assert row.cubin_error is None
    assert row.ms["cubin"] > 0
    assert os.environ.get("INTENT_CACHE_DIR") == before


def test_cold_caches_use_a_fresh_directory_then_restore():
    from triton import knobs

    before = (os.environ.get("INTENT_CACHE_DIR"), knobs.compilation.always_compile)
    with cold_caches():
        inside = Path(os.environ["INTENT_CACHE_DIR"])
        assert inside.is_dir() and not any(inside.iterdir())
        assert knobs.compilation.always_compile is True
    assert (os.environ.get("INTENT_CACHE_DIR"), knobs.compilation.always_compile) == before
    assert not inside.exists()


def test_a_failing_kernel_is_a_table_row(monkeypatch):
    import physical
    from kir.errors import IntentError

    def refuse(kernel):
        raise IntentError(f"cannot construct {kernel.name}")

    monkeypatch.setattr(physical, "construct", refuse)
    row = measure(subject(), repeat=1, cubin_repeat=0)
    assert row.error == "IntentError: cannot construct vector_add"
    assert row.met is False
    assert "FAILED: IntentError: cannot construct vector_add" in table([row])


def test_acceptance_subjects_are_distinct_kernels(tmp_path):
    (tmp_path / "mod.py").write_text(
        "import torch\n"
        "from bench.kernels import vector_add\n"
        "def cases():\n"
        "    for n in (3, 5):\n"
        "        yield vector_add, {'x': torch.zeros(n), 'y': torch.zeros(n), 'out': torch.zeros(n)}, {}\n")
    (tmp_path / "run.py").write_text("raise SystemExit('not a kernel module')\n")
    found = acceptance_subjects(tmp_path)
    assert [s.label for s in found] == ["mod.vector_add"]
    assert found[0].args["x"].numel() == 3
