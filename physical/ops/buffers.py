"""Buffer allocation points: where an allocation instance begins (and is filled, for FULL init)."""

from __future__ import annotations

from ..model import POp, PValue
from ._base import EFFECTS, active_members, effect_members, no_results, pop, typing_rule


@pop("alloc", EFFECTS)
class AllocBuffer(POp):
    """Begin an allocation instance of `buffer` (copy `copy`); a FULL buffer is set to its fill here,
    an UNINITIALISED one is left alone (the author's first-write obligation)."""

    buffer: int
    copy: PValue | None = None
    active: PValue | None = None  # the members that own a live allocation instance


# ---------------------------------------------------------------------------------------------- typing


typing_rule(AllocBuffer)(no_results)


# ---------------------------------------------------------------------------------------------- members


effect_members(AllocBuffer)(active_members)
