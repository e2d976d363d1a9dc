"""Buffers: scope, instance identity, initialisation, ownership and the order of their reads and writes.

* buffer-complete: every buffer has a consistent scope, lifetime and backing (external views belong
  to their tensor parameter; local buffers to a hidden workspace sized copies x elements), is used
  only the way its access mode says, stays in its owning group, and every access to a buffer with
  several copies names its copy.
* buffer-init: a full buffer is filled exactly once per allocation instance, at an allocation point
  that precedes every access; an uninitialised buffer is never default-filled; reads and writes of
  every buffer keep the order KIR gave them (origins are KIR op ordinals in program order), so the
  author's first-write obligation and every read-after-write survive.
"""

from __future__ import annotations

from kir.core import Kernel

from .. import ops as P
from ..launch_expr import LConst
from ..model import Access, Buffer, BufferInit, BufferScope, Lifetime, ParamKind, Program, Workspace
from .base import Reporter, describe, rule
from .index import ProgramIndex, evaluate, index_of, product

_LIFETIME = {BufferScope.EXTERNAL_VIEW: Lifetime.HOST, BufferScope.PROGRAM_PRIVATE: Lifetime.INSTANCE,
             BufferScope.ITERATION_PRIVATE: Lifetime.ITERATION, BufferScope.INVOCATION_WORKSPACE: Lifetime.INVOCATION}


def has_copies(ix: ProgramIndex, b: Buffer) -> bool:
    if b.copies is None or b.copies == LConst(1):
        return False
    return any(v is None or v != 1 for v in ix.values(b.copies))


