"""Counter-based random numbers: `intent.rand/randn/randint(seed, offset)` -> KIR random (Philox)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..rng import Random, RngKind
from .calls import CallArgs, spelling
from .coerce import WEAK_INT, is_int_like, to_tval, weak_to
from .values import DimExpr, FValue, Num, RefV, TVal, a_type, describe

if TYPE_CHECKING:
    from .lower import Lowerer


def _int_operand(lw: Lowerer, call: CallArgs, pname: str, scalar_only: bool) -> TVal:
    fv = call.value(pname)
    node = call.arg_node(pname)
    if isinstance(fv, Num) and isinstance(fv.value, int) and not isinstance(fv.value, bool) or isinstance(fv, DimExpr):
        return weak_to(lw, fv, WEAK_INT, node, f"intent.{call.name}")
    if not isinstance(fv, TVal | RefV):
        raise lw.error(node, f"intent.{call.name}(): `{pname}` must be an integer, got {describe(fv)}")
    tv = to_tval(lw, fv, node, f"intent.{call.name}")
    if not is_int_like(tv.dtype):
        raise lw.error(node, f"intent.{call.name}(): `{pname}` must be an integer, got {a_type(tv.dtype)}; convert "
                             f"with `.to(i64)`")
    if scalar_only and tv.shape:
        raise lw.error(node, f"intent.{call.name}(): the seed is one integer, got {a_type(tv.type)}")
    return tv


@spelling("rand", "randn", "randint")
def random(lw: Lowerer, call: CallArgs) -> FValue:
    seed = _int_operand(lw, call, "seed", True)
    offset = _int_operand(lw, call, "offset", False)
    return TVal(lw.add(Random, call.node, kind=RngKind(call.name), seed=seed.value, offset=offset.value))
