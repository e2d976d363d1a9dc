"""Op traits: every physical op class declares its properties, and the declarations obey the laws that
passes, analyses and the verifier rely on (a forgotten declaration fails here, not silently in a pass)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import pytest

import physical.ops as P
from physical.model import POp, Trait
from physical.ops._base import pop

T = Trait


def _op_modules():
    for info in pkgutil.iter_modules(P.__path__):
        yield importlib.import_module(f"physical.ops.{info.name}")


def test_every_op_class_is_registered_with_its_own_traits():
    defined = {cls for mod in _op_modules() for _, cls in inspect.getmembers(mod, inspect.isclass)
               if issubclass(cls, POp) and cls is not POp}
    assert defined == set(P.OP_CLASSES.values())
    for name, cls in P.OP_CLASSES.items():
        assert "TRAITS" in vars(cls), f"{name} declares no traits"
        assert isinstance(cls.TRAITS, Trait)


@pytest.mark.parametrize("name", sorted(P.OP_CLASSES))
def test_trait_laws(name):
    cls = P.OP_CLASSES[name]
    t = cls.TRAITS
    if T.ELEMENTWISE in t:
        assert T.PURE | T.POSITIONWISE in t, f"{name}: element-wise work is pure and position by position"
    if T.PURE in t:
        assert not t & (T.READS | T.WRITES | T.EFFECTS), f"{name}: a pure op touches no memory and has no effect"
    if T.WRITES in t:
        assert T.EFFECTS in t, f"{name}: a write is an effect"
    if T.UNIFORM in t:
        assert T.PURE | T.INVARIANT in t, f"{name}: a launch value is pure and the same for every block"
    if T.INVARIANT in t:
        assert t & (T.PURE | T.READS) and not t & (T.WRITES | T.EFFECTS), f"{name}: invariant ops compute a value"
    if cls.TERMINATOR:
        assert T.PURE in t
    if T.CONTROL in t:
        assert T.EFFECTS in t and _region_fields(cls), f"{name}: control runs regions and orders their effects"
        assert not t & (T.READS | T.WRITES | T.LOOKBACK) and not _holds_an_access_relation(cls), \
            f"{name}: control has no effect of its own"
    if T.LOOKBACK in t:
        assert T.EFFECTS in t, f"{name}: a flag raised or waited for is an effect"


def _region_fields(cls: type[POp]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if "PRegion" in str(f.type)]


def _names_a_sync_buffer(cls: type[POp]) -> bool:
    return any(f.name == "sync" for f in dataclasses.fields(cls))


def test_lookback_ops_are_the_ops_naming_a_sync_buffer_and_the_rule_knows_each():
    """The lookback-protocol rule finds the groups to check by the trait and checks each op by its class: an op
    using a sync buffer's flags without the trait, or without the rule's entry, fails here."""
    from physical.verifier import lookback

    declared = {c for c in P.OP_CLASSES.values() if T.LOOKBACK in c.TRAITS}
    assert declared == {c for c in P.OP_CLASSES.values() if _names_a_sync_buffer(c)}
    assert declared == {P.PublishSlot, P.FoldSlots, P.RetireTicket}
    assert set(lookback._USES_FLAGS) == declared


def test_control_is_as_free_of_effects_as_its_regions():
    from kir.dtypes import DType
    from physical.model import AccessRelation, PRegion, Proven, PValue, effect_free, scalar_type

    assert {n for n, c in P.OP_CLASSES.items() if T.CONTROL in c.TRAITS} == {"for", "while", "if", "looped_rows"}
    i = PValue(1, scalar_type(DType.i32, index=True))
    pure = PRegion((i,), (P.Const(results=(PValue(2, scalar_type(DType.f32)),), value=1.0, dtype=DType.f32),
                          P.Yield()))
    store = P.Store(access=AccessRelation(0, (i,), None, Proven("ok")), value=PValue(3, scalar_type(DType.f32)))
    writes = PRegion((i,), (store, P.Yield()))
    loop = P.For(start=i, stop=i, step=i, inits=(), body=pure)
    assert effect_free((loop,)) and not effect_free((P.For(start=i, stop=i, step=i, inits=(), body=writes),))
    assert effect_free((P.If(cond=i, then_=pure, else_=pure),))
    assert not effect_free((P.If(cond=i, then_=pure, else_=writes),))
    # an effect of its own is not excused by pure regions
    assert not effect_free((P.BlockLoop(group=0, flag="F", blocks=i, resident=i, body=pure),))  # type: ignore


def _holds_an_access_relation(cls: type[POp]) -> bool:
    return any("AccessRelation" in str(f.type) for f in dataclasses.fields(cls))


@pytest.mark.parametrize("name", sorted(n for n, c in P.OP_CLASSES.items() if _holds_an_access_relation(c)))
def test_an_op_with_an_access_relation_declares_its_memory_traffic(name):
    """The laws above cannot see a load-like op declared pure: its class must say it reads or writes, or
    persistent-programs would hoist it and the effect analyses would not see it."""
    t = P.OP_CLASSES[name].TRAITS
    assert t & (T.READS | T.WRITES), f"{name}: holds an access relation but declares neither reads nor writes"
    assert T.PURE not in t, f"{name}: holds an access relation but declares itself pure"


def test_the_ops_with_access_relations():
    """Memory traffic is counted per op class (physical/counts.py) and checked by the sanitizer where each
    access's emitter calls emit_access.sanitize_access: a new op holding an access relation needs both."""
    assert {n for n, c in P.OP_CLASSES.items() if _holds_an_access_relation(c)} == {
        "load", "store", "atomic_rmw", "atomic_cas", "ticket"}


