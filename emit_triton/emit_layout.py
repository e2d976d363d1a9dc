"""Layout ops on register fragments."""

from __future__ import annotations

from physical import ops as P

from .emit import Emitter, emits


@emits(P.Broadcast)
def emit_broadcast(em: Emitter, op: P.Broadcast) -> None:
    t = op.result.type
    x = op.x
    if x.type.rank == 0:
        src = em.name(x)
    else:
        idx = []
        if t.lanes:
            idx.append(":" if x.type.lanes else "None")
        for j in range(len(t.tile)):
            idx.append(":" if j in op.dims else "None")
        src = f"{em.name(x)}[{', '.join(idx)}]"
    em.line(f"{em.define(op.result)} = tl.cast(tl.broadcast_to({src}, {em.shape(t)}), {em.dtype(t)})")


@emits(P.Permute)
def emit_permute(em: Emitter, op: P.Permute) -> None:
    lanes = int(op.x.type.lanes)
    perm = ([0] if lanes else []) + [p + lanes for p in op.perm]
    em.line(f"{em.define(op.result)} = tl.permute({em.name(op.x)}, ({', '.join(map(str, perm))},))")


@emits(P.ExpandDims)
def emit_expand(em: Emitter, op: P.ExpandDims) -> None:
    em.line(f"{em.define(op.result)} = tl.expand_dims({em.tensor(op.x)}, {op.axis + int(op.x.type.lanes)})")


@emits(P.Squeeze)
def emit_squeeze(em: Emitter, op: P.Squeeze) -> None:
    em.line(f"{em.define(op.result)} = tl.reshape({em.name(op.x)}, {em.shape(op.result.type)})")
