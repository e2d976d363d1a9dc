"""Structural rules: self-containment, SSA scoping, the program-space partition and launch extents."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from enum import Enum

from kir import core as K
from kir.core import Kernel
from kir.dims import Dim, Pred
from kir.dtypes import DType
from kir.errors import Loc

from .. import launch_expr as LE
from .. import ops as P
from ..model import Group, Origin, POp, PRegion, Program
from .base import Reporter, describe, rule
from .index import evaluate, index_of, product

# ---------------------------------------------------------------------------------------------- self-contained

_KIR_IR = (K.Op, K.Value, K.Region, K.Kernel, K.Param, K.TensorType, K.RefType, K.Slice, K.DynSlice)
_PLAIN = (int, float, bool, str, type(None), DType, Dim, Pred, Loc, Enum, LE.LaunchExpr)


def _is_model(x: object) -> bool:
    """Dataclasses of the physical package (the program model and its op classes)."""
    return dataclasses.is_dataclass(x) and not isinstance(x, type) and \
        type(x).__module__.split(".")[0] == "physical" and not isinstance(x, LE.LaunchExpr)


@rule("self-contained")
def check_self_contained(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """the physical program needs neither KIR nor side records to interpret execution; origins hold integers only"""
    physical_ops = set(P.OP_CLASSES.values())
    fields: dict[type, tuple[str, ...] | None] = {}  # a model dataclass type -> its field names (None: no model)
    clean: set[int] = set()  # model objects met before with nothing to report inside (a value has many uses)

    def where(path: tuple) -> str:  # (parent path, step) pairs, written out only for a report
        steps: list[str] = []
        while path:
            path, step = path
            steps.append(step)
        return "".join(reversed(steps))

    def visit(x: object, path: tuple) -> bool:
        """Report what `x` and everything it holds break (`path` names it); whether nothing was reported."""
        if isinstance(x, tuple):
            ok = True
            for k, y in enumerate(x):
                ok = visit(y, (path, f"[{k}]")) and ok
            return ok
        if id(x) in clean:
            return True
        before = len(report.found)
        if isinstance(x, _KIR_IR):
            report(f"{where(path)} holds a KIR {type(x).__name__}; a physical program carries its own SSA and "
                   f"attributes, and refers to KIR by integer origins only")
        elif isinstance(x, POp):
            if type(x) not in physical_ops:
                report(f"{where(path)} is a {type(x).__name__}, not a registered physical op")
        elif isinstance(x, Origin):
            for f in dataclasses.fields(x):
                val = getattr(x, f.name)
                if val is not None and (not isinstance(val, int) or isinstance(val, bool)):
                    report(f"{where(path)}.{f.name} is a {type(val).__name__}; origins are KIR identities "
                           f"(integers) only")
        t = type(x)
        if t not in fields:
            fields[t] = tuple(f.name for f in dataclasses.fields(x)) if _is_model(x) else None  # type: ignore
        names = fields[t]
        if names is None:
            if not isinstance(x, (*_PLAIN, *_KIR_IR, POp, Origin)):
                report(f"{where(path)} holds a {t.__name__}, which is no part of the physical program model")
            return len(report.found) == before
        ok = True
        for name in names:
            ok = visit(getattr(x, name), (path, f".{name}")) and ok
        if ok and len(report.found) == before:
            clean.add(id(x))
            return True
        return False

    visit(program, ((), "program"))


# ---------------------------------------------------------------------------------------------- ssa-defined


@rule("ssa-defined")
def check_ssa(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """every physical value is defined once and used only where its definition is in scope, with the type it was defined
    with"""
    ix = index_of(program)
    for d in ix.duplicates:
        first = ix.defs[d.value.id]
        report(f"%{d.value.id} is defined twice (in group {first.group} and again in group {d.group})", d.op,
               group=d.group)
    for g in program.groups:
        _scoped(program, g.body, [set()], report, g.id, ix.defs)


def _scoped(program: Program, region: PRegion, scopes: list[set[int]], report: Reporter, gid: int,
            defs: dict) -> None:
    scopes.append({a.id for a in region.args})
    try:
        for op in region.ops:
            for v in op.operands():
                if not any(v.id in s for s in scopes):
                    report(f"{describe(program, op)} uses %{v.name or 'p'}{v.id} where it is not defined "
                           f"(no definition in this region or an enclosing one)", op, gid)
                else:
                    d = defs.get(v.id)
                    if d is not None and d.value.type != v.type:
                        report(f"{describe(program, op)} uses %{v.id} as {v.type} but it is defined as "
                               f"{d.value.type}", op, gid)
            for r in op.regions():
                _scoped(program, r, scopes, report, gid, defs)
            scopes[-1].update(v.id for v in op.results)
    finally:
        scopes.pop()


# ---------------------------------------------------------------------------------------------- segments


@rule("segments-partition")
def check_segments(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """one segment per group; offsets are the running sums of the lengths (O_g = sum_{h<g} L_h), so segments are
    disjoint, and the grid is the sum of all lengths"""
    ix = index_of(program)
    seen: dict[int, int] = {}
    for s in program.segments:
        seen[s.group] = seen.get(s.group, 0) + 1
        if s.group not in ix.groups:
            report(f"segment for group {s.group}, which does not exist")
    for g in program.groups:
        if seen.get(g.id, 0) != 1:
            report(f"group {g.id} ({g.name}) has {seen.get(g.id, 0)} segments; every group has exactly one",
                   group=g.id)
    running: list[LE.LaunchExpr] = []
    for s in program.segments:
        want = LE.lsum(tuple(running))
        if not _agree(ix, s.offset, want):
            report(f"segment of group {s.group} starts at {s.offset}, but the lengths before it sum to {want}",
                   group=s.group)
        if any(v is not None and v < 0 for v in ix.values(s.length)):
            report(f"segment of group {s.group} has a negative length {s.length}", group=s.group)
        running.append(s.length)
    total = LE.lsum(tuple(running))
    if not _agree(ix, program.grid, total):
        report(f"grid is {program.grid}, but the segment lengths sum to {total}")


def _agree(ix, a: LE.LaunchExpr, b: LE.LaunchExpr) -> bool:
    if a == b:
        return True
    pairs = [(x, y) for x, y in zip(ix.values(a), ix.values(b)) if x is not None and y is not None]
    return bool(pairs) and all(x == y for x, y in pairs)


# ---------------------------------------------------------------------------------------------- launch extents


def launch_expressions(program: Program) -> Iterator[tuple[str, LE.LaunchExpr, bool, POp | None]]:
    """(where, expression, evaluated on the host?, op) for every launch expression of the program."""
    for s in program.segments:
        yield f"segment {s.group} length", s.length, True, None
        yield f"segment {s.group} offset", s.offset, True, None
    yield "grid", program.grid, True, None
    if isinstance(program.num_warps, LE.LaunchExpr):
        yield "num_warps", program.num_warps, True, None
    for n, e in program.constexprs:
        yield f"constexpr {n}", e, True, None
    for w in program.workspaces:
        yield f"workspace {w.name} size", w.count, True, None
    for b in program.buffers:
        if b.copies is not None:
            yield f"buffer {b.name} copies", b.copies, True, None
    for op in program.walk():
        if isinstance(op, P.ShapeValue):
            yield "shape_value", op.expr, False, op


@rule("launch-extent")
def check_launch_extents(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """every runtime program-space extent depends only on launch-visible values: shape symbols, integer ABI scalars and
    constants (never device data); each constexpr is defined once"""
    names: set[str] = set()
    for name, _ in program.constexprs:
        if name in names:
            report(f"constexpr {name} defined twice (the kernel and the launcher would disagree)", None)
        names.add(name)
    ix = index_of(program)
    symbols = set(program.symbols)
    params = {q.name: q for q in program.params}
    constexprs = set(ix.constexprs)
    clean: set[tuple[int, bool]] = set()  # (expression, host) met before with nothing to report inside

    def visit(node: LE.LaunchExpr, where: str, host: bool, op: POp | None) -> bool:
        """Report what `node` and its operands break; whether nothing was. The launch expressions of a program
        share their operands (a split count in every extent built on it): each is checked once."""
        if (id(node), host) in clean:
            return True
        before = len(report.found)
        if type(node).__module__ != LE.__name__:
            report(f"{where} holds {type(node).__name__}, not a launch expression", op)
        elif isinstance(node, LE.LScalar):
            q = params.get(node.name)
            if q is None:
                report(f"{where} reads {node.name}, which is no ABI parameter", op)
            elif q.kind.value == "tensor":
                report(f"{where} reads tensor parameter {node.name}: device data may not set a launch extent",
                       op)
            elif not q.dtype.is_int:
                report(f"{where} reads {q.dtype} scalar {node.name}; launch expressions are integer", op)
        elif isinstance(node, LE.LConstexpr):
            if host:
                report(f"{where} reads constexpr {node.name}; host-side extents are written out, not "
                       f"referenced", op)
            elif node.name not in constexprs:
                report(f"{where} reads unknown constexpr {node.name}", op)
        elif isinstance(node, LE.LDim):
            for s in sorted(node.dim.symbols() - symbols):
                report(f"{where} reads {s}, which is not a shape symbol of the kernel", op)
        ok = True
        for c in node.children():
            ok = visit(c, where, host, op) and ok
        if ok and len(report.found) == before:
            clean.add((id(node), host))
            return True
        return False

    for where, e, host, op in launch_expressions(program):
        if not isinstance(e, LE.LaunchExpr):
            report(f"{where} is {e!r:.60}, not a launch expression", op)
            continue
        visit(e, where, host, op)
    for g in program.groups:
        for d in g.domain:
            for s in sorted(d.symbols() - symbols):
                report(f"group {g.id} ({g.name}) domain reads {s}, which is not a shape symbol", group=g.id)


def group_splits(group: Group) -> str | None:
    """The constexpr S of a group whose blocks are each shared by S programs (its `split_index`), if any.

    The group's other form (the looped form's alternative) runs only where S is 1, so either form names it."""
    for body in P.forms(group.body):
        for op in P.instance_ops(body):
            if isinstance(op, P.SplitIndex):
                return op.splits
    return None


def domain_programs(ix, group: Group) -> list[int | None]:
    """cdiv(prod(domain), BLOCK_I) on every sample (1 for a single-instance group), times the programs that
    share each block (`group_splits`), plus the helpers past the blocks (`group_helpers`)."""
    splits = group_splits(group)
    if group.single_instance:
        out = [1] * len(ix.envs)
    elif group.ownership.tiled:
        from .tiles import tile_programs

        out = tile_programs(ix, group)
    else:
        out = []
        for env in ix.envs:
            n, b = evaluate(product(group.domain), env), env.get(group.block)
            out.append(None if n is None or not b else -(-n // b))
    if splits is not None:
        out = [None if n is None or env.get(splits) is None else n * env[splits] for n, env in zip(out, ix.envs)]
    helpers = group_helpers(group)
    if helpers is None:
        return out
    return [None if n is None or env.get(helpers) is None else n + env[helpers] for n, env in zip(out, ix.envs)]


def group_helpers(group: Group) -> str | None:
    """The constexpr H of a group whose segment ends in H helper programs past its blocks (`helper_index`)."""
    return next((op.helpers for op in P.instance_ops(group.body) if isinstance(op, P.HelperIndex)), None)


__all__ = ["check_self_contained", "check_ssa", "check_segments", "check_launch_extents", "launch_expressions",
           "domain_programs", "group_splits", "group_helpers"]
