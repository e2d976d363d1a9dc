"""Region folds beside region scans: a group that scans and folds subregions per instance splits as one.

A segment's running sum and its total written in one `parallel` body (`out[b:e] = intent.cumsum(values[b:e])`
and `total[s] = intent.sum(values[b:e])`) is one group holding a `P.RegionScan` and a `P.RegionFold`. The scans
split over the pieces of split-region-scans (physical/passes/split_region_scan.py: ticket t runs piece t % S of
the instances of block t // S, passing piece aggregates on by look-back); the folds ride on the same pieces with
split-segments' combine (physical/passes/partials.py, the invocation-workspace protocol of physical/workspace.py;
where the data balances the scans, the folds ride on the helpers' ranges: physical/passes/balance_scan_folds.py):

* piece s of a fold's subregion [b, e) is split-segments' cut (`partials.piece`: the s-th run of whole
  chunks, the pieces of a long segment equal to within a chunk, the later pieces of a short one empty), folded
  whole by the program of piece s;
* the program writes that partial into its slot of the instance (one copy per split), draws the instance's
  acquire-release ticket after it, and the holder of ticket S - 1 reads the S slots in slot order, folds them with
  the fold's own kind and combine (the same partials meet in the same order on every run: bitwise reproducible,
  no float atomics), runs the work that needs the results with its stores under that ticket and resets the
  counter (no launch fills the workspace); nobody waits for anybody, so the look-back's waits are unchanged;
* where the launch gives one piece an instance (SPLITS_g = 1, the constexpr SPLIT_g = 0: Triton's interpreter, or
  blocks enough to fill the device) the kernel holds the direct form only: each fold whole, stored at once;
* a fold that is a scan's total (`matching_scan`: the same built-in kind, accumulators and identity, its bounds and
  source the same computation as the scan's) takes the scan's piece aggregate as its partial where the pieces are
  several, so the subregion is read once, by the scan; in the direct form it folds its subregion itself (a piece
  of one program publishes no complete aggregate: its scan carries the rest's total without folding it).

The fold partials sit between the program's publish and its wait for the predecessors' aggregates: the fold's
reads overlap the look-back. Legality (`plan_folds`): the folds give values per instance (argmax/argmin pieces
meet as (value, position) pairs, any/all pieces as bytes: physical/passes/partials.py), nothing but pointwise work
and stores reads their results (a scan is
written piece by piece before any fold is complete, so no scan may read one), every store moves after the combine,
and no fold, scan or other work reads what such a store writes.
"""

from __future__ import annotations

import dataclasses

from kir.dtypes import DType
from kir.reduce import ReduceKind, identical_literal
from kir.scan import ScanKind

from .. import ops as P
from ..builder import Builder
from ..launch_expr import LaunchExpr, LNextPow2
from ..model import Buffer, Fragment, Origin, POp, PRegion, Program, PValue
from ..rewrite import used_values
from . import partials as shared
from .split_segments import folded_values


@dataclasses.dataclass(frozen=True)
class FoldsPlan:
    """The region folds of a region-scan group: their positions, the work that waits for their combine (pointwise
    work on their results and every store, positions in the body) and the elements of their folded tensors."""

    folds: tuple[int, ...]
    after: tuple[int, ...]
    values: tuple[LaunchExpr, ...]
    totals: tuple[int | None, ...] = ()  # per fold, the position of the scan whose total it is (None: its own)

    @property
    def moved(self) -> frozenset[int]:
        """Positions the folds' protocol writes itself (the rest of the body stays where split-region-scans puts
        it)."""
        return frozenset(self.folds) | frozenset(self.after)


@dataclasses.dataclass(frozen=True)
class FoldsWorkspace:
    """The folds' slot arrays (per fold, one per accumulator, a copy per split) and the instances' ticket counter."""

    slots: list[list[Buffer]]
    counter: Buffer
    block_splits: str


def _loads(ops: tuple[POp, ...]) -> set[int]:
    return {o.access.buffer for op in ops for o in (op, *(i for r in op.regions() for i in r.walk()))
            if isinstance(o, P.Load)}


