"""Balanced segments by the data: helper programs take equal shares of the folded range, whoever the segments are.

`split-segments` splits every subregion over S = `SPLITS_g` programs decided from the shapes at launch. With
blocks enough to fill the device S is 1, and one subregion holding half of the values runs whole in one program
while the others idle. Where the subregions' bounds are `offsets[i]` and `offsets[i + 1]` of one integer tensor
(segment sums, CSR rows), the data decides at launch: the group's segment ends in H = `HELPERS_g` helper programs
besides its blocks, as many as fill the device (HELPERS_PER_SLOT per resident program slot) where the folded
tensor gives each at least HELPER_CHUNK_BLOCKS of the fold's chunks, and S is then 1 (the shapes would cut every
subregion alike, the huge one no finer than the rest). Only where the helpers would be fewer than the shapes'
pieces per block (a folded tensor too small for more than a few helpers; under Triton's interpreter S = 1) do the
shapes split alone, with H = 0:

* the folded tensor's positions [0, H * C) are cut into H chunks of C positions (C = `cdiv(E, H * B) * B` for a
  folded tensor of E elements and the fold's chunk block B, so a chunk is whole fold chunks);
* the *owner* of chunk k is `search(k * C)`: the last i < instances with `offsets[i] <= k * C` (a binary search,
  a `while` loop of about log2(instances) steps; -1 if none). Whatever the offsets hold, the search visits them
  by one decision tree, so the owner never decreases with k;
* subregion i *delegates* its whole chunks k0 <= k < k1 (the chunks inside [begin, end)) when it has some and
  owns both the first and the last of them, so (the owner being monotone) every one of them. Sorted offsets
  always delegate; for unsorted ones the test can fail, and then the subregion's block folds it whole: a chunk
  is never folded twice nor left out. Helper k joins the subregion that owns its chunk if that subregion
  delegates it (the same test, computed from the same bounds): a helper's program decodes the owner's block
  (`owned_instances` with `helper_block`) and folds its chunk for that one lane; every other lane of a helper
  does nothing;
* the block program folds the rest of each subregion: piece s of the head [begin, k0 * C) (of the whole
  subregion when it delegates nothing) and, in split S - 1, the tail [k1 * C, end);
* a subregion with one participant (S = 1, nothing delegated) stores its result at once, with no workspace
  traffic; the others go through the invocation workspace of physical/workspace.py: each participant writes
  its partial into its slot (the block's head and tail slots, copy s; a helper's chunk slot, copy k) and draws
  the subregion's acq_rel ticket; participants number S + (delegated chunks), so the one drawing that count
  minus one is the last: it folds head, the chunk slots k0 .. k1 - 1, tail, in that order (a region fold over
  the positions k0 - 1 .. k1, each fold's own combine), stores the result through the group's pointwise work
  and resets the counter. The order depends on the bounds only: bitwise reproducible, no float atomics, and
  nobody waits for anybody (under Triton's interpreter programs run one by one in order). argmax/argmin
  partials are (value, position) pairs with the position counted from the subregion's begin (NO_POSITION where
  a participant holds no member), any/all partials preds held as bytes (physical/passes/partials.py), so
  positions and conditions balance like sums.

Over a (segments, columns) workset (jagged folds, `out[s, :] = intent.sum(values[b:e, :], axis=0)`: the bounds
are `offsets[flat // D]`) the chunks cut the rows, and a segment's D columns are lanes of the blocks that hold its
instances s * D .. s * D + D - 1, which may be several (D > BLOCK_g, or an odd D across a block's edge). Each
chunk then has P = `HELPER_SPAN_g` helpers, the most blocks a segment's columns lie in (`blocks_spanned`): of
CHUNKS_g chunks, H = CHUNKS_g * P. Helper h takes chunk k = h // P for the *part* j = h % P: it joins the j-th
block of the segment owning chunk k (the block of its first column plus j; none where the segment's columns end
before it), folds chunk k for the segment's columns in that block and writes them into its own slot (copy h, an
element per column). A lane joins the helper of its own part (its block less its segment's first block) and only
in its own block (`flat // BLOCK_g == helper_block`), so each chunk of a segment reaches each of its columns once;
the last participant reads chunk k's slot for a lane at copy k * P + (the lane's part). The verifier proves the
join form: ownership takes the block test as the lane's place, workspace-protocol the part test as the proof that
at most one of a chunk's P helpers joins a lane, and ownership, on every sample launch with helpers, that at least
one does: the helper of a lane's part decodes the block that holds the lane, and every lane's part is below P
(physical/verifier/helpers.py, `unjoined_lanes`; a balanced jagged scan's helpers join by the same tests).

All of this is one form of the group's body, which the launch selects with the constexpr SPLIT_g (1 where
S > 1 or H > 0), as split-segments does (physical/passes/partials.py): an `if` with that flag holds the
helper's search (before `owned_instances`, which takes its block from it) and another the pieces, the slots and
the combine. Where S = 1 and H = 0 (a launch whose blocks fill the device and whose folded tensor is too small
to give a helper a chunk, or Triton's interpreter) the kernel holds only the other branches: each program folds
its subregions whole and stores them, with no search and no workspace traffic.
"""

from __future__ import annotations

import dataclasses

from kir.dims import DConst
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn

