"""Run-time errors the oracle raises, reported by the module: an error-state result checked after execution.

StableHLO cannot raise, so each op that may fail at run time (a region scan whose source and target
lengths differ; with checks on, out-of-range gathers, scatters, atomics and subregions) owns one
row of an i64 state tensor `[sites, 3]`: (failed, detail0, detail1) for the first failing element
in instance order. The state is carried like memory (through loops), returned as the module's last
result, and `runtime.execute` raises the oracle's error message for the first failed row.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from kir.core import Kernel, Op
from kir.dtypes import DType
from kir.errors import IntentError

from .context import Ctx, RefState
from .values import Val

ERROR_REF = -1  # the key of the error state among the refs
_BIG = DType.i64.int_range[1]


def checks_enabled(kernel: Kernel, checks: bool | None) -> bool:
    """Explicit `checks`, else the kernel's own flag, else `INTENT_CHECKS=1` (the oracle's rule)."""
    if checks is not None:
        return checks
    return kernel.checks or os.environ.get("INTENT_CHECKS", "") == "1"


@dataclass(frozen=True)
class Site:
    """One op's run-time check: `message(detail0, detail1)` is the error it raises."""

    message: Callable[[int, int], str]


def at(op: Op) -> str:
    return f" at {op.loc}" if op.loc is not None else ""


def site_tags(op: Op, checks_on: bool) -> list[str]:
    """The checks an op may fail, in the order the oracle tests them."""
    from kir.access import Gather, Scatter
    from kir.atomic import Atomic
    from kir.region import RegionFold, RegionScan

    if isinstance(op, RegionScan):
        return (["source point", "source subregion", "target point", "target subregion"] if checks_on else []) \
            + ["length"]
    if not checks_on:
        return []
    if isinstance(op, RegionFold):
        return ["point", "subregion"]
    if isinstance(op, Gather) and op.masked:
        return []
    if isinstance(op, Gather | Scatter | Atomic):
        return ["index"]
    return []


def setup(ctx: Ctx, kernel: Kernel, checks_on: bool) -> None:
    """Give every check of every op a row of the error state (zeros: nothing failed)."""
    rows = [(id(op), tag) for op in kernel.walk() for tag in site_tags(op, checks_on)]
    ctx.sites = {key: n for n, key in enumerate(rows)}
    ctx.site_ops = {id(op) for op in kernel.walk() if site_tags(op, checks_on)}
    if rows:
        ctx.refs[ERROR_REF] = RefState(ctx.splat(0, DType.i64, (len(rows), 3)), "errors")


def has_site(ctx: Ctx, op: Op, tag: str) -> bool:
    return (id(op), tag) in ctx.sites


def report(ctx: Ctx, op: Op, tag: str, bad: Val, details: tuple[Val, Val], message: Callable[[int, int], str]
           ) -> None:
    """Record the first element (row-major over lanes and elements) where `bad` holds, with its details.

    `bad` and `details` share one shape whose leading axes are lanes; inactive lanes never fail.
    """
    s = ctx.ssa
    row = ctx.sites[(id(op), tag)]
    ctx.site_messages[row] = Site(message)
    if ctx.mask is not None:
        depth = max(bad.depth, ctx.mask.depth)
        bad = ctx.lift(bad, depth)
        details = (ctx.lift(details[0], depth), ctx.lift(details[1], depth))
        bad = s.binary("and", bad, ctx.expand(ctx.lift(ctx.mask, depth), bad.logical, []))
    n = 1
    for d in bad.shape:
        n *= d
    flat_bad = s.reshape(bad, (n,), 0)
    pos = s.iota(DType.i64, (n,), 0)
    init = ctx.splat(_BIG, DType.i64)
    (first,) = s.reduce([s.select(flat_bad, pos, ctx.splat_like(_BIG, pos))], [init], [0],
                        lambda a: [s.binary("minimum", a[0], a[1])], 0, "first_bad")
    failed = s.compare("LT", first, ctx.splat(_BIG, DType.i64))
    at_first = s.reshape(s.select(failed, first, ctx.splat(0, DType.i64)), (1, 1), 0)
    values = []
    for d in details:
        flat = s.reshape(s.convert(d, DType.i64), (n,), 0)
        values.append(s.gather_points(flat, at_first, 0) if n else ctx.splat(0, DType.i64, (1,)))
    flag = s.reshape(s.convert(failed, DType.i64), (1,), 0)
    new_row = s.reshape(s.concatenate([flag] + values, 0, 0), (1, 3), 0)
    state = ctx.refs[ERROR_REF]
    start = [ctx.splat(row, DType.i64), ctx.splat(0, DType.i64)]
    old_row = s.dynamic_slice(state.val, start, [1, 3], 0)
    old_failed = s.compare("NE", s.slice(old_row, [0, 0], [1, 1]), ctx.splat(0, DType.i64, (1, 1)))
    keep_old = s.broadcast_in_dim(s.reshape(old_failed, (), 0), (1, 3), [], 0)
    state.val = s.dynamic_update_slice(state.val, s.select(keep_old, old_row, new_row), start)


def first_bad_axis(ctx: Ctx, coords: list[Val], extents: tuple[int, ...]) -> tuple[Val, Val, Val] | None:
    """(any axis out of range, the first such axis, its index) per element, or None without coordinates."""
    s = ctx.ssa
    bad: Val | None = None
    axis: Val | None = None
    index: Val | None = None
    for ax in reversed(range(len(coords))):
        c = coords[ax]
        out = s.binary("or", s.compare("LT", c, ctx.splat_like(0, c)),
                       s.compare("GE", c, ctx.splat_like(extents[ax], c)))
        here = ctx.splat_like(ax, c)
        if bad is None:
            bad, axis, index = out, here, c
        else:
            axis = s.select(out, here, axis)  # type: ignore[arg-type]
            index = s.select(out, c, index)  # type: ignore[arg-type]
            bad = s.binary("or", out, bad)
    if bad is None:
        return None
    return bad, axis, index  # type: ignore[return-value]


def index_message(what: str, op: Op, name: str, extents: tuple[int, ...]) -> Callable[[int, int], str]:
    def message(axis: int, index: int) -> str:
        return f"{what} out of range{at(op)}: index {index} on axis {axis} of {name} with extent {extents[axis]}"

    return message


def raise_first(sites: list[Site], state: object) -> None:
    """Raise the error of the first failed row of the returned error state, if any."""
    import numpy as np

    rows = np.asarray(state)
    for site, (failed, d0, d1) in zip(sites, rows):
        if failed:
            raise IntentError(site.message(int(d0), int(d1)))
