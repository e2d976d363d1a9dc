"""Partials of one block of instances computed by S cooperating programs and combined by the last of them.

What split-reductions (split_reduce.py) and split-segments (split_segments.py) share: how their plans find a
group's lane-validity test and check the work after the combine, how the segment of the split group grows
S-fold with the constexprs `SPLITS_g` and `BLOCK_SPLITS_g`, the workspace of partials (one slot array per
accumulator, one ticket counter per instance), and the end of the split body written with the protocol of
physical/workspace.py: each program publishes its partials and draws its ticket; the holder of the last ticket
reads the S slots in slot order, folds them with each fold's own kind and combine (the same partials meet in
the same order on every run), runs the work that needs the results with its stores under that ticket and
resets the counter. All of it sits in the branch of an `if` on the constexpr SPLIT_g (SPLITS_g > 1): where a
launch has one program per block the kernel holds the other branch only, which takes the partials as the
results and touches no workspace.

It also holds what the splits compute alike: `Ops`, shorthands for the integer arithmetic of their bodies,
`piece`, the cut of a subregion [b, e) into S runs of whole chunks that every split of a data-dependent subregion
(split-segments, split-region-scans, scan-folds, balanced segments' heads) folds or scans, and the form in which
the partials of a region fold over such pieces meet:

* an argmax/argmin partial is its (value, position) pair with the position counted from the subregion's begin
  (`positioned`: the piece's offset added), and NO_POSITION where the piece holds no member: the fold's own -1
  for an empty range would win every tie of values (an all -inf segment, an integer one at the type's lowest),
  NO_POSITION loses every one. The pairs meet in piece order with the fold's own combine (the first position
  wins among equal values, NaN is the extreme, the first NaN wins: kir/reduce.py's rule, as in the oracle) from
  the identity (value identity, NO_POSITION), and a result that is still NO_POSITION is an empty subregion's -1
  (`settle`);
* a pred accumulator (any/all) is stored in its slot as a byte (`partial_slot_dtype`) and read back as a
  pred (`!= 0`); the slots' fold takes its members from the read's mask, since a byte fill is no pred identity.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from kir.reduce import EMPTY_ARG_INDEX, ReduceKind

from .. import ops as P
from ..analysis import producer
from ..builder import Builder
from ..launch_expr import LaunchExpr, LBin, LConst, LConstexpr, LNextPow2, as_launch, ldim, lmin, lmul, lprod, lsum
from ..lower.reduce import INT64_MAX
from ..model import Buffer, Fragment, Origin, POp, PRegion, Program, PValue, Segment
from ..rewrite import map_operands
from ..workspace import (
    INDEX,
    add_slot_array,
    add_ticket_counter,
    conjoin,
    draw_ticket,
    last_ticket,
    read_slots,
    reset_counter,
    write_slot,
)


class Ops:
    """Builder shorthands for integer arithmetic on scalars and lanes (i64 unless a dtype is given)."""

    def __init__(self, w: Builder, origin: Origin | None) -> None:
        self.w, self.origin = w, origin

    def const(self, value: int, dt: DType = DType.i64) -> PValue:
        return self.w.add(P.Const, Fragment(dt), self.origin, value=value, dtype=dt)

    def launch(self, expr: LaunchExpr, name: str, dt: DType = DType.i64) -> PValue:
        """The launch value `expr` (a constexpr expression) as a scalar of `dt`."""
        return self.cast(self.w.add(P.ShapeValue, INDEX, self.origin, name, expr=expr), dt)

    def cast(self, x: PValue, dt: DType, name: str | None = None) -> PValue:
        if x.type.dtype is dt and not x.type.index:
            return x
        return self.w.add(P.Cast, Fragment(dt, x.type.lanes, x.type.tile), self.origin, name, x=x, dtype=dt)

    def bin(self, fn: BinaryFn, x: PValue, y: PValue, name: str | None = None) -> PValue:
        dt = DType.pred if fn in (BinaryFn.and_, BinaryFn.or_) else x.type.dtype
        t = Fragment(dt, x.type.lanes or y.type.lanes, x.type.tile or y.type.tile, x.type.index and y.type.index)
        return self.w.add(P.Binary, t, self.origin, name, fn=fn, lhs=x, rhs=y)

    def cmp(self, fn: CmpFn, x: PValue, y: PValue, name: str | None = None) -> PValue:
        t = Fragment(DType.pred, x.type.lanes or y.type.lanes, x.type.tile or y.type.tile)
        return self.w.add(P.Compare, t, self.origin, name, fn=fn, lhs=x, rhs=y)

    def select(self, c: PValue, x: PValue, y: PValue, name: str | None = None) -> PValue:
        t = Fragment(x.type.dtype, c.type.lanes or x.type.lanes or y.type.lanes, c.type.tile or x.type.tile
                     or y.type.tile)
        return self.w.add(P.Select, t, self.origin, name, cond=c, on_true=x, on_false=y)

    def not_(self, x: PValue) -> PValue:
        return self.cmp(CmpFn.eq, x, self.const(False, DType.pred))


def piece(o: Ops, b: PValue, e: PValue, s: PValue, splits: str, chunk: str, least: str | None = None
          ) -> tuple[PValue, PValue]:
    """Split s's piece [b + lo, b + hi) of each lane's subregion [b, e), in the bounds' dtype: with S = `splits`
    pieces of C = `chunk` (constexpr names), per = cdiv(e - b, S * C) * C positions each (whole chunks, so the
    pieces of a long subregion are equal to within a chunk, the last ones shorter or empty), lo = min(s * per,
    e - b), hi = min(lo + per, e - b); with `least` (a constexpr, a whole number of chunks) a piece holds at
    least that many positions (a short subregion takes fewer pieces)."""
    dt = b.type.dtype
    zero = o.const(0, dt)
    length = o.bin(BinaryFn.maximum, o.bin(BinaryFn.sub, e, b), zero, "length")
    size = o.launch(LConstexpr(chunk), "chunk", dt)
    span = o.launch(lmul(LConstexpr(splits), LConstexpr(chunk)), "split_span", dt)
    # whole chunks per piece: cdiv(length, S * C) * C (non-negative operands: C division floors)
    chunks = o.bin(BinaryFn.floordiv, o.bin(BinaryFn.add, length, o.bin(BinaryFn.sub, span, o.const(1, dt))), span)
    per = o.bin(BinaryFn.mul, chunks, size, "piece")
    if least is not None:
        per = o.bin(BinaryFn.maximum, per, o.launch(LConstexpr(least), "least", dt), "piece")
    lo = o.bin(BinaryFn.minimum, o.bin(BinaryFn.mul, o.cast(s, dt), per), length, "piece_lo")
    hi = o.bin(BinaryFn.minimum, o.bin(BinaryFn.add, lo, per), length, "piece_hi")
    return o.bin(BinaryFn.add, b, lo, "piece_begin"), o.bin(BinaryFn.add, b, hi, "piece_end")


def subregion_extent(program: Program, op: P.RegionFold | P.RegionScan, load: P.Load) -> LaunchExpr:
    """The most elements one lane's subregion of the region fold or scan `op` can hold: the extent of the axis of
    its source tensor (read by `load`) along which the subregion runs, the one coordinate of the load that follows
    the chunk start (the whole tensor where not one). A piece is a run of whole chunks, so a split never needs more
    pieces than this extent has chunks: past them every piece would be empty."""
    shape = program.buffer(load.access.buffer).shape
    defs = {v.id: o for o in op.source.ops for v in o.results}
    start = op.source.args[0].id

    def follows(v: PValue, seen: set[int]) -> bool:
        if v.id == start:
            return True
        made = defs.get(v.id)
        if made is None or v.id in seen:
            return False
        seen.add(v.id)
        return any(follows(x, seen) for x in made.operands())

    axes = [k for k, c in enumerate(load.access.coords) if follows(c, set())]
    return ldim(shape[axes[0]]) if len(axes) == 1 else lprod(tuple(ldim(d) for d in shape))


ARG_KINDS = frozenset({ReduceKind.argmax, ReduceKind.argmin})
# an argmax/argmin partial's position where its piece holds no member: a whole reduction's identity position
NO_POSITION = INT64_MAX


def partial_identity(kind: ReduceKind, identity: tuple) -> tuple:
    """The identity the partials of a region fold of `kind` meet from: (value identity, NO_POSITION) for
    argmax/argmin, whose own -1 would win the ties a position of the subregion must win."""
    return (identity[0], NO_POSITION) if kind in ARG_KINDS else identity


def positioned(o: Ops, kind: ReduceKind, partial: tuple[PValue, ...], start: PValue, begin: PValue
               ) -> tuple[PValue, ...]:
    """The partial of a region fold of `kind` over a range from `start` of the subregion from `begin`, as the
    partials meet: an argmax/argmin position counted from `begin` (the range's own plus start - begin),
    NO_POSITION where the range holds no member (its fold gave -1); the partials of other kinds as they are."""
    if kind not in ARG_KINDS:
        return partial
    value, index = partial
    dt = index.type.dtype
    if start.type.dtype is not begin.type.dtype:  # a piece's i64 start and i32 offsets: both as the position's
        start, begin = o.cast(start, dt), o.cast(begin, dt)
    moved = o.bin(BinaryFn.add, index, o.cast(o.bin(BinaryFn.sub, start, begin), dt))
    none = o.cmp(CmpFn.lt, index, o.const(0, dt))
    return value, o.select(none, o.const(NO_POSITION, dt), moved, "position")


def settle(w: Builder, kind: ReduceKind, total: PValue, result: PValue, origin: Origin | None) -> None:
    """`result`, an argmax/argmin fold's position, from the combined partials' `total`: -1 where no piece held a
    member (NO_POSITION), the position otherwise."""
    o = Ops(w, origin)
    none = o.cmp(CmpFn.eq, total, o.const(NO_POSITION, total.type.dtype))
    w.put(P.Select(results=(result,), origin=origin, cond=none, on_true=o.const(EMPTY_ARG_INDEX, total.type.dtype),
                   on_false=total))


def partial_slot_dtype(acc: DType) -> DType:
    """What a slot array holds for a partial of accumulator dtype `acc`: the accumulator itself (a workspace
    access converts to and from its storage), a pred as a byte (no slot holds a pred)."""
    return DType.i8 if acc.is_pred else acc


def slot_value(o: Ops, value: PValue, slots: Buffer) -> PValue:
    """`value` as slot buffer `slots` holds it (a pred as a byte)."""
    return o.cast(value, slots.dtype) if value.type.dtype is not slots.dtype else value


def fold_slots(w: Builder, p: Partial, bufs: list[Buffer], inst: PValue, sizes: tuple[str, str], reads: PValue,
               lane_ok: PValue | None, name: str = "total") -> tuple[PValue, ...]:
    """Every split's slot of each accumulator of `p` (`sizes`: SPLITS_g and BLOCK_SPLITS_g), read by the lanes
    `reads` and folded in slot order with p's kind and combine: argmax/argmin pairs with their combine (the
    native forms would return positions), pred accumulators read as bytes (folded as preds, `!= 0`, into a byte
    read back as a pred), their members the slots read (the byte fill is no pred identity)."""
    splits, block_s = sizes
    parts, member = [], None
    for buf, ident, dt in zip(bufs, p.identity, p.acc_dtypes):
        fill = int(ident) if dt.is_pred else ident
        got = read_slots(w, buf, inst, splits, block_s, reads, lane_ok, fill, p.origin)
        if dt.is_pred:
            load = w.frames[-1].ops[-1]
            assert isinstance(load, P.Load) and load.results[0].id == got.id
            member = load.access.mask
        parts.append(got)
    folded = tuple(w.fresh(Fragment(x.type.dtype, inst.type.lanes), name) for x in parts)
    kind = ReduceKind.custom if p.kind in ARG_KINDS else p.kind
    w.put(P.Reduce(results=folded, origin=p.origin, inputs=tuple(parts), axes=(0,), kind=kind, identity=p.identity,
                   acc_dtypes=p.acc_dtypes, member=member, combine=w.copy_region(p.combine)))
    o = Ops(w, p.origin)
    return tuple(o.cast(v, dt) for v, dt in zip(folded, p.acc_dtypes))


def lane_test(ops: tuple[POp, ...]) -> tuple[int, PValue] | str:
    """The position of the one `owned_instances` among `ops` and the lane-validity test `flat < instances`
    (a comparison with a launch value), or why the programs of a block could not share its instances."""
    owned = [n for n, op in enumerate(ops) if isinstance(op, P.OwnedInstances)]
    if len(owned) != 1:
        return "it does not decode its instances once"
    flat = ops[owned[0]].results[0]
    lane_ok = next((op.results[0] for op in ops if isinstance(op, P.Compare) and op.fn is CmpFn.lt
                    and op.lhs.id == flat.id and isinstance(producer(ops, op.rhs), P.ShapeValue)), None)
    if lane_ok is None:
        return "it has no lane-validity test"
    return owned[0], lane_ok


def per_instance(values: tuple[PValue, ...]) -> bool:
    """Whether the fold results `values` of a group of several instances vary by instance (have its lanes). A
    fold over values that do not (whole tensors loaded outside the loop, subregion bounds that are loop
    invariant) is the same for every instance: sharing an instance's work among programs gains nothing, and
    its partial has no lanes to publish per instance, so the splits refuse it."""
    return all(v.type.lanes for v in values)


def pointwise_or_store(op: POp) -> bool:
    """Whether `op` may run after the combine, in the last ticket's holder only: a store (its mask then takes
    the last ticket) or work with neither regions nor effects."""
    return isinstance(op, P.Store) or not (op.regions() or op.has_effects())


def split_launch(program: Program, gid: int, count: LaunchExpr, consts: dict[str, LaunchExpr],
                 length: Callable[[Segment], LaunchExpr] = lambda seg: as_launch(seg.length)
                 ) -> tuple[Program, str, str, tuple[Segment, ...], LaunchExpr]:
    """`program` with the constexprs `consts` plus SPLITS_g = `count`, BLOCK_SPLITS_g (its next power of
    two) and SPLIT_g (`split_flag`) after them, and the segments with group `gid`'s `count` times as long
    (`length`: a segment's length before that); also the two names, the segments and the grid, which the
    caller sets with its groups."""
    splits, block_s, flag = f"SPLITS_{gid}", f"BLOCK_SPLITS_{gid}", split_flag(gid)
    # SPLIT_g: 1 where several programs share a block (SPLITS_g > 1), 0 where each runs its own alone
    consts = {**consts, splits: count, block_s: LNextPow2(count), flag: lmin(LBin("-", count, LConst(1)), LConst(1))}
    order = [n for n, _ in program.constexprs] + [splits, block_s, flag]
    lengths = [lmul(length(seg), count) if seg.group == gid else length(seg) for seg in program.segments]
    segments = tuple(dataclasses.replace(seg, length=n, offset=lsum(tuple(lengths[:k])))
                     for k, (seg, n) in enumerate(zip(program.segments, lengths)))
    program = dataclasses.replace(program, constexprs=tuple((n, consts[n]) for n in order))
    return program, splits, block_s, segments, lsum(tuple(lengths))


@dataclasses.dataclass(frozen=True)
class Partial:
    """One fold shared by the programs of a block: `values` is a program's partial (accumulator dtypes),
    `results` what combining every program's partial gives (the fold's own values, read by later work)."""

    values: tuple[PValue, ...]
    results: tuple[PValue, ...]
    kind: ReduceKind
    identity: tuple
    acc_dtypes: tuple[DType, ...]
    combine: PRegion
    origin: Origin | None
    # argmax/argmin partials of pieces of a subregion (`positioned`): the results take -1 where no piece held a
    # member (`settle`)
    pieces: bool = False


def region_partial(fold: P.RegionFold, values: tuple[PValue, ...], results: tuple[PValue, ...] | None = None
                   ) -> Partial:
    """The partial `values` of region fold `fold` over a piece of its subregion (`positioned`), which combining
    every piece's gives the fold's `results` (its own by default)."""
    return Partial(values, fold.results if results is None else results, fold.kind,
                   partial_identity(fold.kind, fold.identity), fold.acc_dtypes, fold.combine, fold.origin,
                   fold.kind in ARG_KINDS)


def add_partial_slots(program: Program, gid: int, folds: list[tuple[DType, ...]], splits: str,
                      name: Callable[[int, int], str]) -> tuple[Program, list[list[Buffer]], Buffer]:
    """A slot array per accumulator `k` of each fold `j` (named `name(j, k)`, one copy per split; a pred
    accumulator's holds bytes) and the instances' ticket counter."""
    slots: list[list[Buffer]] = []
    for j, dtypes in enumerate(folds):
        bufs = []
        for k, dt in enumerate(dtypes):
            program, buf = add_slot_array(program, gid, name(j, k), partial_slot_dtype(dt), splits)
            bufs.append(buf)
        slots.append(bufs)
    program, counter = add_ticket_counter(program, gid, "arrivals")
    return program, slots, counter


def split_flag(gid: int) -> str:
    """The constexpr that is 1 where the programs of a block of group `gid` share it (SPLITS_g > 1)."""
    return f"SPLIT_{gid}"


def flag_set(w: Builder, flag: str, origin: Origin | None, zero: PValue | None = None) -> PValue:
    """Whether the launch sets the constexpr `flag`: the condition of the `if` that selects a body form by it
    (`zero`: an index 0 already at hand)."""
    on = w.add(P.ShapeValue, INDEX, origin, "split", expr=LConstexpr(flag))
    if zero is None:
        zero = w.add(P.Const, INDEX, origin, value=0, dtype=DType.i64)
    return w.add(P.Compare, Fragment(DType.pred), origin, fn=CmpFn.ne, lhs=on, rhs=zero)


def fold_piece(w: Builder, fold: P.RegionFold, s: PValue, splits: str) -> tuple[PValue, ...]:
    """`fold` over piece `s` of S = `splits` of its subregion (`piece`, a copy of its regions), its partial in
    the accumulator dtypes, `positioned`."""
    o = Ops(w, fold.origin)
    values = tuple(w.fresh(Fragment(dt, v.type.lanes), "partial") for v, dt in zip(fold.results, fold.acc_dtypes))
    begin, end = piece(o, fold.begin, fold.end, s, splits, fold.block)
    fold_over(w, fold, begin, end, values)
    return positioned(o, fold.kind, values, begin, fold.begin)


def fold_over(w: Builder, fold: P.RegionFold, begin: PValue, end: PValue, results: tuple[PValue, ...]) -> None:
    """`fold` over [begin, end) instead of its own subregion (a copy of its regions), giving `results`."""
    swap = {fold.begin.id: begin, fold.end.id: end}
    cut = map_operands(fold, lambda v: swap.get(v.id, v))
    w.put(dataclasses.replace(cut, results=results, source=w.copy_region(cut.source),
                              combine=w.copy_region(cut.combine)))


def combine_in_last(w: Builder, partials: list[Partial], slots: list[list[Buffer]], counter: Buffer,
                    split: PValue, inst: PValue, lane_ok: PValue | None, sizes: tuple[str, str],
                    origin: Origin | None, gid: int) -> PValue:
    """Publish this program's partials, draw the instance's ticket and, in the holder of the last one, fold
    the slots of every split into each fold's results and reset the counter (`sizes`: SPLITS_g and
    BLOCK_SPLITS_g). Gives the mask of the program that stores the results.

    The launch selects this form by the constexpr SPLIT_g (an `if` on it: the kernel holds one branch): where
    SPLITS_g is 1 a program's partials are the results, the storing program is every valid lane's, and the
    workspace is not touched."""
    lanes = inst.type.lanes
    o = Ops(w, origin)
    w.begin()
    for p, bufs in zip(partials, slots):
        for buf, v in zip(bufs, p.values):
            write_slot(w, buf, split, inst, slot_value(o, v, buf), lane_ok, p.origin)
    last = last_ticket(w, draw_ticket(w, counter, inst, lane_ok, origin), sizes[0], lane_ok, origin)
    shared: list[PValue] = []
    for p, bufs in zip(partials, slots):
        shared += fold_slots(w, p, bufs, inst, sizes, last, lane_ok)
    reset_counter(w, counter, inst, last, lane_ok, origin)
    then = w.finish((last, *shared))
    w.begin()
    alone = lane_ok if lane_ok is not None else w.add(P.Const, Fragment(DType.pred), origin, value=True,
                                                     dtype=DType.pred)
    otherwise = w.finish((alone, *(v for p in partials for v in p.values)))
    # the results: each fold's own values where the accumulator is their type, else converted after the branch
    # (and pieces' positions settled after it)
    outs = [w.fresh(last.type, "stores")]
    for p in partials:
        outs += [v if v.type == Fragment(dt, lanes) and not (p.pieces and k == 1) else
                 w.fresh(Fragment(dt, lanes), "total") for k, (v, dt) in enumerate(zip(p.results, p.acc_dtypes))]
    cond = flag_set(w, split_flag(gid), origin)
    w.put(P.If(results=tuple(outs), origin=origin, cond=cond, then_=then, else_=otherwise, flag=split_flag(gid)))
    totals = iter(outs[1:])
    for p in partials:
        for k, v in enumerate(p.results):
            total = next(totals)
            if p.pieces and k == 1:
                settle(w, p.kind, total, v, p.origin)
            elif v.id != total.id:  # back to the fold's result dtype, as its own fold converts its accumulator
                w.put(P.Cast(results=(v,), origin=p.origin, x=total, dtype=v.type.dtype))
    return outs[0]


def put_storing_in(w: Builder, after: list[POp], last: PValue) -> None:
    """The work after a combine, its stores made only where `last` holds (in the program that holds the results)."""
    for op in after:
        if isinstance(op, P.Store):
            mask = conjoin(w, op.access.mask, last, op.origin)
            op = dataclasses.replace(op, access=dataclasses.replace(op.access, mask=mask))
        w.put(op)


def finish_in_last(w: Builder, after: list[POp], last: PValue) -> None:
    """The work after the combine (its stores only in the program that holds the results: `last`) and the
    body's end."""
    put_storing_in(w, [op for op in after if not isinstance(op, P.Yield)], last)
    w.put(P.Yield(values=()))


def instance_coordinate(w: Builder, ops: tuple[POp, ...], owned: int | None, origin: Origin | None) -> PValue:
    """The flattened instance of each lane (`owned_instances` at `owned`), or 0 for a single-instance group."""
    if owned is not None:
        return ops[owned].results[0]
    return w.add(P.Const, Fragment(DType.i64), origin, value=0, dtype=DType.i64)


__all__ = ["Ops", "piece", "subregion_extent",
           "lane_test", "per_instance", "pointwise_or_store", "split_launch", "split_flag", "Partial",
           "add_partial_slots", "flag_set", "fold_over", "combine_in_last", "put_storing_in", "finish_in_last",
           "instance_coordinate"]


__all__ = ["Ops", "piece", "ARG_KINDS", "NO_POSITION", "partial_identity", "positioned", "settle",
           "partial_slot_dtype", "slot_value", "fold_slots", "region_partial", "fold_piece", "lane_test",
           "per_instance", "pointwise_or_store", "split_launch", "split_flag", "Partial", "add_partial_slots",
           "flag_set", "fold_over", "combine_in_last", "put_storing_in", "finish_in_last", "instance_coordinate"]
