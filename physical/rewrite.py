"""Pattern rewrites over physical ops: rewrite functions registered per op class, applied to a fixpoint.

A rewrite function gets one op and the `Rewriter` (the builder for new values, and which values are
used) and returns `None` (no match) or a `Replace`: the ops that take the op's place and the values
that take the places of its results, so that later uses are renamed. Nested regions are rewritten
with the same patterns. Sweeps repeat until one changes nothing (`MAX_SWEEPS` bounds a pattern set
that never settles, which is a bug in the patterns and is reported as one).

    patterns = Patterns()

    @patterns.on(P.Select)
    def same_arms(op, rw):  # select(c, x, x) -> x
        return Replace.by(op.on_true) if op.on_true == op.on_false else None

    ops = rewrite_ops(ops, patterns)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .builder import Builder
from .model import POp, PRegion, PValue, map_operands, map_values

MAX_SWEEPS = 64


@dataclass(frozen=True)
class Replace:
    """What takes a matched op's place: `ops` (in order) and `values`, one per result of the op."""

    ops: tuple[POp, ...] = ()
    values: tuple[PValue, ...] = ()

    @staticmethod
    def by(*values: PValue) -> Replace:
        """The op's results are existing values; the op goes."""
        return Replace((), values)

    @staticmethod
    def drop() -> Replace:
        """The op goes (its results must be unused)."""
        return Replace()


RewriteFn = Callable[[POp, "Rewriter"], Replace | None]


class Patterns:
    """Rewrite functions keyed by op class; a function registered for a base class sees its subclasses."""

    def __init__(self) -> None:
        self.rules: dict[type[POp], list[RewriteFn]] = {}

    def on(self, *classes: type[POp]) -> Callable[[RewriteFn], RewriteFn]:
        def deco(fn: RewriteFn) -> RewriteFn:
            for c in classes:
                self.rules.setdefault(c, []).append(fn)
            return fn

        return deco

    def for_op(self, op: POp) -> list[RewriteFn]:
        return [fn for c in type(op).__mro__ for fn in self.rules.get(c, ())]  # type: ignore[arg-type]


def used_values(ops: Iterable[POp]) -> set[int]:
    """Ids of the values the ops (and their nested regions' ops) read."""
    return {v.id for op in ops for inner in (op, *(i for r in op.regions() for i in r.walk()))
            for v in inner.operands()}


class Rewriter:
    """The state a rewrite function may consult: the builder for new values and the values in use."""

    def __init__(self, patterns: Patterns, builder: Builder | None = None) -> None:
        self.patterns = patterns
        self.builder = builder or Builder()
        self.used: set[int] = set()

    def unused(self, op: POp) -> bool:
        """Whether nothing reads a result of `op` (as of the start of this sweep)."""
        return not any(r.id in self.used for r in op.results)

    def sweep(self, ops: list[POp]) -> tuple[list[POp], bool]:
        """One pass over `ops` (and nested regions); whether anything changed."""
        renamed: dict[int, PValue] = {}
        out: list[POp] = []
        changed = False
        for op in ops:
            if renamed:
                op = map_operands(op, lambda v: renamed.get(v.id, v))
            op, inner_changed = self._nested(op)
            changed |= inner_changed
            for fn in self.patterns.for_op(op):
                rep = fn(op, self)
                if rep is None:
                    continue
                if len(rep.values) != len(op.results) and (rep.values or not self.unused(op)):
                    raise ValueError(f"rewrite {fn.__name__} replaces the {len(op.results)} results of {op.NAME} "
                                     f"by {len(rep.values)} values")
                renamed.update((r.id, v) for r, v in zip(op.results, rep.values))
                out.extend(rep.ops)
                changed = True
                break
            else:
                out.append(op)
        return out, changed

    def _nested(self, op: POp) -> tuple[POp, bool]:
        if not op.regions():
            return op, False
        changed = False
        fields: dict[str, Any] = {}
        for f in op.fields():
            x = getattr(op, f.name)
            if isinstance(x, PRegion):
                ops, c = self.sweep(list(x.ops))
                changed |= c
                x = PRegion(x.args, tuple(ops))
            fields[f.name] = x
        return (type(op)(results=op.results, origin=op.origin, **fields) if changed else op), changed


def rewrite_ops(ops: Iterable[POp], patterns: Patterns, builder: Builder | None = None,
                uses: Mapping[int, object] | None = None) -> list[POp]:
    """`ops` rewritten with `patterns` until no pattern applies. `uses`: values read from outside `ops`
    (a region's yield, another region), kept in use whatever the ops do."""
    rw = Rewriter(patterns, builder)
    out = list(ops)
    for _ in range(MAX_SWEEPS):
        rw.used = used_values(out) | set(uses or ())
        out, changed = rw.sweep(out)
        if not changed:
            return out
    raise RuntimeError(f"physical rewrites did not reach a fixpoint in {MAX_SWEEPS} sweeps (patterns: "
                       f"{', '.join(sorted(c.NAME for c in patterns.rules))})")


def rewrite_region(region: PRegion, patterns: Patterns, builder: Builder | None = None) -> PRegion:
    return PRegion(region.args, tuple(rewrite_ops(region.ops, patterns, builder)))


def dead_code(removable: Callable[[POp], bool]) -> Patterns:
    """Patterns that drop every op `removable` admits once nothing reads its results."""
    patterns = Patterns()

    @patterns.on(POp)
    def unused(op: POp, rw: Rewriter) -> Replace | None:
        return Replace.drop() if op.results and rw.unused(op) and removable(op) else None

    return patterns


__all__ = ["Patterns", "Replace", "Rewriter", "RewriteFn", "rewrite_ops", "rewrite_region", "map_values",
           "map_operands", "used_values", "dead_code", "MAX_SWEEPS"]
