"""Cooperation of the programs of one launch through an invocation workspace: split positions and tickets.

A group whose work per block of instances is split over S programs (`split_index`) lets each program
write its partial result into its own slot of a slot array (an invocation-workspace buffer with one copy
per split), then draw a `ticket` from a counter; the program that draws ticket S - 1 is the last to arrive,
sees every slot (the ticket is acquire-release) and finishes the block. `physical/workspace.py` builds
the protocol; `physical/verifier/workspace.py` checks it.
"""

from __future__ import annotations

from kir.dtypes import DType

from ..launch_expr import LaunchExpr
from ..model import AccessRelation, Fragment, POp
from ._base import EFFECTS, NO_TRAITS, READS, WRITES, access_members, effect_members, pop, typing_rule


@pop("split_index", NO_TRAITS)
class SplitIndex(POp):
    """Which of the S = `splits` programs of its block this program is: `(pid - O_g) % S` (uniform index), or
    `ticket % S` in a group whose instances come from a ticket (`OwnedInstances.ticket`, decoded before it)."""

    group: int
    splits: str


@pop("helper_index", NO_TRAITS)
class HelperIndex(POp):
    """Which helper program this is: `(pid - O_g) - blocks` (uniform index), where `blocks` counts the group's
    programs that own blocks of instances; the programs after them are helpers (0, 1, ...) and the block
    programs get negative values. A helper takes an equal share of a data range (balanced segments) and
    joins the instance that the data gives that share to (`owned_instances` with `helper_block`)."""

    group: int
    blocks: LaunchExpr
    helpers: str  # the constexpr H: the helpers at the end of the group's segment
    # the group's look-back sync buffer where the programs take their positions from a ticket (a region scan's
    # helpers, physical/passes/balance_region_scan.py): the index is then `ticket - blocks`, the ticket drawn here
    # (the owned_instances after it decodes the same one), so helpers follow the blocks in the order they start
    ticket: int | None = None


@pop("ticket", READS | WRITES | EFFECTS)
class Ticket(POp):
    """Draw a ticket: atomically add 1 to the counter element at `access` (per member), acquire-release at
    device scope, and return the count before the addition (an i32; members outside the mask get 0 and
    draw none). Every write of the program before the ticket is visible to whoever draws a later ticket
    of that counter, and whoever draws it sees the writes of everyone who drew an earlier one."""

    access: AccessRelation


# ---------------------------------------------------------------------------------------------- typing


@typing_rule(SplitIndex, one_result=True)
def _split_index(op: SplitIndex, r: Fragment) -> list[str]:
    return [] if r.is_scalar and r.dtype.is_int else [f"a split position is a uniform integer scalar, got {r}"]


@typing_rule(HelperIndex, one_result=True)
def _helper_index(op: HelperIndex, r: Fragment) -> list[str]:
    return [] if r.is_scalar and r.dtype.is_int else [f"a helper position is a uniform integer scalar, got {r}"]


@typing_rule(Ticket, one_result=True)
def _ticket(op: Ticket, r: Fragment) -> list[str]:
    lanes = any(v.type.lanes for v in op.access.operands())
    if r.tile or r.dtype is not DType.i32 or r.lanes != lanes:
        return [f"a ticket is an i32 per member of its access ({'lanes' if lanes else 'uniform'}), got {r}"]
    return []


# ---------------------------------------------------------------------------------------------- members


effect_members(Ticket)(access_members)
