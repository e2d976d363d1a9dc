"""Coverage and ownership: which program owns which instance, and which slice performs which effect.

* ownership: a group's segment has exactly the programs its domain needs (cdiv(prod(domain),
  BLOCK_I), or one for a single-instance group); each program decodes its instances from one
  `owned_instances` of its own group; chunks of a workset run inside an instance tile their loop
  exactly (base = the loop's induction variable, step = the chunk block); and where lanes can run
  past the domain, every lane-varying effect is masked by the lane-validity test. Helper programs past the
  blocks (balanced segments) join lanes of the block their `owned_instances` decodes: a join test's lane is
  proven to lie in that block, and a helper per block of a segment (jagged folds and scans) is proven to join
  every lane of its part (physical/verifier/helpers.py), so every chunk a lane hands over is taken for it.
* effect-coverage: every KIR-observable effect is performed by exactly one physical effect, in
  exactly one group (and, with the kernel at hand, every KIR effect is performed). A region scan whose
  piece begins with a tile the program holds (split-region-scans) writes that tile with a store of its own
  and the rest with the scan: the store counts as part of the scan when its mask bounds its positions to
  before the scan's begin (after its end for a reverse scan), so the two write disjoint parts.
"""

from __future__ import annotations

from kir.core import Kernel, OpTrait
from kir.pointwise import CmpFn

from .. import ops as P
from ..launch_expr import LaunchExpr, LConstexpr
from ..model import AccessRelation, BufferScope, Group, POp, Program, PValue, Trait
from .affine import prover_of
from .base import Reporter, describe, rule
from .helpers import PartJoin, joins_outside_its_block, unjoined_lanes
from .helpers import launch_text as _sample
from .index import ProgramIndex, evaluate, index_of, product
from .structure import domain_programs, group_helpers, group_splits
from .tiles import check_tile_group, exclusive, tile_programs_text

# ---------------------------------------------------------------------------------------------- lane sources


def lane_source(ix: ProgramIndex, op: POp) -> tuple[POp, PValue] | None:
    """The op that gives `op`'s program its concurrent lanes (owned_instances or chunk_lanes) and its value."""
    pl = ix.place.get(id(op))
    if pl is None:
        return None
    for parent in reversed(pl.parents):
        if isinstance(parent, P.For):
            for inner in parent.body.ops:
                if isinstance(inner, P.ChunkLanes) and inner.results:
                    return inner, inner.results[0]
    for inner in P.instance_ops(pl.form):
        if isinstance(inner, P.OwnedInstances | P.OwnedTile) and inner.results:
            return inner, inner.results[0]
    return None


def lanes_may_overrun(ix: ProgramIndex, source: POp) -> bool:
    """Whether some launch gives a program lanes beyond the instances that exist."""
    if isinstance(source, P.OwnedInstances):
        g = ix.groups.get(source.group)
        if g is None or not g.domain:
            return False
        total = product(g.domain)
        return any(_rem(evaluate(total, env), env.get(source.block)) for env in ix.envs)
    if isinstance(source, P.ChunkLanes):
        loop = _chunk_loop(ix, source)
        stop = ix.producer(loop.stop) if loop is not None else None
        if not isinstance(stop, P.ShapeValue):
            return True
        return any(_rem(evaluate(stop.expr, env), env.get(source.block)) for env in ix.envs)
    return False


def _rem(n: int | None, b: int | None) -> bool:
    return n is None or not b or n % b != 0


def _chunk_loop(ix: ProgramIndex, op: P.ChunkLanes) -> P.For | None:
    pl = ix.place.get(id(op))
    if pl is None or not pl.parents or not isinstance(pl.parents[-1], P.For):
        return None
    return pl.parents[-1]


