"""Dependences between program instances, and the order of one program's memory effects.

* ordered-dependence: no instance reads what another instance (of its group, or of another group)
  writes: within a group's concurrent lanes this is proven with Z3 over the coordinate forms of two
  different instances; across groups (which run concurrently in one launch) a buffer written in one
  may not be touched by another, except through the same commuting atomic.
* unordered-conflict: two instances never write the same element except through atomics or an
  author-stated `unique` write (proven with Z3 like the above). A helper slot array (one slot per helper
  program) is written by no two members that differ in their instance or their program: members of one
  program (equal `helper_index`) share every value computed once per program.
* buffer-visibility: a program's later read of a buffer it wrote is ordered behind the write by a
  barrier (loop bodies and chunked region traversals are followed into their next iteration).
"""

from __future__ import annotations

from kir.atomic import COMMUTING_KINDS
from kir.core import Kernel
from kir.dims import PCmp, POr, Pred
from kir.region import RegionScan

from .. import ops as P
from ..model import Access, BufferScope, POp, PRegion, Program
from .affine import Forms, forms_of, prover_of
from .base import Reporter, describe, rule
from .index import AccessSite, ProgramIndex, index_of
from .ownership import lane_source


def disjoint_across_instances(ix: ProgramIndex, x: AccessSite, y: AccessSite, source: POp) -> bool:
    """Whether x in one instance and y in another never touch the same element (Z3)."""
    g = ix.groups[x.placed.group]
    forms = forms_of(ix, g)
    flat = source.results[0]
    forms.form(flat)
    src = forms.sources.get(id(source))
    if src is None:
        return False
    hyps, differ = forms.distinct(src)
    return _touch_apart(forms, x, y, hyps + [differ] + forms.base_facts("A") + forms.base_facts("B"))


def _touch_apart(forms: Forms, x: AccessSite, y: AccessSite, hyps: list[Pred]) -> bool:
    """Whether x in member A and y in member B touch distinct elements, given `hyps` about A and B (their masks'
    facts are added here): some coordinate (the copy first) differs (Z3)."""
    hyps = list(hyps)
    for site, tag in ((x, "A"), (y, "B")):
        fact = forms.fact(site.access.mask)
        if fact is not None:
            hyps.append(forms.rename(fact, tag))  # type: ignore[arg-type]
    cx = ((x.access.copy,) if x.access.copy is not None else ()) + x.access.coords
    cy = ((y.access.copy,) if y.access.copy is not None else ()) + y.access.coords
    if len(cx) != len(cy):
        return False
    pairs = []
    for a, b in zip(cx, cy):
        fa, fb = forms.form(a), forms.form(b)
        if fa is None or fb is None:
            return False
        pairs.append(PCmp("!=", forms.rename(fa, "A"), forms.rename(fb, "B")))  # type: ignore[arg-type]
    goal: Pred = POr(tuple(pairs))
    return forms.prover.proves(hyps, goal)


def _concurrent_pairs(ix: ProgramIndex, want: tuple[Access, ...], other: tuple[Access, ...],
                      symmetric: bool = False):
    """Pairs of accesses of one buffer that lanes of the same program space run concurrently.

    With `symmetric`, each unordered pair comes once (x before or equal to y)."""
    by_source: dict[int, tuple[POp, list[AccessSite]]] = {}
    helper_slots = _helper_slot_arrays(ix)
    for site in ix.accesses:
        if site.access.buffer in helper_slots:
            continue
        src = lane_source(ix, site.op)
        if src is None:
            continue
        by_source.setdefault(id(src[0]), (src[0], []))[1].append(site)
    for source, sites in by_source.values():
        for n, x in enumerate(sites):
            if x.kind not in want:
                continue
            for m, y in enumerate(sites):
                if symmetric and m < n and y.kind in want:
                    continue
                if y.access.buffer == x.access.buffer and y.kind in other:
                    yield source, x, y


def _helper_slot_arrays(ix: ProgramIndex) -> set[int]:
    """Workspace slot arrays with one slot per helper program (written at the program's helper_index, for the one
    lane the helper joins): the rule workspace-protocol checks who writes and reads them, not the lanes' forms."""
    helpers = {op.results[0].id for pl in ix.placed if isinstance(op := pl.op, P.HelperIndex) and op.results}
    return {s.access.buffer for s in ix.accesses if s.kind is Access.WRITE and s.access.copy is not None
            and s.access.copy.id in helpers and ix.buffers.get(s.access.buffer) is not None
            and ix.buffers[s.access.buffer].scope is BufferScope.INVOCATION_WORKSPACE}


