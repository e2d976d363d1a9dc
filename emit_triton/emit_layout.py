"""Layout ops on register fragments."""

from __future__ import annotations

from physical import ops as P

from .emit import Emitter, emits


@emits(P.Broadcast)
def emit_broadcast(em: Emitter, op: P.Broadcast) -> None:
    t = op.result.type
    x = op.x
    if x.type.rank == 0:
        src = em.arg(x, t)
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


def _along(vec: str, axis: int, rank: int) -> str:
    """A 1-D tensor expression placed on `axis` of a rank-`rank` tensor (None elsewhere)."""
    if rank == 1:
        return vec
    return f"{vec}[{', '.join(':' if k == axis else 'None' for k in range(rank))}]"


def _dims(em: Emitter, lanes: bool, blocks: list[str]) -> list[str]:
    return ([em.lanes_block] if lanes else []) + blocks


def _shape(dims: list[str]) -> str:
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


@emits(P.TileSlice)
def emit_tile_slice(em: Emitter, op: P.TileSlice) -> None:
    # One register gather per sliced axis; positions past the result extent read a clamped position.
    x, t = op.x.type, op.result.type
    lanes = int(x.lanes)
    cur = em.name(op.x)
    blocks = [a.block for a in x.tile]
    for k, (src, dst) in enumerate(zip(x.tile, t.tile)):
        if src == dst and op.steps[k] == 1:
            continue  # same extent and start 0 (the start is at most extent - extent)
        blocks[k] = dst.block
        dims = _dims(em, x.lanes, blocks)
        pos = f"tl.arange(0, {dst.block}).to(pid.dtype)"
        step = f" * {op.steps[k]}" if op.steps[k] != 1 else ""
        vec = f"tl.minimum({em.name(op.starts[k])} + {pos}{step}, {src.block} - 1)"
        idx, out = em.fresh("positions"), em.fresh("sliced")
        em.line(f"{idx} = tl.broadcast_to({_along(vec, k + lanes, len(dims))}, {_shape(dims)})")
        em.line(f"{out} = tl.gather({cur}, {idx}, {k + lanes})")
        cur = out
    em.line(f"{em.define(op.result)} = {cur}")


@emits(P.TileConcat)
def emit_tile_concat(em: Emitter, op: P.TileConcat) -> None:
    # Each result position along the axis takes the part it falls in, at its offset inside that part.
    t = op.result.type
    lanes = int(t.lanes)
    ax = op.axis
    dims = _dims(em, t.lanes, [a.block for a in t.tile])
    pos = em.fresh("positions")
    em.line(f"{pos} = {_along(f'tl.arange(0, {t.tile[ax].block}).to(pid.dtype)', ax + lanes, len(dims))}")
    out = em.fresh("joined")
    offset = "0"
    for k, part in enumerate(op.parts):
        axis = part.type.tile[ax]
        local, idx = em.fresh("local"), em.fresh("at")
        em.line(f"{local} = {pos} - ({offset})")
        em.line(f"{idx} = tl.broadcast_to(tl.minimum(tl.maximum({local}, 0), {axis.block} - 1), {_shape(dims)})")
        piece = f"tl.gather({em.name(part)}, {idx}, {ax + lanes})"
        if k == 0:
            em.line(f"{out} = {piece}")
        else:
            em.line(f"{out} = tl.where({local} >= 0, {piece}, {out})")
        offset = f"{offset} + {em.dim(axis.extent)}"
    em.line(f"{em.define(op.result)} = {out}")


@emits(P.TileReshape)
def emit_tile_reshape(em: Emitter, op: P.TileReshape) -> None:
    # Result position -> row-major logical index over the result extents -> source coordinates over
    # the source extents -> position in the flattened source tile; one gather from the flattened tile.
    x, t = op.x.type, op.result.type
    lanes = int(t.lanes)
    dims = _dims(em, t.lanes, [a.block for a in t.tile])
    flat_src = " * ".join(a.block for a in x.tile)
    flat_dst = " * ".join(a.block for a in t.tile)
    logical = em.fresh("logical")
    terms = []
    for k, a in enumerate(t.tile):
        later = " * ".join(f"tl.cast({em.dim(b.extent)}, pid.dtype)" for b in t.tile[k + 1:]) or "1"
        vec = f"tl.arange(0, {a.block}).to(pid.dtype)"
        terms.append(f"{_along(vec, k + lanes, len(dims))} * {later}")
    em.line(f"{logical} = {' + '.join(terms)}")
    phys = []
    for k, a in enumerate(x.tile):
        later = " * ".join(f"tl.cast({em.dim(b.extent)}, pid.dtype)" for b in x.tile[k + 1:]) or "1"
        coord = f"({logical} // ({later})) % tl.cast({em.dim(a.extent)}, pid.dtype)" if k else \
            f"{logical} // ({later})"
        stride = " * ".join(b.block for b in x.tile[k + 1:]) or "1"
        phys.append(f"tl.minimum({coord}, {a.block} - 1) * ({stride})")
    idx = em.fresh("at")
    em.line(f"{idx} = tl.broadcast_to({' + '.join(phys)}, {_shape(dims)})")
    src = em.fresh("flat")
    em.line(f"{src} = tl.reshape({em.name(op.x)}, {_shape(([em.lanes_block] if lanes else []) + [flat_src])})")
    em.line(f"{idx} = tl.reshape({idx}, {_shape(([em.lanes_block] if lanes else []) + [flat_dst])})")
    out = em.fresh("regrouped")
    em.line(f"{out} = tl.reshape(tl.gather({src}, {idx}, {lanes}), {_shape(dims)})")
    em.line(f"{em.define(op.result)} = {out}")
