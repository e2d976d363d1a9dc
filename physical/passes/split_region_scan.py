"""Balanced region scans: a scan of data-dependent subregions (a segmented cumsum over CSR offsets) splits each
instance's subregion over several programs that pass piece aggregates on by look-back.

A program scans its lanes' subregions to the longest one, so one huge segment keeps one program busy while the rest
of the device idles. A group whose body scans data-dependent subregions per instance (`P.RegionScan`s at its top,
with nothing but pure work and loads besides) runs S = `SPLITS_g` programs per instance (the split count of
split-segments, decided at launch from the shapes; 1 under Triton's interpreter) with one instance per program:

1. a program takes its position from an acq_rel ticket on the group's self-resetting sync buffer
   (`OwnedInstances.ticket`, as split-scans): ticket t runs piece `t % S` of instance `t // S`, so the pieces of
   an instance hold consecutive tickets, and waiting for lower tickets never waits for a program that has not
   started (no co-residency; the interpreter, which runs programs one at a time in order, never waits);
2. piece s of a subregion [b, e) is its s-th run of whole chunks in traversal order (split-segments' cut:
   [b + lo, b + hi) forward, [e - hi, e - lo) for a reverse scan, which walks from the end), so the pieces of a
   long segment are equal to within a chunk and a short segment's later pieces are empty;
3. it folds its piece with the scan's combine (a region fold over the piece: its aggregate), publishes the
   aggregate in its slot `instance * S + s` (`publish_slot`), waits for the slots of the instance's lower pieces
   and folds them **in index order** (`fold_slots` from `instance * S`: the order depends on the piece only,
   never on timing, so float results are identical from run to run);
4. it scans its piece and combines that prefix into every scanned element before it is written (the first piece
   writes its own scan as it is), and
5. retires its ticket (`retire_ticket`): the last program restores the sync buffer, so no launch clears it.

A piece is read twice (its fold, then its scan): the data a program scans is not held on chip between the two.
Legality (`plan_region_scans`): a group of instances (not serial, tiled, looped or persistent) whose top level holds
the region scans, with no region fold and no other effect; every nested region holds no region scan; no buffer a
scan writes is read by anything but that scan's own source. Profitability: some group has a plan (the launch
decides S; with S = 1 each program scans its instance whole, after an empty fold of the predecessors).
"""

from __future__ import annotations

import dataclasses

from kir.dims import DConst, Dim, DSym, dim_bin
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from kir.reduce import ReduceKind
from kir.scan import ScanKind

from .. import ops as P
from ..builder import Builder
from ..launch_expr import LaunchExpr, LBin, LConst, LConstexpr, lcdiv, ldim, lmax, lmin, lmul, lprod, lsum
from ..model import Fragment, Group, POp, PRegion, Program, PValue
from ..rewrite import map_operands
from ..workspace import INDEX, lookback_buffers
from . import GroupPass, PassContext
from .partials import lane_test, split_flag
from .split_scan import SLOT_BLOCK
from .split_segments import _piece, split_count


@dataclasses.dataclass(frozen=True)
class RegionScanPlan:
    group: Group
    scans: tuple[int, ...]  # positions of the region scans in the group's body
    values: LaunchExpr  # elements of the scanned tensors (the largest)


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
    if any(isinstance(op, P.RegionFold) for op in walked):
        return "it also folds subregions"
    for op in ops:
        if not (isinstance(op, P.RegionScan) or op.TERMINATOR) and op.has_effects():
            return f"it has effects besides its region scans ({op.NAME})"
    found = None if g.single_instance else lane_test(ops)
    if isinstance(found, str):
        return found
    values: list[LaunchExpr] = []
    for n in scans:
        scan = ops[n]
        assert isinstance(scan, P.RegionScan)
        if scan.begin.type.dtype != scan.end.type.dtype or scan.begin.type.tile or scan.end.type.tile:
            return "its subregion bounds differ in type"
        source = next((op for op in scan.source.ops if isinstance(op, P.Load)), None)
        if source is None:
            return "its scan reads no tensor"
        written = {o.access.buffer for o in scan.emit.walk() if isinstance(o, P.Store)}
        others = tuple(op for k, op in enumerate(ops) if k != n)
        if written & _loads(others):
            return "a buffer a scan writes is read by other work of the group"
        values.append(lprod(tuple(ldim(d) for d in program.buffer(source.access.buffer).shape)))
    return RegionScanPlan(g, scans, lmax(*values) if len(values) > 1 else values[0])


