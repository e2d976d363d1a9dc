"""Balanced segments: a region fold over few (or skewed) subregions splits each one over the programs of the launch.

A program folds its lanes' subregions to the longest one, so one huge segment (half of the values in one
`offsets[s]:offsets[s + 1]`) keeps one program busy while the rest of the device idles. A group whose body folds
data-dependent subregions per instance (`P.RegionFold`s at its top: segment sums, maxima, CSR rows times a
vector, custom combines, argmax/argmin, any/all; none reading another's result) and whose results are only stored
(possibly through pointwise ops) gets S = `SPLITS_g` programs per
block of instances (the invocation-workspace protocol of physical/workspace.py, shared with
split_reduce.py):

* program s of a block folds piece s of each lane's subregion [b, e): [b + lo, b + hi) with
  lo = min(s * per, e - b), hi = min(lo + per, e - b) and per = cdiv(e - b, S * CHUNK) * CHUNK, whole chunks,
  so the pieces of a long segment are equal to within a chunk, whatever the other segments hold, and a short
  segment has few nonempty pieces (the others fold nothing);
* it writes its partials into its own slot of the instance (a slot array per accumulator, one copy per split),
  draws the instance's ticket (acquire-release, after its slot write); the program drawing ticket S - 1 reads the S
  slots in slot order and folds them with each fold's own combine, so the same partials meet in the same
  order on every run (bitwise reproducible; no float atomics), stores the result and sets the counter back
  to zero (no launch fills the workspace);
* an argmax/argmin piece's partial is its (value, position) pair, the position counted from the subregion's
  begin (the piece's offset added) and NO_POSITION where the piece holds no member, so that the pairs meet in
  slot order with the fold's own tie rule (the first position among equal values, NaN the extreme) and an empty
  subregion still gives -1; an any/all partial is a pred, held in its slot as a byte (physical/passes/partials.py).

S is decided at launch from the shapes: `max(1, min(2 * resident_programs // blocks, values // (blocks * CHUNK
* 2)))` where `values` is the size of the folded tensor: about two programs per resident slot of the device
(the pieces of a long segment spread over it), and at least two chunks of the average block's values per
split. Under Triton's interpreter (one program at a time) S is 1: every program finishes its own instances,
and where S is 1 the constexpr SPLIT_g = 0 leaves the kernel only that direct form (its folds stored as they
are, no workspace traffic).

S follows the shapes, not the data: with blocks enough to fill the device it is 1, however skewed the subregions,
and with few blocks it cuts every subregion alike. Where every fold's bounds are `offsets[i]`, `offsets[i + 1]`
(or `offsets[flat // D]` over a (segments, columns) workset) of one integer tensor, the pass writes the group
with helper programs past its blocks instead (physical/passes/balance_segments.py): the data decides at launch,
S = 1 and helpers that fill the device take equal chunks of the folded tensor, joining the subregion a binary
search over the offsets gives each (S from the shapes only where the tensor gives fewer helpers a chunk than the
shapes would cut a block into pieces).
"""

from __future__ import annotations

import dataclasses

from .. import ops as P
from ..builder import Builder
from ..launch_expr import (
    LaunchExpr,
    LBin,
    LConst,
    LNextPow2,
    LResidentPrograms,
    as_launch,
    lcdiv,
    ldim,
    lmax,
    lmin,
    lmul,
    lprod,
)
from ..model import Fragment, Group, POp, Program, PValue, effect_free
from ..rewrite import map_operands, used_values
from ..workspace import INDEX
from . import GroupPass
from . import partials as shared
from .balance_segments import balanced_split, bounds_source

MIN_CHUNKS_PER_SPLIT = 2  # a split folds at least this many chunks of the average block's values
PROGRAMS_PER_SLOT = 2     # programs per resident program slot: the pieces of one long segment spread wide


@dataclasses.dataclass(frozen=True)
class SegmentPlan:
    group: Group
    folds: tuple[int, ...]  # positions of the region folds in the group's body
    after: frozenset[int]  # positions before the last fold of the work that moves after the combine
    owned: int | None  # position of owned_instances (None: a single-instance group)
    lane_ok: PValue | None  # the lane-validity test
    values: LaunchExpr  # elements of the folded tensors (the largest)
    longest: LaunchExpr | None = None  # the most elements one lane's subregion can hold (None: `values`)


def _read_buffers(ops: tuple[POp, ...]) -> set[int]:
    return {o.access.buffer for op in ops for o in (op, *(i for r in op.regions() for i in r.walk()))
            if isinstance(o, P.Load)}




