"""Sorting along one tile axis (KIR `sort`): values and their i64 positions, optionally the first k."""

from __future__ import annotations

from kir.dims import DConst
from kir.dtypes import DType

from ..model import Fragment, POp, PValue
from ._base import INVARIANT, PURE, pop, results_problem, typing_rule


@pop("sort", PURE | INVARIANT)
class Sort(POp):
    """Order tile axis `axis` of `x` by (value, position): NaN after every number (`-0.0` equals `0.0`),
    reversed for `descending` except that equal values keep position order; results are the values and
    their positions along the axis. With `k`, the results' axis keeps the first k (its tile axis is the
    results' own). Positions outside `member` (padding) sort after every element.
    """

    x: PValue
    axis: int
    descending: bool
    k: int | None
    member: PValue | None


# ---------------------------------------------------------------------------------------------- typing


@typing_rule(Sort)
def _sort(op: Sort) -> list[str]:
    out = results_problem(op, 2)
    if out:
        return out
    x, (values, positions) = op.x.type, op.results
    if not 0 <= op.axis < len(x.tile):
        return [f"axis {op.axis} is not a tile axis of {x}"]
    tile = x.tile
    if op.k is not None:
        kept = values.type.tile[op.axis:op.axis + 1]
        if not kept or kept[0].extent != DConst(op.k):
            return [f"the first {op.k} along axis {op.axis} have tile {values.type}"]
        tile = tile[:op.axis] + kept + tile[op.axis + 1:]
    for r, dt in ((values.type, x.dtype), (positions.type, DType.i64)):
        if r != Fragment(dt, x.lanes, tile):
            out.append(f"result {r} is not {Fragment(dt, x.lanes, tile)}")
    if op.member is not None and (op.member.type.dtype != DType.pred or op.member.type.tile != x.tile):
        out.append(f"member {op.member.type} is not a pred over the input's tile")
    return out
