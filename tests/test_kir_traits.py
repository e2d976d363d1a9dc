"""KIR op traits: every KIR op class declares its properties beside its definition (`@op(name, traits)`), the
declarations obey the laws the physical construction, the analyses and the verifier rely on, and those read
the traits instead of keeping their own tuples of op classes (a forgotten declaration fails here, not silently
in a pass)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

import physical
from kir import core as K
from kir import reduce as KR
from kir.core import OP_CLASSES, OP_FAMILIES, Op, OpTrait, op

T = OpTrait
K.load_families("kir")


def _fields(cls: type[Op]) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls) if f.name not in ("results", "loc")}


def test_every_op_class_is_registered_with_its_own_traits():
    defined = {cls for fam in OP_FAMILIES for _, cls in inspect.getmembers(importlib.import_module(f"kir.{fam}"),
                                                                         inspect.isclass)
               if issubclass(cls, Op) and cls is not Op}
    assert defined == set(OP_CLASSES.values())
    for name, cls in OP_CLASSES.items():
        assert "TRAITS" in vars(cls), f"{name} declares no traits"
        assert isinstance(cls.TRAITS, OpTrait)


def test_an_op_without_a_trait_declaration_is_refused():
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'traits'"):
        op("unstated")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^op unstated: traits must be an OpTrait, got 0$"):
        op("unstated", 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(OP_CLASSES))
def test_trait_laws(name):
    cls = OP_CLASSES[name]
    t, fields = cls.TRAITS, _fields(cls)
    # memory: an op reads the buffer its `src` names and writes the one its `dst` names; an atomic does both
    assert (T.READS in t) == ("src" in fields or T.ATOMIC in t), f"{name}: READS is declared iff it has a source"
    assert (T.WRITES in t) == ("dst" in fields), f"{name}: WRITES is declared iff it has a destination"
    if T.ATOMIC in t:
        assert T.READS | T.WRITES in t, f"{name}: an atomic update reads and writes"
    # control runs regions it must have; no other op has a region it cannot do without
    required_regions = [n for n, ty in fields.items() if ty == "Region"]
    assert (T.CONTROL in t) == bool(required_regions), f"{name}: CONTROL is declared iff it runs regions"
    if T.CONTROL in t:
        assert not t & (T.READS | T.WRITES | T.STRUCTURED), f"{name}: control has no effect or work of its own"
    if T.STRUCTURED in t:
        assert not t & (T.WRITES | T.CONTROL), f"{name}: structured work computes values"
    # what has effects follows from the declaration
    assert cls.has_effects is Op.has_effects, f"{name}: effects are read from the traits, not overridden"


def test_the_declared_sets():
    """Pinned so that a new op's declaration is a decision someone reviews: the structured ops are those the
    construction shares between statements and refuses to recompute per instance."""

    def having(trait: OpTrait) -> set[str]:
        return {n for n, c in OP_CLASSES.items() if trait in c.TRAITS}

    assert having(T.STRUCTURED) == {"reduce", "scan", "sort", "dot", "histogram", "region_fold"}
    assert having(T.WRITES) == {"store", "scatter", "atomic", "atomic_cas", "region_scan"}
    assert having(T.READS) == {"load", "gather", "atomic", "atomic_cas", "region_fold", "region_scan"}
    assert having(T.ATOMIC) == {"atomic", "atomic_cas"}
    assert having(T.CONTROL) == {"parallel", "for", "while", "if"}
    effects = {n for n, c in OP_CLASSES.items() if c.TRAITS & (T.WRITES | T.CONTROL)}
    assert effects == having(T.WRITES) | having(T.CONTROL)


def _rows_minus_max():
    import intent

    @intent.kernel
    def rows_minus_max(x: intent.f32[4, 8], out: intent.Out[intent.f32[4, 8]]):
        out[:, :] = x[:, :] - intent.max(x[:, :], axis=1, keepdims=True)

    return rows_minus_max.kir


def test_the_construction_reads_the_structured_trait(monkeypatch):
    """A whole-tensor store binds only the axes its reduction does not need (`x - max(x, axis=1)`: one instance
    per row) because the reduction is STRUCTURED; an op without the trait would be rebuilt per element."""
    kernel = _rows_minus_max()
    assert [len(g.domain) for g in physical.construct(kernel).groups] == [1]
    monkeypatch.setattr(KR.Reduce, "TRAITS", T(0))
    assert [len(g.domain) for g in physical.construct(kernel).groups] == [2]
