"""Scans along one tile axis: inclusive/exclusive, forward/reverse, typed combine region."""

from __future__ import annotations

from kir.dtypes import DType
from kir.scan import ScanKind

from ..model import Literal, POp, PRegion, PValue
from ._base import pop


@pop("scan")
class Scan(POp):
    """Prefix-combine tile axis `axis` of the inputs.

    Forward: out[j] = x[0] (+) ... (+) x[j]; reverse: out[j] = x[j] (+) ... (+) x[n-1] (elements keep their
    index order in both directions, as in the oracle: the running prefix is the combine's left operand
    going forward and its right operand in reverse). Exclusive results leave out x[j] (identity at the
    start). Members outside `member` take the identity before scanning.
    """

    inputs: tuple[PValue, ...]
    axis: int
    kind: ScanKind
    reverse: bool
    exclusive: bool
    identity: tuple[Literal, ...]
    acc_dtypes: tuple[DType, ...]
    member: PValue | None
    combine: PRegion
