"""Balanced region scans by the data: helper programs past the blocks scan equal chunks of the scanned tensor,
whichever segments hold them.

Where every region scan of a group takes its subregion from `offsets[i]`, `offsets[i + 1]` of one integer tensor
that nothing in the launch writes (a segmented cumsum over CSR offsets), all of them run the same way (forward, or
all reverse) and every region fold beside them takes the same subregions (a segment's total next to its running
sum: its partials ride on the same ranges and slots, physical/passes/balance_scan_folds.py), split-region-scans does
not cut each segment into `SPLITS_g` pieces decided from the shapes: the data decides, as balance_segments does for
region folds (and with its search, chunks and delegation test). Scans in both directions over the same segments keep
the shapes' pieces: one ticket order cannot serve a helper's chunk from the first and from the last (see
`data_bounds`):

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
* a helper holds its range across the lanes of the block it joins (the joined lane's range, picked out of the
  lanes by a `lane_fold`): lane l takes the l-th run of max(BLOCK_HELD_g, cdiv(length, valid lanes)) positions
  and scans it as a split-region-scans piece (`_hold`, `_write`), holding the first BLOCK_HELD_g elements on chip
  and folding the rest for its aggregate. A range of up to BLOCK_g * BLOCK_HELD_g elements (a whole chunk where
  C <= BLOCK_HELD_g * BLOCK_g, as the held tile's register budget allows) is so read once and written once; only
  what a run holds past its lane's tile is read twice (its fold, then its scan). The lanes' aggregates folded in
  lane order (`lane_fold`) are the helper's aggregate, which the joined lane publishes in its slot (blocks *
  BLOCK_g + its ticket order, under its ticket's flag); every lane then folds the aggregates of the subregion's
  earlier helpers **in index order** (`fold_slots` over the tickets just below its own: the order depends on the
  offsets only, so float results are bitwise identical run to run) and writes its run after that prefix and the
  runs of the lanes before it in traversal order (`lane_scan`, exclusive, in lane order); the first run of a
  subregion's first helper writes its own scan. The blocks fold nothing and need no aggregate (their rest folds
  are empty): they write no slot, only their ticket's flag.

Over a (segments, columns) workset (a jagged scan `out[b:e, :] = intent.cumsum(values[b:e, :], axis=0)`: the bounds
are `offsets[flat // D]`, `balance_segments.bounds_of`) the helpers cut the scanned rows into C = `CHUNKS_g` chunks,
each at least a held tile of rows (BLOCK_HELD_g: a lane holds its column's part of the chunk; the first and last
helpers of a segment, which also take its rows before and after its whole chunks, read what they hold past their
tiles twice, while each helper folds one slot per earlier helper of its segment and column: about C^2 / 2 * D slots
for a segment of C chunks, so fewer, fuller chunks move less), and a segment's columns may lie in up to P =
`HELPER_SPAN_g` blocks (D > BLOCK_g, or an odd D straddling a block's edge: `balance_segments.blocks_spanned`), so
each chunk has P helpers, H = P * C in all, numbered part by part (helper h is the (h // C)-th block of the segment
holding chunk h % C: the helpers of one part hold consecutive tickets, so the look-back over the tickets just below
a helper's own waits for exactly its part's earlier helpers). A helper scans its chunk of rows in each column of the
segment that its block holds (the lanes of the p-th block of the segment, a lane a column: `_by_columns`; none where
the segment spans fewer blocks), with a slot per chunk and column (`blocks * BLOCK_g + column * C + position`, its
position among its part's helpers), so each lane folds its column's earlier helpers in index order; every column
lies in one block, so no two helpers write one slot, and the slots lie in the (blocks + H) * BLOCK_g of the
workspace since D <= P * BLOCK_g.

So a segment holding half of the values spreads over about H / 2 helpers, and many segments of a few values each
stay packed BLOCK_g a program: no program scans an empty piece. SPLITS_g is 1 and SPLIT_g (whether helpers run)
is 1 where H > 0; where H = 0 the kernel holds no search, fold of a rest nor look-back wait that would run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kir.dims import DSym, dim_bin
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from kir.reduce import ReduceKind
from kir.scan import ScanKind

from .. import ops as P
from ..builder import max_value_id
from ..launch_expr import (
    LaunchExpr,
    LBin,
    LConst,
    LConstexpr,
    LWarps,
    as_launch,
    lcdiv,
    ldim,
    lmax,
    lmin,
    lmul,
    lprod,
    lsum,
)
from ..model import Fragment, Program, PValue, TileAxis
from ..workspace import INDEX, lookback_buffers
from .balance_scan_folds import finish_folds, fold_dtypes, fold_partials, last_helper, refusal, wants_rest
from .balance_segments import (
    Bounds,
    HelperValues,
    blocks_spanned,
    bounds_of,
    delegation,
    helper_count,
    helper_values,
    join_block,
)
from .partials import Ops, flag_set, lane_test, split_flag
from .rows import RowBuilder
from .split_region_scan import CHUNK, RegionScanPlan, _chunk_axis, _flat, _hold, look_back


def data_bounds(program: Program, plan: RegionScanPlan) -> Bounds | None:
    """The offsets tensor the plan's scans (and the region folds beside them) all take their subregions from, if
    the data may balance them: a group of instances whose scans all run one way, over one axis where folds sit
    beside them, none of them with pred accumulators (`balance_scan_folds.refusal`).

    Scans in both directions keep the shapes' pieces (split_region_scan.py): a forward scan's look-back waits for
    the chunks before a helper's, a reverse scan's for those after it, and programs may wait only for lower
    tickets (no co-residency), so one helper cannot scan one chunk both ways; a helper would take chunk j forward
    and chunk H - 1 - j backward (what the shapes' pieces do: ticket t scans the t-th piece from each end), and
    each value is then read twice, once per direction, either way. That caps both forms at 0.75 of the ideal
    (every value read once, both results written once: 12 bytes a value for at least 16 moved), so the data
    would remove only the empty pieces' overhead (bench/README.md has the model's numbers)."""
    g = plan.group
    ops = g.body.ops
    if g.single_instance or len({ops[n].reverse for n in plan.scans}) != 1:  # type: ignore[attr-defined]
        return None
    if plan.folds is not None and refusal(ops, plan.folds) is not None:
        return None  # such region folds beside the scans combine over the shapes' pieces (scan_folds.py)
    found = lane_test(ops)
    if isinstance(found, str):
        return None
    folds = plan.folds.folds if plan.folds is not None else ()
    bounds = bounds_of(program, ops, found[0], plan.scans + folds, g.domain)
    if bounds is not None and folds and bounds.columns is not None:
        return None  # folds beside the scans of a (segments, columns) workset keep the shapes' pieces
    return bounds


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
    count = helper_count(program, g, plan.values, first_scan.block)
    # over a (segments, columns) workset the helpers cut the scanned rows (each a row of all the segment's
    # columns), as many as the scanned elements give work for (as balance_segments does for folds)
    rows = plan.values if bounds.columns is None else LBin("//", plan.values, bounds.width)
    segs = None if bounds.columns is None else ldim(g.domain[0])
    span = chunks = None
    parts: tuple[tuple[str, LaunchExpr], ...] = ()
    if bounds.columns is not None:
        # a segment's columns may span several blocks: each chunk of rows gets a helper per block the columns may
        # span (HELPER_SPAN_g), CHUNKS_g chunks, HELPERS_g = HELPER_SPAN_g * CHUNKS_g programs, a part's helpers
        # at consecutive tickets (the look-back folds the tickets just below a helper's own)
        span, chunks = f"HELPER_SPAN_{gid}", f"CHUNKS_{gid}"
        spanned = blocks_spanned(bounds.width, consts[g.block])
        # a chunk at least a held tile of rows (BLOCK_HELD_g, what each lane holds of its column): fewer helpers
        # of a huge segment fold fewer earlier helpers' slots in each of its columns (the look-back moves about
        # H^2 / 2 * D slots of a segment of H helpers); a whole chunk is read once, only the first and last
        # helpers of a segment (which also take its rows before and after its whole chunks) read what they hold
        # past their tiles twice
        n_chunks = lmin(LBin("//", count, spanned), LBin("//", rows, held_size))
        parts = ((span, spanned), (chunks, n_chunks))
        count = lmul(n_chunks, spanned)
    program = dataclasses.replace(program, constexprs=tuple((n, consts[n]) for n, _ in program.constexprs) + (
        (held, held_size), (splits, LConst(1)), *parts, (helpers, count), (fast, lmin(count, LConst(1)))))
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
    # a row of slots per scan and, beside them, per region fold (its helpers' partials: balance_scan_folds.py)
    fold_rows = fold_dtypes(ops, plan.folds) if plan.folds is not None else []
    ws = lookback_buffers(program, gid, flags_dim, programs, [s.acc_dtypes for s in scans] + fold_rows,  # type: ignore
                          values, [f"scan{n}" for n in range(len(scans))] + [f"fold{n}" for n in range(len(fold_rows))])
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

    def chunk_of() -> HelperValues:
        return helper_values(o, rows, g, h_index, helpers, chunk_name, reverse, segs, span, chunks, by_part=True)

    helper_block, owner = join_block(w, program, bounds, g, chunk_of, cond, fast, origin)
    s: PValue | None = None
    flat: PValue | None = None
    moved = plan.folds.moved if plan.folds is not None else frozenset()
    for n, op in enumerate(ops):
        if isinstance(op, P.RegionScan) or op.TERMINATOR or n in moved:
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
    h = chunk_of()
    b, e = o.cast(bounds.begin, DType.i64, "begin"), o.cast(bounds.end, DType.i64, "end")
    w.begin()
    d = delegation(w, o, program, bounds, flat, lane_ok, h, owner, origin, g.block, helper_block)
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
    if bounds.columns is not None:
        return _by_columns(w, o, program, g, scans, (s, flat, lane_ok, cond, izero, h_index), bounds.columns, h,
                           (b, own_end, k0, k1, mine, lo, hi), ws, (splits, held, fast),
                           (blocks, programs, segments, lengths))
    # ---- a helper holds its range across the lanes of the block it joins: lane l takes the l-th run of
    # `per` = max(BLOCK_HELD_g, cdiv(length, valid lanes)) positions, so a range that fits the lanes' tiles is
    # read once; the range is the joined lane's (`mine`: at most one), picked out of the lanes
    j0 = o.bin(BinaryFn.sub, h.n_helpers, k1) if reverse else k0  # its first helper's position (see the slots)
    picked = [_pick(w, o, mine, x, n) for x, n in ((lo, "joined_begin"), (hi, "joined_end"), (j0, "joined_first"))]
    joined = o.cmp(CmpFn.ge, picked[2], izero, "joined")
    hlo, hhi = (o.select(joined, x, o.const(0)) for x in picked[:2])
    lane = o.bin(BinaryFn.sub, o.cast(flat, DType.i64), o.bin(BinaryFn.mul, o.bin(BinaryFn.floordiv, o.cast(
        flat, DType.i64), o.launch(LConstexpr(g.block), "block")), o.launch(LConstexpr(g.block), "block")), "lane")
    valid = _lane_fold(w, o, ReduceKind.sum, o.select(lane_ok, o.const(1), o.const(0)), 0, "valid_lanes")
    length = o.bin(BinaryFn.maximum, o.bin(BinaryFn.sub, hhi, hlo), o.const(0), "joined_length")
    cut = o.bin(BinaryFn.maximum, valid, o.const(1))
    per = o.bin(BinaryFn.maximum, o.launch(LConstexpr(held), "held"), o.bin(BinaryFn.floordiv, o.bin(
        BinaryFn.add, length, o.bin(BinaryFn.sub, cut, o.const(1))), cut), "lane_run")
    lane_b = o.bin(BinaryFn.minimum, o.bin(BinaryFn.add, hlo, o.bin(BinaryFn.mul, lane, per)), hhi, "lane_begin")
    lane_e = o.bin(BinaryFn.minimum, o.bin(BinaryFn.add, lane_b, per), hhi, "lane_end")
    begin_v = o.select(h.is_helper, lane_b, b, "range_begin")
    end_v = o.select(h.is_helper, lane_e, own_end, "range_end")
    # the lane whose run comes first in traversal order (the last nonempty one in a reverse scan)
    runs = o.bin(BinaryFn.floordiv, o.bin(BinaryFn.add, length, o.bin(BinaryFn.sub, per, o.const(1))), per)
    lane_first = o.cmp(CmpFn.eq, lane, o.bin(BinaryFn.sub, runs, o.const(1)) if reverse else o.const(0),
                       "lane_first")

    # every lane of a helper folds from the slot of its subregion's first helper (the ticket order of its first
    # chunk, or from the last chunk down in reverse): they all need the prefix of the earlier chunks
    my_first, my_slot, leading, publishes = _slots(w, o, program, g, (s, flat, lane_ok, h_index), h, splits, blocks,
                                                   mine, None, lambda j: o.select(joined, picked[2], j))
    split = cond
    zero = izero

    pieces = []
    for at, scan in zip(plan.scans, scans):
        assert isinstance(scan, P.RegionScan)
        dt = scan.begin.type.dtype
        piece = (o.cast(begin_v, dt), o.cast(end_v, dt))
        # a fold that is this scan's total takes its aggregate: the blocks' subregions are then folded whole too
        wanted = None if wants_rest(plan.folds, at) else h.is_helper
        pieces.append(_hold(w, scan, s, (splits, held, fast), split, zero, piece, wanted))
    # a helper's aggregate: its lanes' runs in lane order (one value, published by the joined lane); each lane's
    # runs before its own in traversal order (the lanes before it, or after it in a reverse scan)
    published, before = [], []
    for p in pieces:
        scan = p.scan
        kind = ReduceKind.custom if scan.kind is ScanKind.custom else scan.kind.as_reduce
        types = tuple(v.type for v in p.aggregate)
        total = [w.fit(v, t, origin) for v, t in zip(_lanes_op(w, P.LaneFold, p.aggregate, scan, kind=kind), types)]
        published += [o.select(h.is_helper, x, a) for x, a in zip(total, p.aggregate)]
        before.append(_lanes_op(w, P.LaneScan, p.aggregate, scan, kind=scan.kind, reverse=scan.reverse,
                                exclusive=True))
    parts = None
    if plan.folds is not None:  # the folds' partials of the same ranges, published beside the aggregates
        begin_of = o.select(h.is_helper, _pick(w, o, mine, b, "joined_subregion"), b, "subregion_begin")
        aggregates = {at: p.aggregate for at, p in zip(plan.scans, pieces)}
        parts = fold_partials(w, ops, plan.folds, aggregates, (begin_v, end_v), begin_of, h.is_helper, (split, fast))
        published += [v for row in parts.published for v in row]
    w.put(P.PublishSlot(origin=origin, sync=ws.sync.id, slots=tuple(x.id for row in ws.slots for x in row),
                        slot=my_slot, values=tuple(published), active=publishes))
    finish = None
    if plan.folds is not None and parts is not None:
        folds_plan, fold_parts = plan.folds, parts
        # (the lane-validity and delegation tests stated: `mine` implies them, but the verifier reads them here:
        # lanes past the instances perform nothing, and a block stores a subregion no helper joins)
        last = o.bin(BinaryFn.and_, o.bin(BinaryFn.and_, lane_ok, delegates),
                     last_helper(o, h, mine, (k0, k1), reverse), "last_helper")
        # the lanes that hold a complete result: a block's kept subregion, the last helper's joined lane
        final = o.select(h.is_helper, last, o.bin(BinaryFn.and_, lane_ok, o.not_(delegates)), "final")

        def finish() -> None:
            finish_folds(w, ops, folds_plan, fold_parts, ws.slots[len(scans):], ws.sync.id, (my_first, my_slot),
                         last, final, reverse)
    runs_before = {id(p): r for p, r in zip(pieces, before)}

    def in_chunk(p, prefix: list[PValue]) -> tuple[list[PValue], PValue]:
        """What precedes a lane's run: the earlier helpers' `prefix`, then the lanes before it; and whether the
        run comes first in its subregion (it writes its own scan)."""
        lanes_before = runs_before[id(p)]
        types = [v.type for v in prefix]
        lhs, rhs = (lanes_before, prefix) if reverse else (prefix, lanes_before)
        both = w.combine(p.scan.combine, lhs, rhs, types, origin)
        run = [o.select(lane_first, q, o.select(leading, x, y)) for q, x, y in zip(prefix, lanes_before, both)]
        mine_first = o.bin(BinaryFn.and_, leading, lane_first)
        return ([o.select(h.is_helper, x, q) for x, q in zip(run, prefix)],
                o.select(h.is_helper, mine_first, leading, "writes_own_scan"))

    return look_back(w, program, g, pieces, ws, (my_first, my_slot, lane_ok), (leading, zero), origin,
                     (programs, segments, lengths), in_chunk, finish)


def _by_columns(w: RowBuilder, o: Ops, program: Program, g, scans: list, lanes: tuple, columns: PValue, h,
                ranges: tuple, ws, names: tuple[str, str, str], launch: tuple) -> Program:
    """The body over a (segments, columns) workset: a helper scans its chunk of rows of the segment it joined in
    each of the segment's columns (the lanes `mine` of the block that holds the segment, a lane a column), with
    a slot per helper and column (`blocks * BLOCK_g + column * HELPERS_g + helper`: a column's helpers in index
    order), so each lane folds the aggregates of the segment's earlier helpers in its own column."""
    s, flat, lane_ok, cond, izero, h_index = lanes
    b, own_end, k0, k1, mine, lo, hi = ranges
    splits, held, fast = names
    blocks, programs, segments, lengths = launch
    origin = scans[0].origin
    reverse = scans[0].reverse
    none = o.const(0)
    begin_v = o.select(h.is_helper, o.select(mine, lo, none), b, "range_begin")
    end_v = o.select(h.is_helper, o.select(mine, hi, none), own_end, "range_end")
    # ---- slots: a helper's column c at c * HELPERS_g + its position past the blocks' lanes
    column = o.bin(BinaryFn.mod, o.cast(flat, DType.i64), o.cast(columns, DType.i64), "column")
    row = o.bin(BinaryFn.mul, column, h.n_helpers, "column_slots")
    j0 = o.bin(BinaryFn.sub, h.n_helpers, k1) if reverse else k0  # the segment's first helper (its slot order)
    # the helper's position among its part's (the chunk's helpers in each block of the segment: part-major)
    assert h.part is not None
    j = o.bin(BinaryFn.sub, o.bin(BinaryFn.maximum, o.cast(h_index, DType.i64), o.const(0)),
              o.bin(BinaryFn.mul, h.part, h.n_helpers), "helper_position")
    # a joined lane folds from its segment's first helper in its column; the other lanes of a helper fold nothing
    my_first, my_slot, leading, publishes = _slots(w, o, program, g, (s, flat, lane_ok, h_index), h, splits, blocks,
                                                   mine, row, lambda j: o.select(mine, j0, j), j)
    pieces = []
    for scan in scans:
        dt = scan.begin.type.dtype
        piece = (o.cast(begin_v, dt), o.cast(end_v, dt))
        pieces.append(_hold(w, scan, s, (splits, held, fast), cond, izero, piece, h.is_helper))
    w.put(P.PublishSlot(origin=origin, sync=ws.sync.id, slots=tuple(x.id for row in ws.slots for x in row),
                        slot=my_slot, values=tuple(v for p in pieces for v in p.aggregate), active=publishes))
    return look_back(w, program, g, pieces, ws, (my_first, my_slot, lane_ok), (leading, izero), origin,
                     (programs, segments, lengths))