def lane_valid_test(ix: ProgramIndex, source: POp, flat: PValue, v: PValue) -> bool:
    """Whether `v` is the test `flat < (number of instances)` for the lanes of `source`."""
    op = ix.producer(v)
    if not isinstance(op, P.Compare) or op.fn.value != "lt" or op.lhs.id != flat.id:
        return False
    bound = ix.producer(op.rhs)
    if isinstance(source, P.OwnedInstances):
        g = ix.groups.get(source.group)
        return g is not None and isinstance(bound, P.ShapeValue) and ix.same_value(bound.expr, product(g.domain))
    loop = _chunk_loop(ix, source)  # type: ignore[arg-type]
    return loop is not None and (op.rhs.id == loop.stop.id or (
        isinstance(bound, P.ShapeValue) and isinstance(ix.producer(loop.stop), P.ShapeValue) and
        ix.same_value(bound.expr, ix.producer(loop.stop).expr)))  # type: ignore[union-attr]


def effect_lanes(op: POp) -> bool:
    """Whether an effect differs between lanes (so each lane performs its own)."""
    vals: list[PValue] = []
    for f in op.fields():
        x = getattr(op, f.name)
        if isinstance(x, AccessRelation):
            vals += list(x.operands())
        elif isinstance(x, PValue):
            vals.append(x)
    return any(v.type.lanes for v in vals)


def effect_mask(ix: ProgramIndex, op: POp) -> PValue | None:
    """The members an effect op acts for, by its class's declared rule (`physical.ops.effect_members`)."""
    return type(op).members_rule(op, ix.producer)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------- ownership


