"""Loads, gathers, stores and scatters: every one becomes an explicit access relation."""

from __future__ import annotations

from kir import access as KA
from kir import core as K
from kir.dims import DConst, Dim
from kir.dtypes import DType
from kir.pointwise import BinaryFn, UnaryFn

from .. import ops as P
from ..model import AccessRelation, Buffer, Fragment, Guard, PValue, TileAxis
from ..ops.access import DEVICE_CHECK
from . import rule
from .context import Lowerer


def slice_coords(lw: Lowerer, index: K.Index, tile: tuple[TileAxis, ...]) -> tuple[PValue, ...]:
    """Coordinates for point/slice index items: a slice's j-th axis is start + tile position j."""
    coords: list[PValue] = []
    j = 0
    for it in index:
        if isinstance(it, K.Value):
            coords.append(lw.get(it))
        elif isinstance(it, K.Slice):
            pos = lw.tile_index(tile, j)
            if it.start != DConst(0):
                pos = lw.binary(_ADD, pos, lw.shape_value(it.start))
            coords.append(pos)
            j += 1
        else:
            raise lw.fail("a data-dependent subregion (b:e) is only allowed in region folds and scans")
    return tuple(coords)


def fill_for(buffer: Buffer) -> int | float | bool:
    return False if buffer.dtype.is_pred else 0.0 if buffer.dtype.is_float else 0


def note_read(lw: Lowerer, buffer: Buffer) -> None:
    """A read of something this program wrote earlier needs its writes ordered first."""
    written = lw.written
    if buffer.id in written:
        lw.add_barrier()


def note_write(lw: Lowerer, buffer: Buffer) -> None:
    # i4 tensors hold two elements a byte: the generated store writes a byte whole only where one program owns both
    # of its nibbles, and merges a lone nibble into memory atomically (emit_triton.emit_access._store_i4)
    lw.written.add(buffer.id)


def check_indices(lw: Lowerer, what: str, buffer: Buffer, acc: AccessRelation, tile: tuple[TileAxis, ...],
                  lanes: bool, effect: bool) -> None:
    """With checks on (`kernel.checks`), a device check that every member of a data-dependent access
    (`acc` as `Lowerer.access` built it: members, then the in-range guard) lies inside `buffer`."""
    if not lw.kernel.checks or not isinstance(acc.bounds, Guard):
        return
    active = lw.lane_valid if lanes else None
    active = lw.and_(active, lw.tile_member(tile))
    if effect:
        active = lw.and_(active, lw.active)
    active = lw.and_(active, lw.members_of(tile, lanes))
    cond = acc.bounds.mask
    if active is not None:
        off = lw.add(P.Unary, active.type, fn=UnaryFn.not_, x=active)
        cond = lw.add(P.Binary, lw.join(off, cond).with_dtype(DType.pred), fn=BinaryFn.or_, lhs=off, rhs=cond)
    where = f" at {lw.loc()}" if lw.loc() is not None else ""
    lw.emit(P.Check, (), cond=cond, message=f"{DEVICE_CHECK}{what} out of range{where}: an index into {buffer.name} "
                                           f"lies outside its extent")


def _point_tile(tile: tuple[TileAxis, ...], coords: tuple[PValue, ...]) -> tuple[TileAxis, ...]:
    """The tile of a read: its own, or for a scalar read at a point that is itself a tile (a region fold's map
    reads other tensors at the chunk's positions, `indices[k]`, `x[indices[k]]`) the point's."""
    if tile:
        return tile
    return next((c.type.tile for c in coords if c.type.tile), ())


@rule(KA.Load)
def lower_load(lw: Lowerer, op: KA.Load) -> None:
    buf = lw.buffer_of(op.src)
    note_read(lw, buf)
    coords = slice_coords(lw, op.index, lw.tile(op.result.type.shape))
    tile = _point_tile(lw.tile(op.result.type.shape), coords)
    copy = lw.copy_index(buf, True)
    lanes = any(c.type.lanes for c in coords) or (copy is not None and copy.type.lanes)
    acc = lw.access(buf, coords, tile, lanes, data_dependent=False, fill=fill_for(buf), effect=False, copy=copy)
    lw.bind(op.result, lw.add(P.Load, Fragment(lw.natural(op.result.type, lanes).dtype, lanes, tile),
                              name=op.result.name, access=acc))


@rule(KA.Gather)
def lower_gather(lw: Lowerer, op: KA.Gather) -> None:
    buf = lw.buffer_of(op.src)
    note_read(lw, buf)
    coords = tuple(lw.get(v) for v in op.indices)
    tile = _point_tile(lw.tile(op.result.type.shape), coords)
    copy = lw.copy_index(buf, True)
    lanes = any(c.type.lanes for c in coords) or (copy is not None and copy.type.lanes)
    acc = lw.access(buf, coords, tile, lanes, data_dependent=True, fill=op.fill, effect=False, copy=copy)
    if not op.masked:
        check_indices(lw, "gather", buf, acc, tile, lanes, effect=False)
    lw.bind(op.result, lw.add(P.Load, Fragment(lw.natural(op.result.type, lanes).dtype, lanes, tile),
                              name=op.result.name, access=acc))


@rule(KA.Store)
def lower_store(lw: Lowerer, op: KA.Store) -> None:
    buf = lw.buffer_of(op.dst)
    value = lw.get(op.value)
    coords = slice_coords(lw, op.index, value.type.tile)
    lanes = value.type.lanes or any(c.type.lanes for c in coords) or lw.lane_valid is not None
    acc = lw.access(buf, coords, value.type.tile, lanes, data_dependent=False, fill=None, effect=True,
                    copy=lw.copy_index(buf, lanes))
    lw.emit(P.Store, (), access=acc, value=value, unique=op.unique)
    note_write(lw, buf)


@rule(KA.Scatter)
def lower_scatter(lw: Lowerer, op: KA.Scatter) -> None:
    buf = lw.buffer_of(op.dst)
    value = lw.get(op.value)
    coords = tuple(lw.get(v) for v in op.indices)
    tiles = [c.type.tile for c in coords if c.type.tile] + ([value.type.tile] if value.type.tile else [])
    tile = tiles[0] if tiles else ()
    lanes = value.type.lanes or any(c.type.lanes for c in coords) or lw.lane_valid is not None
    acc = lw.access(buf, coords, tile, lanes, data_dependent=True, fill=None, effect=True,
                    copy=lw.copy_index(buf, lanes))
    check_indices(lw, "scatter", buf, acc, tile, lanes, effect=True)
    lw.emit(P.Store, (), access=acc, value=value, unique=op.unique)
    note_write(lw, buf)


_ADD = BinaryFn.add

__all__ = ["slice_coords", "fill_for", "Dim"]