def _slots(w: RowBuilder, o: Ops, program: Program, g, lanes: tuple, h, splits: str, blocks: LaunchExpr,
           mine: PValue, offset: PValue | None, first_helper: Callable[[PValue], PValue],
           position: PValue | None = None) -> tuple[PValue, ...]:
    """A program's first slot, its own slot, whether they are one (its piece comes first), and whether it
    publishes: a block's lanes at their instances (S = 1: instance * 1 + 0); a helper's `blocks * BLOCK_g +
    offset + position`, past every lane of the blocks, folding from `first_helper(position)`. Only a helper
    publishes, in the lanes it joins (`mine`): no one folds a block's slots, so a block writes none (it still
    raises its ticket's flag)."""
    s, flat, lane_ok, h_index = lanes
    origin = o.origin
    per = w.add(P.ShapeValue, INDEX, origin, "splits", expr=LConstexpr(splits))
    first = w.add(P.Binary, flat.type, origin, "instance_first", fn=BinaryFn.mul, lhs=flat, rhs=per)
    slot = w.add(P.Binary, flat.type, origin, "slot", fn=BinaryFn.add, lhs=first, rhs=s)
    base = o.launch(lmul(blocks, program.constexpr(g.block)), "helper_slots")
    j = o.bin(BinaryFn.maximum, o.cast(h_index, DType.i64), o.const(0), "helper_position") if position is None \
        else position

    def past_blocks(x: PValue, name: str | None = None) -> PValue:
        return o.bin(BinaryFn.add, base, x if offset is None else o.bin(BinaryFn.add, offset, x), name)

    my_slot = o.select(h.is_helper, past_blocks(j, "helper_slot"), o.cast(slot, DType.i64), "own_slot")
    my_first = o.select(h.is_helper, past_blocks(first_helper(j)), o.cast(first, DType.i64), "first_slot")
    leading = o.cmp(CmpFn.eq, my_first, my_slot, "first_piece")
    # nobody folds a block's slots (a subregion a block scans is its alone): only a helper's joined lanes write
    publishes = o.bin(BinaryFn.and_, lane_ok, mine, "publishes")
    return my_first, my_slot, leading, publishes


