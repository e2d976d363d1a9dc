"""Determinism: a kernel without atomics gives bitwise-identical outputs on the same inputs, run after run,
whether its generated module was just written, is already loaded, or is read back from the disk cache."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import emit_triton
from emit_triton import cache as cache_mod
from emit_triton import targets
from emit_triton.compile import clear_emitted
from kir import Atomic, AtomicCAS, DType, Kernel
from kir.errors import IntentError
from kir.inputs import random_inputs
from tests import samples
from tests.diffgen import random_case

SAMPLES: dict[str, tuple[Callable[[], Kernel], dict[str, int]]] = {
    "softmax": (samples.softmax, {"M": 3, "N": 37}),
    "segment_sum": (samples.segment_sum, {"S": 5, "E": 40}),
    "recurrence": (samples.recurrence, {"C": 2, "T": 17}),
    "two_groups": (samples.two_groups, {"M": 3, "N": 9, "P": 20}),
    "matmul_f32": (lambda: samples.matmul(DType.f32), {"M": 5, "N": 7, "K": 33}),
    "cumsum_exclusive_reverse": (lambda: samples.cumsum_rows(True, True), {"M": 2, "N": 65}),
    "dropout": (samples.dropout, {"N": 100}),
}


def _copy(args: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def _outputs(kernel: Kernel, args: dict[str, Any]) -> dict[str, bytes]:
    given = _copy(args)
    emit_triton.launch(kernel, given)
    return {p.name: np.ascontiguousarray(given[p.name]).tobytes() for p in kernel.outputs}


def _three_ways(kernel: Kernel, args: dict[str, Any], monkeypatch) -> list[dict[str, bytes]]:
    """Fresh entry; loaded module; module re-read from the disk cache (nothing written that time)."""
    targets.clear_loaded()
    clear_emitted()
    fresh = _outputs(kernel, args)
    loaded = _outputs(kernel, args)
    targets.clear_loaded()
    clear_emitted()
    writes: list[object] = []
    original = cache_mod.atomic_write
    monkeypatch.setattr(cache_mod, "atomic_write", lambda path, data: (writes.append(path), original(path, data)))
    from_disk = _outputs(kernel, args)
    monkeypatch.setattr(cache_mod, "atomic_write", original)
    assert writes == [], f"the third run rewrote the cache entry: {writes}"
    return [fresh, loaded, from_disk]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CACHE_DIR", str(tmp_path / "cache"))
    yield
    targets.clear_loaded()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_kernels_are_bitwise_reproducible(name: str, monkeypatch) -> None:
    make, shapes = SAMPLES[name]
    kernel = make()
    args = random_inputs(kernel, shapes, seed=5)
    fresh, loaded, from_disk = _three_ways(kernel, args, monkeypatch)
    assert fresh == loaded == from_disk


def _has_atomics(kernel: Kernel) -> bool:
    return any(isinstance(o, Atomic | AtomicCAS) for o in kernel.walk())


def test_random_kernels_without_atomics_are_bitwise_reproducible(monkeypatch) -> None:
    checked = 0
    for i in range(60):
        case, _ = random_case(random.Random(f"determinism/{i}"))
        if _has_atomics(case.kernel):
            continue
        args = case.inputs()
        try:
            fresh, loaded, from_disk = _three_ways(case.kernel, args, monkeypatch)
        except IntentError:
            continue  # refused by lowering: nothing runs, so nothing to compare
        except Exception:  # a crash is the differential campaign's business (tests/fuzz_cases)
            continue
        assert fresh == loaded == from_disk, f"{case.describe()}\n{case.kernel}"
        checked += 1
        if checked == 12:
            break
    assert checked == 12, f"only {checked} random kernels ran"
