"""Histogram: per-bin counts of a fragment's values along its last tile axis."""

from __future__ import annotations

from ..model import POp, PValue
from ._base import pop


@pop("histogram")
class Histogram(POp):
    """Count, for each bin b of the result's last tile axis, the members of `values`' last tile axis
    equal to b; values outside [0, bins) and members outside `member` are not counted."""

    values: PValue
    member: PValue | None
