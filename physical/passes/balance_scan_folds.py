"""Region folds beside region scans balanced by the data: a segment's total next to its running sum, both spread
over the helpers that balance the scans (physical/passes/balance_region_scan.py).

Where one offsets tensor bounds every region scan and every region fold of a group of instances (`segment_stats`:
`out[b:e] = intent.cumsum(values[b:e])` and `total[s] = intent.sum(values[b:e])`), the folds ride on the ranges
the scans take, and their partials travel with the scans' aggregates, through the same look-back workspace:

* every lane folds the range its program scans for it (`fold_partials`): a block the subregion it keeps whole
  (nothing, where helpers take the subregion), a helper's lane its run of the chunk it joined. A fold that is a
  scan's total (`scan_folds.matching_scan`) takes that scan's aggregate of the range instead (where helpers run:
  the blocks then fold the rest of their held tiles too, so the subregion is read once, by the scan); the partial
  is `partials.positioned`: an argmax/argmin position counted from the subregion's begin, NO_POSITION where the
  range holds no member;
* a helper folds its lanes' partials across the lanes in lane order (its chunk's partial, in position order) and
  publishes it beside its scans' aggregates, in the same slot and under the same flag (`fold<n>_slot<k>`
  buffers of the look-back workspace);
* the subregion's *last* helper (the highest ticket among its helpers: the chunk k1 - 1, or k0 for scans that run
  from the end) folds the fold slots of the subregion's earlier helpers in index order (`P.FoldSlots` over the
  same slots, below its own ticket, as the scans' look-back: it waits only for programs that started) and joins
  its own partial in position order, the fold's own combine (argmax/argmin: the first position wins among equal
  values, NaN is the extreme; `partials.settle` turns a NO_POSITION total into the empty subregion's -1); the order
  depends on the offsets only, so the results are bitwise identical run to run, with no float atomics and no ticket
  counter;
* the work that needs the folds' results (pointwise work and every store of the group, `scan_folds.plan_folds`)
  runs after the look-back, its stores only in the lane that holds a complete result: a block's lane whose
  subregion it kept, or the last helper's joined lane (`final`).

Folds with pred accumulators (any/all: a slot holds them as bytes) and (segments, columns) worksets keep the shapes'
pieces (physical/passes/scan_folds.py).
"""

from __future__ import annotations

import dataclasses

from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from kir.reduce import ReduceKind

from .. import ops as P
from ..model import Buffer, Fragment, Origin, POp, PValue
from . import partials as shared
from .partials import ARG_KINDS, Ops
from .rows import RowBuilder
from .scan_folds import FoldsPlan
from .split_scan import SLOT_BLOCK


def refusal(ops: tuple[POp, ...], plan: FoldsPlan) -> str | None:
    """Why the folds of `plan` keep the shapes' pieces even where the data balances the scans, if they do."""
    for n in plan.folds:
        fold = ops[n]
        assert isinstance(fold, P.RegionFold)
        if any(dt.is_pred for dt in fold.acc_dtypes):
            return "a fold beside the scans has a pred accumulator (any/all)"
    return None


def fold_dtypes(ops: tuple[POp, ...], plan: FoldsPlan) -> list[tuple[DType, ...]]:
    """The accumulator dtypes of each fold's partial (a row of look-back slots each)."""
    return [ops[n].acc_dtypes for n in plan.folds]  # type: ignore[attr-defined]


def wants_rest(plan: FoldsPlan | None, scan_at: int) -> bool:
    """Whether some fold of `plan` is the total of the scan at position `scan_at`: its aggregate must then cover
    the blocks' whole subregions too (their held tile and their rest)."""
    return plan is not None and scan_at in plan.totals


@dataclasses.dataclass(frozen=True)
class FoldPartials:
    """Per fold: each lane's partial of the range its program scans for it, and what a program publishes (a
    helper: its lanes' partials folded across the lanes; a block: the lane's own)."""

    folds: tuple[P.RegionFold, ...]
    published: tuple[tuple[PValue, ...], ...]