from .. import ops as P
from ..builder import Builder
from ..launch_expr import (
    LaunchExpr,
    LBin,
    LConst,
    LConstexpr,
    LNextPow2,
    LResidentPrograms,
    as_launch,
    lcdiv,
    ldim,
    lmax,
    lmin,
    lmul,
    lprod,
    lselect,
    lsum,
)
from ..model import AccessRelation, Fragment, Guard, Origin, Program, PValue, TileAxis
from ..workspace import (
    INDEX,
    add_slot_array,
    add_ticket_counter,
    conjoin,
    draw_ticket,
    reset_counter,
    write_slot,
)
from . import partials as shared
from .partials import Ops, piece

HELPER_CHUNK_BLOCKS = 16  # a helper's chunk holds at least this many of the fold's chunks
HELPERS_PER_SLOT = 2      # helpers per resident program slot (like PROGRAMS_PER_SLOT of the shape split)
PARTS_BLOCK = 32          # partials the last participant folds per step
I64 = Fragment(DType.i64)
PRED = Fragment(DType.pred)


@dataclasses.dataclass(frozen=True)
class Bounds:
    """Where the folds' subregions come from: `offsets[flat]` and `offsets[flat + 1]` of one integer tensor."""

    offsets: int  # the buffer
    begin: PValue
    end: PValue
    # a (segments, columns) workset: the bounds are `offsets[flat // D]`, D (`columns`, the inner axes' extent
    # as a launch value) whole in each segment; None where the bounds are `offsets[flat]`
    columns: PValue | None = None
    width: LaunchExpr = LConst(1)


def bounds_source(program: Program, plan) -> Bounds | None:  # plan: split_segments.SegmentPlan
    """The offsets tensor every fold of the plan takes its bounds from, if they all share them."""
    if plan.owned is None or plan.lane_ok is None:
        return None
    return bounds_of(program, plan.group.body.ops, plan.owned, plan.folds, plan.group.domain)


def bounds_of(program: Program, ops: tuple, owned: int, positions: tuple[int, ...],
              domain: tuple | None = None) -> Bounds | None:
    """The offsets tensor whose `offsets[flat]`, `offsets[flat + 1]` bound every region op at `positions` of
    `ops` (region folds or scans; `flat` the result of the `owned_instances` at `owned`), if there is one and
    nothing in the launch writes it."""
    regions = [ops[n] for n in positions]
    begin, end = regions[0].begin, regions[0].end
    if any(f.begin.id != begin.id or f.end.id != end.id for f in regions):
        return None
    flat = ops[owned].results[0]
    defs = {v.id: op for op in ops for v in op.results}
    lb, le = defs.get(begin.id), defs.get(end.id)
    if not isinstance(lb, P.Load) or not isinstance(le, P.Load) or lb.access.buffer != le.access.buffer:
        return None
    buf = program.buffer(lb.access.buffer)
    if len(buf.shape) != 1 or not buf.dtype.is_int or buf.copies is not None or lb.access.copy is not None:
        return None
    (seg,) = lb.access.coords
    columns, width = None, LConst(1)
    if seg.id != flat.id:
        div = defs.get(seg.id)
        if domain is None or len(domain) < 2 or not (
                isinstance(div, P.Binary) and div.fn is BinaryFn.floordiv and div.lhs.id == flat.id):
            return None
        inner = defs.get(div.rhs.id)
        width = lprod(tuple(ldim(d) for d in domain[1:]))
        if not (isinstance(inner, P.ShapeValue) and inner.expr == width):
            return None
        columns = div.rhs
    (c,) = le.access.coords
    nxt = defs.get(c.id)
    if not (isinstance(nxt, P.Binary) and nxt.fn is BinaryFn.add and nxt.lhs.id == seg.id
            and isinstance(defs.get(nxt.rhs.id), P.Const) and defs[nxt.rhs.id].value == 1):  # type: ignore[union-attr]
        return None
    if any(isinstance(op, P.Store | P.AtomicRMW | P.AtomicCAS) and op.access.buffer == buf.id
           for g in program.groups for op in g.body.walk()):
        return None  # the helpers read the offsets while the launch runs: nobody may write them
    return Bounds(buf.id, begin, end, columns, width)


def helper_count(program: Program, g, values: LaunchExpr, chunk: str) -> LaunchExpr:
    """H: HELPERS_PER_SLOT per resident program slot (the device filled), at most one per HELPER_CHUNK_BLOCKS fold
    chunks of the folded tensor; 0 under the interpreter (one resident program: nothing runs beside anything)."""
    consts = dict(program.constexprs)
    resident = LResidentPrograms(as_launch(program.num_warps))
    device = lmul(resident, lmin(LBin("-", resident, LConst(1)), LConst(HELPERS_PER_SLOT)))
    by_work = LBin("//", values, lmul(consts[chunk], LConst(HELPER_CHUNK_BLOCKS)))
    return lmin(device, by_work)


