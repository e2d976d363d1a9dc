"""Balanced region scans by the data: helper programs past the blocks scan equal chunks of the scanned tensor,
whichever segments hold them.

Where every region scan of a group takes its subregion from `offsets[i]`, `offsets[i + 1]` of one integer tensor
that nothing in the launch writes (a segmented cumsum over CSR offsets), all of them run the same way (forward, or
all reverse) and no region fold sits beside them, split-region-scans does not cut each segment into `SPLITS_g`
pieces decided from the shapes: the data decides, as balance_segments does for region folds (and with its search,
chunks and delegation test):

* the group's segment ends in H = `HELPERS_g` helper programs past its blocks (`balance_segments.helper_count`:
  0 under Triton's interpreter), and the scanned tensor's positions [0, H * C) are cut into H chunks of C whole
  scan chunks; every program, block or helper, takes its position from one acq_rel ticket on the group's
  self-resetting sync buffer (the helper's `helper_index` draws it: ticket - blocks), so the blocks come first
  and a helper only waits for lower tickets (no co-residency; the interpreter, programs one at a time in order,
  never waits). A reverse scan's helpers take the chunks from the last one down (`helper_values(reverse=)`), so
  the helpers of a segment come in its traversal order either way;
* a subregion [b, e) that owns its whole chunks k0 <= k < k1 (`balance_segments.delegation`; sorted offsets
  always do) hands them to the helpers of those chunks: the helper of chunk k scans [k * C, (k + 1) * C), the
  first one from b and the last one up to e (the head and the tail are shorter than a chunk), and its block scans
  nothing of it; any other subregion (short, empty, or unsorted offsets) its block scans whole, alone;
* a helper scans its range as a split-region-scans piece (`_hold`, `_write`): it holds the first tile of it on
  chip, folds the rest for its aggregate, publishes that aggregate in its slot (blocks * BLOCK_g + its ticket
  order, under its ticket's flag), folds the aggregates of the subregion's earlier helpers **in index order**
  (`fold_slots` over the tickets just below its own: the order depends on the offsets only, so float results are
  bitwise identical run to run) and writes its range after that prefix; the first helper of a subregion writes its
  own scan. The blocks fold nothing and need no aggregate (their rest folds are empty).

So a segment holding half of the values spreads over about H / 2 helpers, and many segments of a few values each
stay packed BLOCK_g a program: no program scans an empty piece. SPLITS_g is 1 and SPLIT_g (whether helpers run)
is 1 where H > 0; where H = 0 the kernel holds no search, fold of a rest nor look-back wait that would run.
"""

from __future__ import annotations

import dataclasses

from kir.dims import DSym, dim_bin
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn

from .. import ops as P
from ..builder import max_value_id
from ..launch_expr import LBin, LConst, LConstexpr, LWarps, as_launch, lcdiv, ldim, lmax, lmin, lmul, lprod, lsum
from ..model import Program, PValue, TileAxis
from ..workspace import INDEX, lookback_buffers
from .balance_segments import Bounds, bounds_of, delegation, helper_count, helper_values, join_block
from .partials import Ops, flag_set, lane_test, split_flag
from .rows import RowBuilder
from .split_region_scan import CHUNK, RegionScanPlan, _chunk_axis, _flat, _hold, look_back


def data_bounds(program: Program, plan: RegionScanPlan) -> Bounds | None:
    """The offsets tensor the plan's scans all take their subregions from, if the data may balance them: a group
    of instances whose scans all run one way, with no region fold beside them."""
    g = plan.group
    ops = g.body.ops
    if g.single_instance or len({ops[n].reverse for n in plan.scans}) != 1:  # type: ignore[attr-defined]
        return None
    if plan.folds is not None:  # region folds beside the scans combine over the shapes' pieces (scan_folds.py)
        return None
    found = lane_test(ops)
    if isinstance(found, str):
        return None
    return bounds_of(program, ops, found[0], plan.scans)


