"""One object per kernel holds everything the process keeps for launching it (`emit_triton.bound`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import emit_triton
from emit_triton import bound, fast_launch, targets
from emit_triton import compile as compile_mod
from tests import launch_fixtures as lf
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.samples import vector_add


@pytest.fixture(autouse=True)
def fixtures(monkeypatch, isolated_cache):  # noqa: F811
    lf.install(monkeypatch, {vector_add(): lf.vadd_emitted()})
    bound.forget()
    yield
    bound.forget()


def args(n: int = 5) -> dict:
    return {"x": torch.arange(n, dtype=torch.float32), "y": torch.ones(n), "out": torch.empty(n)}


def test_a_launch_keeps_its_plan_function_and_key_on_the_kernels_object() -> None:
    k = vector_add()
    emit_triton.launch(k, args())
    owner = bound.bound(k)
    assert bound.peek(k) is owner and list(owner.plans) == [("x", "y", "out")]
    assert len(owner.functions) == 1 and len(owner.keys) == 1
    assert fast_launch.try_launch(k, args()) is not fast_launch.NOT_PLANNED
    equal = vector_add()  # an equal kernel built elsewhere shares the object (and the emission)
    assert equal is not k and bound.bound(equal) is owner


def test_dropping_loaded_modules_or_emissions_drops_the_plans() -> None:
    k = vector_add()
    emit_triton.launch(k, args())
    targets.clear_loaded()
    owner = bound.bound(k)
    assert not owner.plans and not owner.functions
    assert fast_launch.try_launch(k, args()) is fast_launch.NOT_PLANNED
    emit_triton.launch(k, args())
    compile_mod.clear_emitted()
    assert bound.peek(k) is None and bound.bound(k) is not owner
    assert fast_launch.try_launch(k, args()) is fast_launch.NOT_PLANNED


def test_another_emission_function_gives_the_kernel_a_new_object(monkeypatch) -> None:
    k = vector_add()
    emit_triton.launch(k, args())
    before = bound.bound(k)
    lf.install(monkeypatch, {vector_add(): lf.vadd_emitted()})  # a replaced `compile.emitted_for`
    assert bound.peek(k) is None
    assert fast_launch.try_launch(k, args()) is fast_launch.NOT_PLANNED
    assert bound.bound(k) is not before


# The launch path's modules keep nothing per kernel at module level: `bound` holds it.
LAUNCH_MODULES = ("compile", "launcher", "fast_launch", "targets", "autotune")


def test_the_launch_path_has_no_module_level_kernel_caches() -> None:
    root = Path(emit_triton.__file__).parent
    found = []
    for name in LAUNCH_MODULES:
        tree = ast.parse((root / f"{name}.py").read_text())
        for node in tree.body:
            target = node.target if isinstance(node, ast.AnnAssign) else \
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            value = getattr(node, "value", None)
            mutable = isinstance(value, ast.Dict | ast.List | ast.Set) and not target.id.isupper() \
                if isinstance(target, ast.Name) and target.id != "__all__" else False
            if mutable or isinstance(target, ast.Name) and target.id == "generation":
                found.append(f"{name}.{target.id}")  # type: ignore[union-attr]
            if isinstance(node, ast.Global) or any(isinstance(n, ast.Global) for n in ast.walk(node)):
                found.append(f"{name}: global statement")
    # the simulated device size is a stack of contexts, not a kernel cache; the multiprocessor counts are
    # per device
    assert found == ["targets._multiprocessors", "targets._simulated"]
