"""Passes over the physical program, in pipeline order. Each has separate legality and profitability."""

from __future__ import annotations

from ..model import Group, Program


class PassContext:
    """One lowering run's state: the plan each pass made for the program it was asked about.

    The pipeline (`physical.lowering.run_passes`) creates one per run and hands it to every pass's `legal`,
    `profitable` and `run`, so each pass plans a program once and nothing outlives the run. A pass asked
    without one (a test, a tool looking at one pass) plans for that one call."""

    def __init__(self) -> None:
        self._plans: dict[Pass, tuple[Program, object]] = {}

    def plan(self, p: Pass, program: Program) -> object:
        """`p`'s plan for `program`, made once in this run however many of legal, profitable and run ask."""
        held = self._plans.get(p)
        if held is None or held[0] is not program:
            held = self._plans[p] = (program, p.make_plan(program))
        return held[1]


class Pass:
    """A named program-to-program rewrite; the construction verifier runs after it.

    A pass that plans (`make_plan`) computes its plan once per program and run: `plan(program, ctx)` keeps it
    in the run's `PassContext`, so `legal`, `profitable` and `run` of one program share it."""

    name = "pass"

    def plan(self, program: Program, ctx: PassContext | None = None) -> object:
        """The pass's plan for `program` (`ctx`: the lowering run that keeps it; None: planned for this call)."""
        return (ctx if ctx is not None else PassContext()).plan(self, program)

    def make_plan(self, program: Program) -> object:
        raise NotImplementedError

    def legal(self, program: Program, ctx: PassContext | None = None) -> bool | str:
        """True, or the reason it is not legal."""
        raise NotImplementedError

    def profitable(self, program: Program, ctx: PassContext | None = None) -> bool:
        raise NotImplementedError

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


class GroupPass(Pass):
    """A pass that plans each group on its own (`plan_group`: a plan, or the reason the group has none); it is
    legal where some group has a plan and profitable where one does, and `run` applies each of
    `plans(program, ctx)` in turn (`apply`)."""

    def plan_group(self, program: Program, group: Group) -> object:
        raise NotImplementedError

    def apply(self, program: Program, plan: object) -> Program:
        """`program` with one group's plan carried out."""
        raise NotImplementedError

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        for plan in self.plans(program, ctx):
            program = self.apply(program, plan)
        return program

    def make_plan(self, program: Program) -> tuple[object, ...]:
        return tuple(self.plan_group(program, g) for g in program.groups)

    def plans(self, program: Program, ctx: PassContext | None = None) -> list:
        return [p for p in self.plan(program, ctx) if not isinstance(p, str)]  # type: ignore[attr-defined]

    def legal(self, program: Program, ctx: PassContext | None = None) -> bool | str:
        outcomes = self.plan(program, ctx)
        if any(not isinstance(r, str) for r in outcomes):  # type: ignore[attr-defined]
            return True
        return "; ".join(f"group {g.id}: {r}" for g, r in zip(program.groups, outcomes)) or "no groups"

    def profitable(self, program: Program, ctx: PassContext | None = None) -> bool:
        return bool(self.plans(program, ctx))


from .aggregate import AggregateAtomics  # noqa: E402
from .enlarge import EnlargeOwnership  # noqa: E402
from .looped import LoopRows  # noqa: E402
from .persistent import PersistentPrograms  # noqa: E402
from .split_reduce import SplitReductions  # noqa: E402
from .split_region_scan import SplitRegionScans  # noqa: E402
from .split_rows import SplitRowsAtLaunch  # noqa: E402
from .split_scan import SplitScans  # noqa: E402
from .split_segments import SplitSegments  # noqa: E402
from .tile_contract import TileContraction  # noqa: E402
from .tile_layout import TileLayout  # noqa: E402

PIPELINE: list[Pass] = [EnlargeOwnership(), TileContraction(), TileLayout(), AggregateAtomics(), SplitScans(),
                        LoopRows(), SplitRowsAtLaunch(), SplitReductions(), PersistentPrograms(), SplitSegments(),
                        SplitRegionScans()]

__all__ = ["Pass", "PassContext", "GroupPass", "PIPELINE", "EnlargeOwnership", "TileContraction", "AggregateAtomics",
           "LoopRows", "PersistentPrograms", "TileLayout", "SplitReductions", "SplitScans", "SplitSegments",
           "SplitRegionScans", "SplitRowsAtLaunch"]
