"""Look-back through an invocation workspace: programs of one launch pass values to higher tickets.

A group whose instances take their positions from an atomic ticket (`OwnedInstances.ticket`) may
exchange one value per instance through *slots*: `publish_slot` writes the instance's values into its own
slot of each slot buffer and then raises the slot's flag in the sync buffer (release); `fold_slots` waits
for the flags of a range of lower slots (acquire) and folds their values with a combine region in a fixed
order; `retire_ticket` counts the finished programs and has the last one restore the sync buffer to
zero. The sync buffer (i32) holds the ticket counter at 0, the finished-program counter at 1 and the slot
flags from 2 on; it is self-resetting (`BufferInit.SELF_RESETTING`): zero when a launch starts because the
previous launch left it so.
"""

from __future__ import annotations

from kir.dtypes import DType

from ..launch_expr import LaunchExpr
from ..model import Literal, POp, PRegion, PValue
from ._base import EFFECTS, LOOKBACK, active_members, effect_members, per_program, pop, typing_rule

SYNC_TICKET = 0   # sync buffer element: the next ticket
SYNC_DONE = 1     # ... the programs that have finished with the workspace
SYNC_FLAGS = 2    # ... first slot flag (slot s at SYNC_FLAGS + s)


def slot_dtype(acc: DType) -> DType:
    """What a slot buffer holds for an accumulator: its register form (bf16 and fp8 live in f32 registers,
    pred is stored as a byte)."""
    if acc.is_pred:
        return DType.i8
    if acc in (DType.bf16, DType.f8e4m3, DType.f8e5m2):
        return DType.f32
    return acc


@pop("publish_slot", EFFECTS | LOOKBACK)
class PublishSlot(POp):
    """Write `values[k]` into slot `slot` of slot buffer `slots[k]`, then set the slot's flag (release, after
    a barrier: every thread's writes of the program precede the flag). In a group whose S consecutive tickets
    share a block of several instances, each `active` lane writes its own slot and the program raises one flag,
    its ticket's."""

    sync: int
    slots: tuple[int, ...]
    slot: PValue
    values: tuple[PValue, ...]
    active: PValue | None = None  # the lanes that publish (a block's lanes past the instances do not)


@pop("fold_slots", EFFECTS | LOOKBACK)
class FoldSlots(POp):
    """Wait until the flags of slots `first <= s < upto` are set (acquire), then fold their values with
    `combine` in index order (`reverse`: from `upto - 1` down to `first`), `block` slots per step: each step
    an element-order tree, steps in sequence, so the order of combination depends on the range only, never
    on timing. An empty range gives `identity`. In a group whose S consecutive tickets share a block of several
    instances, each `active` lane folds its own slots (the same count in every lane), whose flags are those of
    the tickets just below the program's. A lane that is not `active` folds nothing (its result is `identity`):
    where a program owns one instance, it neither waits nor reads (a split region scan's piece past the end of
    a short subregion needs no prefix)."""

    sync: int
    slots: tuple[int, ...]
    first: PValue
    upto: PValue
    reverse: bool
    identity: tuple[Literal, ...]
    acc_dtypes: tuple[DType, ...]
    block: int
    combine: PRegion
    active: PValue | None = None  # the lanes that fold (a block's lanes past the instances, empty pieces do not)


@pop("retire_ticket", EFFECTS | LOOKBACK)
class RetireTicket(POp):
    """Count this program as finished with the workspace (acq_rel); the last of the `programs` programs
    restores the ticket counter, the finished counter and the `programs` slot flags to zero."""

    sync: int
    programs: LaunchExpr


# ---------------------------------------------------------------------------------------------- typing





# ---------------------------------------------------------------------------------------------- typing


@typing_rule(PublishSlot)
def _publish_types(op: PublishSlot) -> list[str]:
    out = [] if not op.results else [f"has {len(op.results)} results, expected 0"]
    if not (op.slot.type.dtype.is_int and not op.slot.type.tile):
        out.append(f"the slot must be an integer without a tile, got {op.slot.type}")
    if len(op.values) != len(op.slots):
        out.append(f"{len(op.values)} values for {len(op.slots)} slot buffers")
    for v in op.values:
        if v.type.tile or v.type.lanes != op.slot.type.lanes:
            out.append(f"a published value must have the slot's lanes and no tile, got {v.type}")
    return out + _active_types(op.active, op.slot)


def _active_types(active: PValue | None, slot: PValue) -> list[str]:
    if active is None or (active.type.dtype is DType.pred and not active.type.tile and
                          active.type.lanes == slot.type.lanes):
        return []
    return [f"the active lanes must be a predicate with the slot's lanes and no tile, got {active.type}"]


@typing_rule(FoldSlots)
def _fold_types(op: FoldSlots) -> list[str]:
    out = []
    n = len(op.acc_dtypes)
    if not (len(op.results) == len(op.slots) == len(op.identity) == n):
        out.append(f"{len(op.results)} results, {len(op.slots)} slot buffers, {len(op.identity)} identities and "
                   f"{n} accumulators must agree")
    for v in (op.first, op.upto):
        if not (v.type.dtype.is_int and not v.type.tile):
            out.append(f"a slot bound must be an integer without a tile, got {v.type}")
    for r, dt in zip(op.results, op.acc_dtypes):
        if r.type.tile or r.type.dtype != dt or r.type.lanes != op.upto.type.lanes:
            out.append(f"result {r.type} is not a {dt} with the bounds' lanes")
    args, ys = op.combine.args, op.combine.yielded
    if len(args) != 2 * n or [a.type.dtype for a in args] != list(op.acc_dtypes) * 2 or \
            [y.type.dtype for y in ys] != list(op.acc_dtypes):
        out.append(f"the combine must take two ({', '.join(map(str, op.acc_dtypes))}) and yield one")
    if op.block < 1 or op.block & (op.block - 1):
        out.append(f"the slots per step ({op.block}) must be a power of two")
    return out + _active_types(op.active, op.upto)


@typing_rule(RetireTicket)
def _retire_types(op: RetireTicket) -> list[str]:
    return [] if not op.results else [f"has {len(op.results)} results, expected 0"]


__all__ = ["PublishSlot", "FoldSlots", "RetireTicket", "slot_dtype", "SYNC_TICKET", "SYNC_DONE", "SYNC_FLAGS"]


# ---------------------------------------------------------------------------------------------- members


effect_members(RetireTicket)(per_program)
effect_members(PublishSlot, FoldSlots)(active_members)
