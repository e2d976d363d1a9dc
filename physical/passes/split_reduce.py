"""Cross-program reductions: a reduction with too few instances to fill the device splits its reduced axis.

A group whose looped body (passes/looped.py) folds one reduction over chunks of its row, and whose
result is only stored (possibly through pointwise ops), gets a second way to run that body: S = `SPLITS_g`
programs share each block of instances. Program s folds the chunks [s * c, min((s + 1) * c, chunks)) of
its rows (c = cdiv(chunks, S)), writes its partial into its own slot of an invocation-workspace slot
array, and draws a ticket from the instance's counter (acquire-release, device scope). The program that
draws ticket S - 1 reads the S slots in slot order and folds them along the slot axis with the
reduction's own kind and combine (argmax/argmin fold their (value, index) pairs with the combine, whose
tie rule keeps the first index): the same S partials meet in the same order on every run whoever
arrives last, so float results are bitwise reproducible, with no float atomics. It stores the result and
resets the counter (physical/workspace.py).

The launch decides: S is `max(1, min(resident programs // blocks, chunks))` over powers of two of the
block count and of the row (so that a kernel is specialised per power of two of its shapes, as its
blocks already are; a program's share may then be empty and give the identity), and the looped body now
runs also when S > 1 (few instances of a row long enough to share); with S = 1
(many instances, or Triton's interpreter, which runs one program at a time) the constexpr SPLIT_g is 0 and
the kernel holds only the direct form: a program stores its own rows' results, with no workspace traffic.
"""

from __future__ import annotations

import dataclasses

from kir.pointwise import BinaryFn

from .. import ops as P
from ..analysis import producer
from ..builder import Builder
from ..launch_expr import (
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
    lprod,
    lselect,
)
from ..model import Group, POp, Program, PValue, effect_free
from ..workspace import (
    INDEX,
    restate_workspaces,
)
from . import GroupPass
from . import partials as shared
from .looped import substitute

MIN_CHUNKS_PER_SPLIT = 1  # each program folds at least one chunk of its row


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    group: Group
    reduce: P.Reduce  # the reduction of the group's body
    define: int  # position in the looped body of the op that gives its accumulators (the chunk loop or a fold after it)
    loop: int  # position of the chunk loop
    owned: int | None  # position of owned_instances (None: a single-instance group)
    lane_ok: PValue | None  # the lane-validity test of the looped body


def plan_split(program: Program, g: Group) -> SplitPlan | str:
    """The plan for group `g`, or why it keeps one program per block."""
    choice = P.looped_rows(g.body)
    if choice is None:
        return "its rows are held whole (no looped body)"
    if g.ownership.tiled or any(P.block_loop(f.ops) is not None for f in P.forms(g.body)) or g.serial:
        return "it owns tiles, loops over blocks or runs in order"
    if choice.loops != 1:
        return "its looped body walks the row more than once"
    reduces = [op for op in choice.whole.ops if isinstance(op, P.Reduce)]
    if len(reduces) != 1 or any(isinstance(op, P.Scan | P.RegionFold | P.RegionScan | P.Contract | P.MatMul)
                                for op in g.body.walk()):
        return "it does not fold exactly one reduction"
    red = reduces[0]
    ops = choice.looped.ops
    loops = [n for n, op in enumerate(ops) if isinstance(op, P.For)]
    if len(loops) != 1:
        return "its looped body has no single chunk loop before the result"
    loop = ops[loops[0]]
    assert isinstance(loop, P.For)
    d = _fold_position(ops, loops[0])
    if [v.type.dtype for v in ops[d].results] != list(red.acc_dtypes):
        return "its fold does not give the accumulators"
    if not g.single_instance and not shared.per_instance(ops[d].results):
        return "its reduction is the same for every instance"
    if not effect_free(ops[:d]) or not effect_free(loop.body.ops):
        return "it has effects before its reduction completes"
    if not all(shared.pointwise_or_store(op) for op in ops[d + 1:]):
        return "its reduction's result feeds more than pointwise work and stores"
    if g.single_instance:
        return SplitPlan(g, red, d, loops[0], None, None)
    found = shared.lane_test(ops)
    if isinstance(found, str):
        return found
    owned, lane_ok = found
    return SplitPlan(g, red, d, loops[0], owned, lane_ok)


def _fold_position(ops: tuple[POp, ...], loop: int) -> int:
    """Where the looped body completes the reduction's accumulators: the reduce that folds the chunk loop's
    accumulators after it (a chunk-wide accumulator), or the loop itself (a fold carried per lane). What
    follows (a cast of the accumulators to the result dtype, the stores) reads the result."""
    carried = {v.id for v in ops[loop].results}
    return next((n for n in range(loop + 1, len(ops)) if isinstance(ops[n], P.Reduce)
                 and {v.id for v in ops[n].inputs} == carried), loop)  # type: ignore[attr-defined]


class SplitReductions(GroupPass):
    """Split the reduced axis of few-instance reductions over the programs of the launch."""

    name = "split-reductions"

    def plan_group(self, program: Program, group: Group) -> SplitPlan | str:
        return plan_split(program, group)

    def apply(self, program: Program, plan: SplitPlan) -> Program:  # type: ignore[override]
        return _split(program, plan)