def plan_folds(program: Program, ops: tuple[POp, ...], single: bool) -> FoldsPlan | str | None:
    """The plan for the region folds among a region-scan group's top-level `ops` (None: it has none), or why the
    group keeps its instances' whole subregions (`single`: a group of one instance)."""
    folds = tuple(n for n, op in enumerate(ops) if isinstance(op, P.RegionFold))
    if not folds:
        return None
    values: list[LaunchExpr] = []
    for n in folds:
        fold = ops[n]
        assert isinstance(fold, P.RegionFold)
        folded = folded_values(program, fold)
        if isinstance(folded, str):
            return folded
        if not single and not shared.per_instance(fold.results):
            return "a fold is the same for every instance"
        values.append(folded)
    derived = {v.id for n in folds for v in ops[n].results}
    after: list[int] = []
    for n, op in enumerate(ops):
        if isinstance(op, P.RegionFold | P.RegionScan) or op.TERMINATOR:
            continue
        if isinstance(op, P.Store) or used_values((op,)) & derived:
            if not shared.pointwise_or_store(op):
                return "a fold's result feeds more than pointwise work and stores"
            after.append(n)
            derived |= {v.id for v in op.results}
        elif op.has_effects():
            return f"it has effects besides its region scans, folds and stores ({op.NAME})"
    if used_values(tuple(ops[n] for n in folds)) & derived:
        return "a fold reads another fold's result"
    scans = tuple(op for op in ops if isinstance(op, P.RegionScan))
    if used_values(scans) & derived:
        return "a scan reads a fold's result (a piece writes its scan before the fold is complete)"
    written = {ops[n].access.buffer for n in after if isinstance(ops[n], P.Store)}
    if written & _loads(tuple(op for n, op in enumerate(ops) if n not in after)):
        return "a fold, a scan or the work before them reads what a store of the group writes"
    scan_at = [n for n, op in enumerate(ops) if isinstance(op, P.RegionScan)]
    totals = tuple(matching_scan(ops, ops[n], scan_at) for n in folds)  # type: ignore[arg-type]
    return FoldsPlan(folds, tuple(after), tuple(values), totals)


def matching_scan(ops: tuple[POp, ...], fold: P.RegionFold, scans: list[int]) -> int | None:
    """The position of a region scan among `ops` whose total `fold` is: the same built-in kind, accumulators and
    identity, bounds computed alike and a source yielding the same elements (a reverse scan's source walks from
    the end: never the same)."""
    if fold.kind not in (ReduceKind.sum, ReduceKind.prod, ReduceKind.max, ReduceKind.min):
        return None
    key = _Keys(ops)
    for n in scans:
        scan = ops[n]
        assert isinstance(scan, P.RegionScan)
        if scan.kind is ScanKind.custom or scan.kind.as_reduce is not fold.kind or scan.reverse:
            continue
        if scan.acc_dtypes != fold.acc_dtypes or len(scan.identity) != len(fold.identity) \
                or not all(identical_literal(a, b) for a, b in zip(scan.identity, fold.identity)):
            continue  # compared as emitted: a 0.0 scan identity is not a -0.0 fold's
        if key.value(scan.begin) == key.value(fold.begin) and key.value(scan.end) == key.value(fold.end) \
                and key.region(scan.source) == key.region(fold.source):
            return n
    return None


class _Keys:
    """Structural keys of values: two values with equal keys are computed alike (the same ops over the same
    buffers, constants and region arguments in the same positions); values of the ops outside `ops` are
    themselves."""

    def __init__(self, ops: tuple[POp, ...]) -> None:
        self.defs: dict[int, POp] = {}
        for op in ops:
            for inner in (op, *(i for r in op.regions() for i in r.walk())):
                for v in inner.results:
                    self.defs[v.id] = inner
        self.args: dict[int, tuple] = {}
        self.memo: dict[int, object] = {}
        self.depth = 0

    def value(self, v: PValue) -> object:
        if v.id in self.args:
            return self.args[v.id]
        if v.id not in self.memo:
            op = self.defs.get(v.id)
            self.memo[v.id] = ("outer", v.id) if op is None else (
                type(op).__name__, [r.id for r in op.results].index(v.id), v.type,
                tuple(self.field(getattr(op, f.name)) for f in op.fields()))
        return self.memo[v.id]

    def region(self, r: PRegion) -> object:
        for k, a in enumerate(r.args):  # by nesting depth and position: regions of two ops compare alike
            self.args[a.id] = ("arg", self.depth, k, a.type)
        self.depth += 1
        try:
            return tuple(self.value(v) for v in r.yielded)
        finally:
            self.depth -= 1

    def field(self, x: object) -> object:
        if isinstance(x, PValue):
            return self.value(x)
        if isinstance(x, PRegion):
            return self.region(x)
        if isinstance(x, tuple):
            return tuple(self.field(y) for y in x)
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return (type(x).__name__, tuple(self.field(getattr(x, f.name)) for f in dataclasses.fields(x)))
        return x