def _forms(ix: ProgramIndex, site: AccessSite) -> Forms:
    return forms_of(ix, ix.groups[site.placed.group])


@rule("ordered-dependence")
def check_ordered_dependence(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """ordered dependences are not broken across independent program instances (no instance reads what another instance
    or group writes)"""
    ix = index_of(program)
    prover = prover_of(ix)
    for source, w, r in _concurrent_pairs(ix, (Access.WRITE,), (Access.READ,)):
        mark = prover.mark()
        if not disjoint_across_instances(ix, r, w, source):
            name = ix.buffers[w.access.buffer].name if w.access.buffer in ix.buffers else "?"
            report(f"{describe(program, r.op)} may read {name} where another instance's {describe(program, w.op)} "
                   f"writes: instances of group {w.placed.group} would depend on each other{prover.note(mark)}",
                   r.op, r.placed.group)
    _across_groups(program, ix, report)


def _across_groups(program: Program, ix: ProgramIndex, report: Reporter) -> None:
    uses: dict[int, dict[int, list[AccessSite]]] = {}
    for site in ix.accesses:
        uses.setdefault(site.access.buffer, {}).setdefault(site.placed.group, []).append(site)
    for bid, groups in uses.items():
        if len(groups) < 2:
            continue
        buf = ix.buffers.get(bid)
        if buf is not None and buf.scope in (BufferScope.PROGRAM_PRIVATE, BufferScope.ITERATION_PRIVATE):
            continue  # buffer-complete reports private buffers used outside their group
        sites = [s for ss in groups.values() for s in ss]
        if all(s.kind is Access.READ for s in sites):
            continue
        atomic_kinds = {_atomic_kind(s.op) for s in sites if s.kind is Access.READ_WRITE}
        if all(s.kind is Access.READ_WRITE for s in sites) and len(atomic_kinds) == 1 and \
                atomic_kinds <= COMMUTING_KINDS:
            continue
        writer = next(s for s in sites if s.kind is not Access.READ)
        other = next(s for s in sites if s.placed.group != writer.placed.group)
        name = buf.name if buf is not None else f"buffer {bid}"
        report(f"{describe(program, writer.op)} in group {writer.placed.group} writes {name}, which "
               f"{describe(program, other.op)} in group {other.placed.group} also touches: groups run concurrently, "
               f"so the dependence would be broken", writer.op, writer.placed.group)


def _atomic_kind(op: POp) -> str:
    return op.kind.value if isinstance(op, P.AtomicRMW) else "cas"


@rule("unordered-conflict")
def check_unordered_conflict(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """unordered conflicts (two instances writing one element) are resolved by unique, reduction or atomic semantics"""
    ix = index_of(program)
    prover = prover_of(ix)
    for source, x, y in _concurrent_pairs(ix, (Access.WRITE,), (Access.WRITE, Access.READ_WRITE), True):
        if x is y and isinstance(x.op, P.Store) and x.op.unique:
            continue
        if _parts_of_one_unique_write(x.op, y.op):
            continue
        mark = prover.mark()
        if not disjoint_across_instances(ix, x, y, source):
            name = ix.buffers[x.access.buffer].name if x.access.buffer in ix.buffers else "?"
            same = "it" if x is y else describe(program, y.op)
            report(f"{describe(program, x.op)} may write the element of {name} that {same} writes in another "
                   f"instance, with neither unique, reduction nor atomic semantics{prover.note(mark)}", x.op,
                   x.placed.group)
    _helper_slot_conflicts(program, ix, report)
    if kernel is not None:
        _unique_preserved(program, ix, kernel, report)


def _helper_slot_conflicts(program: Program, ix: ProgramIndex, report: Reporter) -> None:
    """Writes of a helper slot array (one slot per helper, at its `helper_index`): two members of the group's
    programs (other instances, or one instance in other programs) never write one element. A helper writes its
    slot for the one lane it joins: its mask equates the lane's instance with a value computed once per program
    (the owner whose block the helper decoded), so two lanes of one helper cannot both write."""
    prover = prover_of(ix)
    for bid in sorted(_helper_slot_arrays(ix)):
        writes = [s for s in ix.accesses if s.access.buffer == bid and s.kind is not Access.READ]
        for n, x in enumerate(writes):
            for y in writes[n:]:
                mark = prover.mark()
                if x.placed.group == y.placed.group and not _members_write_apart(ix, x, y):
                    same = "it" if x is y else describe(program, y.op)
                    report(f"{describe(program, x.op)} may write the element of helper slot array "
                           f"{ix.buffers[bid].name} that {same} writes for another member (another lane of the "
                           f"same helper, or another participant): a helper writes its slot only for the one "
                           f"lane it joins{prover.note(mark)}", x.op, x.placed.group)


def _members_write_apart(ix: ProgramIndex, x: AccessSite, y: AccessSite) -> bool:
    """Whether x and y, in two members that differ in their instance or their program, write distinct elements."""
    src = lane_source(ix, x.op)
    if src is None or lane_source(ix, y.op) != src:
        return False
    forms = _forms(ix, x)
    forms.form(src[1])
    flat = forms.sources.get(id(src[0]))
    if flat is None or forms.program_atom is None:
        return False
    _, instances_differ = forms.distinct(flat)
    programs_differ = PCmp("!=", forms.rename(forms.program_atom, "A"), forms.rename(forms.program_atom, "B"))
    hyps = forms.base_facts("A") + forms.base_facts("B") + forms.same_program() + \
        [POr((instances_differ, programs_differ))]  # type: ignore[arg-type]
    return _touch_apart(forms, x, y, hyps)


def _parts_of_one_unique_write(a: POp, b: POp) -> bool:
    """Whether `a` and `b` are unique stores of one KIR op (a region scan whose piece's held tile one store writes
    and the scan the rest): that op's instances write disjoint elements, whichever part of an instance each does."""
    return isinstance(a, P.Store) and isinstance(b, P.Store) and a.unique and b.unique and a.origin is not None \
        and b.origin is not None and a.origin.op is not None and a.origin.op == b.origin.op


def _unique_preserved(program: Program, ix: ProgramIndex, kernel: Kernel, report: Reporter) -> None:
    ops = list(kernel.walk())
    for site in ix.accesses:
        op = site.op
        if not (isinstance(op, P.Store) and op.unique) or op.origin is None or op.origin.op is None:
            continue
        kop = ops[op.origin.op] if op.origin.op < len(ops) else None
        # a region scan's instances write disjoint segments (construction proves the target a segment of
        # non-decreasing offsets before it runs them at once)
        if not (getattr(kop, "unique", False) or isinstance(kop, RegionScan)):
            report(f"{describe(program, op)} claims unique writes, which its KIR op does not state", op,
                   site.placed.group)


# ---------------------------------------------------------------------------------------------- visibility


@rule("buffer-visibility")
def check_visibility(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """a program reads what it wrote earlier only after a barrier orders the write before the read"""
    ix = index_of(program)
    flagged: set[int] = set()
    for g in program.groups:
        _walk(program, ix, g.body, set(), report, flagged, g.id)


def _walk(program: Program, ix: ProgramIndex, region: PRegion, dirty: set[int], report: Reporter,
          flagged: set[int], gid: int) -> set[int]:
    dirty = set(dirty)
    for op in region.ops:
        if isinstance(op, P.Barrier):
            dirty.clear()
        elif isinstance(op, P.Load):
            b = op.access.buffer
            if b in dirty and id(op) not in flagged:
                flagged.add(id(op))
                name = ix.buffers[b].name if b in ix.buffers else f"buffer {b}"
                report(f"{describe(program, op)} reads {name} after this program wrote it, with no barrier between "
                       f"the write and the read", op, gid)
        elif isinstance(op, P.Store | P.AtomicRMW | P.AtomicCAS):
            dirty.add(op.access.buffer)
        elif isinstance(op, P.AllocBuffer):
            buf = ix.buffers.get(op.buffer)
            if buf is not None and buf.fill is not None:
                dirty.add(op.buffer)
        elif isinstance(op, P.For | P.While | P.RegionFold | P.RegionScan):
            body = [r for r in op.regions() if r is not getattr(op, "combine", None)]
            state = set(dirty)
            for _ in range(2):  # the second pass is the next iteration, after the first one's writes
                for r in body:
                    state = _walk(program, ix, r, state, report, flagged, gid)
            dirty |= state
        elif isinstance(op, P.BlockLoop):  # one block's work; other blocks are other instances (independent)
            dirty = _walk(program, ix, op.body, dirty, report, flagged, gid)
        elif isinstance(op, P.If | P.LoopedRows):  # one region or the other runs
            state = set(dirty)
            for r in op.regions():
                dirty = dirty | _walk(program, ix, r, state, report, flagged, gid)
    return dirty


__all__ = ["check_ordered_dependence", "check_unordered_conflict", "check_visibility", "disjoint_across_instances"]