def _split(program: Program, plan: SplitPlan) -> Program:
    g, red = plan.group, plan.reduce
    choice = P.looped_rows(g.body)
    assert choice is not None
    gid = g.id
    consts = dict(program.constexprs)
    ops = choice.looped.ops
    loop = ops[plan.loop]
    assert isinstance(loop, P.For)
    chunks_op = producer(ops, loop.stop)
    if not isinstance(chunks_op, P.ShapeValue):
        return program
    chunks = chunks_op.expr

    # ---- launch values: how many programs share a block, and when the looped body runs
    flag_expr = consts[choice.flag]
    lanes = substitute(consts[g.block], flag_expr, LConst(1))
    warps = as_launch(substitute(program.num_warps, flag_expr, LConst(1)))
    # Powers of two of the block count and the row (the split count is a constexpr: a kernel is specialised
    # per power of two of the shapes, as BLOCK_N already is, not per exact extent).
    blocks = LNextPow2(lcdiv(lprod(tuple(ldim(d) for d in g.domain)), as_launch(lanes))) if g.domain else LConst(1)
    row_chunks = LBin("//", consts[choice.axis.block], consts[choice.chunk.block])
    raw = lmax(LConst(1), lmin(LBin("//", LResidentPrograms(warps), blocks),
                               LBin("//", row_chunks, LConst(MIN_CHUNKS_PER_SPLIT))))
    few = lmin(LConst(1), LBin("-", raw, LConst(1)))
    runs = lmin(LConst(1), LBin("+", flag_expr, few))
    count = lselect(runs, raw, LConst(1))
    consts = {n: substitute(e, flag_expr, runs) for n, e in consts.items()}
    consts[choice.flag] = runs
    num_warps = substitute(program.num_warps, flag_expr, runs)
    # the earlier splits' workspaces keep the terms of their constexprs, which now read `runs` for the flag
    program = restate_workspaces(program, flag_expr, runs)
    program, splits, block_s, segments, grid = shared.split_launch(
        program, gid, count, consts, lambda seg: as_launch(substitute(seg.length, flag_expr, runs)))

    # ---- workspace: one slot array per accumulator component, one ticket counter per instance
    many = len(red.acc_dtypes) > 1
    program, slots, counter = shared.add_partial_slots(program, gid, [red.acc_dtypes], splits,
                                                lambda j, k: f"partial{k}" if many else "partial")

    # ---- the body
    w = Builder.after(program)
    origin = red.origin
    s = w.add(P.SplitIndex, INDEX, origin, "split", group=gid, splits=splits)
    new_ops: list[POp] = [w.frames[0].ops.pop()]
    for n, op in enumerate(ops[:plan.define + 1]):
        if n == plan.owned:
            assert isinstance(op, P.OwnedInstances)
            op = dataclasses.replace(op, splits=splits)
        if n == plan.loop:
            assert isinstance(op, P.For)
            per = w.add(P.ShapeValue, INDEX, origin, "chunks_per_split", expr=lcdiv(chunks, LConstexpr(splits)))
            first = w.add(P.Binary, INDEX, origin, "split_start", fn=BinaryFn.mul, lhs=s, rhs=per)
            end = w.add(P.Binary, INDEX, origin, fn=BinaryFn.add, lhs=first, rhs=per)
            stop = w.add(P.Binary, INDEX, origin, "split_stop", fn=BinaryFn.minimum, lhs=end, rhs=op.stop)
            new_ops += w.frames[0].ops
            w.frames[0].ops.clear()
            op = dataclasses.replace(op, start=first, stop=stop, body=_from_start(op, first))
        if n == plan.define:
            # the partial: the fold's accumulators under new names (the combine of the slots gives the fold's
            # own values, which the rest of the body reads)
            folded = op.results
            partial = tuple(w.fresh(v.type, f"partial{k}") for k, v in enumerate(folded))
            op = dataclasses.replace(op, results=partial)
        new_ops.append(op)
    inst = shared.instance_coordinate(w, ops, plan.owned, origin)
    fold = shared.Partial(partial, folded, red.kind, red.identity, red.acc_dtypes, red.combine, origin)
    last = shared.combine_in_last(w, [fold], slots, counter, s, inst, plan.lane_ok, (splits, block_s), origin,
                                  g.id)
    shared.finish_in_last(w, list(ops[plan.define + 1:]), last)
    new_ops += w.frames[0].ops
    looped = dataclasses.replace(choice.looped, ops=tuple(new_ops))
    group = dataclasses.replace(g, body=P.with_form(g.body, choice.looped, looped))
    info = program.op_info(red.origin)
    notes = tuple(n for n in program.notes
                  if not (info is not None and n.loc == info.loc and "runs in one program instance" in n.message))
    return dataclasses.replace(program, groups=tuple(group if x.id == gid else x for x in program.groups),
                               segments=segments, grid=grid, num_warps=num_warps, notes=notes)


def _from_start(loop: P.For, first: PValue) -> object:
    """The chunk loop's body with its first-chunk test against the split's first chunk instead of 0."""
    iv = loop.body.args[0]
    ops = tuple(dataclasses.replace(op, rhs=first) if isinstance(op, P.Compare) and op.lhs.id == iv.id and
                op.rhs.id == loop.start.id else op for op in loop.body.ops)
    return dataclasses.replace(loop.body, ops=ops)

