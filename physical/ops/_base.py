"""Registration of physical op classes (frozen, keyword-only dataclasses) with their declared traits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kir.core import register

from ..model import Fragment, POp, PValue, Trait

OP_CLASSES: dict[str, type[POp]] = {}

# Shorthands for the declarations (`@pop("binary", ARITH)`).
PURE, ELEMENTWISE, POSITIONWISE, UNIFORM = Trait.PURE, Trait.ELEMENTWISE, Trait.POSITIONWISE, Trait.UNIFORM
READS, WRITES, EFFECTS, INVARIANT = Trait.READS, Trait.WRITES, Trait.EFFECTS, Trait.INVARIANT
CONTROL, LOOKBACK = Trait.CONTROL, Trait.LOOKBACK
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
        register(OP_CLASSES, name, cls, f"physical op name {name}")
        return cls

    return deco


# ---------------------------------------------------------------------------------------------- typing rules
#
# Each op's typing rule sits beside its class (`@typing_rule(Cls)` after it): a function of the op that lists
# what is wrong with its result types given its operands (empty when it is well typed). The verifier's
# fragment-types rule runs them; tests/test_physical_verifier.py checks that every op class has one.

TypeRule = Callable[[POp], list[str]]


def typing_rule(*classes: type[POp], one_result: bool = False) -> Callable[[Callable[..., list[str]]],
                                                                          Callable[..., list[str]]]:
    """Declare `fn` the typing rule of `classes`. With `one_result`, the op must have exactly one result and
    `fn(op, result_type)` checks the rest."""

    def deco(fn: Callable[..., list[str]]) -> Callable[..., list[str]]:
        rule = _with_one_result(fn) if one_result else fn
        for c in classes:
            c.type_problems = rule  # type: ignore[attr-defined]
        return fn

    return deco


def _with_one_result(fn: Callable[[POp, Fragment], list[str]]) -> TypeRule:
    def rule(op: POp) -> list[str]:
        return fn(op, op.results[0].type) if len(op.results) == 1 else results_problem(op, 1)

    rule.__doc__, rule.__name__ = fn.__doc__, fn.__name__
    return rule


def ints_agree(a: Fragment, b: Fragment) -> bool:
    """Operand dtypes agree: equal, or integers of which one is index arithmetic (computed at index width)."""
    return a.dtype == b.dtype or (a.dtype.is_int and b.dtype.is_int and (a.index or b.index))


def broadcast_problem(operands: tuple[PValue, ...], result: Fragment) -> str | None:
    """Why operands do not broadcast mechanically (lanes and tile) to `result` (None when they do)."""
    tiles = {v.type.tile for v in operands if v.type.tile}
    if len(tiles) > 1:
        return f"operands have different tiles ({', '.join(str(v.type) for v in operands)})"
    tile = next(iter(tiles)) if tiles else ()
    if result.tile != tile:
        return f"result {result} does not have the operands' tile ({', '.join(str(v.type) for v in operands)})"
    lanes = any(v.type.lanes for v in operands)
    if result.lanes != lanes:
        return f"result {result} {'drops' if lanes else 'invents'} the lanes axis of its operands"
    return None


def one_result(op: POp) -> Fragment | None:
    return op.results[0].type if len(op.results) == 1 else None


def results_problem(op: POp, n: int) -> list[str]:
    return [] if len(op.results) == n else [f"has {len(op.results)} results, expected {n}"]


def no_results(op: POp) -> list[str]:
    return results_problem(op, 0)


def typed_elsewhere(op: POp) -> list[str]:
    """Accesses are typed against their buffers (access-complete, atomic-preserved); structured ops and
    control against their operands and regions (structured-complete, region-op-complete)."""
    return []


# ---------------------------------------------------------------------------------------------- effect members
#
# Which members an effect acts for. The `ownership` rule checks every lane-varying effect of a program whose lanes
# can run past its domain: the lane-validity test must be a conjunct of the effect's members, or lanes that own no
# instance would perform it. Each op class with EFFECTS and without CONTROL declares its rule beside its class
# (`@effect_members(Cls)`): a function of the op and of the lookup of a value's producing op that gives the pred
# value selecting the members (None: every lane). tests/test_physical_traits.py checks that none is missing, so a
# new effect op cannot escape the rule.

Producer = Callable[[PValue], POp | None]
MembersRule = Callable[[POp, Producer], PValue | None]


def effect_members(*classes: type[POp]) -> Callable[[MembersRule], MembersRule]:
    """Declare `fn` the rule that gives the members an effect op of `classes` acts for."""

    def deco(fn: MembersRule) -> MembersRule:
        for c in classes:
            c.members_rule = fn  # type: ignore[attr-defined]
        return fn

    return deco


def access_members(op: POp, producer: Producer) -> PValue | None:
    """An access acts for the members in the mask of its access relation."""
    return op.access.mask  # type: ignore[attr-defined]


def active_members(op: POp, producer: Producer) -> PValue | None:
    """A region op or an allocation acts for its `active` members."""
    return op.active  # type: ignore[attr-defined]


def per_program(op: POp, producer: Producer) -> PValue | None:
    """The op acts once for its program, not per lane: its operands are uniform, so it performs nothing a lane
    past the domain could add (were one of them to vary by lane, the rule would find no members and report it)."""
    return None
