"""One registry keyed by KIR op class: how each op becomes StableHLO, or why it cannot.

Family modules (`pointwise.py`, `access.py`, ...) register their emitters with `@emits(OpClass)`;
op classes with no exact StableHLO equivalent are listed with `refuse(OpClass, reason)`. An op
with neither is an internal gap and reported as such (a test keeps the registry complete).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from kir.control import Yield
from kir.core import Op, Region, Value, registrar
from kir.pointwise import Constant, DimValue

from .context import Ctx
from .values import Val

Emitter = Callable[[Ctx, Op], None]

EMITTERS: dict[type[Op], Emitter] = {}
REFUSALS: dict[type[Op], str] = {}


emits = registrar(EMITTERS, "StableHLO emitter for {key}")


def refuse(cls: type[Op], reason: str) -> None:
    REFUSALS[cls] = reason


def emit_op(ctx: Ctx, op: Op) -> None:
    cls = type(op)
    if cls in REFUSALS:
        raise ctx.refuse(REFUSALS[cls], op)
    fn = EMITTERS.get(cls)
    if fn is None:
        raise ctx.refuse(f"no StableHLO lowering is registered for {cls.__name__}", op)
    mark = ctx.ssa.mark()
    if op.loc is not None and not isinstance(op, Yield | Constant | DimValue):
        ctx.ssa.comment(f"{op.NAME} at {op.loc}")
    saved = ctx.current
    ctx.current = op
    try:
        fn(ctx, op)
    finally:
        ctx.current = saved
    if ctx.ssa.mark() == mark + 1 and op.loc is not None and ctx.ssa.lines[mark].lstrip().startswith("//"):
        ctx.ssa.rewind(mark)  # the op emitted nothing of its own (a view, or a value emitted where used)
    if len(op.results) == 1 and op.results[0].name and ctx.ssa.mark() > mark:
        _name_result(ctx, op.results[0])


def _name_result(ctx: Ctx, v: Value) -> None:
    """Give the SSA value that an op's named result became the author's name, when its definition is the
    op's last line (so nothing else refers to it yet)."""
    val = ctx.values.get(v.id)
    if val is None or "#" in val.name or not v.name:
        return
    last = ctx.ssa.lines[-1]
    body = last.lstrip()
    if not body.startswith(f"{val.name} = "):
        return
    new = ctx.ssa.fresh(v.name)
    ctx.ssa.lines[-1] = last[:len(last) - len(body)] + new + body[len(val.name):]
    ctx.values[v.id] = dataclasses.replace(val, name=new)


def run_region(ctx: Ctx, region: Region, args: Sequence[Val]) -> list[Val]:
    """Bind the region's arguments, emit its ops, and return the emitted values it yields."""
    for a, v in zip(region.args, args):
        ctx.set(a, v)
    for op in region.ops:
        if isinstance(op, Yield):
            return [ctx.get(v) for v in op.values]
        emit_op(ctx, op)
    return []


def captured(region: Region) -> list[Value]:
    """Values a region uses that it does not define (its implicit captures)."""
    defined: set[int] = set()
    out: list[Value] = []

    def walk(r: Region) -> None:
        defined.update(a.id for a in r.args)
        for op in r.ops:
            for v in op.operands():
                if v.id not in defined and all(v.id != o.id for o in out):
                    out.append(v)
            for sub in op.regions():
                walk(sub)
            defined.update(v.id for v in op.results)

    walk(region)
    return out