def folded_values(program: Program, fold: P.RegionFold) -> LaunchExpr | str:
    """The elements of the tensor a region fold reads (what its pieces share out), or why the fold cannot be
    split: its bounds differ in type, it reads no tensor. Every kind splits: argmax/argmin pieces combine their
    (value, position) pairs, any/all their pred partials held as bytes (physical/passes/partials.py)."""
    if fold.begin.type.dtype != fold.end.type.dtype or fold.begin.type.tile or fold.end.type.tile:
        return "its subregion bounds differ in type"
    source = next((op for op in fold.source.ops if isinstance(op, P.Load)), None)
    if source is None:
        return "its fold reads no tensor"
    return lprod(tuple(ldim(d) for d in program.buffer(source.access.buffer).shape))

def plan_segments(program: Program, g: Group) -> SegmentPlan | str:
    """The plan for group `g`, or why each program keeps its instances' whole subregions."""
    if P.looped_rows(g.body) is not None or g.ownership.tiled or P.block_loop(g.body.ops) is not None or g.serial:
        return "it holds rows, owns tiles, loops over blocks or runs in order"
    ops = g.body.ops
    folds = tuple(n for n, op in enumerate(ops) if isinstance(op, P.RegionFold))
    if not folds:
        return "it folds no data-dependent subregion"
    if sum(isinstance(op, P.RegionFold) for op in g.body.walk()) != len(folds):
        return "a fold runs inside another op (a fold's map, a loop or a branch)"
    last = folds[-1]
    results = {v.id for n in folds for v in ops[n].results}
    values: list[LaunchExpr] = []
    for n in folds:
        fold = ops[n]
        assert isinstance(fold, P.RegionFold)
        folded = folded_values(program, fold)
        if isinstance(folded, str):
            return folded
        values.append(folded)
    # the work that needs a fold's result (and every store) waits for the last split: it moves after the folds
    after: set[int] = set()
    derived = set(results)
    for n, op in enumerate(ops[:last]):
        if isinstance(op, P.RegionFold):
            continue
        if isinstance(op, P.Store) or used_values((op,)) & derived:
            if not shared.pointwise_or_store(op):
                return "a fold's result feeds more than pointwise work and stores before its last fold"
            after.add(n)
            derived |= {v.id for v in op.results}
        elif not effect_free((op,)):
            return "it has effects before its folds complete"
    if used_values(tuple(ops[n] for n in folds)) & derived:
        return "a fold reads another fold's result"
    written = {ops[n].access.buffer for n in after if isinstance(ops[n], P.Store)}
    if written & _read_buffers(tuple(op for n, op in enumerate(ops[:last + 1]) if n not in after)):
        return "a fold or the work before it reads what a store before the last fold writes"
    if not all(shared.pointwise_or_store(op) for op in ops[last + 1:]):
        return "its folds' results feed more than pointwise work and stores"
    size = lmax(*values) if len(values) > 1 else values[0]
    extents = [_extent(program, ops[n]) for n in folds]  # type: ignore[arg-type]
    longest = lmax(*extents) if len(extents) > 1 else extents[0]
    if g.single_instance:
        return SegmentPlan(g, folds, frozenset(after), None, None, size, longest)
    if not all(shared.per_instance(ops[n].results) for n in folds):
        return "a fold is the same for every instance"
    found = shared.lane_test(ops)
    if isinstance(found, str):
        return found
    owned, lane_ok = found
    return SegmentPlan(g, folds, frozenset(after), owned, lane_ok, size, longest)


def _extent(program: Program, fold: P.RegionFold) -> LaunchExpr:
    """The most elements one lane's subregion of `fold` can hold (`partials.subregion_extent`)."""
    source = next(op for op in fold.source.ops if isinstance(op, P.Load))
    return shared.subregion_extent(program, fold, source)


class SplitSegments(GroupPass):
    """Split the subregions of region folds over several programs when the device would otherwise idle."""

    name = "split-segments"

    def plan_group(self, program: Program, group: Group) -> SegmentPlan | str:
        return plan_segments(program, group)

    def apply(self, program: Program, plan: SegmentPlan) -> Program:  # type: ignore[override]
        bounds = bounds_source(program, plan)  # offsets of one tensor: helpers balance by the data
        return _split(program, plan) if bounds is None else balanced_split(program, plan, bounds)



