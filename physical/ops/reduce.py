"""Reductions over tile axes: identity per component, typed combine region, accumulator dtypes."""

from __future__ import annotations

from kir.dtypes import DType
from kir.reduce import ReduceKind

from ..model import Literal, POp, PRegion, PValue
from ._base import pop


@pop("reduce")
class Reduce(POp):
    """Fold tile axes `axes` of every input with `combine`.

    Members outside `member` (padding, inactive elements) take `identity`. Components are cast to
    `acc_dtypes` before combining and the results back to the result dtypes. `combine` takes
    (a_1..a_k, b_1..b_k) scalars of the accumulator dtypes and yields k scalars; `kind` names the
    built-in it implements (or `custom`), so that an emitter may use a native reduction for it.
    For argmax/argmin the inputs are (values, indices) and the results (value, index).
    """

    inputs: tuple[PValue, ...]
    axes: tuple[int, ...]
    kind: ReduceKind
    identity: tuple[Literal, ...]
    acc_dtypes: tuple[DType, ...]
    member: PValue | None
    combine: PRegion
