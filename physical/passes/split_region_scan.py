"""Balanced region scans: a scan of data-dependent subregions (a segmented cumsum over CSR offsets) splits each
instance's subregion over several programs that pass piece aggregates on by look-back.

A program scans its lanes' subregions to the longest one, so one huge segment keeps one program busy while the rest
of the device idles. A group whose body scans data-dependent subregions per instance (`P.RegionScan`s at its top,
with nothing but pure work and loads besides) runs S = `SPLITS_g` programs per instance (the split count of
split-segments, decided at launch from the shapes; 1 under Triton's interpreter), each program keeping its block of
`BLOCK_g` instances (several short segments a program):

1. a program takes its position from an acq_rel ticket on the group's self-resetting sync buffer
   (`OwnedInstances.ticket`, as split-scans): ticket t runs piece `t % S` of instance `t // S`, so the pieces of
   an instance hold consecutive tickets, and waiting for lower tickets never waits for a program that has not
   started (no co-residency; the interpreter, which runs programs one at a time in order, never waits);
2. piece s of a subregion [b, e) is its s-th run of whole chunks in traversal order (split-segments' cut:
   [b + lo, b + hi) forward, [e - hi, e - lo) for a reverse scan, which walks from the end), at least one held
   tile T = `BLOCK_HELD_g` long (`held_tile`: within the register budget, at most `HELD_TILE`), so the pieces
   of a long segment are equal to within a chunk and a short segment takes few pieces (the later ones are empty);
3. it loads the first T elements of its piece in traversal order once, into one tile it holds (the source's
   chunk step widened by the shared row builder, passes/rows.py), scans that tile locally and totals it
   (`rows.chunk_scan`, as a split scan's chunk), and folds the rest of the piece with the scan's combine (a
   region fold; empty when the piece fits the tile). The tile's total joined with the rest's is the piece's
   aggregate;
4. it publishes the aggregate in its slot `instance * S + s` (`publish_slot`), waits for the slots of the
   instance's lower pieces and folds them **in index order** (`fold_slots` from `instance * S`: the order depends
   on the piece only, never on timing, so float results are identical from run to run); a program whose pieces
   are all empty (past the end of a short subregion) neither waits nor folds (`fold_slots.active`);
5. it writes the held tile with that prefix combined in (the first piece writes its own scan), then scans the rest
   of the piece after the prefix and the tile's total, and
6. retires its ticket (`retire_ticket`): the last program restores the sync buffer, so no launch clears it.

S (`piece_count`) is split-segments' count raised on a device until the longest subregion a lane may scan (the
extent of the source's subregion axis) is cut into pieces of one tile each, while the launch keeps at least
`VALUES_PER_PROGRAM` values per program: a piece that fits its tile is read once, so only the rest of a longer
piece is read twice (its fold, then its scan). It is also at most those pieces of one tile, or a program per
multiprocessor for each block where they are fewer: a shorter piece reads no less, and each piece more costs every
later piece of its instance one more slot to fold (S (S - 1) / 2 slots per lane in all).

Where one offsets tensor bounds every scan of the group (all one way; region folds beside them bounded alike), the
data decides the pieces instead: helper programs past the blocks scan equal chunks of the scanned tensor
(physical/passes/balance_region_scan.py), and fold them for the folds beside the scans
(physical/passes/balance_scan_folds.py).

Elsewhere (scans in both directions, bounds of two tensors, pred folds, (segments, columns) worksets with folds)
region folds beside the scans (a segment's total next to its running sum) split on the same pieces: each program
folds its piece of each fold's subregion between its publish and its wait, and the folds' pieces meet in slot order
in the last ticket's holder, which stores what needs them (physical/passes/scan_folds.py).

Legality (`plan_region_scans`): a group of instances (not serial, tiled, looped or persistent) whose top level holds
the region scans, with no other effect than region folds and the stores of what they give (`scan_folds.plan_folds`);
every nested region holds no region scan or fold; no buffer a scan writes is read by anything but that scan's own
source. Profitability: some group has a plan (the launch
decides S; with S = 1 each program scans its instance whole, after an empty fold of the predecessors).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from kir.dims import DConst, Dim, DSym, dim_bin
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from kir.reduce import ReduceKind
from kir.scan import ScanKind

from .. import ops as P
from ..builder import Builder, max_value_id
from ..launch_expr import (
    LaunchExpr,
    LBin,
    LConst,
    LConstexpr,
    LResidentPrograms,
    LWarps,
    as_launch,
    lcdiv,
    ldim,
    lmax,
    lmin,
    lmul,
    lmultiprocessors,
    lprod,
    lsum,
)
from ..lower.region import CHUNK
from ..model import Fragment, Group, Origin, POp, PRegion, Program, PValue, Segment, TileAxis
from ..rewrite import map_operands
from ..workspace import INDEX, LookbackBuffers, lookback_buffers
from . import GroupPass, PassContext, partials
from .looped import BUDGET_VARIABLE, REGISTER_VALUES, TREE_VALUES
from .partials import lane_test, split_flag
from .rows import RowBuilder, chunk_scan
from .scan_folds import FoldsPlan, add_workspace, instance, plan_folds, split_folds
from .split_scan import SPLIT_TILE
from .split_segments import split_count

# Slots one look-back step of a region scan reads (across the program's lanes). A piece holds its held tile's scan
# (BLOCK_HELD_g values, 32 a thread at 8 warps) across the look-back, so the step's tile of slots, flags and their
# addresses must stay small: at 1024 slots a step segment_cumsum's sm_90 code (64 segments over 2M values) spilled
# 548 bytes; at 256, none (span_cumsum's none either way). The slots read are the same; a fold of more slots takes
# more steps.
REGION_SLOT_BLOCK = 256

# A launch keeps at least this many values per program on average: the program of an empty piece costs its ticket,
# its bounds, its slot and flag (about 8 sectors, 256 bytes), under 1/8 of what 256 values read and written move
VALUES_PER_PROGRAM = 256
# The most a program holds of its piece: a split scan's chunk (8192 four-byte values and their local scan in 8 warps
# stay in registers: `ptxas -v` on sm_90 shows no spills; 16384 in 16 warps spills)
HELD_TILE = SPLIT_TILE


@dataclasses.dataclass(frozen=True)
class RegionScanPlan:
    group: Group
    scans: tuple[int, ...]  # positions of the region scans in the group's body
    values: LaunchExpr  # elements of the scanned tensors (the largest)
    folds: FoldsPlan | None = None  # region folds beside the scans (physical/passes/scan_folds.py)
    longest: LaunchExpr | None = None  # the most elements one lane's subregion can hold (None: `values`)


def _loads(ops: tuple[POp, ...]) -> set[int]:
    return {o.access.buffer for op in ops for o in (op, *(i for r in op.regions() for i in r.walk()))
            if isinstance(o, P.Load)}


def plan_region_scans(program: Program, g: Group) -> RegionScanPlan | str:
    """The plan for group `g`, or why each program keeps its instances' whole subregions."""
    if P.looped_rows(g.body) is not None or g.tiles or P.block_loop(g.body.ops) is not None or g.serial:
        return "it holds rows, owns tiles, loops over blocks or runs in order"
    ops = g.body.ops
    scans = tuple(n for n, op in enumerate(ops) if isinstance(op, P.RegionScan))
    if not scans:
        return "it scans no data-dependent subregion"
    walked = list(g.body.walk())
    if sum(isinstance(op, P.RegionScan) for op in walked) != len(scans):
        return "a scan runs inside another op (a loop or a branch)"
    if sum(isinstance(op, P.RegionFold) for op in walked) != sum(isinstance(op, P.RegionFold) for op in ops):
        return "a fold runs inside another op (a fold's map, a loop or a branch)"
    folds = plan_folds(program, ops, g.single_instance)
    if isinstance(folds, str):
        return folds
    for op in ops:
        if folds is None and not (isinstance(op, P.RegionScan) or op.TERMINATOR) and op.has_effects():
            return f"it has effects besides its region scans ({op.NAME})"
    found = None if g.single_instance else lane_test(ops)
    if isinstance(found, str):
        return found
    values: list[LaunchExpr] = []
    longest: list[LaunchExpr] = []
    for n in scans:
        scan = ops[n]
        assert isinstance(scan, P.RegionScan)
        if scan.begin.type.dtype != scan.end.type.dtype or scan.begin.type.tile or scan.end.type.tile:
            return "its subregion bounds differ in type"
        source = next((op for op in scan.source.ops if isinstance(op, P.Load)), None)
        if source is None:
            return "its scan reads no tensor"
        if len(scan.source.yielded[-1].type.tile) != 1:  # a program holds one tile axis of its piece
            return "its chunks tile more axes than the subregion's"
        written = {o.access.buffer for o in scan.emit.walk() if isinstance(o, P.Store)}
        others = tuple(op for k, op in enumerate(ops) if k != n)
        if written & _loads(others):
            return "a buffer a scan writes is read by other work of the group"
        shape = program.buffer(source.access.buffer).shape
        values.append(lprod(tuple(ldim(d) for d in shape)))
        longest.append(partials.subregion_extent(program, scan, source))
    values += folds.values if folds is not None else ()
    return RegionScanPlan(g, scans, lmax(*values) if len(values) > 1 else values[0], folds,
                          lmax(*longest) if len(longest) > 1 else longest[0])


