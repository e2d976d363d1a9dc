"""`explain`: the physical plan of a kernel in words (worksets, groups, segments, buffers, bounds, notes)."""

from __future__ import annotations

from kir.core import Kernel

from . import ops as P
from .model import AssumeInBounds, Group, Guard, POp, Program, Proven
from .printer import guards_of


def _where(program: Program, op: POp) -> str:
    info = program.op_info(op.origin)
    if info is None:
        return ""
    at = info.where()
    return f" ({info.name} at {at})" if at else f" ({info.name})"


def _axes(tile: tuple, axes: tuple[int, ...]) -> str:
    return ", ".join(str(tile[a].extent) for a in axes if 0 <= a < len(tile))


def _inside(op: POp) -> str | None:
    """What one instance runs in order or as a tile for this op (None for plain element work)."""
    if isinstance(op, P.Reduce) and op.inputs:
        return f"reduce {op.kind} over {_axes(op.inputs[0].type.tile, op.axes)} (tile)"
    if isinstance(op, P.Scan) and op.inputs:
        mode = ("reverse " if op.reverse else "") + ("exclusive " if op.exclusive else "")
        return f"{mode}scan {op.kind} along {_axes(op.inputs[0].type.tile, (op.axis,))} (tile)"
    if isinstance(op, P.Contract):
        return f"contraction over {_axes(op.lhs.type.tile, op.axes)} (tile, {op.acc_dtype} accumulator)"
    if isinstance(op, P.RegionFold):
        return f"region fold {op.kind} over a data-dependent subregion [begin, end), in chunks of {op.block}"
    if isinstance(op, P.RegionScan):
        return f"region scan {op.kind} over a data-dependent subregion [begin, end), in chunks of {op.block}"
    if isinstance(op, P.For):
        if any(isinstance(o, P.ChunkLanes) for o in op.body.ops):
            return "a workset run chunk by chunk, in order"
        carried = f", carrying {len(op.inits)} value{'s' * (len(op.inits) != 1)}" if op.inits else ""
        return f"ordered for loop{carried}"
    if isinstance(op, P.While):
        return f"ordered while loop, carrying {len(op.inits)} value{'s' * (len(op.inits) != 1)}"
    if isinstance(op, P.Histogram):
        return "histogram (tile)"
    if isinstance(op, P.BinCount):
        return "bin counts of the owned values, a tile of bins at a time"
    if isinstance(op, P.MatMul):
        return f"tile matrix multiply (tl.dot), accumulating in {op.acc.type.dtype}"
    if isinstance(op, P.If) and op.cond.type.is_scalar:
        return "a uniform branch between two forms of the work"
    if isinstance(op, P.AtomicRMW | P.AtomicCAS):
        kind = f"atomic {op.kind}" if isinstance(op, P.AtomicRMW) else "atomic compare-and-swap"
        return f"{kind} ({op.order}, shared by the {op.sharing}, {op.scope} scope)"
    return None


def _group_lines(p: Program, g: Group, consts: dict) -> list[str]:
    seg = next((s for s in p.segments if s.group == g.id), None)
    where = f" at {g.loc.file.rsplit('/', 1)[-1]}:{g.loc.line}" if g.loc else ""
    if g.domain and g.tiles:
        dom = ", ".join(str(d) for d in g.domain)
        tiled = g.domain[len(g.domain) - len(g.tiles):]
        shape = " x ".join(f"{b} = {consts.get(b, '?')}" for b in g.tiles)
        lines = [f"group {g.id} ({g.name}{where}): workset over ({dom})",
                 f"  each program owns one tile {shape} of ({', '.join(map(str, tiled))})"
                 + (" and one coordinate of each leading axis" if len(g.domain) > len(g.tiles) else "")]
    elif g.domain:
        dom = ", ".join(str(d) for d in g.domain)
        lines = [f"group {g.id} ({g.name}{where}): workset over ({dom}), flattened row-major",
                 f"  each program owns {g.block} = {consts.get(g.block, '?')} consecutive instances"]
    else:
        why = "independence could not be proven; everything runs in order" if g.serial else "nothing to map"
        lines = [f"group {g.id} ({g.name}{where}): a single instance ({why})"]
    if seg is not None:
        lines.append(f"  segment: programs [{seg.offset}, {seg.offset} + {seg.length})")
    inside: list[str] = []
    for op in g.body.walk():
        what = _inside(op)
        if what is not None and what not in inside:
            inside.append(what)
    lines.append("  inside each instance: " + ("; ".join(inside) if inside else "element-wise work only"))
    if g.persistent is not None:
        loads = sorted({p.buffer(op.access.buffer).name for op in g.persistent.split(g.body.ops)[0]
                        if isinstance(op, P.Load)})
        lines.append(f"  persistent when {g.persistent.flag} = {consts.get(g.persistent.flag, '?')} is 1: the programs "
                     f"walk the {g.persistent.blocks} blocks of instances, as many programs "
                     f"as keep the device busy (resident_programs(num_warps)); each reads "
                     f"{', '.join(loads) or 'nothing'} "
                     f"once, before its loop")
    if g.looped is not None:
        lp = g.looped
        passes = f"{lp.loops} pass{'es' if lp.loops > 1 else ''}"
        lines.append(f"  looped when {lp.flag} = {consts.get(lp.flag, '?')} is 1: {lp.axis.extent} in chunks of "
                     f"{lp.chunk.block} = {consts.get(lp.chunk.block, '?')}, {passes} over the row")
    return lines


def _bounds(a) -> str:
    if isinstance(a.bounds, Proven):
        return f"proven {a.bounds.predicate}"
    if isinstance(a.bounds, Guard):
        return f"guarded by an explicit in-range mask (%{a.bounds.mask.name or 'p'}{a.bounds.mask.id})"
    if isinstance(a.bounds, AssumeInBounds):
        return f"assumed in bounds ({a.bounds.reason})"
    return "not justified"


def explain_program(program: Program) -> str:
    p = program
    consts = dict(p.constexprs)
    lines = [f"kernel {p.name}: one launch, grid = {p.grid} programs, num_warps = {p.num_warps}"]
    for g in p.groups:
        lines += _group_lines(p, g, consts)
    lines.append("tiles:")
    tiles = [(n, e) for n, e in p.constexprs if not any(g.block == n or (g.looped is not None and g.looped.flag == n)
                                                        for g in p.groups)]
    lines += [f"  {n} = {e}" for n, e in tiles] or ["  none"]
    lines.append("buffers:")
    for b in p.buffers:
        backing = f", backed by workspace {b.storage} ({b.copies} copies)" if b.storage else ""
        lines.append(f"  {b.name}: {b.dtype}[{', '.join(str(d) for d in b.shape)}] {b.scope}, init {b.init}, "
                     f"lifetime {b.lifetime}, {b.access}{backing}")
    lines.append("accesses:")
    names = {b.id: b.name for b in p.buffers}
    for op, a in guards_of(p):
        lines.append(f"  {op.NAME} {names.get(a.buffer, a.buffer)}{_where(p, op)}: {_bounds(a)}")
    lines.append("performance notes:")
    lines += [f"  {n}" for n in p.notes] or ["  none"]
    return "\n".join(lines) + "\n"


def explain(kernel: Kernel) -> str:
    """Lower `kernel`, check it with the construction verifier, and explain the plan."""
    from . import lower
    from .verifier import RULES, verify

    program = lower(kernel)
    verify(program, kernel)
    return explain_program(program) + f"construction verifier: all {len(RULES)} rules hold\n"


__all__ = ["explain", "explain_program"]
