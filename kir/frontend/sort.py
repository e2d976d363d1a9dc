"""`intent.sort`, `intent.argsort` and `intent.topk` along an axis -> KIR `sort` (see kir/sort.py for the order:
stable, NaN after every number ascending and before every number descending, as torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dims import DConst, PCmp
from ..sort import Sort
from .calls import CallArgs, spelling
from .coerce import is_pred, to_tval
from .region import find_region, region_scope
from .values import FValue, TupleV, TVal, describe

if TYPE_CHECKING:
    from .lower import Lowerer


def _input(lw: Lowerer, call: CallArgs) -> tuple[TVal, int]:
    what = f"intent.{call.name}"
    with region_scope(lw):
        if find_region(lw, [call.arg_node("x")], call.node, what) is not None:
            raise lw.error(call.arg_node("x"), f"{what}() of a data-dependent subregion x[b:e] is not supported: a "
                                               f"sort needs a row of launch-known length")
        fv = call.value("x")
    x = to_tval(lw, fv, call.arg_node("x"), what)
    if x.rank == 0:
        raise lw.error(call.arg_node("x"), f"{what}() needs a value of rank 1 or more, got {describe(x)}")
    if is_pred(x.dtype):
        raise lw.error(call.arg_node("x"), f"{what}() orders numbers, not pred values; convert first, e.g. "
                                           f"x.to(i32)")
    axis = call.static_int("axis")
    if not -x.rank <= axis < x.rank:
        raise lw.error(call.arg_node("axis"), f"{what}(): axis {axis} is out of range for rank {x.rank}")
    return x, axis % x.rank


def _sorted(lw: Lowerer, call: CallArgs, x: TVal, axis: int, descending: bool, k: int | None) -> tuple[TVal, TVal]:
    op = lw.make(Sort, call.node, x=x.value, axis=axis, descending=descending, k=k)
    values, indices = op.results
    return TVal(values, weak=x.weak), TVal(indices)


@spelling("sort")
def _sort(lw: Lowerer, call: CallArgs) -> FValue:
    x, axis = _input(lw, call)
    values, indices = _sorted(lw, call, x, axis, call.static_bool("descending"), None)
    return TupleV((values, indices)) if call.static_bool("return_indices") else values


@spelling("argsort")
def _argsort(lw: Lowerer, call: CallArgs) -> FValue:
    x, axis = _input(lw, call)
    return _sorted(lw, call, x, axis, call.static_bool("descending"), None)[1]


@spelling("topk")
def _topk(lw: Lowerer, call: CallArgs) -> FValue:
    x, axis = _input(lw, call)
    k = call.static_int("k")
    n = x.shape[axis]
    if k < 1 or not lw.proves_in_loops(PCmp("<=", DConst(k), n)):
        raise lw.error(call.arg_node("k"), f"intent.topk(): k = {k} must be at least 1 and at most the extent {n} of "
                                           f"axis {axis} (state it with requires=[...])")
    return TupleV(_sorted(lw, call, x, axis, call.static_bool("largest"), k))