class SplitRegionScans(GroupPass):
    """Split the subregions of region scans over programs that pass piece aggregates on by look-back."""

    name = "split-region-scans"

    def plan_group(self, program: Program, group: Group) -> RegionScanPlan | str:
        return plan_region_scans(program, group)

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        for plan in self.plans(program, ctx):
            program = _split(program, plan)
        return program


def _split(program: Program, plan: RegionScanPlan) -> Program:
    g = plan.group
    gid = g.id
    ops = g.body.ops
    scans = [ops[n] for n in plan.scans]
    splits = f"SPLITS_{gid}"
    # a program keeps its block of BLOCK_g instances (several short segments each) and scans its piece of each
    consts = dict(program.constexprs)
    count = split_count(program, g, plan.values, scans[0].block)  # type: ignore[attr-defined]
    fast = split_flag(gid)
    selects = lmin(LBin("-", count, LConst(1)), LConst(1))  # 1: several pieces an instance (SPLITS_g > 1)
    program = dataclasses.replace(program, constexprs=tuple((n, consts[n]) for n, _ in program.constexprs) +
                                  ((splits, count), (fast, selects)))
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

    found = None if g.single_instance else lane_test(ops)
    lane_ok = found[1] if isinstance(found, tuple) else None  # the block's lanes within the instances
    w = Builder.after(program)
    origin = scans[0].origin
    s: PValue | None = None
    flat: PValue | None = None
    if g.single_instance:  # a top-level scan: the ticket gives the piece, the one instance has slots 0 .. S - 1
        w.add(P.OwnedInstances, Fragment(DType.i64, True, (), True), origin, "ticket", group=gid, block=g.block,
              splits=splits, ticket=ws.sync.id)
        s = w.add(P.SplitIndex, INDEX, origin, "piece", group=gid, splits=splits)
    for op in ops:
        if isinstance(op, P.RegionScan) or op.TERMINATOR:
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
    flag = w.add(P.ShapeValue, INDEX, origin, "split", expr=LConstexpr(fast))
    split = w.add(P.Compare, Fragment(DType.pred), origin, fn=CmpFn.ne, lhs=flag, rhs=zero)

    pieces: list[P.RegionScan] = []
    aggregates: list[PValue] = []
    for scan in scans:
        assert isinstance(scan, P.RegionScan)
        begin, end = _piece(w, scan, s, splits)  # type: ignore[arg-type]
        if scan.reverse:  # the s-th piece from the end: [e - hi, e - lo), with [b + lo, b + hi) the s-th from b
            lo, hi = (w.add(P.Binary, begin.type, origin, fn=BinaryFn.sub, lhs=x, rhs=scan.begin) for x in (begin, end))
            begin, end = (w.add(P.Binary, begin.type, origin, "piece_begin", fn=BinaryFn.sub, lhs=scan.end, rhs=hi),
                          w.add(P.Binary, begin.type, origin, "piece_end", fn=BinaryFn.sub, lhs=scan.end, rhs=lo))
        swap = {scan.begin.id: begin, scan.end.id: end}
        piece = map_operands(scan, lambda v, swap=swap: swap.get(v.id, v))
        assert isinstance(piece, P.RegionScan)
        pieces.append(piece)
        lanes = begin.type.lanes or end.type.lanes
        agg = tuple(w.fresh(Fragment(dt, lanes), "piece_total") for dt in scan.acc_dtypes)
        kind = ReduceKind.custom if scan.kind is ScanKind.custom else scan.kind.as_reduce
        combine = w.copy_region(scan.combine)
        if scan.reverse and kind is ReduceKind.custom:
            # the source yields a reverse scan's piece from its end: the fold joins each element on the left
            k = len(scan.acc_dtypes)
            combine = PRegion(combine.args[k:] + combine.args[:k], combine.ops)
        # the piece's aggregate only serves later pieces: with one piece (SPLITS_g = 1, constexpr SPLIT_g = 0)
        # the kernel holds no fold, so each segment is read once
        w.begin()
        w.put(P.RegionFold(results=agg, origin=scan.origin, begin=begin, end=end, block=scan.block,
                           source=w.copy_region(piece.source), kind=kind, identity=scan.identity,
                           acc_dtypes=scan.acc_dtypes, combine=combine, active=scan.active))
        folded = w.finish(agg)
        w.begin()
        none = w.finish(tuple(w.fit(w.add(P.Const, Fragment(v.type.dtype), scan.origin, value=i, dtype=v.type.dtype),
                                    v.type, scan.origin) for v, i in zip(agg, scan.identity)))
        outs = tuple(w.fresh(v.type, v.name) for v in agg)
        w.put(P.If(results=outs, origin=scan.origin, cond=split, then_=folded, else_=none, flag=fast))
        aggregates += list(outs)
    w.put(P.PublishSlot(origin=origin, sync=ws.sync.id, slots=tuple(b.id for row in ws.slots for b in row),
                        slot=slot, values=tuple(aggregates), active=lane_ok))
    for scan, piece, bufs in zip(scans, pieces, ws.slots):
        assert isinstance(scan, P.RegionScan)
        prefix = [w.fresh(Fragment(dt, slot.type.lanes), "prefix") for dt in scan.acc_dtypes]
        w.put(P.FoldSlots(results=tuple(prefix), origin=scan.origin, sync=ws.sync.id, slots=tuple(b.id for b in bufs),
                          first=first, upto=slot, reverse=scan.reverse, identity=scan.identity,
                          acc_dtypes=scan.acc_dtypes, block=SLOT_BLOCK, combine=w.copy_region(scan.combine),
                          active=lane_ok))
        w.put(dataclasses.replace(piece, emit=_prefixed(w, piece, prefix, leading)))
    w.put(P.RetireTicket(origin=origin, sync=ws.sync.id, programs=programs))
    w.put(P.Yield(values=()))
    group = dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(w.ops)))
    return dataclasses.replace(program, groups=tuple(group if x.id == gid else x for x in program.groups),
                               segments=segments, grid=lsum(tuple(lengths)))


