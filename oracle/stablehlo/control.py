"""Control: `parallel` by vectorisation, ordered loops as `stablehlo.while`, `if` by lane masks.

* `parallel` adds its domain as batch axes; its indices are iotas (emitted only where used as values).
* `for` with uniform bounds is a counted `stablehlo.while` over the trip count; loop-carried values
  and every ref the body writes are carried. Carried values take the batch axes their updates need
  (found by re-emitting the body until the carried types are stable).
* `for` with per-instance bounds and `while` with a per-instance condition run until no lane is
  active; inactive lanes keep their carried values and do not commit stores.
* `if` evaluates both branches under complementary masks and selects the results.
"""

from __future__ import annotations

from collections.abc import Callable

from kir.control import For, If, Parallel, While, Yield
from kir.core import Op, OpTrait, Region
from kir.dtypes import DType
from kir.errors import IntentError

from .checks import ERROR_REF
from .context import Ctx, batch_index, constant_value
from .registry import emits, run_region
from .values import Val

Counters = list[Val]
Carried = list[Val]


def written_refs(ctx: Ctx, *regions: Region) -> list[int]:
    """Refs from outside the regions that ops inside them write (they must be carried through a loop)."""
    out: list[int] = []
    for r in regions:
        for op in r.walk():
            if op.has(OpTrait.WRITES):
                rid = op.dst.id
                if rid in ctx.refs and rid not in out:
                    out.append(rid)
            if id(op) in ctx.site_ops and ERROR_REF not in out:
                out.append(ERROR_REF)
    return out


def blend(ctx: Ctx, active: Val, new: Val, old: Val) -> Val:
    """`new` on active lanes, `old` elsewhere."""
    a, n, o = ctx.lift_all(active, new, old)
    a = ctx.expand(a, n.logical, [])
    return ctx.ssa.select(a, n, o)


def loop(ctx: Ctx, counters: Counters, carried: Carried, ref_ids: list[int],
         cond: Callable[[Counters, Carried], Val],
         body: Callable[[Counters, Carried], tuple[Counters, Carried]]) -> tuple[Counters, Carried]:
    """A `stablehlo.while` over (counters, carried values, written refs); updates the refs in `ctx`."""
    depths = [c.depth for c in carried]
    nc, nv = len(counters), len(carried)
    for _ in range(ctx.depth + 2):
        mark = ctx.ssa.mark()
        saved = {rid: ctx.refs[rid].val for rid in ref_ids}
        inits = counters + [ctx.lift(c, d) for c, d in zip(carried, depths)] + [saved[r] for r in ref_ids]
        grew = False

        def split(args: list[Val]) -> tuple[Counters, Carried]:
            for rid, v in zip(ref_ids, args[nc + nv:]):
                ctx.refs[rid].val = v
            return args[:nc], args[nc:nc + nv]

        def cond_region(args: list[Val]) -> list[Val]:
            with ctx.nested():
                p = cond(*split(args))
                if p.rank:
                    raise IntentError("StableHLO exit: a loop condition must be a scalar")
                return [p]

        def body_region(args: list[Val]) -> list[Val]:
            nonlocal grew
            with ctx.nested():
                cs, cv = split(args)
                new_cs, new_cv = body(cs, cv)
                for i, v in enumerate(new_cv):
                    if v.depth > depths[i]:
                        depths[i] = v.depth
                        grew = True
                if grew:
                    return list(args)
                lifted = [ctx.lift(v, d) for v, d in zip(new_cv, depths)]
                return new_cs + lifted + [ctx.refs[r].val for r in ref_ids]

        outs = ctx.ssa.while_(inits, cond_region, body_region)
        if not grew:
            for rid, v in zip(ref_ids, outs[nc + nv:]):
                ctx.refs[rid].val = v
            return outs[:nc], outs[nc:nc + nv]
        ctx.ssa.rewind(mark)
        for rid, v in saved.items():
            ctx.refs[rid].val = v
    raise IntentError("StableHLO exit: loop-carried types did not settle")


# ---------------------------------------------------------------------------------------------- parallel


@emits(Parallel)
def _parallel(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Parallel)
    extents = ctx.dims(op.domain)
    base = ctx.depth
    with ctx.batched(extents):
        for k, a in enumerate(op.body.args):
            axis = base + k
            prefix = ctx.batch[:axis + 1]
            ctx.affine[a.id] = batch_index(axis)
            ctx.set_lazy(a, lambda prefix=prefix, axis=axis: ctx.ssa.iota(DType.i64, prefix, axis, axis + 1, "i"))
        run_region(ctx, op.body, [])


@emits(Yield)
def _yield(ctx: Ctx, op: Op) -> None:
    raise IntentError("StableHLO exit: yield is only valid as the last op of a region")


# ---------------------------------------------------------------------------------------------- for


def trip_count(ctx: Ctx, start: Val, stop: Val, step: Val) -> Val:
    """`len(range(start, stop, step))` per lane (0 for a zero step)."""
    s = ctx.ssa
    a, b, st = ctx.lift_all(ctx.to_i64(start), ctx.to_i64(stop), ctx.to_i64(step))
    zero, one = ctx.splat_like(0, a), ctx.splat_like(1, a)
    up = s.binary("divide", s.binary("subtract", s.binary("add", s.binary("subtract", b, a), st), one), st)
    neg = s.unary("negate", st)
    down = s.binary("divide", s.binary("subtract", s.binary("add", s.binary("subtract", a, b), neg), one), neg)
    t = s.select(s.compare("GT", st, zero), up, down)
    t = s.binary("maximum", t, zero)
    return s.select(s.compare("EQ", st, zero), zero, t, "trip")


