"""Region fold / region scan: the data-dependent subregion stays inside the instance, in chunks."""

from __future__ import annotations

from kir import core as K
from kir import region as KG
from kir.dims import DConst
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from kir.reduce import default_acc
from kir.reduce import identity as reduce_identity

from .. import ops as P
from ..analysis import captured
from ..model import Fragment, PRegion, PValue
from . import lower_ops, rule
from .access import fill_for, note_read, note_write
from .context import Lowerer
from .reduce import builtin_combine, lower_combine, seeded

CHUNK = 256  # elements of a subregion visited per chunk step


def _dyn(index: K.Index) -> tuple[int, K.DynSlice]:
    for ax, it in enumerate(index):
        if isinstance(it, K.DynSlice):
            return ax, it
    raise AssertionError("region index without a subregion")


def _positions(lw: Lowerer, begin: PValue, end: PValue, start: PValue, reverse: bool) -> tuple[PValue, PValue]:
    """Element positions of one chunk and their membership in [begin, end) (traversal order)."""
    tile = lw.tile((DConst(CHUNK),))
    t = lw.binary(BinaryFn.add, start, lw.tile_index(tile, 0))
    if reverse:
        last = lw.binary(BinaryFn.sub, end, lw.shape_value(DConst(1)))
        pos = lw.binary(BinaryFn.sub, lw.broadcast_to(last, Fragment(last.type.dtype, last.type.lanes, tile,
                                                                       last.type.index)), t)
        member = lw.compare(CmpFn.ge, pos, lw.broadcast_to(begin, pos.type.with_dtype(begin.type.dtype,
                                                                                      begin.type.index)))
    else:
        pos = lw.binary(BinaryFn.add, lw.broadcast_to(begin, Fragment(begin.type.dtype, begin.type.lanes, tile,
                                                                        begin.type.index)), t)
        member = lw.compare(CmpFn.lt, pos, lw.broadcast_to(end, pos.type.with_dtype(end.type.dtype,
                                                                                   end.type.index)))
    return pos, member


def _lane_columns(lw: Lowerer, *indices: K.Index) -> dict[int, PValue]:
    """The index items of `indices` that are a one-axis instance's own coordinate (its flat index), each as
    `flat % N`: the same value in every valid lane, but a term whose divisibility Triton sees (at N = 1 it folds
    to 0), where the bare program-derived flat index left a chunk's contiguous positions beside a column of
    unknown alignment (32-bit loads). Computed once, outside the chunk loop; the per-lane remainder is paid once
    per instance, against a chunk of elements."""
    flat = lw.instance_flat
    found: dict[int, PValue] = {}
    for index in indices:
        for it in index:
            if flat is None or not isinstance(it, K.Value) or it.id in found or it.id not in lw.env:
                continue
            v = lw.get(it)
            if v.id != flat.id:
                continue
            col = lw.binary(BinaryFn.mod, v, lw.shape_value(lw.instance_count), name="column")
            lw.set_form(col, lw.affine_of(v))  # the lane's coordinate wherever the lane is valid
            found[it.id] = col
    return found


def _coord(lw: Lowerer, it: object, columns: dict[int, PValue]) -> PValue:
    assert isinstance(it, K.Value)
    return columns[it.id] if it.id in columns else lw.get(it)