def test_declared_traits_of_representative_ops():
    assert P.Binary.TRAITS == T.PURE | T.ELEMENTWISE | T.POSITIONWISE | T.INVARIANT
    assert P.Load.TRAITS == T.READS | T.POSITIONWISE | T.INVARIANT
    assert P.Store.TRAITS == T.WRITES | T.EFFECTS | T.POSITIONWISE
    assert P.AtomicRMW.TRAITS == T.READS | T.WRITES | T.EFFECTS
    assert P.RegionScan.TRAITS == T.WRITES | T.EFFECTS
    assert P.OwnedInstances.TRAITS == Trait(0)  # its value is the program's own instances
    assert {n for n, c in P.OP_CLASSES.items() if T.EFFECTS in c.TRAITS} == {
        "store", "check", "atomic_rmw", "atomic_cas", "alloc", "for", "while", "if", "block_loop", "looped_rows",
        "barrier",
        "region_scan", "ticket", "publish_slot", "fold_slots", "retire_ticket"}
    assert P.Ticket.TRAITS == T.READS | T.WRITES | T.EFFECTS  # an atomic increment of a workspace counter
    assert P.SplitIndex.TRAITS == Trait(0)  # its value is the program's own position among its block's


def test_has_effects_and_has_read_the_declaration():
    from kir.dtypes import DType
    from physical.model import PValue, scalar_type

    v = PValue(1, scalar_type(DType.i32))
    c = P.Const(results=(v,), value=1, dtype=DType.i32)
    assert not c.has_effects() and c.has(T.PURE | T.UNIFORM) and not c.has(T.PURE | T.READS)
    assert P.Barrier().has_effects()


def test_registration_requires_traits():
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'traits'"):
        pop("no_traits")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"physical op bad: traits must be a Trait, got \('pure',\)"):
        pop("bad", ("pure",))  # type: ignore[arg-type]


def test_passes_and_lowering_decide_without_verifier_code():
    """A pass that decided with the verifier's own analysis could not be caught by it: the shared analyses live
    in physical/analysis.py (and the traits), which both use."""
    import pathlib
    import re

    root = pathlib.Path(P.__file__).resolve().parent.parent
    files = [*root.glob("passes/*.py"), *root.glob("lower/*.py"), root / "construct.py", root / "worksets.py",
             root / "lowering.py", root / "workspace.py"]
    offenders = [f.name for f in files if f.exists() and
                 re.search(r"^\s*(from|import)\s+(\.\.?|physical\.)verifier\b", f.read_text(), re.M)]
    assert offenders == []