@emits(For)
def _for(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, For)
    s = ctx.ssa
    start, stop, step = ctx.get(op.start), ctx.get(op.stop), ctx.get(op.step)
    iv_dtype = start.dtype
    inits = [ctx.get(v) for v in op.inits]
    refs = written_refs(ctx, op.body)
    body_region = op.body
    consts = [constant_value(ctx.affine.get(v.id)) for v in (op.start, op.stop, op.step)]
    start64, step64 = ctx.to_i64(start), ctx.to_i64(step)
    uniform = max(start.depth, stop.depth, step.depth) == 0
    if all(c is not None for c in consts):
        lo, hi, st = consts  # type: ignore[misc]
        trip = ctx.splat(len(range(lo, hi, st)) if st else 0, DType.i64)
    else:
        trip = trip_count(ctx, start, stop, step)
    live = ctx.any_lane(ctx.mask) if (uniform and ctx.mask is not None) else None

    def lanes_active(k: Val) -> Val:
        below = s.compare("LT", s.broadcast_in_dim(k, trip.shape, [], trip.depth), trip)
        return ctx.and_(ctx.mask, below)  # type: ignore[return-value]

    def induction(k: Val) -> Val:
        if uniform:
            return s.convert(s.binary("add", start64, s.binary("multiply", k, step64)), iv_dtype, "iv")
        a, st = ctx.lift_all(start64, step64)
        kb = s.broadcast_in_dim(k, a.shape, [], a.depth)
        return s.convert(s.binary("add", a, s.binary("multiply", kb, st)), iv_dtype, "iv")

    def cond(cs: Counters, cv: Carried) -> Val:
        if uniform:
            p = s.compare("LT", cs[0], trip)
            return s.binary("and", p, live) if live is not None else p
        return ctx.any_lane(lanes_active(cs[0]))

    def body(cs: Counters, cv: Carried) -> tuple[Counters, Carried]:
        k = cs[0]
        iv = induction(k)
        if uniform:
            ys = run_region(ctx, body_region, [iv] + cv)
        else:
            active = lanes_active(k)
            with ctx.masked(active):
                ys = run_region(ctx, body_region, [iv] + cv)
            ys = [blend(ctx, active, y, old) for y, old in zip(ys, cv)]
        return [s.binary("add", k, ctx.splat(1, DType.i64))], ys

    _, outs = loop(ctx, [ctx.splat(0, DType.i64)], inits, refs, cond, body)
    for v, out in zip(op.results, outs):
        ctx.set(v, out)


# ---------------------------------------------------------------------------------------------- while


class _Divergent(Exception):
    """The loop condition differs between lanes: re-emit the loop with masks."""


@emits(While)
def _while(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, While)
    s = ctx.ssa
    inits = [ctx.get(v) for v in op.inits]
    refs = written_refs(ctx, op.cond, op.body)
    cond_region, body_region = op.cond, op.body

    def test(cv: Carried) -> Val:
        return run_region(ctx, cond_region, cv)[0]

    if ctx.mask is None:
        mark = s.mark()
        saved = {rid: ctx.refs[rid].val for rid in refs}

        def cond(cs: Counters, cv: Carried) -> Val:
            p = test(cv)
            if p.depth:
                raise _Divergent
            return p

        def body(cs: Counters, cv: Carried) -> tuple[Counters, Carried]:
            return [], run_region(ctx, body_region, cv)

        try:
            _, outs = loop(ctx, [], inits, refs, cond, body)
        except _Divergent:
            s.rewind(mark)
            for rid, v in saved.items():
                ctx.refs[rid].val = v
        else:
            for v, out in zip(op.results, outs):
                ctx.set(v, out)
            return

    def masked_cond(cs: Counters, cv: Carried) -> Val:
        return ctx.any_lane(ctx.and_(ctx.mask, test(cv)))  # type: ignore[arg-type]

    def masked_body(cs: Counters, cv: Carried) -> tuple[Counters, Carried]:
        active = ctx.and_(ctx.mask, test(cv))
        assert active is not None
        with ctx.masked(active):
            ys = run_region(ctx, body_region, cv)
        return [], [blend(ctx, active, y, old) for y, old in zip(ys, cv)]

    _, outs = loop(ctx, [], inits, refs, masked_cond, masked_body)
    for v, out in zip(op.results, outs):
        ctx.set(v, out)


# ---------------------------------------------------------------------------------------------- if


@emits(If)
def _if(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, If)
    c = ctx.get(op.cond)
    with ctx.masked(ctx.and_(ctx.mask, c)):
        then_ys = run_region(ctx, op.then_, [])
    with ctx.masked(ctx.and_(ctx.mask, ctx.not_(c))):
        else_ys = run_region(ctx, op.else_, [])
    for v, t, e in zip(op.results, then_ys, else_ys):
        ctx.set(v, blend(ctx, c, t, e))
