"""Atomic read-modify-write with memory order, sharing domain and the chosen scope."""

from __future__ import annotations

from kir.atomic import AtomicKind, MemOrder
from kir.dtypes import SpelledEnum

from ..model import AccessRelation, POp, PValue
from ._base import EFFECTS, READS, WRITES, access_members, effect_members, pop, typed_elsewhere, typing_rule


class Sharing(SpelledEnum):
    """Who may touch the same element concurrently (the logical sharing domain)."""

    INVOCATION = "invocation"  # any program instance of this launch
    PROGRAM = "program"        # only lanes of one program instance


SCOPE_FOR_SHARING = {Sharing.INVOCATION: "gpu", Sharing.PROGRAM: "cta"}


@pop("atomic_rmw", READS | WRITES | EFFECTS)
class AtomicRMW(POp):
    """Returns the old value per member (fill for inactive members)."""

    kind: AtomicKind
    access: AccessRelation
    value: PValue
    order: MemOrder
    sharing: Sharing
    scope: str  # provider scope chosen from the mapping: "gpu" (device-wide) or "cta"


@pop("atomic_cas", READS | WRITES | EFFECTS)
class AtomicCAS(POp):
    """Compare-and-swap; returns the old value (success is old == expected)."""

    access: AccessRelation
    expected: PValue
    value: PValue
    order: MemOrder
    sharing: Sharing
    scope: str


# ---------------------------------------------------------------------------------------------- typing


typing_rule(AtomicRMW, AtomicCAS)(typed_elsewhere)


# ---------------------------------------------------------------------------------------------- members


effect_members(AtomicRMW, AtomicCAS)(access_members)
