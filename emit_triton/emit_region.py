"""Region fold and region scan: chunked loops over [begin, end) per lane with a carried state."""

from __future__ import annotations

from kir.reduce import ReduceKind
from physical import ops as P
from physical.model import Fragment

from .emit import TL_DTYPE, Emitter, emits, literal
from .emit_reduce import reduce_axis


def _trip(em: Emitter, begin, end, active) -> str:
    """The longest subregion among the active lanes (the chunk loop's extent)."""
    lanes = begin.type.lanes or end.type.lanes
    t = Fragment(begin.type.dtype, lanes)
    span = em.fresh("span")
    em.line(f"{span} = {em.arg(end, t)} - {em.arg(begin, t)}")
    if lanes:
        if active is not None:
            em.line(f"{span} = tl.where({em.arg(active, t)}, {span}, 0)")
        em.line(f"{span} = tl.max({span}, axis=0)")
    return span


def _chunk(em: Emitter, op) -> tuple[Fragment, str]:
    lanes = op.begin.type.lanes or op.end.type.lanes
    dims = ([em.lanes_block] if lanes else []) + [op.block]
    return Fragment(op.acc_dtypes[0], lanes), "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


@emits(P.RegionFold)
def emit_region_fold(em: Emitter, op: P.RegionFold) -> None:
    lane_t, chunk = _chunk(em, op)
    span = _trip(em, op.begin, op.end, op.active)
    accs = [em.fresh("acc") for _ in op.acc_dtypes]
    for a, dt, ident in zip(accs, op.acc_dtypes, op.identity):
        em.line(f"{a} = tl.full({chunk}, {literal(ident, dt)}, {TL_DTYPE[dt]})")
    fn = em.helper(op.combine, f"combine_{op.kind}")
    start = em.fresh("start")
    em.line(f"for {start} in range(0, {span}, {op.block}):")
    em.depth += 1
    ys = em.inline(op.source, (start,))
    comps, member = ys[:-1], ys[-1]
    parts = []
    for c, dt, ident in zip(comps, op.acc_dtypes, op.identity):
        p = em.fresh("part")
        em.line(f"{p} = tl.where({member}, {c}.to({TL_DTYPE[dt]}), {literal(ident, dt)})")
        parts.append(p)
    if op.kind is ReduceKind.sum:
        em.line(f"{accs[0]} = {accs[0]} + {parts[0]}")
    else:
        em.line(f"{', '.join(accs)} = {fn}({', '.join(accs + parts)})")
    em.depth -= 1
    axis = 1 if lane_t.lanes else 0
    reduce_axis(em, accs, op.kind, op.acc_dtypes, axis, fn)
    for r, a, dt in zip(op.results, accs, op.acc_dtypes):
        n = em.define(r)
        em.line(f"{n} = {a}" if r.type.dtype == dt else f"{n} = {a}.to({TL_DTYPE[r.type.dtype]})")


@emits(P.RegionScan)
def emit_region_scan(em: Emitter, op: P.RegionScan) -> None:
    lane_t, chunk = _chunk(em, op)
    span = _trip(em, op.begin, op.end, op.active)
    fn = em.helper(op.combine, f"combine_{op.kind}")
    k = len(op.acc_dtypes)
    lane_shape = f"({em.lanes_block},)" if lane_t.lanes else "()"
    carry = [em.fresh("carry") for _ in range(k)]
    for c, dt, ident in zip(carry, op.acc_dtypes, op.identity):
        em.line(f"{c} = tl.full({lane_shape}, {literal(ident, dt)}, {TL_DTYPE[dt]})")
    start = em.fresh("start")
    em.line(f"for {start} in range(0, {span}, {op.block}):")
    em.depth += 1
    ys = em.inline(op.source, (start,))
    comps, member = ys[:-1], ys[-1]
    xs = []
    for c, dt, ident in zip(comps, op.acc_dtypes, op.identity):
        x = em.fresh("x")
        em.line(f"{x} = tl.where({member}, {c}.to({TL_DTYPE[dt]}), {literal(ident, dt)})")
        xs.append(x)
    axis = 1 if lane_t.lanes else 0
    local = [em.fresh("local") for _ in xs]
    if op.exclusive:
        ex = em.exclusive_helper(fn, k)
        ids = [f"tl.full({chunk}, {literal(i, d)}, {TL_DTYPE[d]})" for i, d in zip(op.identity, op.acc_dtypes)]
        incl = [em.fresh("inclusive") for _ in xs]
        em.line(f"{', '.join(local + incl)} = tl.associative_scan(({', '.join(ids + xs)}), {axis}, {ex})")
    else:
        em.line(f"{', '.join(local)} = tl.associative_scan(({', '.join(xs)}), {axis}, {fn})" if k > 1 else
                f"{local[0]} = tl.associative_scan({xs[0]}, {axis}, {fn})")
    total = [em.fresh("chunk_total") for _ in xs]
    em.line(f"{', '.join(total)} = tl.reduce(({', '.join(xs)}), {axis}, {fn})" if k > 1 else
            f"{total[0]} = tl.reduce({xs[0]}, {axis}, {fn})")
    spread = [f"{c}[:, None]" if lane_t.lanes else c for c in carry]
    outs = [em.fresh("out") for _ in xs]
    em.line(f"{', '.join(outs)} = {fn}({', '.join(spread + local)})")
    em.line(f"{', '.join(carry)} = {fn}({', '.join(carry + total)})")
    em.inline(op.emit, (start, *outs, member))
    em.depth -= 1