def _source(lw: Lowerer, src: K.Value, index: K.Index, begin: PValue, end: PValue, reverse: bool,
            map_region: K.Region | None, position: bool = False, columns: dict[int, PValue] | None = None
            ) -> tuple[PRegion, tuple[DType, ...], PValue | None]:
    """The slicing relation + summariser: chunk start -> (components..., member). With `position`, the
    element's position relative to `begin` (i64) follows the components (argmax/argmin). `columns`: index items
    read as their `_lane_columns` value."""
    buf = lw.buffer_of(src)
    note_read(lw, buf)
    axis, _ = _dyn(index)
    (start,) = lw.begin((Fragment(DType.i64, index=True),), ("start",))
    pos, member = _positions(lw, begin, end, start, reverse)
    member = lw.and_(member, lw.lane_valid if pos.type.lanes else None)
    coords = []
    for ax, it in enumerate(index):
        coords.append(pos if ax == axis else _coord(lw, it, columns or {}))
    acc = lw.access(buf, tuple(coords), pos.type.tile, pos.type.lanes, data_dependent=True, fill=fill_for(buf),
                    effect=False, copy=lw.copy_index(buf, pos.type.lanes))
    acc = type(acc)(acc.buffer, acc.coords, lw.and_(acc.mask, member), acc.bounds, acc.fill, acc.copy)
    elem = lw.add(P.Load, Fragment(buf.dtype, pos.type.lanes, pos.type.tile), name="elem", access=acc)
    if map_region is None:
        comps: tuple[PValue, ...] = (elem,)
    else:
        lw.bind(map_region.args[0], elem)
        if len(map_region.args) > 1:  # the element's position: other subregions over the range are read there
            lw.bind(map_region.args[1], pos if pos.type.dtype is DType.i64 else lw.cast(pos, DType.i64))
        saved, lw.members = lw.members, member
        try:
            lower_ops(lw, map_region.ops)
        finally:
            lw.members = saved
        # A map result computed only from values outside the map (a lane's own index, a constant) has
        # no chunk tile: widen it to the element's fragment, it is one value per element like the rest.
        comps = tuple(lw.broadcast_to(c, elem.type.with_dtype(c.type.dtype, c.type.index))
                      for c in (lw.get(v) for v in map_region.yielded))
    if position:
        rel = lw.binary(BinaryFn.sub, pos, lw.broadcast_to(begin, pos.type.with_dtype(begin.type.dtype,
                                                                                     begin.type.index)))
        rel = lw.cast(rel, DType.i64)  # the offsets may be i32: positions are i64, as KIR's argmax
        comps += (lw.broadcast_to(rel, elem.type.with_dtype(DType.i64, rel.type.index)),)
        # elements outside the source are not members (as the oracle clips them), not fill values
        member = acc.mask if acc.mask is not None else member
    region = lw.finish(comps + (member,))
    return region, tuple(c.type.dtype for c in comps), member


def _lane_bounds(lw: Lowerer, op: KG.RegionFold | KG.RegionScan, index: K.Index) -> tuple[PValue, PValue]:
    """The bounds of the subregion `index` reaches, both per lane where the op reads or writes a lane's own
    elements: bounds every instance shares (`b:e` of a top-level jagged scan run per column) with an index item
    or a map value of the lane's own (its column), or one bound per lane and the other shared (`offsets[s]:E`),
    make every lane walk its own elements, so positions, loads, the scan and what it writes all carry the
    lanes."""
    _, dyn = _dyn(index)
    begin, end = lw.get(dyn.begin), lw.get(dyn.end)
    if begin.type.lanes and end.type.lanes:
        return begin, end
    if begin.type.lanes or end.type.lanes or any(i in lw.env and lw.env[i].type.lanes for i in captured(op)):
        # both bounds: a reverse walk starts from the end, a forward one from the begin
        begin, end = (v if v.type.lanes else lw.broadcast_to(v, Fragment(v.type.dtype, True, (), v.type.index))
                      for v in (begin, end))
    return begin, end


@rule(KG.RegionFold)
def lower_region_fold(lw: Lowerer, op: KG.RegionFold) -> None:
    begin, end = _lane_bounds(lw, op, op.index)
    arg = op.kind in (KG.ReduceKind.argmax, KG.ReduceKind.argmin)
    columns = _lane_columns(lw, op.index)
    source, dtypes, _ = _source(lw, op.src, op.index, begin, end, False, op.map, position=arg, columns=columns)
    lanes = begin.type.lanes or end.type.lanes
    if op.kind is KG.ReduceKind.custom:
        assert op.combine is not None and op.identity is not None
        combine, identity, accs = lower_combine(lw, op.combine, dtypes), op.identity, dtypes
        outs = tuple(Fragment(d, lanes) for d in dtypes)
    elif arg:
        # (value, position) pairs folded in element order: the first extreme wins, NaN counts as the
        # extreme; an empty subregion keeps the identity's position, -1
        combine = builtin_combine(lw, op.kind, dtypes)
        identity, accs = (reduce_identity(op.kind, dtypes[0]), -1), dtypes
        outs = tuple(Fragment(d, lanes) for d in dtypes)
    else:
        acc = op.effective_acc()
        assert isinstance(acc, DType)
        combine, identity, accs = builtin_combine(lw, op.kind, (acc,)), (reduce_identity(op.kind, acc),), (acc,)
        outs = (Fragment(dtypes[0], lanes),)
    names = (op.results[0].name,) * len(outs) if arg else tuple(v.name for v in op.results)
    r = lw.emit(P.RegionFold, outs, names=names, begin=begin, end=end,
                block=lw.state.block_name(DConst(CHUNK)), source=source, kind=op.kind, identity=identity,
                acc_dtypes=accs, combine=combine, active=lw.lane_valid if lanes else None)
    results = r.results[1:] if arg else r.results
    if op.kind is not KG.ReduceKind.custom and not arg and op.identity is not None:
        results = (seeded(lw, op.kind, accs[0], op.identity[0], results[0]),)
    for kv, pv in zip(op.results, results):
        lw.bind(kv, pv)