def fold_partials(w: RowBuilder, ops: tuple[POp, ...], plan: FoldsPlan, aggregates: dict[int, tuple[PValue, ...]],
                  ranges: tuple[PValue, PValue], begin: PValue, is_helper: PValue, flagged: tuple[PValue, str]
                  ) -> FoldPartials:
    """Each fold's partial over this lane's `ranges` [lo, hi) (i64), positioned from its subregion's `begin`
    (i64); a fold that is a scan's total takes the `aggregates` of that scan (by position) where the constexpr
    flag (`flagged`: its condition and name) selects the helpers' form, its own fold of the range elsewhere."""
    cond, flag = flagged
    folds, published = [], []
    for n, total in zip(plan.folds, plan.totals or (None,) * len(plan.folds)):
        fold = ops[n]
        assert isinstance(fold, P.RegionFold)
        origin = fold.origin
        o = Ops(w, origin)
        lo, hi = (o.cast(v, b.type.dtype) for v, b in zip(ranges, (fold.begin, fold.end)))

        if total is None or total not in aggregates:
            values = _own(w, fold, lo, hi)
        else:  # the scan's aggregate where the helpers' form runs (its rest folded); the fold itself elsewhere
            values = tuple(w.fresh(Fragment(dt, v.type.lanes), "partial")
                           for v, dt in zip(fold.results, fold.acc_dtypes))
            w.begin()
            then = w.finish(tuple(aggregates[total]))
            w.begin()
            alone = w.finish(_own(w, fold, lo, hi))
            w.put(P.If(results=values, origin=origin, cond=cond, then_=then, else_=alone, flag=flag))
        lane = shared.positioned(o, fold.kind, values, lo, o.cast(begin, lo.type.dtype))
        identity = shared.partial_identity(fold.kind, fold.identity)
        kind = ReduceKind.custom if fold.kind in ARG_KINDS else fold.kind
        across = w.emit(P.LaneFold, tuple(Fragment(v.type.dtype) for v in lane), ("chunk_partial",) * len(lane),
                        origin, inputs=tuple(lane), kind=kind, identity=identity, acc_dtypes=fold.acc_dtypes,
                        combine=w.copy_region(fold.combine)).results
        published.append(tuple(o.select(is_helper, w.fit(x, v.type, origin), v, "fold_partial")
                               for x, v in zip(across, lane)))
        folds.append(fold)
    return FoldPartials(tuple(folds), tuple(published))


def _own(w: RowBuilder, fold: P.RegionFold, lo: PValue, hi: PValue) -> tuple[PValue, ...]:
    """`fold` over [lo, hi) (a copy of its regions), in its accumulator dtypes."""
    values = tuple(w.fresh(Fragment(dt, v.type.lanes), "partial") for v, dt in zip(fold.results, fold.acc_dtypes))
    shared.fold_over(w, fold, lo, hi, values)
    return values


def finish_folds(w: RowBuilder, ops: tuple[POp, ...], plan: FoldsPlan, parts: FoldPartials, rows: list[list[Buffer]],
                 sync: int, slots: tuple[PValue, PValue], final_helper: PValue, final: PValue, reverse: bool) -> None:
    """The last helper of each subregion folds its earlier helpers' fold slots (`rows`, under flags of `sync`,
    from `slots` = (first, own) as the scans' look-back) in index order and joins its own partial in position
    order; then the fold results (a block's kept subregion: its own partial) and the work after them, the stores
    only where `final` (the lane holds a complete result)."""
    first, own = slots
    for fold, mine, bufs in zip(parts.folds, parts.published, rows):
        origin: Origin | None = fold.origin
        o = Ops(w, origin)
        identity = shared.partial_identity(fold.kind, fold.identity)
        prefix = tuple(w.fresh(Fragment(dt, own.type.lanes), "earlier_helpers") for dt in fold.acc_dtypes)
        # a scan from the end numbers its helpers from the last chunk down: folding its slots from the highest
        # down keeps the partials in position order (the earlier helpers' chunks follow the last helper's own)
        w.put(P.FoldSlots(results=prefix, origin=origin, sync=sync, slots=tuple(b.id for b in bufs), first=first,
                          upto=own, reverse=reverse, identity=identity, acc_dtypes=fold.acc_dtypes, block=SLOT_BLOCK,
                          combine=w.copy_region(fold.combine), active=final_helper))
        spread = [w.fit(x, v.type, origin) for x, v in zip(prefix, mine)]
        lhs, rhs = (list(mine), spread) if reverse else (spread, list(mine))
        joined = w.combine(fold.combine, lhs, rhs, [v.type for v in mine], origin)
        for k, (result, whole, alone) in enumerate(zip(fold.results, joined, mine)):
            if whole.type == result.type and not (fold.kind in ARG_KINDS and k == 1):
                w.put(P.Select(results=(result,), origin=origin, cond=final_helper, on_true=whole, on_false=alone))
                continue
            total = o.select(final_helper, whole, alone, "total")
            if fold.kind in ARG_KINDS and k == 1:
                shared.settle(w, fold.kind, total, result, origin)
            else:  # back to the fold's result dtype, as its own fold converts its accumulator
                w.put(P.Cast(results=(result,), origin=origin, x=total, dtype=result.type.dtype))
    shared.put_storing_in(w, [ops[n] for n in plan.after], final)


def last_helper(o: Ops, h, mine: PValue, chunks: tuple[PValue, PValue], reverse: bool) -> PValue:
    """Whether this program is the helper of the lane's subregion with the highest ticket (it joined the lane, and
    its chunk is the subregion's last whole chunk, or its first for a scan from the end)."""
    k0, k1 = chunks
    at = k0 if reverse else o.bin(BinaryFn.sub, k1, o.const(1))
    return o.bin(BinaryFn.and_, mine, o.cmp(CmpFn.eq, h.hk, at), "last_helper")


__all__ = ["refusal", "fold_dtypes", "wants_rest", "FoldPartials", "fold_partials", "finish_folds", "last_helper"]
