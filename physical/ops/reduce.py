"""Reductions over tile axes: identity per component, typed combine region, accumulator dtypes."""

from __future__ import annotations

from kir.dtypes import DType
from kir.reduce import ReduceKind

from ..model import Literal, POp, PRegion, PValue
from ._base import INVARIANT, PURE, pop, typed_elsewhere, typing_rule

# Built-in kinds the target folds natively (Triton's tl.sum, tl.max, tl.argmax, ...); prod has none.
NATIVE_REDUCE = frozenset({ReduceKind.sum, ReduceKind.max, ReduceKind.min, ReduceKind.any, ReduceKind.all,
                           ReduceKind.argmax, ReduceKind.argmin})


def native_reduce(kind: ReduceKind, n_axes: int = 1) -> bool:
    """Whether a fold of `kind` over `n_axes` tile axes uses the target's native reduction; otherwise it folds
    in element order with its combine region (a tree). argmax/argmin over several axes fold (value,
    position) pairs with the combine, so that the first extreme in row-major order wins. The one place
    this is decided: register budgets (passes/looped.py) and the emitter read it.
    """
    return kind in NATIVE_REDUCE and (kind not in (ReduceKind.argmax, ReduceKind.argmin) or n_axes == 1)


@pop("reduce", PURE | INVARIANT)
class Reduce(POp):
    """Fold tile axes `axes` of every input with `combine`.

    Members outside `member` (padding, inactive elements) take `identity`. Components are cast to
    `acc_dtypes` before combining and the results back to the result dtypes. `combine` takes
    (a_1..a_k, b_1..b_k) scalars of the accumulator dtypes and yields k scalars; `kind` names the
    built-in it implements (or `custom`), so that an emitter may use a native reduction for it.
    For argmax/argmin the inputs are (values, indices) and the results (value, index).
    """

    @property
    def native(self) -> bool:  # decided here, read by the register budgets and the emitter
        return native_reduce(self.kind, len(self.axes))

    inputs: tuple[PValue, ...]
    axes: tuple[int, ...]
    kind: ReduceKind
    identity: tuple[Literal, ...]
    acc_dtypes: tuple[DType, ...]
    member: PValue | None
    combine: PRegion


# ---------------------------------------------------------------------------------------------- typing


typing_rule(Reduce)(typed_elsewhere)
