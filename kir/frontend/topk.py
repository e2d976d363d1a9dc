"""`intent.topk(x, k)`: the k largest elements of a 1-D value with their indices, composed of selections.

Each of the k steps takes the first maximum of the elements not yet taken (`argmax`, NaN counting as the
largest, as torch.topk) and selects it in registers; the result is exact and sorted, ties in index order.
The work is k passes over the row, which suits top-k sampling's small k.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..dims import DConst, PCmp
from ..dtypes import DType
from ..pointwise import BinaryFn, Iota, Unary, UnaryFn
from ..reduce import Reduce, ReduceKind, identity
from .calls import CallArgs, spelling
from .coerce import WEAK_INT, cast, constant, to_tval
from .values import FValue, TupleV, TVal, describe

if TYPE_CHECKING:
    from .lower import Lowerer


@spelling("topk")
def _topk(lw: Lowerer, call: CallArgs) -> FValue:
    from .pointwise import binary, compare_pair, select

    x = to_tval(lw, call.value("x"), call.arg_node("x"), "intent.topk")
    node = call.node
    if x.rank != 1:
        raise lw.error(call.arg_node("x"), f"intent.topk() takes a 1-D value (a row), got {describe(x)}; index the "
                                           f"row first, e.g. intent.topk(x[i, :], k)")
    dt = x.dtype
    if not isinstance(dt, DType) or dt.is_pred:
        raise lw.error(call.arg_node("x"), f"intent.topk() needs numbers of a concrete dtype, got {dt}")
    k = call.static_int("k")
    n = x.shape[0]
    if k < 1 or not lw.proves_in_loops(PCmp("<=", DConst(k), n)):
        raise lw.error(call.arg_node("k"), f"intent.topk(): k = {k} must be at least 1 and at most the row's "
                                           f"extent {n} (state it with requires=[...])")
    lowest = identity(ReduceKind.max, dt)  # f8e4m3 has no -inf (it would round to NaN): -448
    positions = TVal(lw.add(Iota, node, extent=n, dtype=WEAK_INT), weak=True)
    ranks = TVal(lw.add(Iota, node, extent=DConst(k), dtype=DType.i64))
    taken: TVal | None = None
    values: FValue = constant(lw, 0, dt, node) if not dt.is_float else constant(lw, 0.0, dt, node)
    indices: FValue = constant(lw, 0, DType.i64, node)
    for step in range(k):
        rest = x if taken is None else select(lw, taken, constant(lw, lowest, dt, node), x, node, node, node)
        first = TVal(lw.add(Reduce, node, inputs=(rest.value,), axes=(0,), kind=ReduceKind.argmax))
        if taken is not None:
            # only when every element left equals `lowest` can a taken one win: take the first one left instead
            free = cast(lw, TVal(lw.add(Unary, node, fn=UnaryFn.not_, x=taken.value)), DType.i32, node)
            left = TVal(lw.add(Reduce, node, inputs=(free.value,), axes=(0,), kind=ReduceKind.argmax))
            hit = compare_pair(lw, ast.Eq, positions, first, node, node, node)
            was = TVal(lw.add(Reduce, node, inputs=(select(lw, hit, taken, constant(lw, False, DType.pred, node),
                                                           node, node, node).value,), axes=(0,), kind=ReduceKind.any))
            first = select(lw, was, left, first, node, node, node)
        hit = compare_pair(lw, ast.Eq, positions, first, node, node, node)
        picked = TVal(lw.add(Reduce, node, inputs=(select(lw, hit, x, constant(lw, lowest, dt, node), node, node,
                                                          node).value,), axes=(0,), kind=ReduceKind.max))
        taken = hit if taken is None else binary(lw, "|", BinaryFn.or_, taken, hit, node, node, node)  # type: ignore
        here = compare_pair(lw, ast.Eq, ranks, constant(lw, step, DType.i64, node), node, node, node)
        values = select(lw, here, picked, values, node, node, node)
        indices = select(lw, here, cast(lw, first, DType.i64, node), indices, node, node, node)
    return TupleV((values, indices))