def search(w: Builder, program: Program, offsets: int, count: PValue, x: PValue, active: PValue,
           origin: Origin | None) -> PValue:
    """The last i < `count` with `offsets[i] <= x`, -1 if none (i64, with `x`'s lanes; -1 where `active` is false).

    lo, hi = -1, count; while hi - lo > 1: mid = (lo + hi) // 2; offsets[mid] <= x ? lo = mid : hi = mid. The
    probes follow one decision tree whatever the offsets hold, so the result never decreases as x grows."""
    o = Ops(w, origin)
    lanes = x.type.lanes or active.type.lanes
    t = Fragment(DType.i64, lanes)
    zero = o.bin(BinaryFn.mul, x, o.const(0)) if x.type.lanes else o.const(0)
    lo0 = o.select(active, o.bin(BinaryFn.sub, zero, o.const(1)), o.bin(BinaryFn.sub, zero, o.const(1)))
    hi0 = o.select(active, o.bin(BinaryFn.add, zero, count), o.bin(BinaryFn.sub, zero, o.const(0)))
    buf = program.buffer(offsets)
    extent = o.launch(lprod(tuple(ldim(d) for d in buf.shape)), "offsets_extent")

    lo, hi = w.begin((t, t), ("lo", "hi"))
    cond = o.cmp(CmpFn.gt, o.bin(BinaryFn.sub, hi, lo), o.const(1))
    cond_region = w.finish((conjoin(w, cond, active, origin),))  # type: ignore[arg-type]

    lo, hi, going = w.begin((t, t, Fragment(DType.pred, lanes)), ("lo", "hi", "searching"))
    mid = o.bin(BinaryFn.floordiv, o.bin(BinaryFn.add, lo, hi), o.const(2), "mid")
    inside = o.bin(BinaryFn.and_, o.cmp(CmpFn.ge, mid, o.const(0)), o.cmp(CmpFn.lt, mid, extent))
    mask = o.bin(BinaryFn.and_, going, inside)
    probe = w.add(P.Load, Fragment(buf.dtype, lanes), origin, "probe",
                  access=AccessRelation(offsets, (mid,), mask, Guard(inside), 0, None))
    right = o.bin(BinaryFn.and_, going, o.cmp(CmpFn.le, o.cast(probe, DType.i64), x))
    left = o.bin(BinaryFn.and_, going, o.not_(right))
    body = w.finish((o.select(right, mid, lo), o.select(left, mid, hi)))

    found = w.fresh(t, "found")
    hi_out = w.fresh(t)
    w.put(P.While(results=(found, hi_out), origin=origin, inits=(lo0, hi0), cond=cond_region, body=body))
    return found


