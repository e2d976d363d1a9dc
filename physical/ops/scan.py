"""Scans along one tile axis: inclusive/exclusive, forward/reverse, typed combine region."""

from __future__ import annotations

from kir.dtypes import DType
from kir.scan import ScanKind

from ..model import Literal, POp, PRegion, PValue
from ._base import pop


@pop("scan")
class Scan(POp):
    """Prefix-combine tile axis `axis` of the inputs.

    Forward: out[j] = x[0] (+) ... (+) x[j]; reverse: out[j] = x[n-1] (+) ... (+) x[j] (the combine's
    left operand is the running prefix). Exclusive results leave out x[j] (identity at the start).
    Members outside `member` take the identity before scanning.
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
