"""Loads and stores through explicit access relations (point, slice, gather and scatter alike)."""

from __future__ import annotations

from intent.runtime.checks import DEVICE_CHECK  # noqa: F401  (how every check's message begins)
from kir.pointwise import BinaryFn, UnaryFn

from ..model import AccessRelation, POp, PValue
from ._base import (
    EFFECTS,
    INVARIANT,
    POSITIONWISE,
    READS,
    WRITES,
    Producer,
    access_members,
    effect_members,
    no_results,
    pop,
    typed_elsewhere,
    typing_rule,
)
from .pointwise import Binary, Unary


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


# ---------------------------------------------------------------------------------------------- members


effect_members(Store)(access_members)


@effect_members(Check)
def _check_members(op: Check, producer: Producer) -> PValue | None:
    """A check tests `not members or holds` (lowering's `check_indices`): it cannot fail for the members it
    leaves out."""
    test = producer(op.cond)
    if isinstance(test, Binary) and test.fn is BinaryFn.or_:
        off = producer(test.lhs)
        if isinstance(off, Unary) and off.fn is UnaryFn.not_:
            return off.x
    return None
