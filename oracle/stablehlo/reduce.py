"""Reductions: built-in kinds as `stablehlo.reduce`, argmax/argmin over (value, index) pairs, custom
combines as the oracle's pairwise tree.

f16/bf16 sums and products accumulate in f32 (convert, reduce, convert back), as the oracle does;
an identity given for a built-in kind is the accumulator's initial value. argmax/argmin return the
first index of the extreme, NaN counting as the extreme (-1 over an empty extent); over several
axes the index is row-major within the reduced axes. A custom combine need not be commutative:
the tree keeps left-to-right order (`stablehlo.reduce` would not promise an order).
"""

from __future__ import annotations

from kir.core import Op
from kir.dtypes import DType
from kir.reduce import Reduce, ReduceKind

from .combine import builtin_op, combine_inputs, identity, region_combiner, tree_fold
from .context import Ctx
from .pointwise import concrete
from .registry import emits
from .values import Val


def reduce_builtin(ctx: Ctx, kind: ReduceKind, x: Val, axes: list[int], acc: DType, out: DType,
                   initial: int | float | bool | None = None) -> Val:
    s = ctx.ssa
    x = s.convert(x, acc)
    init = ctx.splat(identity(kind, acc) if initial is None else initial, acc)
    op_name = builtin_op(kind)
    (r,) = s.reduce([x], [init], axes, lambda a: [s.binary(op_name, a[0], a[1])], x.depth, str(kind))
    return s.convert(r, out)


def _arg_wins(ctx: Ctx, kind: ReduceKind, av: Val, ai: Val, bv: Val, bi: Val) -> Val:
    """Whether (av, ai) beats (bv, bi): more extreme, or NaN against a number, or a tie at a lower index."""
    s = ctx.ssa
    better = s.compare("GT" if kind is ReduceKind.argmax else "LT", av, bv)
    tie = s.compare("EQ", av, bv)
    if av.dtype.is_float:
        a_nan, b_nan = s.compare("NE", av, av), s.compare("NE", bv, bv)
        better = s.binary("or", better, s.binary("and", a_nan, s.unary("not", b_nan)))
        tie = s.binary("or", tie, s.binary("and", a_nan, b_nan))
    first = s.binary("and", tie, s.compare("LT", ai, bi))
    return s.binary("or", better, first)


def flatten_last(ctx: Ctx, x: Val, axes: list[int]) -> Val:
    """`x` with `axes` moved last and flattened into one (row-major over them)."""
    s = ctx.ssa
    keep = [i for i in range(x.rank) if i not in axes]
    n = 1
    for a in axes:
        n *= x.shape[a]
    t = s.transpose(x, keep + list(axes), x.depth)
    return s.reshape(t, tuple(x.shape[i] for i in keep) + (n,), x.depth)


def reduce_arg(ctx: Ctx, kind: ReduceKind, x: Val, axes: list[int]) -> Val:
    s = ctx.ssa
    flat = flatten_last(ctx, x, axes)
    last = flat.rank - 1
    if flat.shape[-1] == 0:
        return ctx.splat(-1, DType.i64, flat.shape[:-1], x.depth)
    if flat.dtype.is_fp8:  # compared in f32, exactly, as the oracle and the launch compare fp8 values
        flat = s.convert(flat, DType.f32)
    idx = s.iota(DType.i64, flat.shape, last, x.depth)
    extreme = identity(ReduceKind.max if kind is ReduceKind.argmax else ReduceKind.min, flat.dtype)
    inits = [ctx.splat(extreme, flat.dtype), ctx.splat(DType.i64.int_range[1], DType.i64)]

    def body(a: list[Val]) -> list[Val]:
        av, ai, bv, bi = a
        wins = _arg_wins(ctx, kind, av, ai, bv, bi)
        return [s.select(wins, av, bv), s.select(wins, ai, bi)]

    _, index = s.reduce([flat, idx], inits, [last], body, x.depth, str(kind))
    return index


def reduce_custom(ctx: Ctx, op: Reduce, xs: list[Val], axes: list[int]) -> list[Val]:
    assert op.combine is not None and op.identity is not None
    flats = [flatten_last(ctx, x, axes) for x in xs]
    if flats[0].shape[-1] == 0:
        return [ctx.splat(lit, x.dtype, f.shape[:-1], x.depth) for lit, x, f in zip(op.identity, xs, flats)]
    return tree_fold(ctx, region_combiner(ctx, op.combine), flats)


@emits(Reduce)
def _reduce(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Reduce)
    xs = combine_inputs(ctx, op.inputs, op.combine)
    d = xs[0].depth
    axes = [d + a for a in op.axes]
    if op.kind is ReduceKind.custom:
        outs = reduce_custom(ctx, op, xs, axes)
    elif op.kind in (ReduceKind.argmax, ReduceKind.argmin):
        outs = [reduce_arg(ctx, op.kind, xs[0], axes)]
    else:
        acc = concrete(ctx, op.effective_acc())
        initial = op.identity[0] if op.identity else None
        outs = [reduce_builtin(ctx, op.kind, xs[0], axes, acc, xs[0].dtype, initial)]
    for v, out in zip(op.results, outs):
        if op.keepdims:
            shape = tuple(1 if a in op.axes else n for a, n in enumerate(xs[0].logical))
            out = ctx.ssa.reshape(out, out.batch + shape, out.depth)
        ctx.set(v, out)