def balanced_split(program: Program, plan, bounds: Bounds) -> Program:  # plan: split_segments.SegmentPlan
    """The group of `plan` split over SPLITS_g programs per block plus HELPERS_g helpers (see the module)."""
    from .split_segments import split_count

    g = plan.group
    gid = g.id
    ops = g.body.ops
    folds = [ops[n] for n in plan.folds]
    assert all(isinstance(f, P.RegionFold) for f in folds) and plan.owned is not None and plan.lane_ok is not None
    block_c = folds[0].block
    splits, block_s, helpers, parts = f"SPLITS_{gid}", f"BLOCK_SPLITS_{gid}", f"HELPERS_{gid}", f"BLOCK_PARTS_{gid}"
    flag = shared.split_flag(gid)
    consts = dict(program.constexprs)
    # the helpers cut the folded rows (each a row of all the columns where the bounds hold per segment), as
    # many as the folded elements give work for
    rows = plan.values if bounds.columns is None else LBin("//", plan.values, bounds.width)
    segs = None if bounds.columns is None else ldim(g.domain[0])
    span, n_chunks = None, None
    if bounds.columns is None:
        consts[helpers] = helper_count(program, g, plan.values, block_c)
    else:
        # a segment's columns may span several blocks: each chunk gets a helper per block the segment's columns
        # may span (HELPER_SPAN_g), CHUNKS_g chunks of the rows, HELPERS_g = CHUNKS_g * HELPER_SPAN_g programs
        span, n_chunks = f"HELPER_SPAN_{gid}", f"CHUNKS_{gid}"
        consts[span] = blocks_spanned(bounds.width, consts[g.block])  # written out: host-side extents read them
        consts[n_chunks] = LBin("//", helper_count(program, g, plan.values, block_c), consts[span])
        consts[helpers] = lmul(consts[n_chunks], consts[span])
    # the data decides wherever the launch has helpers at least as many as the pieces the shapes would cut each
    # block into: one program per block, the helpers taking the whole chunks of every subregion however skewed;
    # elsewhere (a folded tensor too small to give more than a few helpers a chunk) the shapes split, alone (under
    # the interpreter S = 1 and H = 0)
    shape = split_count(program, g, plan.values, block_c, plan.longest)
    data = lmax(LConst(0), LBin("+", LBin("-", consts[helpers], shape), LConst(1)))  # > 0 where H >= S
    count = lselect(data, LConst(1), shape)
    consts[helpers] = lselect(data, consts[helpers], LConst(0))
    if n_chunks is not None:
        consts[n_chunks] = lselect(data, consts[n_chunks], LConst(0))
    consts[splits] = count
    consts[block_s] = LNextPow2(count)
    # SPLIT_g: 1 where more than one program may take part in a block (SPLITS_g > 1, or helpers past the
    # blocks), 0 where each program runs its own alone (the kernel then holds only the direct form)
    consts[flag] = lmin(LBin("-", lsum((count, consts[helpers])), LConst(1)), LConst(1))
    consts[parts] = LNextPow2(LConst(PARTS_BLOCK))
    order = [n for n, _ in program.constexprs] + [splits, block_s, *(n for n in (span, n_chunks) if n is not None),
                                                  helpers, flag, parts]
    seg = next(s for s in program.segments if s.group == gid)
    block_programs = lmul(as_launch(seg.length), count)
    lengths = [lsum((block_programs, consts[helpers])) if s.group == gid else as_launch(s.length)
               for s in program.segments]
    segments = tuple(dataclasses.replace(s, length=n, offset=lsum(tuple(lengths[:k])))
                     for k, (s, n) in enumerate(zip(program.segments, lengths)))
    program = dataclasses.replace(program, constexprs=tuple((n, consts[n]) for n in order))

    # ---- workspace: head and tail slots per instance (a copy per split), a chunk slot per helper, the counter
    heads: list[list] = []
    tails: list[list] = []
    chunks: list[list] = []
    for j, fold in enumerate(folds):
        hs, ts, cs = [], [], []
        for k, dt in enumerate(fold.acc_dtypes):  # type: ignore[attr-defined]
            tag = (f"{j}" if len(folds) > 1 else "") + (f"_{k}" if len(fold.acc_dtypes) > 1 else "")  # type: ignore
            program, b = add_slot_array(program, gid, "partial" + tag, shared.partial_slot_dtype(dt), splits)
            hs.append(b)
            program, b = add_slot_array(program, gid, "tail" + tag, shared.partial_slot_dtype(dt), splits)
            ts.append(b)
            # a helper's chunk slot: one per helper, an element per column of its segment
            program, b = add_slot_array(program, gid, "chunk" + tag, shared.partial_slot_dtype(dt), helpers,
                                        domain=() if bounds.columns is None else tuple(g.domain[1:]))
            cs.append(b)
        heads.append(hs)
        tails.append(ts)
        chunks.append(cs)
    program, counter = add_ticket_counter(program, gid, "arrivals")

    w = Builder.after(program)
    origin = folds[-1].origin
    o = Ops(w, origin)
    s = w.add(P.SplitIndex, INDEX, origin, "split", group=gid, splits=splits)
    h_index = w.add(P.HelperIndex, INDEX, origin, "helper", group=gid, blocks=block_programs,
                    helpers=helpers)
    cond = shared.flag_set(w, flag, origin)

    # ---- which subregion's block a helper joins: a binary search, only in the cooperating form
    helper_block, owner = join_block(w, program, bounds, g, lambda: helper_values(
        o, rows, g, h_index, helpers, block_c, segments=segs, span=span, chunks=n_chunks), cond, flag, origin)

    # ---- the work before the folds (bounds, the lane test): nothing in it reads a fold's result
    flat = ops[plan.owned].results[0]
    lane_ok = plan.lane_ok
    for n, op in enumerate(ops[:plan.folds[-1] + 1]):
        if n in plan.after or isinstance(op, P.RegionFold):
            continue
        if n == plan.owned:
            assert isinstance(op, P.OwnedInstances)
            op = dataclasses.replace(op, splits=splits, helper_block=helper_block)
        w.put(op)

    # ---- the cooperating form: head and tail pieces, helpers' chunks, the last participant's combine
    w.begin()
    h = helper_values(o, rows, g, h_index, helpers, block_c, segments=segs, span=span, chunks=n_chunks)
    lane = _lane_plan(w, o, program, bounds, flat, lane_ok, s, splits, h, owner, block_c, origin, g.block,
                      helper_block)
    partials: list[tuple[PValue, ...]] = []
    tail_partials: list[tuple[PValue, ...]] = []
    for op in folds:
        for ranges, out in (((lane["begin"], lane["end"]), partials),
                            ((lane["tail_begin"], lane["tail_end"]), tail_partials)):
            out.append(shared.positioned(o, op.kind, _fold_over(w, o, op, ranges), ranges[0], op.begin))
    shared_, part = lane["shared"], lane["part"]
    slot_mask = o.bin(BinaryFn.and_, lane_ok, o.bin(BinaryFn.and_, shared_, o.not_(h.is_helper)))
    chunk_mask = o.bin(BinaryFn.and_, lane_ok, o.bin(BinaryFn.and_, shared_, lane["mine"]))
    # only a subregion that hands chunks to helpers has a tail (elsewhere the tail partial is the identity)
    tail_mask = o.bin(BinaryFn.and_, slot_mask, lane["delegates"])
    zero_inst = w.add(P.Const, I64, origin, value=0, dtype=DType.i64)
    column = zero_inst if bounds.columns is None else o.bin(BinaryFn.mod, flat, bounds.columns, "column")
    for fold, hs, ts, cs, head, tail in zip(folds, heads, tails, chunks, partials, tail_partials):
        for hb, tb, cb, hv, tv in zip(hs, ts, cs, head, tail):
            write_slot(w, hb, s, flat, shared.slot_value(o, hv, hb), lane_ok, fold.origin, slot_mask)
            write_slot(w, tb, s, flat, shared.slot_value(o, tv, tb), lane_ok, fold.origin, tail_mask)
            # a helper's chunk: one slot per helper (copy k), written for the one lane it joined
            w.put(P.Store(access=AccessRelation(cb.id, (column,), chunk_mask, Guard(chunk_mask), None, h_index),
                          value=shared.slot_value(o, hv, cb), origin=fold.origin))
    ticket_mask = o.bin(BinaryFn.and_, lane_ok, o.bin(BinaryFn.and_, shared_, part))
    ticket = draw_ticket(w, counter, flat, lane_ok, origin, ticket_mask)
    # the last participant: ticket S - 1 + delegated chunks (lanes with one participant draw none: ticket 0)
    last_n = o.cast(o.bin(BinaryFn.add, o.launch(LBin("-", LConstexpr(splits), LConst(1)), "last_ticket"),
                          lane["delegated"]), DType.i32)
    is_last = o.cmp(CmpFn.eq, ticket, last_n, "last")
    last = o.bin(BinaryFn.and_, o.bin(BinaryFn.and_, is_last, part), lane_ok)
    last_shared = o.bin(BinaryFn.and_, last, shared_)
    totals: list[PValue] = []
    for fold, hs, ts, cs, head, tail in zip(folds, heads, tails, chunks, partials, tail_partials):
        assert isinstance(fold, P.RegionFold)
        sums = []
        last_tail = o.bin(BinaryFn.and_, last_shared, lane["delegates"])
        for bufs, own, reads in ((hs, head, last_shared), (ts, tail, last_tail)):
            folded = shared.fold_slots(w, shared.region_partial(fold, own), bufs, flat, (splits, block_s), reads,
                                       lane_ok, "slots_total")
            # one participant (nothing shared): the program's own partial, never written to the workspace; a
            # tail where nothing is handed to helpers: the identity (an empty range), in the last's own register
            use = shared_ if own is head else lane["delegates"]
            sums.append(tuple(o.select(use, t, mine) for t, mine in zip(folded, own)))
        totals += _finish(w, o, fold, cs, sums[0], sums[1], lane, last, parts, h.n_helpers,
                          None if bounds.columns is None else column, lane.get("lane_part"), h.span,
                          None if span is None else o.launch(LConstexpr(helpers), "helpers"))
    reset_counter(w, counter, flat, last_shared, lane_ok, origin)
    cooperating = w.finish((last, *totals))

    # ---- the direct form (SPLIT_g = 0: one program per block, no helpers): each fold whole, stored at once
    w.begin()
    whole = [v for fold in folds for v in _fold_over(w, o, fold, (fold.begin, fold.end))]
    direct = w.finish((lane_ok, *whole))
    # the results: each fold's own values where the accumulator is their type, else converted after the branch
    # (and argmax/argmin positions settled after it: NO_POSITION where no participant held a member)
    outs = [w.fresh(last.type, "stores")]
    for fold in folds:
        outs += [v if v.type == Fragment(dt, v.type.lanes) and not (k and fold.kind in shared.ARG_KINDS)
                 else w.fresh(Fragment(dt, v.type.lanes), "total")
                 for k, (v, dt) in enumerate(zip(fold.results, fold.acc_dtypes))]  # type: ignore[attr-defined]
    w.put(P.If(results=tuple(outs), origin=origin, cond=cond, then_=cooperating, else_=direct, flag=flag))
    results = iter(outs[1:])
    for fold in folds:
        for k, v in enumerate(fold.results):
            total = next(results)
            if k and fold.kind in shared.ARG_KINDS:
                shared.settle(w, fold.kind, total, v, fold.origin)
            elif v.id != total.id:  # back to the fold's result dtype, as its own fold converts its accumulator
                w.put(P.Cast(results=(v,), origin=fold.origin, x=total, dtype=v.type.dtype))
    shared.finish_in_last(w, [ops[n] for n in sorted(plan.after)] + list(ops[plan.folds[-1] + 1:]), outs[0])
    group = dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(w.ops)))
    return dataclasses.replace(program, groups=tuple(group if x.id == gid else x for x in program.groups),
                               segments=segments, grid=lsum(tuple(lengths)))


