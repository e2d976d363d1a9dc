"""Sorts: `stablehlo.sort` of (values, positions) along the axis, stable, with a comparator that puts NaN after
every number ascending and before every number descending (`-0.0` and `0.0` compare equal, so they keep their
order, as in the oracle); top-k keeps the first k by a slice."""

from __future__ import annotations

from kir.core import Op
from kir.dtypes import DType
from kir.sort import Sort

from .context import Ctx
from .registry import emits
from .values import Val


@emits(Sort)
def _sort(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Sort)
    s = ctx.ssa
    x = ctx.get(op.x)
    axis = x.depth + op.axis
    positions = s.iota(DType.i64, x.shape, axis, x.depth)
    is_float = x.dtype.is_float

    def before(args: list[Val]) -> list[Val]:
        a, b = args[0], args[1]
        strictly = s.compare("GT" if op.descending else "LT", a, b)
        if not is_float:
            return [strictly]
        a_nan, b_nan = s.compare("NE", a, a), s.compare("NE", b, b)
        nan_order = s.binary("and", a_nan, s.unary("not", b_nan)) if op.descending else \
            s.binary("and", s.unary("not", a_nan), b_nan)
        return [s.binary("or", strictly, nan_order)]

    values, order = s.sort([x, positions], axis, before, "sorted")
    if op.k is not None:
        limits = [op.k if d == axis else n for d, n in enumerate(x.shape)]
        values, order = (s.slice(v, [0] * v.rank, limits) for v in (values, order))
    ctx.set(op.results[0], values)
    ctx.set(op.results[1], order)
