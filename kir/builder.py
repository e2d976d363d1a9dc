"""Building KIR: ops are typed as they are added (each op's own `infer`), regions are nested lists."""

from __future__ import annotations

import dataclasses
from typing import Any

from .core import Kernel, Op, Param, Region, Type, TypeContext, Value, new_value
from .dims import Pred
from .dtypes import DTypeVar
from .errors import Loc
from .solver import ShapeSolver


class Builder:
    def __init__(self, solver: ShapeSolver | None = None) -> None:
        self.solver = solver
        self._stack: list[tuple[tuple[Value, ...], list[Op]]] = []

    # --- regions
    def begin_region(self, arg_types: tuple[Type, ...] = (), names: tuple[str | None, ...] | None = None
                     ) -> tuple[Value, ...]:
        names = names or (None,) * len(arg_types)
        args = tuple(new_value(t, n) for t, n in zip(arg_types, names))
        self._stack.append((args, []))
        return args

    def end_region(self) -> Region:
        args, ops = self._stack.pop()
        return Region(args, tuple(ops))

    @property
    def depth(self) -> int:
        return len(self._stack)

    def current_ops(self) -> list[Op]:
        return self._stack[-1][1]

    # --- ops
    def make(self, cls: type[Op], *, loc: Loc | None = None, names: tuple[str | None, ...] | str | None = None,
             **fields: Any) -> Op:
        """Type and append an op; returns the op (results in `.results`)."""
        draft = cls(loc=loc, **fields)
        types = draft.infer(TypeContext(self.solver, loc))
        if isinstance(names, str) or names is None:
            names = (names,) * len(types)
        built = dataclasses.replace(draft, results=tuple(new_value(t, n) for t, n in zip(types, names)))
        self._stack[-1][1].append(built)
        return built

    def add(self, cls: type[Op], *, loc: Loc | None = None, name: str | None = None, **fields: Any) -> Value:
        """Add a single-result op and return its value."""
        return self.make(cls, loc=loc, names=name, **fields).result


def build_kernel(name: str, params: tuple[Param, ...], symbols: tuple[str, ...], body: Region,
                 requires: tuple[Pred, ...] = (), axioms: tuple[Pred, ...] = (),
                 dtype_vars: tuple[DTypeVar, ...] = (), consts: tuple = (), checks: bool = False,
                 loc: Loc | None = None) -> Kernel:
    from .renumber import renumber

    return renumber(Kernel(name, params, symbols, body, requires, axioms, dtype_vars, consts, checks, loc))