def join_block(w: Builder, program: Program, bounds: Bounds, g, helper, cond: PValue, flag: str,
               origin: Origin | None) -> tuple[PValue, PValue]:
    """(helper_block, owner): the block of the subregion that owns a helper's chunk and that subregion (-1 in the
    block programs, and where no subregion starts at or before the chunk), searched only where the constexpr
    `flag` selects the cooperating form (`cond`); `helper()` writes the helper's values into that form."""
    o = Ops(w, origin)
    w.begin()
    h = helper()
    owner = search(w, program, bounds.offsets, h.instances, h.c0, h.is_helper, origin)
    block_i = o.launch(LConstexpr(g.block), "block")
    joined = o.bin(BinaryFn.and_, h.is_helper, o.cmp(CmpFn.ge, owner, h.zero))
    # the block of the owner's first column (the bounds' own D is not yet defined here: before owned_instances)
    first = owner if bounds.columns is None else o.bin(BinaryFn.mul, owner, o.launch(bounds.width, "columns"))
    at = o.bin(BinaryFn.floordiv, first, block_i)
    if h.part is not None:
        # helper `part` of its chunk joins the part-th block the owner's columns lie in, if they reach that far
        width = o.launch(bounds.width, "columns")
        last = o.bin(BinaryFn.floordiv, o.bin(BinaryFn.sub, o.bin(BinaryFn.add, first, width), o.const(1)), block_i)
        at = o.bin(BinaryFn.add, at, h.part)
        joined = o.bin(BinaryFn.and_, joined, o.cmp(CmpFn.le, at, last))
    block = o.select(joined, at, o.const(-1))
    searched = w.finish((block, owner))
    w.begin()
    none = o.const(-1)
    alone = w.finish((none, none))
    helper_block, owner = w.fresh(I64, "helper_block"), w.fresh(I64, "owner")
    w.put(P.If(results=(helper_block, owner), origin=origin, cond=cond, then_=searched, else_=alone, flag=flag))
    return helper_block, owner