@rule("ownership")
def check_ownership(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """ownership of every instance is complete and non-overlapping: segment lengths match the domains, programs decode
    their own instances, chunks tile their loops, and lanes past the domain perform no effect"""
    ix = index_of(program)
    segments = {s.group: s for s in program.segments}
    for g in program.groups:
        if g.block not in ix.constexprs:
            report(f"group {g.id} ({g.name}) owns instances in blocks of {g.block}, which is no constexpr",
                   group=g.id)
            continue
        seg = segments.get(g.id)
        if seg is not None:
            want = domain_programs(ix, g)
            got = ix.values(seg.length)
            loop = next((lp for lp in map(P.block_loop, (f.ops for f in P.forms(g.body))) if lp is not None), None)
            if loop is not None and _persistent_blocks(ix, g, loop, seg.length, want, report):
                got = want
            if loop is not None:
                _forms_without_loop(ix, g, loop, report)
            if any(w is not None and v is not None and w != v for w, v in zip(want, got)):
                need = "1 (a single instance)" if g.single_instance else \
                    f"cdiv({' * '.join(str(d) for d in g.domain)}, {g.block})" if not g.ownership.tiled else \
                    tile_programs_text(g)
                if group_splits(g) is not None:
                    need = f"{need} x {group_splits(g)} (the programs that share each block)"
                if group_helpers(g) is not None:
                    need = f"{need} + {group_helpers(g)} (the helpers past the blocks)"
                report(f"segment of group {g.id} ({g.name}) has {seg.length} programs, but its domain needs {need}",
                       group=g.id)
        _helper_blocks(program, ix, g, report)
        if g.ownership.tiled:
            for message, op in check_tile_group(ix, g):
                report(message, op, g.id)
            continue
        _owned_instances(program, ix, g, report)
    for pl in ix.placed:
        op = pl.op
        if isinstance(op, P.ChunkLanes):
            _chunk(program, ix, op, report, pl.group)
        if op.has(Trait.EFFECTS) and not op.has(Trait.CONTROL) and effect_lanes(op):
            mask = effect_mask(ix, op)
            src = lane_source(ix, op)
            if src is None or not lanes_may_overrun(ix, src[0]):
                continue
            if not any(lane_valid_test(ix, src[0], src[1], c) for c in ix.conjuncts(mask)):
                report(f"{describe(program, op)} is not masked by the lane-validity test {src[1].name or 'flat'} < "
                       f"(instances): programs whose lanes run past the domain would perform it", op, pl.group)


def _helper_blocks(program: Program, ix: ProgramIndex, g: Group, report: Reporter) -> None:
    """Helpers are the programs past the blocks: `helper_index` counts from the first program after them, and a
    group with helpers decodes its instances with the helper's block (and the other way round)."""
    found = [op for op in P.instance_ops(g.body) if isinstance(op, P.HelperIndex)]
    owned = [op for op in P.instance_ops(g.body) if isinstance(op, P.OwnedInstances)]
    if any(op.helper_block is not None for op in owned) and not found:
        report(f"group {g.id} ({g.name}) decodes a helper's block but has no helper programs", owned[0], g.id)
    if not found:
        return
    if len(found) > 1 or found[0].group != g.id:
        report(f"group {g.id} ({g.name}) must number its helpers once, for itself", found[0], g.id)
        return
    if not any(op.helper_block is not None for op in owned):
        report(f"group {g.id} ({g.name}) has helper programs, but its owned_instances gives them no block: they "
               f"would take the instances past the domain", found[0], g.id)
    outside = joins_outside_its_block(ix, g.id)
    if outside is not None:
        ticket, u, block = outside
        if u is None:
            report(f"a helper of group {g.id} ({g.name}) joins a lane by a test of neither form `flat == u` nor "
                   f"`flat // BLOCK == helper_block`: that the lane lies in the block %{block.id} its owned_instances "
                   f"decodes is not proven, and the lane's last participant might never come", ticket, g.id)
        else:
            report(f"a helper of group {g.id} ({g.name}) joins the lane whose instance is %{u.id}, which may lie "
                   f"outside the block %{block.id} its owned_instances decodes: the helper would draw no ticket and "
                   f"write no slot, and the lane's last participant would never come", ticket, g.id)
    mark = prover_of(ix).mark()
    unjoined = unjoined_lanes(ix, g.id)
    if unjoined is not None:
        join, detail = unjoined
        at = ix.producer(join.join if isinstance(join, PartJoin) else join)
        report(f"a helper of group {g.id} ({g.name}) joins a lane {detail}: a chunk the lane hands to the helpers "
               f"might be taken for it by none{prover_of(ix).note(mark)}", at, g.id)
    blocks = ix.values(found[0].blocks)
    want = domain_programs(ix, g)
    for b, w, env in zip(blocks, want, ix.envs):
        if b is not None and w is not None and env.get(found[0].helpers) is not None and b + env[found[0].helpers] != w:
            report(f"helper_index of group {g.id} ({g.name}) counts {found[0].blocks} = {b} block programs, but the "
                   f"group's blocks take {w - env[found[0].helpers]} ({_sample(ix, env)}): helpers would overlap "
                   f"the blocks or leave programs idle", found[0], g.id)
            return


def _persistent_blocks(ix: ProgramIndex, g: Group, p: P.BlockLoop, length: LaunchExpr, want: list[int | None],
                       report: Reporter) -> bool:
    """Whether a persistent group's segment has min(blocks, resident programs) programs where its flag is
    set and one per block elsewhere, and its programs walk exactly the domain's blocks."""
    inside = ix.values(p.blocks)
    # `want` counts the programs that share each block (split-reductions); the loop walks the blocks
    splits = group_splits(g)
    shares = [env.get(splits) if splits is not None else 1 for env in ix.envs]
    blocks_only = [None if w is None or not k else w // k for w, k in zip(want, shares)]
    if any(w is not None and v is not None and w != v for w, v in zip(blocks_only, inside)):
        report(f"group {g.id} ({g.name}) loops over {p.blocks} blocks of instances, but its domain has "
               f"cdiv({' * '.join(str(d) for d in g.domain)}, {g.block})", group=g.id)
        return True
    for env, share in zip(ix.envs, shares):
        if env.get(p.flag) and share is not None and share != 1:
            report(f"group {g.id} ({g.name}) walks its blocks persistently while {splits} = {share} programs share "
                   f"each block ({_sample(ix, env)})", group=g.id)
            return True
    for env, blocks, share, got in zip(ix.envs, blocks_only, shares, ix.values(length)):
        flag, resident = env.get(p.flag), evaluate(p.resident, env)
        if None in (flag, resident, blocks, share, got):
            continue
        need = min(blocks, resident) if flag else blocks * share  # type: ignore[type-var, operator]
        if got != need:
            needs = f"min(blocks, resident programs) = {need}, as {p.flag} is set" if flag else \
                f"one program per block ({need}), as {p.flag} is not set"
            report(f"segment of group {g.id} ({g.name}) has {length} programs: {got} for {_sample(ix, env)}, where "
                   f"it needs {needs}", group=g.id)
            return True
    return True


def _forms_without_loop(ix: ProgramIndex, g: Group, loop: P.BlockLoop, report: Reporter) -> None:
    """A form of a persistent group's body that holds no loop over blocks runs one block per program: the
    segment launches one program per block only where the loop's flag is 0, so that form may run only there."""
    choice = P.looped_rows(g.body)
    if choice is None:
        return
    split = choice.split_flag
    for form, selected in ((choice.whole, 0), (choice.looped, 1)) + (((choice.split, 2),) if choice.split else ()):
        if P.block_loop(form.ops) is not None:  # type: ignore[union-attr]
            continue
        for env in ix.envs:
            if selected == 2 and split is not None and env.get(split) and env.get(loop.flag):
                report(f"group {g.id} ({g.name}) runs its split form, which holds no loop over blocks of instances, "
                       f"while {split} = 1 and {loop.flag} = {env[loop.flag]} ({_sample(ix, env)}): its programs "
                       f"would skip the blocks the loop gives them", group=g.id)
                return
            if selected < 2 and env.get(choice.flag) == selected and not (split and env.get(split)) and \
                    env.get(loop.flag):
                name = "looped" if selected else "whole"
                report(f"group {g.id} ({g.name}) runs its {name} form, which holds no loop over blocks of instances, "
                       f"while {choice.flag} = {selected} and {loop.flag} = {env[loop.flag]} ({_sample(ix, env)}): "
                       f"its programs would skip the blocks the loop gives them", group=g.id)
                return


def _owned_instances(program: Program, ix: ProgramIndex, g: Group, report: Reporter) -> None:
    nested = [pl.op for pl in ix.group_ops(g.id) if isinstance(pl.op, P.OwnedInstances) and pl.nested]
    for op in nested:
        report(f"owned_instances inside a nested region of group {g.id}: a program decodes its instances once, at "
               f"the top of its group", op, g.id)
    for form in P.forms(g.body):  # each form a launch selects decodes the program's instances itself
        _decoded_once(g, [op for op in P.instance_ops(form) if isinstance(op, P.OwnedInstances)], report)


def _decoded_once(g: Group, top: list[P.OwnedInstances], report: Reporter) -> None:
    if g.single_instance:
        # a split top-level scan's ticket (`ticket` and `splits`): its programs share the one instance by pieces
        for op in top:
            if op.ticket is None or op.splits is None or len(top) != 1:
                report(f"single-instance group {g.id} ({g.name}) decodes owned instances", op, g.id)
        return
    if len(top) != 1:
        report(f"group {g.id} ({g.name}) over ({', '.join(map(str, g.domain))}) has {len(top)} owned_instances; "
               f"its programs must decode their instances exactly once", group=g.id)
        return
    op = top[0]
    if op.group != g.id or op.block != g.block:
        report(f"owned_instances in group {g.id} decodes group {op.group} with block {op.block}; it must decode its "
               f"own group with block {g.block}", op, g.id)


def _chunk(program: Program, ix: ProgramIndex, op: P.ChunkLanes, report: Reporter, gid: int) -> None:
    loop = _chunk_loop(ix, op)
    if loop is None or op.base.id != loop.body.args[0].id:
        report(f"chunk_lanes base %{op.base.id} is not the induction variable of its enclosing loop: chunks would not "
               f"tile the loop", op, gid)
        return
    if op.block not in ix.constexprs:
        report(f"chunk_lanes block {op.block} is no constexpr", op, gid)
        return
    step = ix.producer(loop.step)
    start = ix.producer(loop.start)
    step_ok = isinstance(step, P.ShapeValue) and (step.expr == LConstexpr(op.block) or
                                                  ix.same_value(step.expr, ix.constexprs[op.block]))
    start_ok = isinstance(start, P.ShapeValue) and all(v == 0 for v in ix.values(start.expr)) or \
        isinstance(start, P.Const) and start.value == 0
    if not step_ok or not start_ok:
        report(f"the loop around chunk_lanes must start at 0 and step by {op.block}; chunks would overlap or leave "
               f"gaps", op, gid)


# ---------------------------------------------------------------------------------------------- effect coverage


@rule("effect-coverage")
def check_effect_coverage(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """each KIR-observable effect is covered by exactly one physical execution slice"""
    ix = index_of(program)
    units: dict[int, list[tuple[int, POp]]] = {}
    for pl in ix.placed:
        op = pl.op
        if not op.has(Trait.WRITES):
            continue
        access = getattr(op, "access", None)
        if isinstance(access, AccessRelation) and access.buffer in ix.buffers and \
                ix.buffers[access.buffer].scope is BufferScope.INVOCATION_WORKSPACE:
            continue  # the protocol of an invocation workspace, not a KIR effect (rule workspace-protocol)
        if any(p.has(Trait.WRITES) and p.origin is not None and op.origin is not None and
               p.origin.op == op.origin.op for p in pl.parents):
            continue  # part of the enclosing effect (a region scan's emitted stores)
        if op.origin is None or op.origin.op is None:
            report(f"{op.NAME} in group {pl.group} has no origin: no KIR effect accounts for it", op, pl.group)
            continue
        if program.op_info(op.origin) is None:
            report(f"{op.NAME} in group {pl.group} comes from KIR op {op.origin.op}, which the program's origin "
                   f"table does not list", op, pl.group)
            continue
        units.setdefault(op.origin.op, []).append((pl.group, op))
    for _, found in sorted(units.items()):
        groups = sorted({g for g, _ in found})
        first = found[0][1]
        if len(groups) > 1:
            report(f"{describe(program, first)} is performed by groups {', '.join(map(str, groups))}; each KIR effect "
                   f"belongs to exactly one execution slice", first, groups[0])
        elif len(found) > 1:
            # effects in different branches of an `if` or forms of a body never run in one launch together
            ops = [op for _, op in found]
            ops = [op for op in ops if not _held_tile(ix, op, ops)]
            times = max(sum(1 for b in ops if b is a or not exclusive(ix, a, b)) for a in ops)
            if times > 1:
                some = f", {times} of them in one run" if times < len(ops) else ""
                report(f"{describe(program, first)} is performed by {len(found)} physical effects in group "
                       f"{groups[0]}{some}; it would happen {times} times per instance", first, groups[0])
    if kernel is not None:
        for n, kop in enumerate(kernel.walk()):
            if kop.has(OpTrait.WRITES) and n not in units:
                where = f" at {kop.loc}" if kop.loc else ""
                report(f"KIR {kop.NAME}{where} (op {n}) is performed by no physical effect")
        ops = list(kernel.walk())
        for ordinal, found in units.items():
            if ordinal >= len(ops) or not ops[ordinal].has(OpTrait.WRITES):
                op = found[0][1]
                report(f"{describe(program, op)} is an effect, but KIR op {ordinal} it comes from has none", op,
                       found[0][0])


def _held_tile(ix: ProgramIndex, op: POp, effects: list[POp]) -> bool:
    """Whether `op` writes the held tile of a region scan among `effects`: a store whose mask bounds its positions
    below that scan's begin (at or above its end when the scan is reverse), which the scan's pieces start from."""
    if not isinstance(op, P.Store):
        return False
    tests = [ix.producer(c) for c in ix.conjuncts(op.access.mask)]
    for scan in effects:
        if not isinstance(scan, P.RegionScan):
            continue
        cut, fn = (scan.end, CmpFn.ge) if scan.reverse else (scan.begin, CmpFn.lt)
        for t in tests:
            if isinstance(t, P.Compare) and t.fn is fn:
                bound = ix.producer(t.rhs)
                if t.rhs.id == cut.id or (isinstance(bound, P.Broadcast) and bound.x.id == cut.id):
                    return True
    return False


__all__ = ["check_ownership", "check_effect_coverage", "lane_source", "lanes_may_overrun", "lane_valid_test",
           "effect_mask", "effect_lanes"]
