"""Passes over the physical program, in pipeline order. Each has separate legality and profitability."""

from __future__ import annotations

from ..model import Program


class Pass:
    """A named program-to-program rewrite; the construction verifier runs after it."""

    name = "pass"

    def legal(self, program: Program) -> bool | str:
        """True, or the reason it is not legal."""
        raise NotImplementedError

    def profitable(self, program: Program) -> bool:
        raise NotImplementedError

    def run(self, program: Program) -> Program:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


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

__all__ = ["Pass", "PIPELINE", "EnlargeOwnership", "TileContraction", "AggregateAtomics", "LoopRows",
           "PersistentPrograms", "TileLayout", "SplitReductions", "SplitScans", "SplitSegments"]