@dataclasses.dataclass(frozen=True)
class HelperValues:
    """A helper's position and chunk (written in each form that needs them: the two `if`s are apart)."""

    is_helper: PValue
    hk: PValue  # the helper's chunk k (0 in the block programs)
    c0: PValue  # its first position, k * C
    chunk: PValue  # C
    n_helpers: PValue
    instances: PValue
    zero: PValue
    # where a chunk has a helper per block its segment's columns may span (`span` of them): which of them this
    # helper is (the block it joins is the part-th of its segment's); None where one helper takes a chunk
    part: PValue | None = None
    span: PValue | None = None


def helper_values(o: Ops, values: LaunchExpr, g, h_index: PValue, helpers: str, block_c: str,
                   reverse: bool = False, segments: LaunchExpr | None = None, span: str | None = None,
                   chunks: str | None = None, by_part: bool = False) -> HelperValues:
    """A helper's chunk: its position among the helpers (`reverse`: counted from the last chunk, so that the
    helpers of a scan that runs from the end come in its traversal order). With `span` (the constexpr P of
    blocks a segment's columns may span) and `chunks` (the constexpr count of chunks), helper h takes chunk
    h // P for the (h % P)-th block of its segment; `by_part`: chunk h % CHUNKS for the (h // CHUNKS)-th block
    (the helpers of one part hold consecutive tickets, as a scan's look-back over the tickets below needs)."""
    h = o.cast(h_index, DType.i64)
    zero = o.const(0)
    hk = o.bin(BinaryFn.maximum, h, zero)
    part = spans = None
    count = helpers if chunks is None else chunks
    if span is not None:
        spans = o.launch(LConstexpr(span), "span")
        whole = hk
        if by_part:
            n = o.launch(LConstexpr(count), "chunks")
            part = o.bin(BinaryFn.floordiv, whole, n, "helper_part")
            hk = o.bin(BinaryFn.sub, whole, o.bin(BinaryFn.mul, part, n), "helper_chunk")
        else:
            hk = o.bin(BinaryFn.floordiv, whole, spans, "helper_chunk")
            part = o.bin(BinaryFn.sub, whole, o.bin(BinaryFn.mul, hk, spans), "helper_part")
    if reverse:
        last = o.bin(BinaryFn.sub, o.launch(LConstexpr(count), "helpers" if chunks is None else "chunks"),
                     o.const(1))
        hk = o.bin(BinaryFn.maximum, o.bin(BinaryFn.sub, last, hk), zero)
    chunk = o.launch(lmul(lcdiv(values, lmul(lmax(LConstexpr(count), LConst(1)), LConstexpr(block_c))),
                          LConstexpr(block_c)), "chunk")
    return HelperValues(o.cmp(CmpFn.ge, h, zero, "is_helper"), hk, o.bin(BinaryFn.mul, hk, chunk, "chunk_begin"),
                         chunk, o.launch(LConstexpr(count), "helpers" if chunks is None else "chunks"),
                         o.launch(lprod(tuple(ldim(d) for d in g.domain)) if segments is None else segments,
                                  "segments"), zero, part, spans)


def blocks_spanned(width: LaunchExpr, block: LaunchExpr) -> LaunchExpr:
    """The most blocks of `block` (a power of two) instances that a segment's `width` columns lie in (segment u
    holds the instances u * width .. u * width + width - 1): cdiv(width - g, block) + 1 for g = gcd(width, block),
    since the segments start at every multiple of g within a block, the last at block - g. With q = width //
    block and r = width % block that is q where r = 0 (g = block), q + 1 where r is a power of two (g = r) and
    q + 2 otherwise (0 < r - g < block); at least 1."""
    q = LBin("//", width, block)
    r = LBin("-", width, lmul(q, block))
    some = lmin(r, LConst(1))
    return lmax(LConst(1), lsum((q, some, lmul(some, lmin(LBin("-", LNextPow2(r), r), LConst(1))))))


def _fold_over(w: Builder, o: Ops, fold: P.RegionFold, ranges: tuple[PValue, PValue]) -> tuple[PValue, ...]:
    """`fold` over [begin, end) = `ranges` (a copy of its regions), its partials in the accumulator dtypes."""
    begin, end = (o.cast(v, b.type.dtype) for v, b in zip(ranges, (fold.begin, fold.end)))
    partial = tuple(w.fresh(Fragment(dt, v.type.lanes), "partial") for v, dt in zip(fold.results, fold.acc_dtypes))
    shared.fold_over(w, fold, begin, end, partial)
    return partial


