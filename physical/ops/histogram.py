"""Histograms: per-bin counts of a fragment's values (per lane), and of a whole program's values."""

from __future__ import annotations

from kir.dtypes import DType

from ..model import POp, PValue
from ._base import PURE, pop, results_problem, typed_elsewhere, typing_rule


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


# ---------------------------------------------------------------------------------------------- typing


typing_rule(Histogram)(typed_elsewhere)


@typing_rule(BinCount)
def _bincount(op: BinCount) -> list[str]:
    out = results_problem(op, 1)
    if not op.values.type.dtype.is_int:
        out.append(f"bincount counts integers, got {op.values.type}")
    if not (op.base.type.is_scalar and op.base.type.dtype.is_int):
        out.append(f"bincount base is a uniform integer, got {op.base.type}")
    if op.member is not None and not op.member.type.dtype.is_pred:
        out.append(f"bincount member is {op.member.type}, not pred")
    if op.results:
        r = op.results[0].type
        if r.dtype != DType.i32 or r.lanes or len(r.tile) != 1:
            out.append(f"bincount gives uniform i32 counts over one bins axis, got {r}")
    return out
