"""Ordered control inside an instance: for/while with carried values, if, and nested parallel loops.

A condition or bound that varies across lanes is predicated: every lane runs its own iterations or
branch, effects are masked by the lane's membership, and carried values of inactive lanes are kept.
"""

from __future__ import annotations

from kir import control as KC
from kir import core as K
from kir.dims import DConst, DSym, PCmp
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn, UnaryFn

from .. import ops as P
from ..launch_expr import ldim, lprod
from ..model import Fragment, PValue
from . import lower_ops, rule
from .context import Lowerer


def carried_types(lw: Lowerer, inits: tuple[PValue, ...], args: tuple[K.Value, ...], force_lanes: bool
                  ) -> tuple[Fragment, ...]:
    out = []
    for p, a in zip(inits, args):
        lanes = p.type.lanes or lw.is_variant(a) or force_lanes
        out.append(lw.natural(a.type, lanes))  # type: ignore[arg-type]
    return tuple(out)


def merge_active(lw: Lowerer, active: PValue | None, new: tuple[PValue, ...], old: tuple[PValue, ...],
                 types: tuple[Fragment, ...]) -> tuple[PValue, ...]:
    outs = []
    for n, o, t in zip(new, old, types):
        n = lw.broadcast_to(n, t)
        if active is not None:
            n = lw.add(P.Select, t, cond=active, on_true=n, on_false=o)
        outs.append(n)
    return tuple(outs)


def note_loop_writes(lw: Lowerer, *regions: K.Region) -> None:
    """A loop's next iteration reads what its previous one wrote: count the buffers the loop writes as written
    before its first op, so that a read of one in the loop is ordered behind the last iteration's write by a
    barrier (the write of iteration k and the read of k + 1 need not be the same thread's)."""
    for region in regions:
        for o in region.walk():
            if o.has(K.OpTrait.WRITES):
                bid = lw.state.ref_buffer.get(o.dst.id)
                if bid is not None:
                    lw.written.add(bid)


@rule(KC.For)
def lower_for(lw: Lowerer, op: KC.For) -> None:
    start, stop, step = lw.get(op.start), lw.get(op.stop), lw.get(op.step)
    inits = tuple(lw.get(v) for v in op.inits)
    per_lane = start.type.lanes or stop.type.lanes or step.type.lanes
    # with a trip count per lane, a carried value stops changing at its own lane's end: it varies per lane
    # even where its updates do not (a count `n = n + 1.0`)
    types = carried_types(lw, inits, op.body.args[1:], per_lane)
    inits = tuple(lw.broadcast_to(lw.cast_like(p, t), t) for p, t in zip(inits, types))
    iv_t = Fragment(start.type.dtype, per_lane, (), start.type.index and stop.type.index)
    args = lw.begin((iv_t,) + types, tuple(a.name for a in op.body.args))
    iv = args[0]
    lo, hi, st = (lw.affine_of(v) for v in (start, stop, step))
    n_facts = len(lw.facts)
    if lo is not None and hi is not None and isinstance(st, DConst) and st.value > 0 and not per_lane:
        sym = DSym(f"_l{iv.id}")
        lw.affine[iv.id] = sym
        if op.body.args[0].name:
            lw.state.symbol_names[sym.name] = op.body.args[0].name
        lw.facts += [PCmp(">=", sym, lo), PCmp("<", sym, hi)]
    for ka, pa in zip(op.body.args, args):
        lw.bind(ka, pa)
    note_loop_writes(lw, op.body)
    saved_active = lw.active
    active = None
    if per_lane:
        zero = lw.const(0, step.type.dtype)
        up = lw.compare(CmpFn.gt, step, zero)
        below = lw.compare(CmpFn.lt, iv, stop)
        above = lw.compare(CmpFn.gt, iv, stop)
        active = lw.add(P.Select, lw.join(up, below, above).with_dtype(DType.pred), cond=up, on_true=below,
                        on_false=above)
        lw.active = lw.and_(saved_active, active)
    try:
        with lw.loop_body():
            lower_ops(lw, op.body.ops)
            ys = merge_active(lw, active, tuple(lw.get(v) for v in op.body.yielded), args[1:], types)
            body = lw.finish(ys)
    finally:
        lw.active = saved_active
        del lw.facts[n_facts:]
    r = lw.emit(P.For, types, names=tuple(v.name for v in op.results), start=start, stop=stop, step=step,
                inits=inits, body=body)
    for kv, pv in zip(op.results, r.results):
        lw.bind(kv, pv)