def add_workspace(program: Program, gid: int, ops: tuple[POp, ...], plan: FoldsPlan, splits: str,
                  count: LaunchExpr) -> tuple[Program, FoldsWorkspace]:
    """`program` with BLOCK_SPLITS_g (the next power of two of S = `count`, the slots a combine reads at once), a
    slot array per accumulator of each fold and the instances' ticket counter."""
    block_s = f"BLOCK_SPLITS_{gid}"
    program = dataclasses.replace(program, constexprs=program.constexprs + ((block_s, LNextPow2(count)),))
    dtypes = [ops[n].acc_dtypes for n in plan.folds]  # type: ignore[attr-defined]
    program, slots, counter = shared.add_partial_slots(
        program, gid, dtypes, splits,
        lambda j, k: "fold" + (f"{j}" if len(dtypes) > 1 else "") + (f"_{k}" if len(dtypes[j]) > 1 else ""))
    return program, FoldsWorkspace(slots, counter, block_s)


def split_folds(w: Builder, ops: tuple[POp, ...], plan: FoldsPlan, ws: FoldsWorkspace, piece: PValue,
                splits: str, inst: PValue, lane_ok: PValue | None, gid: int,
                aggregates: dict[int, tuple[PValue, ...]]) -> None:
    """Fold this program's piece of each fold's subregion (piece `piece` of S = `splits`), combine the pieces in
    the last ticket's holder (`partials.combine_in_last`) and write the work that waits for the results, its
    stores under that ticket (`inst`: the lanes' instances; `lane_ok`: the lanes within them; `aggregates`: the
    piece aggregate of the scan at each position, which a fold that is its total takes as its partial)."""
    folds = [ops[n] for n in plan.folds]
    partials: list[shared.Partial] = []
    for fold, total in zip(folds, plan.totals or (None,) * len(folds)):
        assert isinstance(fold, P.RegionFold)
        if total is None:
            values = shared.fold_piece(w, fold, piece, splits)
        else:  # several pieces: the scan's piece aggregate; one: the fold itself (the scan totals no rest then)
            values = tuple(w.fresh(Fragment(dt, v.type.lanes), "partial")
                           for v, dt in zip(fold.results, fold.acc_dtypes))
            w.begin()
            then = w.finish(tuple(aggregates[total]))
            w.begin()
            alone = w.finish(shared.fold_piece(w, fold, piece, splits))
            flag = shared.split_flag(gid)
            cond = shared.flag_set(w, flag, fold.origin)
            w.put(P.If(results=values, origin=fold.origin, cond=cond, then_=then, else_=alone, flag=flag))
        partials.append(shared.region_partial(fold, values))
    origin: Origin | None = folds[-1].origin
    last = shared.combine_in_last(w, partials, ws.slots, ws.counter, piece, inst, lane_ok, (splits, ws.block_splits),
                                  origin, gid)
    shared.put_storing_in(w, [ops[n] for n in plan.after], last)


def instance(w: Builder, flat: PValue | None, origin: Origin | None) -> PValue:
    """The lanes' flattened instances (`flat`), or 0 for a single-instance group."""
    if flat is not None:
        return flat
    return w.add(P.Const, Fragment(DType.i64), origin, value=0, dtype=DType.i64)


__all__ = ["FoldsPlan", "FoldsWorkspace", "plan_folds", "add_workspace", "split_folds", "instance"]
