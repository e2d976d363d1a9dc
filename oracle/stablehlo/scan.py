"""Scans by log-step prefix combination (Hillis-Steele): ceil(log2 n) shifted combines along the axis.

Step d combines each element with the running value d places earlier (`combine(earlier, later)`,
so non-commutative combines keep their order); this is the oracle's order for custom combines.
Integer, max/min and logical scans are exact; float sums and products associate differently from
the oracle's sequential loop (within tolerance). As in the oracle, a scan starts from the identity
when it is exclusive (or a built-in scan is given an identity): the identity is prepended, the scan
runs, and the extra element is dropped. A reverse scan reverses, scans with the combine's operands
swapped (so the original left-to-right order holds) and reverses back.
"""

from __future__ import annotations

from collections.abc import Sequence

from kir.core import Op
from kir.dtypes import DType
from kir.reduce import default_acc
from kir.scan import Scan, ScanKind

from .combine import Combiner, builtin_combiner, combine_inputs, identity, region_combiner
from .context import Ctx
from .pointwise import concrete
from .registry import emits
from .values import Val


def _along(x: Val, axis: int, value: int, other: int = 0) -> list[int]:
    out = [other] * x.rank
    out[axis] = value
    return out


def inclusive_scan(ctx: Ctx, xs: list[Val], axis: int, combine: Combiner) -> list[Val]:
    """Hillis-Steele in one `stablehlo.while` over the steps d = 1, 2, 4, ...: each step combines an element
    with the running value d places earlier (read from a copy padded with n leading places)."""
    s = ctx.ssa
    n = xs[0].shape[axis]
    if n <= 1:
        return xs

    def cond(args: list[Val]) -> list[Val]:
        return [s.compare("LT", args[0], ctx.splat(n, DType.i64))]

    def body(args: list[Val]) -> list[Val]:
        with ctx.nested():
            d, *cur = args
            zero = ctx.splat(0, DType.i64)
            start = [zero] * cur[0].rank
            start[axis] = s.binary("subtract", ctx.splat(n, DType.i64), d)
            earlier = [s.dynamic_slice(s.pad(x, ctx.splat(0, x.dtype), _along(x, axis, n), _along(x, axis, 0)),
                                       start, list(x.shape), x.depth) for x in cur]
            combined = combine(earlier, cur)
            pos = s.iota(DType.i64, cur[0].shape, axis, cur[0].depth)
            has_earlier = s.compare("GE", pos, s.broadcast_in_dim(d, pos.shape, [], pos.depth))
            nxt = [s.select(has_earlier, c, x) for c, x in zip(combined, cur)]
            return [s.binary("multiply", d, ctx.splat(2, DType.i64))] + nxt

    with ctx.nested():
        outs = s.while_([ctx.splat(1, DType.i64)] + xs, cond, body, "scan")
    return outs[1:]


def scan(ctx: Ctx, xs: list[Val], axis: int, combine: Combiner, starts: Sequence[int | float | bool] | None,
         reverse: bool, exclusive: bool) -> list[Val]:
    """Scan along `axis`; with `starts`, the scan is seeded with them (prepended, then dropped)."""
    s = ctx.ssa
    if reverse:
        xs = [s.reverse(x, [axis]) for x in xs]
    if starts is not None:
        xs = [s.pad(x, ctx.splat(v, x.dtype), _along(x, axis, 1), _along(x, axis, 0)) for x, v in zip(xs, starts)]
    out = inclusive_scan(ctx, xs, axis, combine)
    if starts is not None:
        lo = 0 if exclusive else 1
        out = [s.slice(x, _along(x, axis, lo), [d - (1 - lo) if a == axis else d for a, d in enumerate(x.shape)])
               for x in out]
    if reverse:
        out = [s.reverse(x, [axis]) for x in out]
    return out


@emits(Scan)
def _scan(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Scan)
    xs = combine_inputs(ctx, op.inputs, op.combine)
    axis = xs[0].depth + op.axis
    if op.kind is ScanKind.custom:
        assert op.combine is not None and op.identity is not None
        starts = list(op.identity) if op.exclusive else None
        outs = scan(ctx, xs, axis, region_combiner(ctx, op.combine, swap=op.reverse), starts, op.reverse,
                    op.exclusive)
    else:
        kind = op.kind.as_reduce
        dtype = xs[0].dtype
        acc = concrete(ctx, op.acc_dtype or default_acc(kind, dtype) or dtype)
        x = ctx.ssa.convert(xs[0], acc)
        seeded = op.exclusive or op.identity is not None
        start = op.identity[0] if op.identity else identity(kind, acc)
        (out,) = scan(ctx, [x], axis, builtin_combiner(ctx, kind), [start] if seeded else None, op.reverse,
                      op.exclusive)
        outs = [ctx.ssa.convert(out, dtype)]
    for v, out in zip(op.results, outs):
        ctx.set(v, out)