@rule(KC.While)
def lower_while(lw: Lowerer, op: KC.While) -> None:
    inits = tuple(lw.get(v) for v in op.inits)
    cond_variant = any(lw.is_variant(v) for v in op.cond.yielded)
    types = carried_types(lw, inits, op.body.args, cond_variant)
    inits = tuple(lw.broadcast_to(lw.cast_like(p, t), t) for p, t in zip(inits, types))
    cargs = lw.begin(types, tuple(a.name for a in op.cond.args))
    for ka, pa in zip(op.cond.args, cargs):
        lw.bind(ka, pa)
    note_loop_writes(lw, op.cond, op.body)
    lower_ops(lw, op.cond.ops)
    c = lw.get(op.cond.yielded[0])
    c = lw.broadcast_to(c, Fragment(DType.pred, cond_variant or c.type.lanes))
    cond = lw.finish((c,))
    bargs = lw.begin(types + (c.type,), tuple(a.name for a in op.body.args) + ("active",))
    for ka, pa in zip(op.body.args, bargs):
        lw.bind(ka, pa)
    note_loop_writes(lw, op.cond, op.body)
    saved_active = lw.active
    active = bargs[-1] if c.type.lanes else None
    lw.active = lw.and_(saved_active, active)
    try:
        with lw.loop_body():
            lower_ops(lw, op.body.ops)
            ys = merge_active(lw, active, tuple(lw.get(v) for v in op.body.yielded), bargs[:-1], types)
            body = lw.finish(ys)
    finally:
        lw.active = saved_active
    r = lw.emit(P.While, types, names=tuple(v.name for v in op.results), inits=inits, cond=cond, body=body)
    for kv, pv in zip(op.results, r.results):
        lw.bind(kv, pv)


@rule(KC.If)
def lower_if(lw: Lowerer, op: KC.If) -> None:
    c = lw.get(op.cond)
    if not c.type.lanes:
        types = tuple(lw.natural(v.type, lw.is_variant(v)) for v in op.results)  # type: ignore[arg-type]
        regions = []
        for reg in (op.then_, op.else_):
            lw.begin()
            lower_ops(lw, reg.ops)
            ys = tuple(lw.broadcast_to(lw.cast_like(lw.get(v), t), t) for v, t in zip(reg.yielded, types))
            regions.append(lw.finish(ys))
        r = lw.emit(P.If, types, names=tuple(v.name for v in op.results), cond=c, then_=regions[0],
                    else_=regions[1])
        for kv, pv in zip(op.results, r.results):
            lw.bind(kv, pv)
        return
    # Per-lane condition: both sides run, effects masked, results selected.
    saved = lw.active
    not_c = lw.add(P.Unary, c.type, fn=UnaryFn.not_, x=c)
    outs = []
    for reg, pred in ((op.then_, c), (op.else_, not_c)):
        lw.active = lw.and_(saved, pred)
        try:
            lower_ops(lw, reg.ops)
        finally:
            lw.active = saved
        outs.append(tuple(lw.get(v) for v in reg.yielded))
    for kv, a, b in zip(op.results, outs[0], outs[1]):
        t = lw.join(c, a, b)
        t = Fragment(a.type.dtype, t.lanes, t.tile)
        lw.bind(kv, lw.add(P.Select, t, name=kv.name, cond=c, on_true=a, on_false=b))


@rule(KC.Parallel)
def lower_nested_parallel(lw: Lowerer, op: KC.Parallel) -> None:
    """A parallel loop inside an instance runs its members in order (any order is legal)."""
    total = lw.shape_value(lprod(tuple(ldim(d) for d in op.domain)))
    zero, one = lw.shape_value(DConst(0)), lw.shape_value(DConst(1))
    (flat,) = lw.begin((Fragment(DType.i64, index=True),), ("flat",))
    coords = decode(lw, flat, op.domain, tuple(a.name for a in op.body.args))
    for ka, pa in zip(op.body.args, coords):
        lw.bind(ka, pa)
    with lw.loop_body():
        lower_ops(lw, op.body.ops)
    body = lw.finish(())
    lw.emit(P.For, (), start=zero, stop=total, step=one, inits=(), body=body)


def decode(lw: Lowerer, flat: PValue, domain: tuple, names: tuple[str | None, ...] = ()) -> tuple[PValue, ...]:
    """Row-major decode of a flattened instance index into one coordinate per domain axis (`names`: the
    author's names of the coordinates, for explanations)."""
    coords: list[PValue] = []
    rest = flat
    for k in range(len(domain) - 1, -1, -1):
        if k == 0:
            c = rest
        else:
            c = lw.binary(BinaryFn.mod, rest, lw.shape_value(domain[k]))
            rest = lw.binary(BinaryFn.floordiv, rest, lw.shape_value(domain[k]))
        coords.append(c)
    coords.reverse()
    for k, c in enumerate(coords):
        if lw.affine_of(flat) is not None or True:
            sym = DSym(f"_c{c.id}")
            lw.affine[c.id] = sym
            shown = names[k] if k < len(names) and names[k] else f"(each position along {domain[k]})"
            lw.state.symbol_names[sym.name] = shown  # type: ignore[assignment]
            lw.facts += [PCmp(">=", sym, DConst(0)), PCmp("<", sym, domain[k])]
    return tuple(coords)


@rule(KC.Yield)
def lower_yield(lw: Lowerer, op: KC.Yield) -> None:
    """A region's yield is read by the op that owns the region (loops, branches, combines)."""
    raise lw.fail("internal: yield is lowered by the op that owns its region")
