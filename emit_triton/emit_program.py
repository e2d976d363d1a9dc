"""Program-space ops: owned instances, lane chunks, shape values, tile positions, barriers, buffers."""

from __future__ import annotations

from physical import ops as P
from physical.model import BufferInit

from .emit import TL_DTYPE, Emitter, emits, literal


@emits(P.OwnedInstances)
def emit_owned(em: Emitter, op: P.OwnedInstances) -> None:
    n = em.define(op.result, "flat")
    em.line(f"{n} = (pid - seg_offset) * {op.block} + tl.arange(0, {op.block}).to(pid.dtype)")


@emits(P.ChunkLanes)
def emit_chunk_lanes(em: Emitter, op: P.ChunkLanes) -> None:
    n = em.define(op.result, "flat")
    em.line(f"{n} = {em.name(op.base)} + tl.arange(0, {op.block}).to(pid.dtype)")


@emits(P.ShapeValue)
def emit_shape_value(em: Emitter, op: P.ShapeValue) -> None:
    n = em.define(op.result, "n")
    em.line(f"{n} = tl.cast({em.launch(op.expr)}, pid.dtype)")


@emits(P.TileIndex)
def emit_tile_index(em: Emitter, op: P.TileIndex) -> None:
    t = op.result.type
    n = em.define(op.result, "pos")
    ar = f"tl.arange(0, {t.tile[op.axis].block}).to(pid.dtype)"
    if len(t.tile) == 1:
        em.line(f"{n} = {ar}")
        return
    idx = ", ".join(":" if k == op.axis else "None" for k in range(len(t.tile)))
    em.line(f"{n} = tl.broadcast_to({ar}[{idx}], {em.shape(t)})")


@emits(P.Barrier)
def emit_barrier(em: Emitter, op: P.Barrier) -> None:
    em.line("tl.debug_barrier()")


@emits(P.AllocBuffer)
def emit_alloc(em: Emitter, op: P.AllocBuffer) -> None:
    buf = em.buffers[op.buffer]
    if buf.init is not BufferInit.FULL:
        em.line(f"# {buf.name}: uninitialised; the kernel writes it before reading")
        return
    numel = " * ".join(em.dim(d) for d in buf.shape) or "1"
    ws = em.workspace_names[buf.storage]  # type: ignore[index]
    base = f"{ws} + {em.name(op.copy)}.to(pid.dtype) * ({numel})" if op.copy is not None else ws
    e = em.fresh("e")
    offs = em.fresh("offs")
    lanes = op.copy is not None and op.copy.type.lanes
    em.line(f"for {e} in range(0, {numel}, 1024):")
    em.line(f"    {offs} = {e} + tl.arange(0, 1024)")
    if lanes:
        mask = f"{offs}[None, :] < ({numel})"
        if op.active is not None:
            mask = f"({mask}) & {em.name(op.active)}[:, None]"
        em.line(f"    tl.store(({base})[:, None] + {offs}[None, :], "
                f"tl.full(({em.lanes_block}, 1024), {literal(buf.fill, buf.dtype)}, {TL_DTYPE[buf.dtype]}), "
                f"mask={mask})")
    else:
        em.line(f"    tl.store({base} + {offs}, tl.full((1024,), {literal(buf.fill, buf.dtype)}, "
                f"{TL_DTYPE[buf.dtype]}), mask={offs} < ({numel}))")


@emits(P.ScalarParam)
def emit_scalar_param(em: Emitter, op: P.ScalarParam) -> None:
    n = em.define(op.result, op.param)
    em.line(f"{n} = tl.cast({em.param_names[op.param]}, {TL_DTYPE[op.result.type.dtype]})")
