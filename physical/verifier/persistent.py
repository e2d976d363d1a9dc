"""Persistent programs: what a group's programs compute once, before their loop over instance blocks.

* loop-invariant: the ops at `PersistentLoop.hoisted` of a persistent group's body run once per
  program, before the loop over blocks (while the group's flag is set).
  Each must be declared invariant (`Trait.INVARIANT`), read only values that earlier invariant ops define, and load
  only from external views that no op of the kernel writes: then computing it once gives every block
  the value it would have computed itself. The owned instances are never invariant.
"""

from __future__ import annotations

from kir.core import Kernel

from .. import ops as P
from ..analysis import not_invariant, written_buffers
from ..model import Group, POp, Program
from .base import Reporter, Violation, describe, rule


def invariant_prefix(program: Program, once: tuple[POp, ...]) -> list[tuple[POp, str]]:
    """The ops of `once` (in their order) that may not run before the loop, with the reason."""
    written = written_buffers(program)
    invariant: set[int] = set()
    bad = []
    for op in once:
        reason = not_invariant(program, op, invariant, written)
        if reason is not None:
            bad.append((op, reason))
        invariant.update(r.id for r in op.results)
    return bad


@rule("loop-invariant", "what a persistent group's programs compute once, before their loop over instance blocks, "
      "depends on no block and reads no memory the kernel writes")
def check_loop_invariant(program: Program, kernel: Kernel | None = None) -> list[Violation]:
    report = Reporter("loop-invariant")
    for g in program.groups:
        p = g.persistent
        if p is None:
            continue
        if g.single_instance or g.tiles or g.serial:
            report(f"group {g.id} ({g.name}) loops over blocks of instances, but it "
                   f"{'is a single instance' if g.single_instance else 'owns tiles' if g.tiles else 'is serial'}",
                   group=g.id)
            continue
        if p.flag not in dict(program.constexprs):
            report(f"group {g.id} ({g.name}) loops over blocks of instances while {p.flag}, which is no constexpr",
                   group=g.id)
        _check_body(program, g, report)
    return report.found


def _check_body(program: Program, g: Group, report: Reporter) -> None:
    p = g.persistent
    assert p is not None
    ops = g.body.ops
    if list(p.hoisted) != sorted(set(p.hoisted)) or any(not 0 <= k < len(ops) for k in p.hoisted):
        report(f"group {g.id} ({g.name}) hoists ops at {list(p.hoisted)}, which are not increasing positions of its "
               f"body of {len(ops)} ops", group=g.id)
        return
    once, each = p.split(ops)
    for op in once:
        if isinstance(op, P.OwnedInstances):
            report(f"owned_instances of group {g.id} runs before the loop over blocks: every block would decode the "
                   f"first block's instances", op, g.id)
            return
    for op, reason in invariant_prefix(program, once):
        report(f"{describe(program, op)} runs once per program, before the loop over blocks of group {g.id}, but "
               f"{reason}", op, g.id)
    if not any(isinstance(op, P.OwnedInstances) for op in each):
        report(f"group {g.id} ({g.name}) decodes no owned instances inside its loop over blocks", group=g.id)


__all__ = ["check_loop_invariant", "invariant_prefix"]
