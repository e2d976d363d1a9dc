"""Persistent programs: what a group's programs compute once, before their loop over instance blocks.

* loop-invariant: the ops before a persistent group's `block_loop` run once per program, before its
  loop over blocks (while the loop's flag is set). The loop is the last op at the top of the group's body
  (of one of its forms, when a `looped_rows` op holds the body in two).
  Each must be declared invariant (`Trait.INVARIANT`), read only values that earlier invariant ops define, and load
  only from external views that no op of the kernel writes: then computing it once gives every block
  the value it would have computed itself. The owned instances are never invariant.
"""

from __future__ import annotations

from kir.core import Kernel

from .. import ops as P
from ..analysis import not_invariant, written_buffers
from ..model import Group, POp, PRegion, Program
from .base import Reporter, describe, rule


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


@rule("loop-invariant")
def check_loop_invariant(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """what a persistent group's programs compute once, before their loop over instance blocks, depends on no block and
    reads no memory the kernel writes"""
    for g in program.groups:
        loops = [op for op in g.body.walk() if isinstance(op, P.BlockLoop)]
        if not loops:
            continue
        loop = loops[0]
        form = next((f for f in P.forms(g.body) if any(op is loop for op in f.ops)), P.whole_form(g.body))
        top = [op for op in form.ops if not op.TERMINATOR]
        if len(loops) > 1 or not top or top[-1] is not loop:
            report(f"group {g.id} ({g.name}) has {len(loops)} loops over blocks of instances; a persistent group "
                   f"has one, the last op at the top of its body", loop, g.id)
            continue
        if loop.group != g.id:
            report(f"group {g.id} ({g.name}) holds the loop over the blocks of group {loop.group}", loop, g.id)
            continue
        if g.single_instance or g.ownership.tiled or g.serial:
            why = "is a single instance" if g.single_instance else "owns tiles" if g.ownership.tiled else "is serial"
            report(f"group {g.id} ({g.name}) loops over blocks of instances, but it {why}", loop, g.id)
            continue
        if loop.flag not in dict(program.constexprs):
            report(f"group {g.id} ({g.name}) loops over blocks of instances while {loop.flag}, which is no "
                   f"constexpr", loop, g.id)
        _check_body(program, g, form, loop, report)


def _check_body(program: Program, g: Group, form: PRegion, loop: P.BlockLoop, report: Reporter) -> None:
    once = P.once_ops(form)
    for op in once:
        if isinstance(op, P.OwnedInstances):
            report(f"owned_instances of group {g.id} runs before the loop over blocks: every block would decode the "
                   f"first block's instances", op, g.id)
            return
    for op, reason in invariant_prefix(program, once):
        report(f"{describe(program, op)} runs once per program, before the loop over blocks of group {g.id}, but "
               f"{reason}", op, g.id)
    if not any(isinstance(op, P.OwnedInstances) for op in loop.body.ops):
        report(f"group {g.id} ({g.name}) decodes no owned instances inside its loop over blocks", group=g.id)


__all__ = ["check_loop_invariant", "invariant_prefix"]
