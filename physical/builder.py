"""The one builder of physical ops: hands out value ids and appends ops to nested regions.

Construction (`physical.lower.context.Lowerer`, a builder that also tracks KIR values) and every pass
that writes new ops use it. A pass starts numbering after the program's own values
(`Builder.after(program)`), which `max_value_id` finds in every group body (the regions of its ops, a
`looped_rows` op's forms included), so that no id is handed out twice whatever the order of the passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ops as P
from .model import Fragment, Origin, POp, PRegion, Program, PValue, map_values


def region_values(region: PRegion) -> list[PValue]:
    """Every value `region` defines: its arguments, its ops' results and those of nested regions."""
    out = list(region.args)
    for op in region.walk():
        out.extend(op.results)
        for r in op.regions():
            out.extend(r.args)
    return out


def max_value_id(program: Program) -> int:
    """The largest value id `program` uses (0 for none)."""
    return max((v.id for g in program.groups for v in region_values(g.body)), default=0)


@dataclass
class Frame:
    """One region under construction. `cache` and `isolated` serve construction's value caches (a cached
    value is visible in nested regions; an isolated frame, a combine, sees none of the enclosing ones)."""

    args: tuple[PValue, ...] = ()
    ops: list[POp] = field(default_factory=list)
    cache: dict[Any, PValue] = field(default_factory=dict)
    isolated: bool = False


class Builder:
    """Appends new ops to the innermost open region, numbering their values after `last`."""

    def __init__(self, last: int = 0) -> None:
        self.last = last
        self.frames: list[Frame] = [Frame()]

    @classmethod
    def after(cls, program: Program) -> Builder:
        """A builder whose values are numbered after every value of `program`."""
        return cls(max_value_id(program))

    # ------------------------------------------------------------------ ids and values
    def fresh_id(self) -> int:
        self.last += 1
        return self.last

    def fresh(self, t: Fragment, name: str | None = None) -> PValue:
        return PValue(self.fresh_id(), t, name)

    @property
    def next_id(self) -> int:
        """The last id handed out (a pass that builds in several steps continues from it)."""
        return self.last

    # ------------------------------------------------------------------ ops
    def put(self, op: POp) -> POp:
        self.frames[-1].ops.append(op)
        return op

    def emit(self, cls: type[POp], types: tuple[Fragment, ...], names: tuple[str | None, ...] | None = None,
             origin: Origin | None = None, **fields: Any) -> POp:
        """Append a `cls` op with fresh results of `types`."""
        names = names or (None,) * len(types)
        return self.put(cls(results=tuple(self.fresh(t, n) for t, n in zip(types, names)), origin=origin, **fields))

    def add(self, cls: type[POp], t: Fragment, origin: Origin | None = None, name: str | None = None,
            **fields: Any) -> PValue:
        """Append a one-result `cls` op and return its result."""
        return self.emit(cls, (t,), (name,), origin, **fields).results[0]

    # ------------------------------------------------------------------ regions
    def begin(self, types: tuple[Fragment, ...] = (), names: tuple[str | None, ...] | None = None,
              isolated: bool = False) -> tuple[PValue, ...]:
        """Open a region with fresh arguments of `types`; returns them."""
        names = names or (None,) * len(types)
        args = tuple(self.fresh(t, n) for t, n in zip(types, names))
        self.frames.append(Frame(args, isolated=isolated))
        return args

    def end(self) -> list[POp]:
        """Close the innermost region; returns its ops."""
        return self.frames.pop().ops

    def finish(self, yields: tuple[PValue, ...] | None = None) -> PRegion:
        """Close the innermost region as a `PRegion` of its arguments (ending it with a yield of `yields`)."""
        if yields is not None:
            self.emit(P.Yield, (), values=yields)
        f = self.frames.pop()
        return PRegion(f.args, tuple(f.ops))

    def copy_region(self, region: PRegion) -> PRegion:
        """A copy of `region` with fresh values (a region belongs to one op; an op that needs another's
        combine, say, takes a copy)."""
        names: dict[int, PValue] = {}

        def renamed(v: PValue) -> PValue:
            names[v.id] = self.fresh(v.type, v.name)
            return names[v.id]

        def copy(r: PRegion) -> PRegion:
            args = tuple(renamed(a) for a in r.args)
            ops = []
            for op in r.ops:
                fields = {f.name: map_values(getattr(op, f.name), lambda v: names.get(v.id, v), copy)
                          for f in op.fields()}
                ops.append(type(op)(results=tuple(renamed(v) for v in op.results), origin=op.origin, **fields))
            return PRegion(args, tuple(ops))

        return copy(region)

    def fit(self, v: PValue, t: Fragment, origin: Origin | None) -> PValue:
        """`v` broadcast to the fragment `t` (same dtype)."""
        if v.type == t:
            return v
        dims = tuple(range(len(v.type.tile)))
        return self.add(P.Broadcast, t, origin, x=v, dims=dims)

    def combine(self, region: PRegion, lhs: list[PValue], rhs: list[PValue], like: list[Fragment],
                origin: Origin | None) -> list[PValue]:
        """The scalar combine `region` applied element-wise to (lhs, rhs), results broadcast to `like`."""
        vals: dict[int, PValue] = {a.id: v for a, v in zip(region.args, lhs + rhs)}
        for op in region.ops:
            if isinstance(op, P.Yield):
                continue
            fields = {f.name: vals.get(getattr(op, f.name).id, getattr(op, f.name))
                      if isinstance(getattr(op, f.name), PValue) else getattr(op, f.name) for f in op.fields()}
            ins = [x for x in fields.values() if isinstance(x, PValue)]
            tile = next((x.type.tile for x in ins if x.type.tile), ())
            (res,) = op.results
            t = res.type if isinstance(op, P.Const) else \
                Fragment(res.type.dtype, any(x.type.lanes for x in ins), tile, res.type.index)
            new = self.fresh(t, res.name)
            self.put(type(op)(results=(new,), origin=op.origin, **fields))
            vals[res.id] = new
        return [self.fit(vals.get(y.id, y), t, origin) for y, t in zip(region.yielded, like)]

    @property
    def ops(self) -> list[POp]:
        """The ops of the outermost region (what a pass built outside any nested region)."""
        return self.frames[0].ops


__all__ = ["Builder", "Frame", "max_value_id", "region_values"]
