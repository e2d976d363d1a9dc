"""Registration of physical op classes (frozen, keyword-only dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass

from ..model import POp

OP_CLASSES: dict[str, type[POp]] = {}


def pop(name: str):
    """Register a physical op class under its printed name."""

    def deco(cls: type[POp]) -> type[POp]:
        cls = dataclass(frozen=True, kw_only=True)(cls)
        cls.NAME = name
        if name in OP_CLASSES:
            raise ValueError(f"duplicate physical op name {name}")
        OP_CLASSES[name] = cls
        return cls

    return deco
