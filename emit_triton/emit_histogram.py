"""Histograms: counts of integer values into bins."""

from __future__ import annotations

from physical import ops as P

from .emit import Emitter, emits


@emits(P.Histogram)
def emit_histogram(em: Emitter, op: P.Histogram) -> None:
    t = op.result.type
    v = op.values
    bins = t.tile[-1].block
    lanes = v.type.lanes
    vals = f"{em.name(v)}[:, None, :]" if lanes else f"{em.name(v)}[None, :]"
    pos = f"tl.arange(0, {bins})[None, :, None]" if lanes else f"tl.arange(0, {bins})[:, None]"
    hit = em.fresh("hit")
    em.line(f"{hit} = {vals} == {pos}")
    if op.member is not None:
        m = em.name(op.member)
        spread = ":, None, :" if op.member.type.lanes else ("None, None, :" if lanes else "None, :")
        em.line(f"{hit} = {hit} & {m}[{spread}]")
    em.line(f"{em.define(op.result, 'counts')} = tl.sum({hit}.to(tl.int32), axis={2 if lanes else 1})")
