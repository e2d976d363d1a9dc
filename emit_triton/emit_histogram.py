"""Histograms: counts of integer values into bins, per lane (`histogram`) or per program (`bincount`)."""

from __future__ import annotations

from physical import ops as P

from .emit import Emitter, emits


@emits(P.Histogram)
def emit_histogram(em: Emitter, op: P.Histogram) -> None:
    # Compare every value with every bin position and count along the value axes (bins stay after lanes).
    t = op.result.type
    v = op.values
    bins = t.tile[-1].block
    lanes = v.type.lanes
    rank = len(v.type.tile)
    lead = ":, None" if lanes else "None"
    vals = f"{em.name(v)}[{lead}, {', '.join([':'] * rank)}]"
    spread = ", ".join(["None"] * rank)
    pos = f"tl.arange(0, {bins})[{'None, ' if lanes else ''}:, {spread}]"
    hit = em.fresh("hit")
    em.line(f"{hit} = {vals} == {pos}")
    if op.member is not None:
        m = op.member
        axes = ([":" if m.type.lanes else "None"] if lanes else []) + ["None"] + \
            ([":"] * rank if m.type.tile else ["None"] * rank)
        em.line(f"{hit} = {hit} & {em.name(m)}[{', '.join(axes)}]")
    counts = f"{hit}.to(tl.int32)"
    first = 2 if lanes else 1
    for axis in range(first + rank - 1, first - 1, -1):
        counts = f"tl.sum({counts}, axis={axis})"
    em.line(f"{em.define(op.result, 'counts')} = {counts}")


@emits(P.BinCount)
def emit_bincount(em: Emitter, op: P.BinCount) -> None:
    # One tl.histogram over every member of the program: values are shifted to the chunk's first bin
    # and those outside the chunk are masked out (tl.histogram leaves out-of-range values undefined).
    v = op.values
    bins = op.result.type.tile[0].block
    t = v.type
    shifted, keep = em.fresh("in_chunk"), em.fresh("counted")
    em.line(f"{shifted} = {em.name(v)}.to(pid.dtype) - {em.name(op.base)}")
    member = ""
    if op.member is not None:
        member = f" & {em.arg(op.member, t)}"
        if op.member.type.rank < t.rank:
            member = f" & tl.broadcast_to({em.arg(op.member, t)}, {em.shape(t)})"
    em.line(f"{keep} = ({shifted} >= 0) & ({shifted} < {bins}){member}")
    if t.rank > 1:
        em.line(f"{shifted} = tl.ravel({shifted})")
        em.line(f"{keep} = tl.ravel({keep})")
    # tl.histogram takes 32-bit values: every counted one lies in [0, bins)
    em.line(f"{em.define(op.result, 'counts')} = tl.histogram({shifted}.to(tl.int32), {bins}, mask={keep})")
