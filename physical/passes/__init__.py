"""Passes over the physical program, in pipeline order. Each has separate legality and profitability."""

from __future__ import annotations

from ..model import Group, Program


class Pass:
    """A named program-to-program rewrite; the construction verifier runs after it.

    A pass that plans (`make_plan`) computes its plan once per program: `plan(program)` keeps it for the
    program it was asked about last, so `legal`, `profitable` and `run` of one program share it."""

    name = "pass"
    _planned: tuple[Program, object] | None = None

    def plan(self, program: Program) -> object:
        """The pass's plan for `program`, made once however many of legal, profitable and run ask."""
        planned = self._planned
        if planned is None or planned[0] is not program:
            planned = self._planned = (program, self.make_plan(program))
        return planned[1]

    def make_plan(self, program: Program) -> object:
        raise NotImplementedError

    def legal(self, program: Program) -> bool | str:
        """True, or the reason it is not legal."""
        raise NotImplementedError

    def profitable(self, program: Program) -> bool:
        raise NotImplementedError

    def run(self, program: Program) -> Program:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


class GroupPass(Pass):
    """A pass that plans each group on its own (`plan_group`: a plan, or the reason the group has none); it is
    legal where some group has a plan and profitable where one does, and `run` applies `plans(program)`."""

    def plan_group(self, program: Program, group: Group) -> object:
        raise NotImplementedError

    def make_plan(self, program: Program) -> tuple[object, ...]:
        return tuple(self.plan_group(program, g) for g in program.groups)

    def plans(self, program: Program) -> list:
        return [p for p in self.plan(program) if not isinstance(p, str)]  # type: ignore[attr-defined]

    def legal(self, program: Program) -> bool | str:
        outcomes = self.plan(program)
        if any(not isinstance(r, str) for r in outcomes):  # type: ignore[attr-defined]
            return True
        return "; ".join(f"group {g.id}: {r}" for g, r in zip(program.groups, outcomes)) or "no groups"

    def profitable(self, program: Program) -> bool:
        return bool(self.plans(program))


from .aggregate import AggregateAtomics  # noqa: E402
from .enlarge import EnlargeOwnership  # noqa: E402
from .looped import LoopRows  # noqa: E402
from .persistent import PersistentPrograms  # noqa: E402
from .split_reduce import SplitReductions  # noqa: E402
from .split_scan import SplitScans  # noqa: E402
from .split_segments import SplitSegments  # noqa: E402
from .tile_contract import TileContraction  # noqa: E402
from .tile_layout import TileLayout  # noqa: E402

PIPELINE: list[Pass] = [EnlargeOwnership(), TileContraction(), TileLayout(), AggregateAtomics(), SplitScans(),
                        LoopRows(), SplitReductions(), PersistentPrograms(), SplitSegments()]

__all__ = ["Pass", "GroupPass", "PIPELINE", "EnlargeOwnership", "TileContraction", "AggregateAtomics", "LoopRows",
           "PersistentPrograms", "TileLayout", "SplitReductions", "SplitScans", "SplitSegments"]