def delegation(w: Builder, o: Ops, program: Program, bounds: Bounds, flat: PValue, lane_ok: PValue,
               h: HelperValues, owner: PValue, origin: Origin | None, block: str = "",
               helper_block: PValue | None = None) -> dict[str, PValue]:
    """Per lane (i64): its subregion [begin, end), its whole chunks [first_chunk, end_chunk), whether it
    `delegates` them (it owns the first and the last: see the module), how many (`delegated`) and whether the
    program is the helper of one of them (`mine`)."""
    is_helper, hk, chunk, n_helpers, instances = h.is_helper, h.hk, h.chunk, h.n_helpers, h.instances
    b = o.cast(bounds.begin, DType.i64, "begin")
    e = o.cast(bounds.end, DType.i64, "end")
    zero, one = o.const(0), o.const(1)
    bl = o.bin(BinaryFn.maximum, b, zero)
    el = o.bin(BinaryFn.maximum, e, bl)
    k0 = o.bin(BinaryFn.floordiv, o.bin(BinaryFn.add, bl, o.bin(BinaryFn.sub, chunk, one)), chunk, "first_chunk")
    k1 = o.bin(BinaryFn.minimum, o.bin(BinaryFn.floordiv, el, chunk), n_helpers, "end_chunk")
    n = o.bin(BinaryFn.maximum, o.bin(BinaryFn.sub, k1, k0), zero, "whole_chunks")
    want = o.bin(BinaryFn.and_, lane_ok, o.cmp(CmpFn.gt, n, zero))
    first = search(w, program, bounds.offsets, instances, o.bin(BinaryFn.mul, k0, chunk), want, origin)
    last = search(w, program, bounds.offsets, instances,
                  o.bin(BinaryFn.mul, o.bin(BinaryFn.sub, k1, one), chunk), want, origin)
    me = o.cast(flat, DType.i64)
    lane_part = None
    if bounds.columns is not None:
        assert h.part is not None  # the (segments, columns) form always has a helper per part (`span`)
        # a helper per block of the segment: every segment may hand its chunks over; the lane's part (which of
        # its segment's blocks holds it) picks, of a chunk's helpers, the one that joins it
        inst = me
        me = o.bin(BinaryFn.floordiv, inst, bounds.columns, "segment")
        block_i = o.launch(LConstexpr(block), "block")
        lane_block = o.bin(BinaryFn.floordiv, inst, block_i, "lane_block")
        lane_part = o.bin(BinaryFn.sub, lane_block, o.bin(BinaryFn.floordiv, o.bin(BinaryFn.mul, me, bounds.columns),
                                                           block_i), "lane_part")
    delegates = o.bin(BinaryFn.and_, want, o.bin(BinaryFn.and_, o.cmp(CmpFn.eq, first, me),
                                                   o.cmp(CmpFn.eq, last, me)), "delegates")
    nd = o.select(delegates, n, zero, "delegated")
    # a helper joins the lane whose delegated chunks hold its own (at most one lane: the owner is monotone)
    mine = o.bin(BinaryFn.and_, o.bin(BinaryFn.and_, is_helper, o.bin(BinaryFn.and_, delegates, o.cmp(
        CmpFn.eq, me, owner))), o.bin(BinaryFn.and_, o.cmp(CmpFn.le, k0, hk), o.cmp(CmpFn.lt, hk, k1)), "joins")
    if lane_part is not None and helper_block is not None:
        # the helper of the lane's part, and the lane in the block the helper decoded (so the helpers of a chunk
        # join each lane of the segment once, and only lanes of their own programs)
        assert h.part is not None
        mine = o.bin(BinaryFn.and_, o.bin(BinaryFn.and_, mine, o.cmp(CmpFn.eq, lane_part, h.part)),
                     o.cmp(CmpFn.eq, lane_block, helper_block), "joins")
    return {"begin": b, "end": e, "first_chunk": k0, "end_chunk": k1, "delegates": delegates, "delegated": nd,
            "mine": mine, "zero": zero, "one": one, **({} if lane_part is None else {"lane_part": lane_part})}


def _lane_plan(w: Builder, o: Ops, program: Program, bounds: Bounds, flat: PValue, lane_ok: PValue, s: PValue,
               splits: str, h: HelperValues, owner: PValue, block: str, origin: Origin | None,
               g_block: str = "", helper_block: PValue | None = None) -> dict[str, PValue]:
    """Per lane: the whole chunks of its subregion, whether it delegates them, and this program's ranges."""
    is_helper, c0, chunk, n_helpers = h.is_helper, h.c0, h.chunk, h.n_helpers
    d = delegation(w, o, program, bounds, flat, lane_ok, h, owner, origin, g_block, helper_block)
    b, e, k0, k1, delegates, nd, mine = (d[k] for k in ("begin", "end", "first_chunk", "end_chunk", "delegates",
                                                         "delegated", "mine"))
    zero, one = d["zero"], d["one"]
    part = o.bin(BinaryFn.or_, o.not_(is_helper), mine, "takes_part")
    sn = o.launch(LConstexpr(splits), "splits")
    shared = o.cmp(CmpFn.gt, o.bin(BinaryFn.add, o.bin(BinaryFn.sub, sn, one), nd), zero, "shared")
    # the block's head: piece s of [b, k0 * C) (of [b, e) when nothing is delegated), whole chunks per piece
    head_end = o.select(delegates, o.bin(BinaryFn.mul, k0, chunk), e)
    pb, pe = piece(o, b, head_end, s, splits, block)
    c1 = o.bin(BinaryFn.add, c0, chunk)
    begin = o.select(is_helper, c0, pb, "fold_begin")
    end = o.select(is_helper, o.select(mine, c1, c0), pe, "fold_end")
    # the tail [k1 * C, e), folded by split S - 1 where the subregion delegates; empty elsewhere
    tail_here = o.bin(BinaryFn.and_, o.bin(BinaryFn.and_, delegates, o.not_(is_helper)),
                      o.cmp(CmpFn.eq, o.cast(s, DType.i64), o.bin(BinaryFn.sub, sn, one)))
    tail_begin = o.select(tail_here, o.bin(BinaryFn.mul, k1, chunk), e, "tail_begin")
    return {"begin": begin, "end": end, "tail_begin": tail_begin, "tail_end": e, "delegated": nd,
            "delegates": delegates, "first_chunk": k0, "mine": mine, "part": part, "shared": shared,
            "n_helpers": n_helpers, **({"lane_part": d["lane_part"]} if "lane_part" in d else {})}