@rule("buffer-complete")
def check_buffer_complete(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """every buffer has complete allocation scope, instance identity, initialisation mode, ownership and visibility"""
    ix = index_of(program)
    for b in ix.duplicate_buffers:
        report(f"buffer id {b.id} is used by {ix.buffers[b.id].name} and {b.name}")
    params = {q.name: q for q in program.params}
    workspaces = {w.name: w for w in program.workspaces}
    for q in program.params:
        if q.kind is ParamKind.TENSOR:
            b = ix.buffers.get(q.buffer) if q.buffer is not None else None
            if b is None or b.param != q.name:
                report(f"tensor parameter {q.name} has no external-view buffer of its own")
    for b in ix.buffers.values():
        if _LIFETIME.get(b.scope) != b.lifetime:
            report(f"buffer {b.name} is {b.scope} but lives for {b.lifetime} (expected {_LIFETIME.get(b.scope)})")
        if b.scope is BufferScope.EXTERNAL_VIEW:
            q = params.get(b.param or "")
            if q is None or q.kind is not ParamKind.TENSOR or q.buffer != b.id:
                report(f"external view {b.name} belongs to no tensor parameter")
            elif (q.dtype, q.shape) != (b.dtype, b.shape):
                report(f"external view {b.name} is {b.dtype}{list(map(str, b.shape))} but parameter {q.name} is "
                       f"{q.dtype}{list(map(str, q.shape))}")
            if b.init is not BufferInit.EXTERNAL or b.storage is not None:
                report(f"external view {b.name} must take its contents from the host (init external, no storage)")
            continue
        w = workspaces.get(b.storage or "")
        if w is None or w.buffer != b.id:
            report(f"local buffer {b.name} ({b.scope}) has no hidden workspace of its own")
        else:
            if w.dtype != b.dtype:
                report(f"local buffer {b.name} is {b.dtype} but its workspace {w.name} holds {w.dtype}")
            if b.copies is None:
                report(f"local buffer {b.name} does not say how many copies its workspace holds")
            else:
                for env in ix.envs:
                    n, c, e = evaluate(w.count, env), evaluate(b.copies, env), evaluate(product(b.shape), env)
                    if None not in (n, c, e) and n != c * e:  # type: ignore[operator]
                        report(f"workspace {w.name} holds {w.count} elements, but {b.copies} copies of {b.name} need "
                               f"{b.copies} x {' x '.join(map(str, b.shape)) or '1'}")
                        break
        if b.owner_group is None or b.owner_group not in ix.groups:
            report(f"local buffer {b.name} has no owning group")
    _uses(program, ix, report)


def _uses(program: Program, ix: ProgramIndex, report: Reporter) -> None:
    written: dict[int, bool] = {}
    read: dict[int, bool] = {}
    for site in ix.accesses:
        b = ix.buffers.get(site.access.buffer)
        if b is None:
            continue
        if site.kind is not Access.READ:
            written[b.id] = True
        if site.kind is not Access.WRITE:
            read[b.id] = True
        if b.scope is not BufferScope.EXTERNAL_VIEW and b.owner_group is not None and \
                site.placed.group != b.owner_group:
            report(f"{describe(program, site.op)} in group {site.placed.group} touches {b.scope} buffer {b.name} "
                   f"of group {b.owner_group}", site.op, site.placed.group)
        if has_copies(ix, b) and site.access.copy is None:
            report(f"{describe(program, site.op)} does not say which copy of {b.name} it uses: every instance has "
                   f"its own", site.op, site.placed.group)
    params = {q.name: q for q in program.params}
    for b in ix.buffers.values():
        q = params.get(b.param or "")
        if written.get(b.id) and (b.access is Access.READ or (q is not None and q.role == "in")):
            what = "an `in` parameter" if q is not None and q.role == "in" else "read-only"
            report(f"buffer {b.name} is written, but it is {what}")
        if read.get(b.id) and b.access is Access.WRITE:
            report(f"buffer {b.name} is read, but its access mode is write-only")


@rule("buffer-init")
def check_buffer_init(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """every buffer preserves its initial value or the author's first-write obligation, with its reads and writes in KIR
    order"""
    ix = index_of(program)
    workspaces = {w.name: w for w in program.workspaces}
    allocs: dict[int, list] = {}
    for pl in ix.placed:
        if isinstance(pl.op, P.AllocBuffer):
            allocs.setdefault(pl.op.buffer, []).append(pl)
    for b in ix.buffers.values():
        if b.scope is BufferScope.EXTERNAL_VIEW:
            if b.init is not BufferInit.EXTERNAL:
                report(f"external view {b.name} is initialised by the kernel ({b.init}); its contents are the host's")
            continue
        if b.init is BufferInit.FULL and b.fill is None:
            report(f"buffer {b.name} is initialised full but has no fill value")
        if b.init is BufferInit.UNINITIALISED:
            w = workspaces.get(b.storage or "")
            if b.fill is not None or (w is not None and w.fill is not None):
                report(f"uninitialised buffer {b.name} is default-filled with "
                       f"{b.fill if b.fill is not None else w.fill}; the author's first-write obligation must stand")
        if b.init is BufferInit.EXTERNAL:
            report(f"local buffer {b.name} claims host-provided contents")
        if b.scope is BufferScope.INVOCATION_WORKSPACE:
            _workspace_init(b, workspaces.get(b.storage or ""), report)
            continue  # allocated by the launcher for the whole launch (its protocol: rule workspace-protocol)
        points = allocs.get(b.id, [])
        if len(points) != 1:
            report(f"buffer {b.name} has {len(points)} allocation points; each allocation instance begins exactly once")
            continue
        alloc = points[0]
        for site in ix.accesses:
            if site.access.buffer != b.id:
                continue
            scope = [id(p) for p in alloc.parents]
            if site.placed.order < alloc.order or [id(p) for p in site.placed.parents[:len(scope)]] != scope:
                report(f"{describe(program, site.op)} touches {b.name} outside its allocation instance (before or "
                       f"outside the allocation point)", site.op, site.placed.group)
    _kir_order(program, ix, report)


def _workspace_init(b: Buffer, w: Workspace | None, report: Reporter) -> None:
    """An invocation workspace is uninitialised (each owner writes its slice first) or self-resetting (zero
    when the launcher allocates it, once; every launch leaves it zero)."""
    if b.init is BufferInit.SELF_RESETTING:
        if b.fill != 0 or w is None or w.fill != 0 or not w.resets:
            report(f"self-resetting workspace buffer {b.name} must be allocated zero once and kept between "
                   f"launches (fill 0, a resetting workspace)")
    elif b.init is not BufferInit.UNINITIALISED:
        report(f"invocation workspace buffer {b.name} is initialised {b.init}: a launch may not fill it (uninitialised "
               f"or self-resetting only)")


def _kir_order(program: Program, ix: ProgramIndex, report: Reporter) -> None:
    """Accesses of one buffer where one is a write keep their KIR order (by origin ordinal)."""
    by_buffer: dict[tuple[int, int], list] = {}
    for site in ix.accesses:
        if site.op.origin is not None and site.op.origin.op is not None:
            by_buffer.setdefault((site.placed.group, site.access.buffer), []).append(site)
    for (gid, bid), sites in by_buffer.items():
        name = ix.buffers[bid].name if bid in ix.buffers else f"buffer {bid}"
        for n, first in enumerate(sites):
            for later in sites[n + 1:]:
                if first.kind is Access.READ and later.kind is Access.READ:
                    continue
                a, b = first.op.origin.op, later.op.origin.op  # type: ignore[union-attr]
                if a > b:
                    report(f"{describe(program, first.op)} runs before {describe(program, later.op)}, but KIR orders "
                           f"it after: the order of {name}'s reads and writes changed", first.op, gid)
                    break


__all__ = ["check_buffer_complete", "check_buffer_init", "has_copies"]
