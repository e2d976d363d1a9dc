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

It also holds what the splits compute alike: `Ops`, shorthands for the integer arithmetic of their bodies, and
`piece`, the cut of a subregion [b, e) into S runs of whole chunks that every split of a data-dependent subregion
(split-segments, split-region-scans, scan-folds, balanced segments' heads) folds or scans.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from kir.reduce import ReduceKind

from .. import ops as P
from ..analysis import producer
from ..builder import Builder
from ..launch_expr import LaunchExpr, LBin, LConst, LConstexpr, LNextPow2, as_launch, ldim, lmin, lmul, lprod, lsum
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


def add_partial_slots(program: Program, gid: int, folds: list[tuple[DType, ...]], splits: str,
                      name: Callable[[int, int], str]) -> tuple[Program, list[list[Buffer]], Buffer]:
    """A slot array per accumulator `k` of each fold `j` (named `name(j, k)`, one copy per split) and the
    instances' ticket counter."""
    slots: list[list[Buffer]] = []
    for j, dtypes in enumerate(folds):
        bufs = []
        for k, dt in enumerate(dtypes):
            program, buf = add_slot_array(program, gid, name(j, k), dt, splits)
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
    splits, block_s = sizes
    lanes = inst.type.lanes
    w.begin()
    for p, bufs in zip(partials, slots):
        for buf, v in zip(bufs, p.values):
            write_slot(w, buf, split, inst, v, lane_ok, p.origin)
    last = last_ticket(w, draw_ticket(w, counter, inst, lane_ok, origin), splits, lane_ok, origin)
    shared: list[PValue] = []
    for p, bufs in zip(partials, slots):
        parts = tuple(read_slots(w, buf, inst, splits, block_s, last, lane_ok, ident, p.origin)
                      for buf, ident in zip(bufs, p.identity))
        folded = tuple(w.fresh(Fragment(dt, lanes), "total") for dt in p.acc_dtypes)
        # argmax/argmin fold (value, index) pairs with their combine: the native forms would return positions
        kind = ReduceKind.custom if p.kind in (ReduceKind.argmax, ReduceKind.argmin) else p.kind
        w.put(P.Reduce(results=folded, origin=p.origin, inputs=parts, axes=(0,), kind=kind, identity=p.identity,
                       acc_dtypes=p.acc_dtypes, member=None, combine=w.copy_region(p.combine)))
        shared += folded
    reset_counter(w, counter, inst, last, lane_ok, origin)
    then = w.finish((last, *shared))
    w.begin()
    alone = lane_ok if lane_ok is not None else w.add(P.Const, Fragment(DType.pred), origin, value=True,
                                                     dtype=DType.pred)
    otherwise = w.finish((alone, *(v for p in partials for v in p.values)))
    # the results: each fold's own values where the accumulator is their type, else converted after the branch
    outs = [w.fresh(last.type, "stores")]
    for p in partials:
        outs += [v if v.type == Fragment(dt, lanes) else w.fresh(Fragment(dt, lanes), "total")
                 for v, dt in zip(p.results, p.acc_dtypes)]
    cond = flag_set(w, split_flag(gid), origin)
    w.put(P.If(results=tuple(outs), origin=origin, cond=cond, then_=then, else_=otherwise, flag=split_flag(gid)))
    totals = iter(outs[1:])
    for p in partials:
        for v in p.results:
            total = next(totals)
            if v.id != total.id:  # back to the fold's result dtype, as its own fold converts its accumulator
                w.put(P.Cast(results=(v,), origin=p.origin, x=total, dtype=v.type.dtype))
    return outs[0]


def finish_in_last(w: Builder, after: list[POp], last: PValue) -> None:
    """The work after the combine (its stores only in the program that holds the results: `last`) and the
    body's end."""
    for op in after:
        if isinstance(op, P.Yield):
            continue
        if isinstance(op, P.Store):
            mask = conjoin(w, op.access.mask, last, op.origin)
            op = dataclasses.replace(op, access=dataclasses.replace(op.access, mask=mask))
        w.put(op)
    w.put(P.Yield(values=()))


def instance_coordinate(w: Builder, ops: tuple[POp, ...], owned: int | None, origin: Origin | None) -> PValue:
    """The flattened instance of each lane (`owned_instances` at `owned`), or 0 for a single-instance group."""
    if owned is not None:
        return ops[owned].results[0]
    return w.add(P.Const, Fragment(DType.i64), origin, value=0, dtype=DType.i64)


__all__ = ["Ops", "piece", "subregion_extent",
           "lane_test", "per_instance", "pointwise_or_store", "split_launch", "split_flag", "Partial",
           "add_partial_slots", "flag_set", "fold_over", "combine_in_last", "finish_in_last", "instance_coordinate"]
