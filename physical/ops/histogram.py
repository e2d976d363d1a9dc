"""Histograms: per-bin counts of a fragment's values (per lane), and of a whole program's values."""

from __future__ import annotations

from ..model import POp, PValue
from ._base import PURE, pop


@pop("histogram", PURE)
class Histogram(POp):
    """Count, for each bin b of the result's last tile axis, the members of `values`' tile (all its
    axes, per lane) equal to b; values outside [0, bins) and members outside `member` are not
    counted."""

    values: PValue
    member: PValue | None


@pop("bincount", PURE)
class BinCount(POp):
    """Counts over every member of `values` (all lanes and tile positions) of the values equal to
    `base + b`, for each position b of the result's bins tile (a uniform i32 tile): the counts of one
    chunk of bins, aggregated over the instances a program owns. Values outside the chunk and members
    outside `member` are not counted."""

    values: PValue
    base: PValue
    member: PValue | None
