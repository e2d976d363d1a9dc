"""Canonical value numbering: ids follow definition order in the printed form.

Two kernels that print the same are then structurally equal, which is what the round-trip property
`parse(print(k)) == k` relies on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .core import DynSlice, Kernel, Op, Param, Region, Value


class _Renumber:
    def __init__(self) -> None:
        self.map: dict[int, Value] = {}
        self.next = 0

    def define(self, v: Value) -> Value:
        nv = Value(self.next, v.type, v.name)
        self.next += 1
        self.map[v.id] = nv
        return nv

    def use(self, v: Value) -> Value:
        # An undefined use keeps its identity so that the verifier can still report it.
        return self.map.get(v.id, v)

    def field(self, x: Any) -> Any:
        if isinstance(x, Value):
            return self.use(x)
        if isinstance(x, DynSlice):
            return DynSlice(self.use(x.begin), self.use(x.end))
        if isinstance(x, Region):
            return self.region(x)
        if isinstance(x, tuple):
            return tuple(self.field(y) for y in x)
        return x

    def region(self, r: Region) -> Region:
        args = tuple(self.define(a) for a in r.args)
        return Region(args, tuple(self.op(o) for o in r.ops))

    def op(self, o: Op) -> Op:
        # Regions are printed (and so parsed) before the op's results are defined.
        changes = {f.name: self.field(getattr(o, f.name)) for f in o.fields()}
        results = tuple(self.define(v) for v in o.results)
        return dataclasses.replace(o, results=results, **changes)


def renumber(k: Kernel) -> Kernel:
    rn = _Renumber()
    body = rn.region(k.body)
    params = tuple(Param(p.name, a) for p, a in zip(k.params, body.args))
    return dataclasses.replace(k, params=params, body=body)