def balanced_scan_split(program: Program, plan: RegionScanPlan, tile: int, bounds: Bounds) -> Program:
    """The group of `plan` with one program per block and HELPERS_g helpers past the blocks (see the module)."""
    g = plan.group
    gid = g.id
    ops = g.body.ops
    scans = [ops[n] for n in plan.scans]
    assert all(isinstance(s, P.RegionScan) for s in scans)
    first_scan = scans[0]
    assert isinstance(first_scan, P.RegionScan)
    reverse = first_scan.reverse
    splits, held, helpers, fast = f"SPLITS_{gid}", P.held_block(gid), f"HELPERS_{gid}", split_flag(gid)
    consts = dict(program.constexprs)
    held_size = lmax(LConst(CHUNK), LBin("//", LConst(tile), consts[g.block]))
    program = dataclasses.replace(program, num_warps=lmax(as_launch(program.num_warps), LWarps(LConst(tile))))
    count = helper_count(program, g, plan.values, first_scan.block, LConst(1))
    program = dataclasses.replace(program, constexprs=tuple((n, consts[n]) for n, _ in program.constexprs) + (
        (held, held_size), (splits, LConst(1)), (helpers, count), (fast, lmin(count, LConst(1)))))
    blocks = lcdiv(lprod(tuple(ldim(d) for d in g.domain)), consts[g.block])
    programs = lsum((blocks, count))
    lengths = [programs if seg.group == gid else seg.length for seg in program.segments]
    segments = tuple(dataclasses.replace(seg, length=n, offset=lsum(tuple(lengths[:k])))
                     for k, (seg, n) in enumerate(zip(program.segments, lengths)))
    # a flag per ticket (blocks, then helpers); a slot per lane of every program: a block's lanes at their
    # instances, a helper's at blocks * BLOCK_g + its position among the helpers (the one lane it joins)
    lanes = DSym(g.block)
    block_dim = dim_bin("//", dim_bin("+", _flat(g), dim_bin("-", lanes, 1)), lanes)
    flags_dim = dim_bin("+", block_dim, DSym(helpers))
    values = (dim_bin("*", flags_dim, lanes), lmul(programs, consts[g.block]))
    ws = lookback_buffers(program, gid, flags_dim, programs, [s.acc_dtypes for s in scans], values)  # type: ignore
    program = dataclasses.replace(program, buffers=program.buffers + (ws.sync,) + tuple(b for row in ws.slots
                                                                                          for b in row),
                                  workspaces=program.workspaces + tuple(ws.workspaces))

    found = lane_test(ops)
    assert not isinstance(found, str)
    lane_ok = found[1]
    w = RowBuilder(_chunk_axis(first_scan), TileAxis(DSym(held), held), max_value_id(program), relative=True)
    origin = first_scan.origin
    o = Ops(w, origin)
    h_index = w.add(P.HelperIndex, INDEX, origin, "helper", group=gid, blocks=blocks, helpers=helpers,
                    ticket=ws.sync.id)
    izero = w.add(P.Const, INDEX, origin, value=0, dtype=DType.i64)
    cond = flag_set(w, fast, origin, izero)
    chunk_name = first_scan.block

    def chunk_of() -> object:
        return helper_values(o, plan.values, g, h_index, helpers, chunk_name, reverse)

    helper_block, owner = join_block(w, program, bounds, g, chunk_of, cond, fast, origin)
    s: PValue | None = None
    flat: PValue | None = None
    for op in ops:
        if isinstance(op, P.RegionScan) or op.TERMINATOR:
            continue
        if isinstance(op, P.OwnedInstances):
            op = dataclasses.replace(op, splits=splits, ticket=ws.sync.id, helper_block=helper_block)
            w.put(op)
            flat = op.results[0]
            s = w.add(P.SplitIndex, INDEX, origin, "piece", group=gid, splits=splits)
            continue
        w.put(op)
    assert s is not None and flat is not None

    # ---- per lane: what the block scans (its subregion whole, or nothing where helpers take it), a helper's range;
    # the delegation test (its searches) only where helpers run: elsewhere nothing is handed over
    h = helper_values(o, plan.values, g, h_index, helpers, chunk_name, reverse)
    b, e = o.cast(bounds.begin, DType.i64, "begin"), o.cast(bounds.end, DType.i64, "end")
    w.begin()
    d = delegation(w, o, program, bounds, flat, lane_ok, h, owner, origin)
    handed = w.finish((d["first_chunk"], d["end_chunk"], d["delegates"], d["mine"]))
    w.begin()
    none, no = o.const(0), o.bin(BinaryFn.and_, lane_ok, o.const(False, DType.pred))
    kept = w.finish((o.bin(BinaryFn.add, b, none), o.bin(BinaryFn.add, b, none), no, no))
    k0, k1, delegates, mine = (w.fresh(v.type, n) for v, n in zip(
        handed.yielded, ("first_chunk", "end_chunk", "delegates", "joins")))
    w.put(P.If(results=(k0, k1, delegates, mine), origin=origin, cond=cond, then_=handed, else_=kept, flag=fast))
    one = o.const(1)
    c0 = o.bin(BinaryFn.mul, h.hk, h.chunk)
    lo = o.select(o.cmp(CmpFn.eq, h.hk, k0), b, c0, "chunk_lo")
    hi = o.select(o.cmp(CmpFn.eq, h.hk, o.bin(BinaryFn.sub, k1, one)), e, o.bin(BinaryFn.add, c0, h.chunk),
                  "chunk_hi")
    own_end = o.select(delegates, b, e)
    begin_v = o.select(mine, lo, b, "range_begin")
    end_v = o.select(h.is_helper, o.select(mine, hi, b), own_end, "range_end")

    # ---- slots: a block's lanes at their instances (S = 1: instance * 1 + 0), a helper's after the blocks' lanes
    per = w.add(P.ShapeValue, INDEX, origin, "splits", expr=LConstexpr(splits))
    first = w.add(P.Binary, flat.type, origin, "instance_first", fn=BinaryFn.mul, lhs=flat, rhs=per)
    slot = w.add(P.Binary, flat.type, origin, "slot", fn=BinaryFn.add, lhs=first, rhs=s)
    base = o.launch(lmul(blocks, consts[g.block]), "helper_slots")
    j = o.bin(BinaryFn.maximum, o.cast(h_index, DType.i64), o.const(0), "helper_position")
    # the ticket order of the subregion's first helper: its first chunk, or from the last chunk down (reverse)
    j0 = o.bin(BinaryFn.sub, h.n_helpers, k1) if reverse else k0
    helper_slot = o.bin(BinaryFn.add, base, j, "helper_slot")
    my_slot = o.select(h.is_helper, helper_slot, o.cast(slot, DType.i64), "own_slot")
    my_first = o.select(h.is_helper, o.bin(BinaryFn.add, base, o.select(mine, j0, j)), o.cast(first, DType.i64),
                        "first_slot")
    leading = o.cmp(CmpFn.eq, my_first, my_slot, "first_piece")
    publishes = o.bin(BinaryFn.and_, lane_ok, o.bin(BinaryFn.or_, o.not_(h.is_helper), mine), "publishes")
    split = cond
    zero = izero

    pieces = []
    for scan in scans:
        assert isinstance(scan, P.RegionScan)
        dt = scan.begin.type.dtype
        piece = (o.cast(begin_v, dt), o.cast(end_v, dt))
        pieces.append(_hold(w, scan, s, (splits, held, fast), split, zero, piece, h.is_helper))
    w.put(P.PublishSlot(origin=origin, sync=ws.sync.id, slots=tuple(x.id for row in ws.slots for x in row),
                        slot=my_slot, values=tuple(v for p in pieces for v in p.aggregate), active=publishes))
    return look_back(w, program, g, pieces, ws, (my_first, my_slot, lane_ok), (leading, zero), origin,
                     (programs, segments, lengths))


__all__ = ["balanced_scan_split", "data_bounds"]