def _finish(w: Builder, o: Ops, fold: P.RegionFold, chunk_bufs: list, head: tuple[PValue, ...],
            tail: tuple[PValue, ...], lane: dict[str, PValue], last: PValue, parts: str,
            n_helpers: PValue, column: PValue | None, lane_part: PValue | None = None,
            span: PValue | None = None, programs: PValue | None = None) -> list[PValue]:
    """The fold's result for the last participant, in its accumulator dtypes: head, chunk slots k0 .. k0 +
    delegated - 1, tail, in order (a region fold over the positions k0 - 1 .. k0 + delegated; empty for the
    other lanes); a subregion with one participant gives its head partial. With a helper per block of the
    segment (`span` of them a chunk), chunk k's slot for the lane is that of helper k * span + `lane_part`."""
    origin = fold.origin
    one = o.const(1)
    k0, nd = lane["first_chunk"], lane["delegated"]
    first = o.bin(BinaryFn.sub, k0, one, "parts_begin")
    after = o.bin(BinaryFn.add, k0, nd, "tail_position")
    # only where the subregion was shared: one participant's result is its head partial (its tail is empty)
    folding = o.bin(BinaryFn.and_, last, lane["shared"])
    stop = o.select(folding, o.bin(BinaryFn.add, after, one), first, "parts_end")
    axis = TileAxis(DConst(PARTS_BLOCK), parts)
    tile_t = Fragment(DType.i64, False, (axis,), True)

    (start,) = w.begin((INDEX,), ("start",))
    pos = w.add(P.TileIndex, tile_t, origin, "part", axis=0)
    rel = o.bin(BinaryFn.add, start, pos)
    lt = Fragment(DType.i64, True, (axis,))

    def wide(v: PValue) -> PValue:
        return w.add(P.Broadcast, Fragment(v.type.dtype, True, (axis,)), origin, x=v, dims=())

    p = o.bin(BinaryFn.add, wide(first), o.cast(rel, DType.i64))
    assert p.type == lt
    member = o.bin(BinaryFn.and_, o.cmp(CmpFn.lt, p, wide(stop)), wide(folding))
    is_head = o.cmp(CmpFn.eq, p, wide(first))
    is_tail = o.cmp(CmpFn.eq, p, wide(after))
    in_range = o.bin(BinaryFn.and_, o.cmp(CmpFn.ge, p, o.const(0)), o.cmp(CmpFn.lt, p, n_helpers))
    slot = p
    if lane_part is not None and span is not None and programs is not None:
        slot = o.bin(BinaryFn.add, o.bin(BinaryFn.mul, p, wide(span)), wide(lane_part), "chunk_slot")
        # the slot among the helper programs' (so the access is justified by its own guard)
        in_range = o.bin(BinaryFn.and_, in_range, o.bin(BinaryFn.and_, o.cmp(CmpFn.ge, slot, o.const(0)),
                                                        o.cmp(CmpFn.lt, slot, programs)))
    inner = o.bin(BinaryFn.and_, o.bin(BinaryFn.and_, member, o.bin(BinaryFn.and_, o.not_(is_head), o.not_(is_tail))),
                  in_range)
    if column is None:
        column = w.add(P.Const, I64, origin, value=0, dtype=DType.i64)
    values = []
    identity = shared.partial_identity(fold.kind, fold.identity)
    for buf, ident, dt, hv, tv in zip(chunk_bufs, identity, fold.acc_dtypes, head, tail):
        # a pred partial is a byte in its slot (its fill the identity's)
        got = o.cast(w.add(P.Load, Fragment(buf.dtype, True, (axis,)), origin, "chunk_partial",
                           access=AccessRelation(buf.id, (column,), inner, Guard(in_range),
                                                 int(ident) if dt.is_pred else ident, slot)), dt)
        values.append(o.select(is_head, wide(hv), o.select(is_tail, wide(tv), got)))
    source = w.finish((*values, member))
    parts_total = tuple(w.fresh(Fragment(dt, True), "parts_total") for dt in fold.acc_dtypes)
    w.put(P.RegionFold(results=parts_total, origin=origin, begin=first, end=stop, block=parts, source=source,
                       kind=fold.kind, identity=identity, acc_dtypes=fold.acc_dtypes,
                       combine=w.copy_region(fold.combine), active=folding))
    return [o.select(lane["shared"], total, hv) for total, hv in zip(parts_total, head)]
