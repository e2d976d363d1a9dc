"""`intent.histogram(values, bins)` -> KIR histogram (i32 counts; values outside [0, bins) are ignored)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..histogram import Histogram
from .calls import CallArgs, spelling
from .coerce import is_int_like, to_tval
from .pointwise import static_dim
from .values import FValue, TVal, describe

if TYPE_CHECKING:
    from .lower import Lowerer


@spelling("histogram")
def histogram(lw: Lowerer, call: CallArgs) -> FValue:
    values = to_tval(lw, call.value("values"), call.arg_node("values"), "intent.histogram")
    if not is_int_like(values.dtype):
        raise lw.error(call.arg_node("values"), f"intent.histogram counts integer values, got {values.dtype}; "
                                                f"compute bin numbers first, e.g. `(x * B).to(i32)`")
    bins = static_dim(call.value("bins"))
    if bins is None:
        raise lw.error(call.arg_node("bins"), f"intent.histogram: `bins` is a shape expression (a dim or an integer "
                                              f"constant), got {describe(call.value('bins'))}")
    return TVal(lw.add(Histogram, call.node, values=values.value, bins=bins))
