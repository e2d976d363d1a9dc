"""Scans along one tile axis: inclusive/exclusive, forward/reverse, typed combine region."""

from __future__ import annotations

from kir.dtypes import DType
from kir.scan import ScanKind

from ..model import Literal, POp, PRegion, PValue
from ._base import INVARIANT, PURE, pop, typed_elsewhere, typing_rule


def native_scan(kind: ScanKind, components: int, exclusive: bool, acc: DType) -> bool:
    """Whether a scan uses the target's native cumulative sum or product (one component); otherwise it runs
    the element-order tree with its combine region. An exclusive scan is native only where the inclusive
    scan minus the element is exact, an integer sum (wrapping): a float sum would round, and a product
    has no inverse (x / 0). The one place this is decided: register budgets (passes/looped.py) and the
    emitter read it.
    """
    if kind not in (ScanKind.sum, ScanKind.prod) or components != 1:
        return False
    return not exclusive or (kind is ScanKind.sum and acc.is_int)


@pop("scan", PURE | INVARIANT)
class Scan(POp):
    """Prefix-combine tile axis `axis` of the inputs.

    Forward: out[j] = x[0] (+) ... (+) x[j]; reverse: out[j] = x[j] (+) ... (+) x[n-1] (elements keep their
    index order in both directions, as in the oracle: the running prefix is the combine's left operand
    going forward and its right operand in reverse). Exclusive results leave out x[j] (identity at the
    start). Members outside `member` take the identity before scanning.
    """

    @property
    def native(self) -> bool:  # decided here, read by the register budgets and the emitter
        return native_scan(self.kind, len(self.inputs), self.exclusive, self.acc_dtypes[0])

    inputs: tuple[PValue, ...]
    axis: int
    kind: ScanKind
    reverse: bool
    exclusive: bool
    identity: tuple[Literal, ...]
    acc_dtypes: tuple[DType, ...]
    member: PValue | None
    combine: PRegion


# ---------------------------------------------------------------------------------------------- typing


typing_rule(Scan)(typed_elsewhere)
