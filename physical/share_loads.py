"""share-loads: one load where a group's body reads the same elements of a buffer nothing in the launch writes twice.

Authors name a segment's bounds where they use them: `out[offsets[s]:offsets[s + 1]] = intent.cumsum(
values[offsets[s]:offsets[s + 1]])` reads `offsets[s]` and `offsets[s + 1]` once for the write slice and once for
the read slice, and construction lowers each read on its own. The last step of construction keeps the first of
such loads and gives its value to the uses of the others, so a program moves each bound once (and every pass after
it sees one value per bound: a scan's write slice then starts where its read slice does).

Two loads are the same read when they sit at the top of one group body (one straight-line block: the first
dominates the second), read one buffer that no op of the program writes (a pure read: nothing can change it
between them), and their accesses agree in every part: coordinates, copy and mask computed alike from the same
values (pure, region-free ops of that body, keyed by kind, fields and operands: `offsets[%s + 1]` twice is one
coordinate), the same fill, the same justification and the same fragment type. The arithmetic that only fed a
dropped load goes with it. Nothing else changes: every other op, and every value another op reads, stays as built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable

from . import ops as P
from .model import AccessRelation, Group, Guard, POp, Program, PValue, Trait
from .rewrite import dead_code, map_operands, rewrite_ops

NAME = "share-loads"


def written_buffers(program: Program) -> set[int] | None:
    """Ids of the buffers some op of the program writes (stores, atomics, tickets, nested ones included), or None
    where a writing op names no access relation and has no regions to write through (its target unknown here). An
    op with regions and no access of its own (a region scan) writes through the ops of its regions, which the walk
    visits."""
    out: set[int] = set()
    for op in program.walk():
        if not op.has(Trait.WRITES):
            continue
        access = getattr(op, "access", None)
        if isinstance(access, AccessRelation):
            out.add(access.buffer)
        elif not op.regions():
            return None
    return out


def share_loads(program: Program) -> Program:
    """`program` with each group's repeated pure loads read once (see the module)."""
    written = written_buffers(program)
    if written is None:
        return program  # a write this rewrite cannot place: every load stays as built
    groups = tuple(_share(g, written) for g in program.groups)
    if all(a is b for a, b in zip(groups, program.groups)):
        return program
    return dataclasses.replace(program, groups=groups)


def _share(g: Group, written: set[int]) -> Group:
    keys: dict[int, Hashable] = {}  # value id -> the key of the computation that gives it
    first: dict[Hashable, PValue] = {}  # load key -> the value of the first load with it
    renamed: dict[int, PValue] = {}
    dropped: list[POp] = []
    out: list[POp] = []
    for op in g.body.ops:
        if renamed:
            op = map_operands(op, lambda v: renamed.get(v.id, v))
        if isinstance(op, P.Load) and op.access.buffer not in written:
            key = ("load", _access_key(op.access, keys), op.results[0].type)
            keys[op.results[0].id] = key
            if key in first:
                renamed[op.results[0].id] = first[key]
                dropped.append(op)
                continue
            first[key] = op.results[0]
        elif not (op.regions() or op.has_effects() or op.has(Trait.READS)) and op.results:
            fields = tuple((f.name, _field_key(getattr(op, f.name), keys)) for f in op.fields())
            for n, r in enumerate(op.results):
                keys[r.id] = (type(op).__name__, fields, tuple(x.type for x in op.results), n)
        out.append(op)
    if not dropped:
        return g
    # the arithmetic that fed only the dropped loads (their coordinates, masks) goes with them
    fed = _feeding(dropped, out)
    ops = rewrite_ops(out, dead_code(lambda op: id(op) in fed))
    return dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops)))


def _feeding(dropped: list[POp], ops: list[POp]) -> set[int]:
    """The pure, region-free ops among `ops` whose results only the `dropped` loads read, directly or through
    one another."""
    defs = {r.id: op for op in ops for r in op.results}
    fed: set[int] = set()
    todo = [v for op in dropped for v in op.operands()]
    while todo:
        v = todo.pop()
        op = defs.get(v.id)
        if op is None or id(op) in fed or op.regions() or op.has_effects() or op.has(Trait.READS):
            continue
        fed.add(id(op))
        todo.extend(op.operands())
    return fed


def _value_key(v: PValue, keys: dict[int, Hashable]) -> Hashable:
    return keys.get(v.id, ("value", v.id))


def _field_key(x: object, keys: dict[int, Hashable]) -> Hashable:
    if isinstance(x, PValue):
        return _value_key(x, keys)
    if isinstance(x, tuple):
        return tuple(_field_key(y, keys) for y in x)
    if isinstance(x, float):
        return ("float", repr(x))  # -0.0 and 0.0 differ, NaN equals itself
    return x if isinstance(x, Hashable) else ("object", id(x))


def _access_key(a: AccessRelation, keys: dict[int, Hashable]) -> Hashable:
    bounds = ("guard", _value_key(a.bounds.mask, keys)) if isinstance(a.bounds, Guard) else a.bounds
    return (a.buffer, tuple(_value_key(c, keys) for c in a.coords),
            None if a.mask is None else _value_key(a.mask, keys), bounds, _field_key(a.fill, keys),
            None if a.copy is None else _value_key(a.copy, keys))


__all__ = ["NAME", "share_loads", "written_buffers"]
