"""Combines shared by reduce, scan and region folds: built-in kinds and author-written regions.

A combine region is scalar code; here it runs elementwise over whole tensors (every element pair at
once), so the orders the oracle uses carry over exactly: a custom reduction folds adjacent pairs
level by level (`tree_fold`), a custom scan is a Hillis-Steele scan, and a region fold is
sequential. A region may read scalars defined around it (per instance); they are broadcast to the
operands' shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from kir.core import RefType, Region, Value
from kir.dtypes import DType
from kir.reduce import EMPTY_ARG_INDEX, ReduceKind, combine_fn
from kir.reduce import identity as reduce_identity

from .context import Ctx
from .pointwise import binary_op_name
from .registry import captured, run_region
from .values import Val

Combiner = Callable[[list[Val], list[Val]], list[Val]]

def builtin_op(kind: ReduceKind) -> str:
    """The StableHLO op of a built-in kind's combine (kir.reduce.COMBINE)."""
    return binary_op_name(combine_fn(kind))


def identity(kind: ReduceKind, dtype: DType) -> int | float | bool:
    """A built-in combine's initial value: kir.reduce's identity (-0.0 for a float sum, exact for every
    addend), argmax/argmin's empty index (-1)."""
    if kind in (ReduceKind.argmax, ReduceKind.argmin):
        return EMPTY_ARG_INDEX
    return reduce_identity(kind, dtype)


def apply_region(ctx: Ctx, region: Region, args: Sequence[Val]) -> list[Val]:
    """Evaluate a scalar region elementwise over tensors that all have one shape (lanes first)."""
    shape = args[0].shape
    depth = args[0].depth
    outside = []
    for v in captured(region):
        if isinstance(v.type, RefType):
            raise ctx.refuse("a combine or map region that reads memory has no elementwise StableHLO form")
        x = original = ctx.get(v)
        if x.logical:
            raise ctx.refuse("a combine or map region that reads a non-scalar value from outside it has no "
                             "elementwise StableHLO form")
        if x.depth > depth:
            raise ctx.refuse("the combine region reads a value that varies across more parallel instances than "
                             "its operands")
        x = ctx.lift(x, depth)
        wide = ctx.ssa.broadcast_in_dim(x, shape, list(range(x.depth)), len(shape))
        outside.append((v, original, wide))
    with ctx.elementwise(shape):
        for v, _, wide in outside:
            ctx.set(v, wide)
        outs = run_region(ctx, region, [dataclasses.replace(a, depth=len(shape)) for a in args])
        outs = [ctx.lift(o, len(shape)) for o in outs]
    for v, x, _ in outside:  # the value as it was: what was lifted here may live in a nested region
        ctx.set(v, x)
    return [dataclasses.replace(o, depth=depth) for o in outs]


def captured_depth(ctx: Ctx, region: Region | None) -> int:
    """The batch depth of the scalars a region reads from outside it (its operands need at least that)."""
    if region is None:
        return 0
    return max([ctx.get(v).depth for v in captured(region) if not isinstance(v.type, RefType)], default=0)


def combine_inputs(ctx: Ctx, inputs: tuple[Value, ...], combine: Region | None) -> list[Val]:
    """The inputs of a reduction or scan at one batch depth, at least that of what its `combine` region reads."""
    xs = ctx.lift_all(*(ctx.get(v) for v in inputs))
    need = captured_depth(ctx, combine)
    return [ctx.lift(x, max(x.depth, need)) for x in xs]


def region_combiner(ctx: Ctx, region: Region, swap: bool = False) -> Combiner:
    """`combine(a, b)` by the region; `swap` passes (b, a), for scans that run from the end."""

    def combine(a: list[Val], b: list[Val]) -> list[Val]:
        first, second = (b, a) if swap else (a, b)
        return apply_region(ctx, region, first + second)

    return combine


def builtin_combiner(ctx: Ctx, kind: ReduceKind) -> Combiner:
    def combine(a: list[Val], b: list[Val]) -> list[Val]:
        return [apply_builtin(ctx, kind, a[0], b[0])]

    return combine


def apply_builtin(ctx: Ctx, kind: ReduceKind, a: Val, b: Val) -> Val:
    a, b = ctx.lift_all(a, b)
    return ctx.ssa.binary(builtin_op(kind), a, b)


def tree_fold(ctx: Ctx, combine: Combiner, xs: list[Val]) -> list[Val]:
    """Fold the last axis (extent n >= 1) by combining adjacent pairs level by level (the oracle's tree).

    One `stablehlo.while` over the levels keeps the module small: the live prefix of length m (n,
    then ceil(n/2), ...) is folded pairwise into its first ceil(m/2) places; an odd last element
    moves down unpaired. Places past the live prefix hold leftovers that are never read.
    """
    s = ctx.ssa
    n = xs[0].shape[-1]
    if n == 1:
        return [s.reshape(x, x.shape[:-1], x.depth) for x in xs]
    half = (n + 1) // 2
    lead = xs[0].rank - 1

    def take(x: Val, start: int, stop: int, step: int) -> Val:
        return s.slice(x, [0] * lead + [start], list(x.shape[:-1]) + [stop], [1] * lead + [step])

    def cond(args: list[Val]) -> list[Val]:
        return [s.compare("GT", args[0], ctx.splat(1, DType.i64))]

    def body(args: list[Val]) -> list[Val]:
        with ctx.nested():
            live, *cur = args
            evens = [take(x, 0, n, 2) for x in cur]
            odds = [take(x, 1, n, 2) for x in cur]
            odds = [s.pad(o, ctx.splat(0, o.dtype), [0] * (lead + 1), [0] * lead + [half - o.shape[-1]])
                    for o in odds]
            merged = combine(evens, odds)
            pairs = s.binary("divide", live, ctx.splat(2, DType.i64))
            pos = s.iota(DType.i64, evens[0].shape, lead, evens[0].depth)
            paired = s.compare("LT", pos, s.broadcast_in_dim(pairs, pos.shape, [], pos.depth))
            folded = [s.select(paired, m, e) for m, e in zip(merged, evens)]
            rest = [take(x, half, n, 1) for x in cur]
            nxt = [s.concatenate([f, r], lead, x.depth) for f, r, x in zip(folded, rest, cur)]
            return [s.binary("subtract", live, pairs)] + nxt

    with ctx.nested():
        outs = s.while_([ctx.splat(n, DType.i64)] + xs, cond, body, "tree")
    return [s.reshape(take(x, 0, 1, 1), x.shape[:-1], x.depth) for x in outs[1:]]
