"""Ordered control: for, while and if with carried values, and the region terminator."""

from __future__ import annotations

from ..model import POp, PRegion, PValue
from ._base import CONTROL, EFFECTS, PURE, no_results, pop, typed_elsewhere, typing_rule


@pop("yield", PURE)
class Yield(POp):
    values: tuple[PValue, ...] = ()
    TERMINATOR = True


@pop("for", EFFECTS | CONTROL)
class For(POp):
    """`for iv in range(start, stop, step)` in order, body args (iv, *carried).

    With uniform bounds the loop is a plain loop. When a bound varies across lanes, every lane runs
    its own trip count: iteration k (up to the longest) gives iv = start + k * step per lane, and the
    body masks its effects and merges its carried values by its own membership test.
    """

    start: PValue
    stop: PValue
    step: PValue
    inits: tuple[PValue, ...]
    body: PRegion


@pop("while", EFFECTS | CONTROL)
class While(POp):
    """`cond` (args: carried) yields one pred; `body` (args: carried, active) yields the carried values.

    A lane-varying condition runs while any lane is active; `active` is that lane's condition (the
    body masks effects and keeps the carried values of finished lanes). Uniform: a plain loop.
    """

    inits: tuple[PValue, ...]
    cond: PRegion
    body: PRegion


@pop("if", EFFECTS | CONTROL)
class If(POp):
    """A uniform condition branches; a lane-varying one is lowered to predication by construction.

    With `flag` (a constexpr of the program, 0 or 1, and `cond` its value) the launch selects the branch: the
    generated kernel holds only the branch its specialisation takes (a form with no workspace traffic, say)."""

    cond: PValue
    then_: PRegion
    else_: PRegion
    flag: str | None = None


# ---------------------------------------------------------------------------------------------- typing


typing_rule(Yield)(no_results)


typing_rule(For, While, If)(typed_elsewhere)
