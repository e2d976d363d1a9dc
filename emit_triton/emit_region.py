"""Region fold and region scan: chunked loops over [begin, end) per lane with a carried state.

Every lane walks its own subregion in chunks of `block` elements; the loop runs to the longest active
subregion, so several short segments share one program (one per lane) and a lane past its end only
sees identity. Built-in folds that commute accumulate elementwise across chunks and reduce the
accumulator once; other combines fold each chunk in element order and combine it into a per-lane carry,
so the subregion's elements meet in order. Scans combine the carry (the previous chunks' total) with
each chunk's local scan.
"""

from __future__ import annotations

from kir.reduce import ReduceKind
from physical import ops as P
from physical.model import Fragment

from .emit import REGISTER_DTYPE, Emitter, emits, literal
from .emit_combine import combine_inline, fold_inline, scan_inline, take_edge_inline, unpack
from .emit_reduce import reduce_axis
from .numerics import convert


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


def _chunk(em: Emitter, op) -> tuple[bool, str, str]:
    """(lanes, the chunk's shape, a lane's shape)."""
    lanes = bool(op.begin.type.lanes or op.end.type.lanes)
    dims = ([em.lanes_block] if lanes else []) + [op.block]
    chunk = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
    return lanes, chunk, f"({em.lanes_block},)" if lanes else "()"


def _masked_parts(em: Emitter, op, comps, member) -> list[str]:
    parts = []
    for c, dt, ident in zip(comps, op.acc_dtypes, op.identity):
        p = em.fresh("part")
        em.line(f"{p} = tl.where({member}, {c}.to({REGISTER_DTYPE[dt]}), {literal(ident, dt)})")
        parts.append(p)
    return parts


def _results(em: Emitter, op, accs: list[str]) -> None:
    for r, a, dt in zip(op.results, accs, op.acc_dtypes):
        n = em.define(r)
        em.line(f"{n} = {convert(em, a, dt, r.type.dtype)}")


@emits(P.RegionFold)
def emit_region_fold(em: Emitter, op: P.RegionFold) -> None:
    lanes, chunk, lane_shape = _chunk(em, op)
    span = _trip(em, op.begin, op.end, op.active)
    elementwise = op.per_position
    accs = [em.fresh("acc") for _ in op.acc_dtypes]
    for a, dt, ident in zip(accs, op.acc_dtypes, op.identity):
        em.line(f"{a} = tl.full({chunk if elementwise else lane_shape}, {literal(ident, dt)}, {REGISTER_DTYPE[dt]})")
    seen = None
    if not elementwise:  # whether the carry holds a member yet: the first one is taken as it is
        seen = em.fresh("seen")
        em.line(f"{seen} = tl.full({lane_shape}, False, tl.int1)")
    start = em.fresh("start")
    with em.block(f"for {start} in range(0, {span}, {op.block})"):
        ys = em.inline(op.source, (start,))
        parts = _masked_parts(em, op, ys[:-1], ys[-1])
        axis = 1 if lanes else 0
        if op.kind is ReduceKind.sum:
            em.line(f"{accs[0]} = {accs[0]} + {parts[0]}")
        elif elementwise:  # commutative built-ins: accumulate per position, reduce once after the loop
            new = combine_inline(em, op.combine, accs, parts, accs)
            em.line(f"{unpack(accs)} = {unpack(new)}")
        else:  # the chunk's in-order fold joins the carry: elements meet in subregion order
            valid = em.fresh("members")
            em.line(f"{valid} = tl.broadcast_to({ys[-1]}, {parts[0]}.shape)")
            some = fold_inline(em, op.combine, parts, axis, int(lanes) + 1, valid)
            new = combine_inline(em, op.combine, accs, parts, accs)
            for a, n, part in zip(accs, new, parts):
                em.line(f"{a} = tl.where({seen} & {some}, {n}, tl.where({seen}, {a}, {part}))")
            em.line(f"{seen} = {seen} | {some}")
    if elementwise:
        reduce_axis(em, accs, op.kind, op.native, op.acc_dtypes, axis, op.combine, int(lanes) + 1)
    _results(em, op, accs)


@emits(P.RegionScan)
def emit_region_scan(em: Emitter, op: P.RegionScan) -> None:
    lanes, chunk, lane_shape = _chunk(em, op)
    span = _trip(em, op.begin, op.end, op.active)
    k = len(op.acc_dtypes)
    carry = [em.fresh("carry") for _ in range(k)]
    for c, dt, ident in zip(carry, op.acc_dtypes, op.identity):
        em.line(f"{c} = tl.full({lane_shape}, {literal(ident, dt)}, {REGISTER_DTYPE[dt]})")
    start = em.fresh("start")
    with em.block(f"for {start} in range(0, {span}, {op.block})"):
        ys = em.inline(op.source, (start,))
        comps, member = ys[:-1], ys[-1]
        xs = _masked_parts(em, op, comps, member)
        axis, rank = (1, 2) if lanes else (0, 1)
        # The source yields elements in traversal order (a reverse scan reads its subregion backwards); a
        # reverse scan keeps index order, so there the running prefix is the combine's right operand.
        right = op.reverse

        def join(prefix: list[str], elem: list[str], like: list[str]) -> list[str]:
            lhs, rhs = (elem, prefix) if right else (prefix, elem)
            return combine_inline(em, op.combine, lhs, rhs, like)

        if op.native:
            # dtype= keeps 8/16-bit integer sums at their width (Triton widens them to 32 bits by default,
            # which would neither wrap as KIR does nor keep the loop-carried type)
            acc = REGISTER_DTYPE[op.acc_dtypes[0]]
            local = [em.fresh("local")]
            em.line(f"{local[0]} = tl.cumsum({xs[0]}, axis={axis}, dtype={acc})")
            if op.exclusive:  # integer sums wrap exactly
                em.line(f"{local[0]} = {local[0]} - {xs[0]}")
            total = [em.fresh("chunk_total")]
            em.line(f"{total[0]} = tl.sum({xs[0]}, axis={axis}, dtype={acc})")
        else:
            ids = [literal(i, d) for i, d in zip(op.identity, op.acc_dtypes)]
            excl = scan_inline(em, op.combine, xs, ids, rank, False, right)
            incl = join(excl, xs, xs)
            local = excl if op.exclusive else incl
            total = [take_edge_inline(em, i, rank, True) for i in incl]
        # the carry spread over the chunk (a 0-d carry is broadcast explicitly: the interpreter does not mix
        # 0-d and 1-d predicates)
        spread = [f"{c}[:, None]" if lanes else f"tl.broadcast_to({c}, {x}.shape)" for c, x in zip(carry, local)]
        outs = join(spread, local, local)
        new = join(carry, total, carry)
        em.line(f"{unpack(carry)} = {unpack(new)}")
        em.inline(op.emit, (start, *outs, member))