def split_count(program: Program, g: Group, values: LaunchExpr, chunk: str,
                longest: LaunchExpr | None = None) -> LaunchExpr:
    """S: about PROGRAMS_PER_SLOT programs per resident program slot, at least MIN_CHUNKS_PER_SPLIT chunks of
    the average block's values per split; 1 under the interpreter (one resident program). A piece is a run of
    whole chunks, so S never exceeds the chunks of the longest subregion a lane may fold (`longest` elements: the
    extent of the source's subregion axis, not the columns beside it, which other lanes fold): past them every
    piece would be empty.

    The work bound counts the average block's values, not its steps (a step folds a chunk in each of the block's
    lanes): the lanes of a block may hold subregions of any lengths, and where one lane holds the block's values
    its pieces need that many splits; the extent of the subregion axis is what bounds every lane."""
    consts = dict(program.constexprs)
    instances = lprod(tuple(ldim(d) for d in g.domain)) if g.domain else LConst(1)
    blocks = LNextPow2(lcdiv(instances, consts[g.block]))
    resident = LResidentPrograms(as_launch(program.num_warps))
    # PROGRAMS_PER_SLOT on a device, 1 under the interpreter (resident = 1)
    factor = LBin("+", lmin(LBin("-", resident, LConst(1)), LConst(PROGRAMS_PER_SLOT - 1)), LConst(1))
    by_device = LBin("//", lmul(resident, factor), blocks)
    by_work = LBin("//", values, lmul(blocks, lmul(consts[chunk], LConst(MIN_CHUNKS_PER_SPLIT))))
    count = lmax(LConst(1), lmin(by_device, by_work))
    if longest is None:
        return count
    return lmin(count, lmax(LConst(1), lcdiv(longest, consts[chunk])))


def _split(program: Program, plan: SegmentPlan) -> Program:
    g = plan.group
    gid = g.id
    ops = g.body.ops
    folds = [ops[n] for n in plan.folds]
    assert all(isinstance(f, P.RegionFold) for f in folds)
    count = split_count(program, g, plan.values, folds[0].block, plan.longest)  # type: ignore[attr-defined]
    program, splits, block_s, segments, grid = shared.split_launch(program, gid, count,
                                                                   dict(program.constexprs))

    # ---- workspace: one slot array per accumulator of each fold, one ticket counter per instance
    dtypes = [fold.acc_dtypes for fold in folds]  # type: ignore[attr-defined]
    program, slots, counter = shared.add_partial_slots(
        program, gid, dtypes, splits,
        lambda j, k: "partial" + (f"{j}" if len(folds) > 1 else "") + (f"_{k}" if len(dtypes[j]) > 1 else ""))

    # ---- the body: each fold folds this split's piece of its subregions
    w = Builder.after(program)
    origin = folds[-1].origin
    s = w.add(P.SplitIndex, INDEX, origin, "split", group=gid, splits=splits)
    partials: list[tuple[PValue, ...]] = []
    for n, op in enumerate(ops[:plan.folds[-1] + 1]):
        if n in plan.after:
            continue
        if n == plan.owned:
            assert isinstance(op, P.OwnedInstances)
            op = dataclasses.replace(op, splits=splits)
        if isinstance(op, P.RegionFold):
            o = shared.Ops(w, op.origin)
            begin, end = shared.piece(o, op.begin, op.end, s, splits, op.block)
            swap = {op.begin.id: begin, op.end.id: end}
            piece = map_operands(op, lambda v, swap=swap: swap.get(v.id, v))
            # the partial, in the accumulator dtypes under new names (the slots' fold gives the fold's own values)
            partial = tuple(w.fresh(Fragment(dt, v.type.lanes), "partial")
                            for v, dt in zip(op.results, op.acc_dtypes))
            w.put(dataclasses.replace(piece, results=partial))
            partials.append(shared.positioned(o, op.kind, partial, begin, op.begin))
            continue
        w.put(op)
    inst = shared.instance_coordinate(w, ops, plan.owned, origin)
    combined = [shared.region_partial(fold, partial) for fold, partial in zip(folds, partials)]  # type: ignore
    last = shared.combine_in_last(w, combined, slots, counter, s, inst, plan.lane_ok, (splits, block_s), origin,
                                  gid)
    after = [ops[n] for n in sorted(plan.after)] + list(ops[plan.folds[-1] + 1:])
    shared.finish_in_last(w, after, last)
    group = dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(w.ops)))
    return dataclasses.replace(program, groups=tuple(group if x.id == gid else x for x in program.groups),
                               segments=segments, grid=grid)