@rule(KG.RegionScan)
def lower_region_scan(lw: Lowerer, op: KG.RegionScan) -> None:
    _, dyn = _dyn(op.src_index)
    daxis, ddyn = _dyn(op.dst_index)
    begin, end = _lane_bounds(lw, op, op.src_index)
    dbegin = begin if ddyn.begin.id == dyn.begin.id else lw.get(ddyn.begin)
    columns = _lane_columns(lw, op.src_index, op.dst_index)
    source, dtypes, _ = _source(lw, op.src, op.src_index, begin, end, op.reverse, None, columns=columns)
    if op.kind is KG.ScanKind.custom:
        assert op.combine is not None and op.identity is not None
        accs = dtypes
        combine, identity = lower_combine(lw, op.combine, dtypes), op.identity
    else:
        # sums and products run in the kind's accumulator (f32 for f16/bf16), as in the oracle; an
        # identity given for a built-in kind is folded into each output, after the scan
        acc = default_acc(op.kind.as_reduce, dtypes[0]) or dtypes[0]
        assert isinstance(acc, DType)
        accs = (acc,)
        combine, identity = builtin_combine(lw, op.kind.as_reduce, accs), (reduce_identity(op.kind.as_reduce, acc),)
    buf = lw.buffer_of(op.dst)
    tile = lw.tile((DConst(CHUNK),))
    lanes = begin.type.lanes or end.type.lanes
    # the target's offset from the source, computed outside the scan: the written position is the element's own
    # position moved by it, whatever part of [begin, end) the scan walks (split-region-scans walks pieces)
    shift = None if dbegin.id == begin.id else lw.binary(BinaryFn.sub, dbegin, begin)
    args = lw.begin((Fragment(DType.i64, index=True),) + tuple(Fragment(d, lanes, tile) for d in accs)
                    + (Fragment(DType.pred, lanes, tile),), ("start",) + ("scanned",) * len(accs) + ("member",))
    start, vals = args[0], args[1:]
    pos, _ = _positions(lw, begin, end, start, op.reverse)
    dpos = pos if shift is None else \
        lw.binary(BinaryFn.add, pos, lw.broadcast_to(shift, pos.type.with_dtype(shift.type.dtype, shift.type.index)))
    coords = tuple(dpos if ax == daxis else _coord(lw, it, columns) for ax, it in enumerate(op.dst_index))
    acc = lw.access(buf, coords, tile, lanes, data_dependent=True, fill=None, effect=True,
                    copy=lw.copy_index(buf, lanes))
    acc = type(acc)(acc.buffer, acc.coords, lw.and_(acc.mask, vals[-1]), acc.bounds, acc.fill, acc.copy)
    value = vals[0]
    if op.kind is not KG.ScanKind.custom and op.identity is not None:
        value = seeded(lw, op.kind.as_reduce, accs[0], op.identity[0], value)
    if value.type.dtype != buf.dtype:
        value = lw.cast(value, buf.dtype)  # the accumulator rounds to the destination once, per element
    # unique: the instances' target segments are disjoint (construction runs them at once only for a segment
    # `dst[offsets[i]:offsets[i + 1]]`, offsets being non-decreasing; see physical.analysis.instances_independent)
    lw.emit(P.Store, (), access=acc, value=value, unique=True)
    emit_region = lw.finish(())
    note_write(lw, buf)
    lw.emit(P.RegionScan, (), begin=begin, end=end, block=lw.state.block_name(DConst(CHUNK)), source=source,
            kind=op.kind, reverse=op.reverse, exclusive=op.exclusive, identity=identity, acc_dtypes=accs,
            combine=combine, emit=emit_region, active=lw.lane_valid if lanes else None)