def _pick(w: RowBuilder, o: Ops, mine: PValue, x: PValue, name: str) -> PValue:
    """The value of `x` (i64, >= 0 where `mine`) in the lane `mine` selects (at most one), -1 if none: uniform."""
    return _lane_fold(w, o, ReduceKind.max, o.select(mine, x, o.const(-1)), -(1 << 63), name)


def _lane_fold(w: RowBuilder, o: Ops, kind: ReduceKind, x: PValue, identity: int, name: str) -> PValue:
    """`x` (i64 lanes) folded over the lanes with the built-in `kind` (sum or max)."""
    a, c = w.begin((Fragment(DType.i64), Fragment(DType.i64)))
    fn = BinaryFn.add if kind is ReduceKind.sum else BinaryFn.maximum
    combine = w.finish((w.add(P.Binary, Fragment(DType.i64), o.origin, fn=fn, lhs=a, rhs=c),))
    (r,) = w.emit(P.LaneFold, (Fragment(DType.i64),), (name,), o.origin, inputs=(x,), kind=kind,
                  identity=(identity,), acc_dtypes=(DType.i64,), combine=combine).results
    return r


def _lanes_op(w: RowBuilder, cls: type, values: tuple[PValue, ...], scan: P.RegionScan, **fields) -> list[PValue]:
    """A lane fold or scan (`cls`) of a piece's per-lane `values` with the scan's combine, in index order."""
    lanes = cls is P.LaneScan
    types = tuple(Fragment(v.type.dtype, lanes) for v in values)
    return list(w.emit(cls, types, ("lanes_before" if lanes else "helper_total",) * len(values), scan.origin,
                       inputs=values, identity=scan.identity, acc_dtypes=scan.acc_dtypes,
                       combine=w.copy_region(scan.combine), **fields).results)


__all__ = ["balanced_scan_split", "data_bounds"]
