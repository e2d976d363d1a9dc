"""Kir dims and predicates and physical launch expressions, written in the runtime's expression format
(`intent.runtime.expr`), which prebuilt kernels and the profiler evaluate without the compiler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kir.dims import DBin, DConst, DSym, PAnd, PCmp, PNot, POr
from kir.errors import IntentError
from physical import launch_expr as L

_ENCODERS: dict[type, Callable[[Any], Any]] = {
    DConst: lambda d: d.value,
    DSym: lambda d: d.name,
    DBin: lambda d: [d.op, encode(d.lhs), encode(d.rhs)],
    PCmp: lambda p: [p.op, encode(p.lhs), encode(p.rhs)],
    PAnd: lambda p: ["and", *(encode(q) for q in p.items)],
    POr: lambda p: ["or", *(encode(q) for q in p.items)],
    PNot: lambda p: ["not", encode(p.item)],
    L.LConst: lambda e: e.value,
    L.LDim: lambda e: encode(e.dim),
    L.LScalar: lambda e: e.name,
    L.LConstexpr: lambda e: e.name,
    L.LBin: lambda e: [e.op, encode(e.lhs), encode(e.rhs)],
    L.LMinMax: lambda e: [e.op, *(encode(x) for x in e.items)],
    L.LSum: lambda e: ["sum", *(encode(x) for x in e.items)] if e.items else 0,
    L.LSelect: lambda e: ["select", encode(e.cond), encode(e.when_set), encode(e.otherwise)],
    L.LNextPow2: lambda e: ["next_pow2", encode(e.x)],
    L.LTileBlock: lambda e: ["tile_block", encode(e.extent), e.limit, e.what],
    L.LWarps: lambda e: ["warps_for", encode(e.elements)],
    L.LResidentPrograms: lambda e: ["resident_programs", encode(e.warps)],
}


def encode(x: Any) -> Any:
    """`x` (an int, a kir dim or predicate, or a launch expression) as expression data."""
    if isinstance(x, (bool, int)):
        return x
    fn = _ENCODERS.get(type(x))
    if fn is None:
        raise IntentError(f"internal error: no expression encoding for {type(x).__name__} ({x})")
    return fn(x)
