"""Loads and stores through explicit access relations (point, slice, gather and scatter alike)."""

from __future__ import annotations

from intent.runtime.checks import DEVICE_CHECK  # noqa: F401  (how every check's message begins)

from ..model import AccessRelation, POp, PValue
from ._base import EFFECTS, INVARIANT, POSITIONWISE, READS, WRITES, no_results, pop, typed_elsewhere, typing_rule


@pop("load", READS | POSITIONWISE | INVARIANT)
class Load(POp):
    """Read `access` (members outside its mask take its fill)."""

    access: AccessRelation


@pop("store", WRITES | EFFECTS | POSITIONWISE)
class Store(POp):
    """Write `value` (broadcast to the access) at `access` for the members in its mask.

    `unique` records that the author stated instances write disjoint elements (KIR `unique=True`)."""

    access: AccessRelation
    value: PValue
    unique: bool = False




@pop("check", EFFECTS)
class Check(POp):
    """A device check (kernels compiled with checks): `cond` holds for every member, else the launch
    fails with `message` (an out-of-range gather, scatter or atomic index, named with its source)."""

    cond: PValue
    message: str


# ---------------------------------------------------------------------------------------------- typing


typing_rule(Store)(no_results)


typing_rule(Load)(typed_elsewhere)


@typing_rule(Check)
def _check(op: Check) -> list[str]:
    out = [] if not op.results else [f"has {len(op.results)} results, expected 0"]
    if not op.cond.type.dtype.is_pred:
        out.append(f"a check tests a pred, got {op.cond.type}")
    if not op.message.startswith(DEVICE_CHECK):
        out.append(f"check message {op.message!r} must start with {DEVICE_CHECK!r}")
    return out