def _flat(g: Group) -> Dim:
    if not g.domain:
        return DConst(1)
    total = g.domain[0]
    for d in g.domain[1:]:
        total = dim_bin("*", total, d)
    return total


def _prefixed(w: Builder, scan: P.RegionScan, prefix: list[PValue], leading: PValue) -> PRegion:
    """The scan's emit region with the predecessors' prefix combined into each scanned element before it is
    written (in index order: after it in a reverse scan); the first piece writes its own scan."""
    emit = scan.emit
    start, vals, member = emit.args[0], list(emit.args[1:-1]), emit.args[-1]
    args = w.begin((start.type, *(v.type for v in vals), member.type), (start.name, *(v.name for v in vals),
                                                                          member.name))
    new_vals = list(args[1:-1])
    spread = [w.fit(p, p.type.with_tile(v.type.tile), scan.origin) for p, v in zip(prefix, new_vals)]
    lhs, rhs = (new_vals, spread) if scan.reverse else (spread, new_vals)
    joined = w.combine(scan.combine, lhs, rhs, [v.type for v in new_vals], scan.origin)
    chosen = [w.add(P.Select, v.type, scan.origin, cond=leading, on_true=v, on_false=j)
              for v, j in zip(new_vals, joined)]
    rename = {a.id: b for a, b in zip(emit.args, (args[0], *chosen, args[-1]))}
    for op in emit.ops:
        w.put(map_operands(op, lambda v: rename.get(v.id, v)))
    return w.finish()


__all__ = ["SplitRegionScans", "RegionScanPlan", "plan_region_scans"]