class SplitRegionScans(GroupPass):
    """Split the subregions of region scans over programs that pass piece aggregates on by look-back (`tile`: a
    smaller held tile, for tests; `INTENT_LOOP_BUDGET` lowers it too). Where the scans' bounds come from one
    offsets tensor, helpers balance them by the data (physical/passes/balance_region_scan.py) unless `by_data` is
    off: then the shapes decide the pieces everywhere."""

    name = "split-region-scans"

    def __init__(self, tile: int | None = None, by_data: bool = True) -> None:
        self.tile = tile
        self.by_data = by_data

    def plan_group(self, program: Program, group: Group) -> RegionScanPlan | str:
        return plan_region_scans(program, group)

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        from .balance_region_scan import balanced_scan_split, data_bounds

        for plan in self.plans(program, ctx):
            tile = held_tile([program.group(plan.group.id).body.ops[n] for n in plan.scans], self.tile)
            bounds = data_bounds(program, plan) if self.by_data else None  # offsets of one tensor: by the data
            program = _split(program, plan, tile) if bounds is None else \
                balanced_scan_split(program, plan, tile, bounds)
        return program


def held_tile(scans: list[POp], forced: int | None = None) -> int:
    """The elements of a piece one program holds on chip (a power of two, whole chunks): every component it
    loads and its local scan stay live across the wait for the predecessors, within the persistent register
    budget (`looped.REGISTER_VALUES`, `TREE_VALUES` for element-order scans), at most `HELD_TILE`.
    `forced` (or `INTENT_LOOP_BUDGET`) lowers it."""
    live, size, native = 0, 4, True
    for scan in scans:
        assert isinstance(scan, P.RegionScan)
        live += 2 * len(scan.acc_dtypes)
        size = max([size] + [d.bits // 8 for d in scan.acc_dtypes])
        native = native and scan.native
    limit = min(HELD_TILE, (REGISTER_VALUES if native else TREE_VALUES) // live * 4 // size)
    if forced is None and os.environ.get(BUDGET_VARIABLE, "").strip().isdigit():
        forced = int(os.environ[BUDGET_VARIABLE])
    if forced:
        limit = min(limit, forced)
    return max(CHUNK, 1 << (limit.bit_length() - 1))


def piece_count(program: Program, g: Group, values: LaunchExpr, chunk: str, held: LaunchExpr,
                longest: LaunchExpr | None = None) -> LaunchExpr:
    """S: split-segments' count (`split_count`: the device filled, 1 under the interpreter, never more pieces than
    the longest subregion a lane may scan has chunks), raised on a device until the pieces of that subregion
    (`longest` elements: the extent of the source's subregion axis, not the columns beside it, which other lanes
    scan; `values` when not given) are one held tile (`held` elements) each, as long as the launch keeps
    `VALUES_PER_PROGRAM` values per program on average (the programs of empty pieces cost a ticket, the bounds and
    the workspace only).

    S is also at most the larger of those held tiles and a program per multiprocessor for each block: a piece
    shorter than its held tile reads nothing less than a held tile's piece does, while each program more costs
    every later piece of its instance one more slot to fold (S (S - 1) / 2 in all). Where the held tiles give
    fewer programs than the device has multiprocessors, shorter pieces spread the subregion over them."""
    extent = values if longest is None else longest
    device = split_count(program, g, values, chunk, extent)
    resident = LResidentPrograms(as_launch(program.num_warps))
    on_device = lmin(LBin("-", resident, LConst(1)), LConst(1))  # 0 under the interpreter (one program at a time)
    blocks = lcdiv(lprod(tuple(ldim(d) for d in g.domain)), dict(program.constexprs)[g.block])
    tiles = lcdiv(extent, held)
    cover = lmin(tiles, LBin("//", values, lmul(blocks, LConst(VALUES_PER_PROGRAM))))
    count = lmax(device, lmul(on_device, cover))
    spread = lmax(tiles, lcdiv(lmultiprocessors(), blocks))
    return lmin(count, spread, lmax(LConst(1), lcdiv(extent, dict(program.constexprs)[chunk])))


def _split(program: Program, plan: RegionScanPlan, tile: int) -> Program:
    g = plan.group
    gid = g.id
    ops = g.body.ops
    scans = [ops[n] for n in plan.scans]
    splits, held = f"SPLITS_{gid}", P.held_block(gid)
    # a program keeps its block of BLOCK_g instances (several short segments each) and scans its piece of each,
    # holding `tile` elements in all: BLOCK_HELD_g of each instance's piece (at least a chunk)
    consts = dict(program.constexprs)
    held_size = lmax(LConst(CHUNK), LBin("//", LConst(tile), consts[g.block]))
    # the held tile sizes the warps (as a split scan's chunk), and with them the resident programs S counts on
    program = dataclasses.replace(program, num_warps=lmax(as_launch(program.num_warps), LWarps(LConst(tile))))
    count = piece_count(program, g, plan.values, scans[0].block, held_size,  # type: ignore[attr-defined]
                        plan.longest)
    fast = split_flag(gid)
    selects = lmin(LBin("-", count, LConst(1)), LConst(1))  # 1: several pieces an instance (SPLITS_g > 1)
    program = dataclasses.replace(program, constexprs=tuple((n, consts[n]) for n, _ in program.constexprs) +
                                  ((held, held_size), (splits, count), (fast, selects)))
    blocks = lcdiv(lprod(tuple(ldim(d) for d in g.domain)), consts[g.block])
    programs = lmul(blocks, count)
    lengths = [programs if seg.group == gid else seg.length for seg in program.segments]
    segments = tuple(dataclasses.replace(seg, length=n, offset=lsum(tuple(lengths[:k])))
                     for k, (seg, n) in enumerate(zip(program.segments, lengths)))
    # a flag per program (ticket); the slots hold a value per lane: instance * S + piece, the block's last lanes
    # past the instances included (they publish what they scanned: nothing)
    lanes = DSym(g.block)
    padded = dim_bin("*", dim_bin("//", dim_bin("+", _flat(g), dim_bin("-", lanes, 1)), lanes), lanes)
    flags_dim = dim_bin("*", dim_bin("//", dim_bin("+", _flat(g), dim_bin("-", lanes, 1)), lanes), DSym(splits))
    values = (dim_bin("*", padded, DSym(splits)), lmul(lmul(blocks, consts[g.block]), count))
    ws = lookback_buffers(program, gid, flags_dim, programs, [s.acc_dtypes for s in scans], values)  # type: ignore
    program = dataclasses.replace(program, buffers=program.buffers + (ws.sync,) + tuple(b for row in ws.slots
                                                                                          for b in row),
                                  workspaces=program.workspaces + tuple(ws.workspaces))
    if plan.folds is not None:
        program, folds_ws = add_workspace(program, gid, ops, plan.folds, splits, count)

    found = None if g.single_instance else lane_test(ops)
    lane_ok = found[1] if isinstance(found, tuple) else None  # the block's lanes within the instances
    first_scan = scans[0]
    assert isinstance(first_scan, P.RegionScan)
    w = RowBuilder(_chunk_axis(first_scan), TileAxis(DSym(held), held), max_value_id(program), relative=True)
    origin = first_scan.origin
    s: PValue | None = None
    flat: PValue | None = None
    if g.single_instance:  # a top-level scan: the ticket gives the piece, the one instance has slots 0 .. S - 1
        w.add(P.OwnedInstances, Fragment(DType.i64, True, (), True), origin, "ticket", group=gid, block=g.block,
              splits=splits, ticket=ws.sync.id)
        s = w.add(P.SplitIndex, INDEX, origin, "piece", group=gid, splits=splits)
    moved = plan.folds.moved if plan.folds is not None else frozenset()
    for n, op in enumerate(ops):
        if isinstance(op, P.RegionScan) or op.TERMINATOR or n in moved:
            continue
        if isinstance(op, P.OwnedInstances):
            op = dataclasses.replace(op, splits=splits, ticket=ws.sync.id)
            w.put(op)
            flat = op.results[0]
            s = w.add(P.SplitIndex, INDEX, origin, "piece", group=gid, splits=splits)
            continue
        w.put(op)
    assert s is not None
    zero = w.add(P.Const, INDEX, origin, value=0, dtype=DType.i64)
    if flat is None:  # one instance: its pieces' slots are the pieces
        first, slot = zero, s
    else:
        per = w.add(P.ShapeValue, INDEX, origin, "splits", expr=LConstexpr(splits))
        first = w.add(P.Binary, flat.type, origin, "instance_first", fn=BinaryFn.mul, lhs=flat, rhs=per)
        slot = w.add(P.Binary, flat.type, origin, "slot", fn=BinaryFn.add, lhs=first, rhs=s)
    leading = w.add(P.Compare, Fragment(DType.pred), origin, "first_piece", fn=CmpFn.eq, lhs=s, rhs=zero)
    split = partials.flag_set(w, fast, origin, zero)

    pieces: list[_Piece] = []
    for scan in scans:
        assert isinstance(scan, P.RegionScan)
        pieces.append(_hold(w, scan, s, (splits, held, fast), split, zero))
    w.put(P.PublishSlot(origin=origin, sync=ws.sync.id, slots=tuple(b.id for row in ws.slots for b in row),
                        slot=slot, values=tuple(v for p in pieces for v in p.aggregate), active=lane_ok))
    if plan.folds is not None:  # the folds' pieces, folded while the predecessors' aggregates arrive
        split_folds(w, ops, plan.folds, folds_ws, s, splits, instance(w, flat, origin), lane_ok, gid,
                    {n: p.aggregate for n, p in zip(plan.scans, pieces)})
    return look_back(w, program, g, pieces, ws, (first, slot, lane_ok), (leading, zero), origin,
                     (programs, segments, lengths))


def look_back(w: RowBuilder, program: Program, g: Group, pieces: list[_Piece], ws: LookbackBuffers,
              slots: tuple[PValue, PValue, PValue | None], first_piece: tuple[PValue, PValue], origin: Origin,
              launch: tuple[LaunchExpr, tuple[Segment, ...], list[LaunchExpr]],
              in_chunk: Callable[[_Piece, list[PValue]], tuple[list[PValue], PValue]] | None = None,
              finish: Callable[[], None] | None = None) -> Program:
    """The end of a split region-scan body, shared by the shapes' pieces and the data's helpers: each piece
    folds the aggregates of the slots `first` up to its own `slot` in index order (a lane out of `lane_ok` or
    with an empty piece folds nothing), writes itself with that prefix (`leading`: the first piece writes its
    own scan), and the program retires its ticket; returns the program with the group's body so built and the
    launch's `programs`, `segments` and `lengths` in place. `in_chunk` (a helper whose lanes hold runs of one
    chunk) gives, from a piece and that prefix, what precedes each lane's run and whether the run writes its
    own scan. `finish` writes what follows the look-back before the ticket retires (region folds beside the scans
    balanced by the data: their last helpers' look-back and the stores of their results)."""
    first, slot, lane_ok = slots
    leading, zero = first_piece
    programs, segments, lengths = launch
    gid = g.id
    for p, bufs in zip(pieces, ws.slots):
        scan = p.scan
        # a lane whose piece is empty (past the end of a short subregion) folds nothing: nothing it writes needs a
        # prefix, so a program of such pieces alone waits for nobody
        b, e = (p.head.begin, p.rest.end) if not scan.reverse else (p.rest.begin, p.head.end)
        active = w.fit(w.add(P.Compare, Fragment(DType.pred, b.type.lanes or e.type.lanes), origin, "nonempty",
                             fn=CmpFn.lt, lhs=b, rhs=e), Fragment(DType.pred, slot.type.lanes), origin)
        if lane_ok is not None:
            active = w.add(P.Binary, active.type, origin, fn=BinaryFn.and_, lhs=active, rhs=lane_ok)
        prefix = [w.fresh(Fragment(dt, slot.type.lanes), "prefix") for dt in scan.acc_dtypes]
        w.put(P.FoldSlots(results=tuple(prefix), origin=scan.origin, sync=ws.sync.id, slots=tuple(b.id for b in bufs),
                          first=first, upto=slot, reverse=scan.reverse, identity=scan.identity,
                          acc_dtypes=scan.acc_dtypes, block=REGION_SLOT_BLOCK, combine=w.copy_region(scan.combine),
                          active=active))
        before, own = (prefix, leading) if in_chunk is None else in_chunk(p, prefix)
        _write(w, p, before, own, zero)
    if finish is not None:
        finish()
    w.put(P.RetireTicket(origin=origin, sync=ws.sync.id, programs=programs))
    w.put(P.Yield(values=()))
    group = dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(w.ops)))
    return dataclasses.replace(program, groups=tuple(group if x.id == gid else x for x in program.groups),
                               segments=segments, grid=lsum(tuple(lengths)))


@dataclasses.dataclass(frozen=True)
class _Piece:
    """One region scan's piece in a program: the scan of its held tile (`local`, its `member`s) and what follows
    the tile (`rest`: the scan over the rest of the piece), the held tile's total and the piece's aggregate."""

    scan: P.RegionScan
    head: P.RegionScan  # the scan restricted to the held tile (its emit region writes the tile)
    rest: P.RegionScan
    local: tuple[PValue, ...]
    member: PValue
    total: tuple[PValue, ...]
    aggregate: tuple[PValue, ...]


def _chunk_axis(scan: P.RegionScan) -> TileAxis:
    """The tile axis of the scan's chunks (its source's member)."""
    return scan.source.yielded[-1].type.tile[0]


def _bounds(w: Builder, scan: P.RegionScan, s: PValue, splits: str, held: str,
            piece: tuple[PValue, PValue] | None = None) -> tuple[PValue, ...]:
    """The held tile [hb, he) and the rest [rb, re) of this program's piece (split s's, or `piece` as given):
    the first `held` elements of the piece in traversal order and what follows them (for a reverse scan the
    tile is the piece's end)."""
    origin = scan.origin
    begin, end = piece or partials.piece(partials.Ops(w, origin), scan.begin, scan.end, s, splits, scan.block, held)
    t = begin.type

    def binary(fn: BinaryFn, x: PValue, y: PValue, name: str | None = None) -> PValue:
        return w.add(P.Binary, Fragment(t.dtype, x.type.lanes or y.type.lanes), origin, name, fn=fn, lhs=x, rhs=y)

    if scan.reverse and piece is None:  # the s-th piece from the end: [e - hi, e - lo), [b + lo, b + hi) from b
        lo, hi = (binary(BinaryFn.sub, x, scan.begin) for x in (begin, end))
        begin, end = binary(BinaryFn.sub, scan.end, hi, "piece_begin"), binary(BinaryFn.sub, scan.end, lo, "piece_end")
    size = w.add(P.Cast, Fragment(t.dtype), origin, x=w.add(P.ShapeValue, INDEX, origin, "held",
                                                            expr=LConstexpr(held)), dtype=t.dtype)
    if scan.reverse:
        cut = binary(BinaryFn.maximum, binary(BinaryFn.sub, end, size), begin, "held_begin")
        return cut, end, begin, cut
    cut = binary(BinaryFn.minimum, binary(BinaryFn.add, begin, size), end, "held_end")
    return begin, cut, cut, end


def _traversal_combine(w: Builder, scan: P.RegionScan) -> PRegion:
    """The scan's combine in traversal order: the source yields a reverse scan's elements from its end, so a custom
    combine joins each element on the left (built-in kinds commute)."""
    combine = w.copy_region(scan.combine)
    if scan.reverse and scan.kind is ScanKind.custom:
        k = len(scan.acc_dtypes)
        combine = PRegion(combine.args[k:] + combine.args[:k], combine.ops)
    return combine


def _hold(w: RowBuilder, scan: P.RegionScan, s: PValue, names: tuple[str, str, str], split: PValue,
          zero: PValue, piece: tuple[PValue, PValue] | None = None, wanted: PValue | None = None) -> _Piece:
    """Load the held tile of this program's piece of `scan` (split s's, or `piece`), scan it locally and total
    it, and fold the rest of the piece (only where several programs share the subregion: a later piece needs
    the aggregate; and only where `wanted`, else the rest's fold is empty)."""
    splits, held, fast = names
    hb, he, rb, re = _bounds(w, scan, s, splits, held, piece)
    head = map_operands(scan, lambda v: {scan.begin.id: hb, scan.end.id: he}.get(v.id, v))
    rest = map_operands(scan, lambda v: {scan.begin.id: rb, scan.end.id: re}.get(v.id, v))
    assert isinstance(head, P.RegionScan) and isinstance(rest, P.RegionScan)
    # the source's one chunk step at the start of the tile, widened to the tile (a copy: the rest keeps its own)
    source = w.copy_region(head.source)
    w.row[source.args[0].id] = zero
    for op in source.ops:
        if not op.TERMINATOR:
            w.copy_op(op, zero)
    *comps, member = (w.get(v) for v in source.yielded)
    combine = _traversal_combine(w, scan)
    lanes = member.type.lanes
    like = tuple(w.fresh(Fragment(dt, lanes, (w.chunk,)), "scanned") for dt in scan.acc_dtypes)
    local, total = chunk_scan(w, P.Scan(results=like, origin=scan.origin, inputs=tuple(comps), axis=0,
                                        kind=scan.kind, reverse=False, exclusive=scan.exclusive,
                                        identity=scan.identity, acc_dtypes=scan.acc_dtypes, member=member,
                                        combine=combine))
    kind = ReduceKind.custom if scan.kind is ScanKind.custom else scan.kind.as_reduce
    # the rest's aggregate only serves later pieces: with one piece (SPLITS_g = 1, constexpr SPLIT_g = 0) the
    # kernel holds no fold, so each segment is read once
    w.begin()
    part = tuple(w.fresh(Fragment(dt, lanes), "rest_total") for dt in scan.acc_dtypes)
    upto = re if wanted is None else w.add(P.Select, re.type, scan.origin, "rest_fold_end", cond=wanted,
                                           on_true=re, on_false=rb)
    w.put(P.RegionFold(results=part, origin=scan.origin, begin=rb, end=upto, block=scan.block,
                       source=w.copy_region(rest.source), kind=kind, identity=scan.identity,
                       acc_dtypes=scan.acc_dtypes, combine=w.copy_region(combine), active=scan.active))
    folded = w.finish(part)
    w.begin()
    none = w.finish(tuple(w.fit(w.add(P.Const, Fragment(v.type.dtype), scan.origin, value=i, dtype=v.type.dtype),
                                v.type, scan.origin) for v, i in zip(part, scan.identity)))
    outs = tuple(w.fresh(v.type, v.name) for v in part)
    w.put(P.If(results=outs, origin=scan.origin, cond=split, then_=folded, else_=none, flag=fast))
    # the piece's aggregate: the tile precedes the rest in traversal order
    aggregate = w.combine(combine, list(total), list(outs), [v.type for v in total], scan.origin)
    return _Piece(scan, head, rest, tuple(local), member, tuple(total), tuple(aggregate))


def _write(w: RowBuilder, p: _Piece, prefix: list[PValue], leading: PValue, zero: PValue) -> None:
    """Write the held tile with the predecessors' prefix combined in (the first piece writes its own scan), then
    scan the rest of the piece after the prefix and the tile."""
    scan = p.scan

    def after(before: list[PValue], own: list[PValue]) -> list[PValue]:
        """`before` (earlier in traversal) joined with `own` in index order, but `own` alone in the first piece."""
        spread = [w.fit(x, v.type, scan.origin) for x, v in zip(before, own)]
        lhs, rhs = (own, spread) if scan.reverse else (spread, own)
        joined = w.combine(scan.combine, lhs, rhs, [v.type for v in own], scan.origin)
        return [w.add(P.Select, v.type, scan.origin, cond=leading, on_true=v, on_false=j) for v, j in zip(own, joined)]

    out = after(prefix, list(p.local))
    emit = w.copy_region(p.head.emit)
    w.row[emit.args[0].id] = zero
    for a, v in zip(emit.args[1:-1], out):
        w.row[a.id] = v
    w.row[emit.args[-1].id] = p.member
    for op in emit.ops:
        if not op.TERMINATOR:
            w.copy_op(op, zero)
    carry = after(prefix, list(p.total))  # what precedes the rest: the predecessors, then the held tile
    w.put(dataclasses.replace(p.rest, emit=_prefixed(w, p.rest, carry)))


def _flat(g: Group) -> Dim:
    if not g.domain:
        return DConst(1)
    total = g.domain[0]
    for d in g.domain[1:]:
        total = dim_bin("*", total, d)
    return total


def _prefixed(w: Builder, scan: P.RegionScan, prefix: list[PValue]) -> PRegion:
    """The scan's emit region with `prefix` (what precedes the scanned part in traversal order) combined into each
    scanned element before it is written (in index order: after it in a reverse scan)."""
    emit = scan.emit
    start, vals, member = emit.args[0], list(emit.args[1:-1]), emit.args[-1]
    args = w.begin((start.type, *(v.type for v in vals), member.type), (start.name, *(v.name for v in vals),
                                                                          member.name))
    new_vals = list(args[1:-1])
    spread = [w.fit(p, p.type.with_tile(v.type.tile), scan.origin) for p, v in zip(prefix, new_vals)]
    lhs, rhs = (new_vals, spread) if scan.reverse else (spread, new_vals)
    joined = w.combine(scan.combine, lhs, rhs, [v.type for v in new_vals], scan.origin)
    rename = {a.id: b for a, b in zip(emit.args, (args[0], *joined, args[-1]))}
    for op in emit.ops:
        w.put(map_operands(op, lambda v: rename.get(v.id, v)))
    return w.finish()


__all__ = ["SplitRegionScans", "RegionScanPlan", "plan_region_scans", "held_tile", "piece_count"]
