"""Folds and scans across the lanes of a program (the leading axis of size BLOCK_I), in lane order.

A program's lanes are its instances, and nearly all work is lane by lane. Where the lanes of one program cooperate
on one piece of work (a balanced region scan's helper holds its chunk across the lanes of the block it joins, lane
l the l-th run of it: physical/passes/balance_region_scan.py), these combine values across them: `LaneFold` folds
the lanes into one uniform value, `LaneScan` gives each lane the combine of the lanes before it (or after it, in
reverse), both in lane order, so float results do not depend on timing.
"""

from __future__ import annotations

from kir.dtypes import DType
from kir.reduce import ReduceKind
from kir.scan import ScanKind

from ..model import Literal, POp, PRegion, PValue
from ._base import INVARIANT, PURE, pop, typed_elsewhere, typing_rule
from .reduce import native_reduce
from .scan import native_scan


@pop("lane_fold", PURE | INVARIANT)
class LaneFold(POp):
    """Fold the lanes of every input (lanes, no tile) with `combine`, in lane order: uniform scalars.

    Components are cast to `acc_dtypes` before combining and the results back to the inputs' dtypes; `kind`
    names the built-in the combine implements (or `custom`), so that an emitter may fold natively."""

    @property
    def native(self) -> bool:
        return native_reduce(self.kind)

    inputs: tuple[PValue, ...]
    kind: ReduceKind
    identity: tuple[Literal, ...]
    acc_dtypes: tuple[DType, ...]
    combine: PRegion


@pop("lane_scan", PURE | INVARIANT)
class LaneScan(POp):
    """Prefix-combine the lanes of every input (lanes, no tile), in lane order: forward, lane j gets lanes
    0 .. j; reverse, lanes j .. BLOCK_I - 1 (lanes keep their order: the suffix is the combine's right operand).
    Exclusive results leave out lane j's own value (the identity at the start)."""

    @property
    def native(self) -> bool:
        return native_scan(self.kind, len(self.inputs), self.exclusive, self.acc_dtypes[0])

    inputs: tuple[PValue, ...]
    kind: ScanKind
    reverse: bool
    exclusive: bool
    identity: tuple[Literal, ...]
    acc_dtypes: tuple[DType, ...]
    combine: PRegion


# ---------------------------------------------------------------------------------------------- typing


typing_rule(LaneFold, LaneScan)(typed_elsewhere)
