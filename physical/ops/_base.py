"""Registration of physical op classes (frozen, keyword-only dataclasses) with their declared traits."""

from __future__ import annotations

from dataclasses import dataclass

from ..model import POp, Trait

OP_CLASSES: dict[str, type[POp]] = {}

# Shorthands for the declarations (`@pop("binary", ARITH)`).
PURE, ELEMENTWISE, POSITIONWISE, UNIFORM = Trait.PURE, Trait.ELEMENTWISE, Trait.POSITIONWISE, Trait.UNIFORM
READS, WRITES, EFFECTS, INVARIANT = Trait.READS, Trait.WRITES, Trait.EFFECTS, Trait.INVARIANT
NO_TRAITS = Trait(0)
ARITH = PURE | ELEMENTWISE | POSITIONWISE | INVARIANT  # pointwise arithmetic


def pop(name: str, traits: Trait):
    """Register a physical op class under its printed name, with the traits it declares (required: an op
    whose properties nobody stated would fall silently outside every pass's and analysis' reach)."""
    if not isinstance(traits, Trait):
        raise TypeError(f"physical op {name}: traits must be a Trait, got {traits!r}")

    def deco(cls: type[POp]) -> type[POp]:
        cls = dataclass(frozen=True, kw_only=True)(cls)
        cls.NAME = name
        cls.TRAITS = traits
        if name in OP_CLASSES:
            raise ValueError(f"duplicate physical op name {name}")
        OP_CLASSES[name] = cls
        return cls

    return deco
