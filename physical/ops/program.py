"""Program-space ops: which instances a program owns, shape values, tile coordinates, barriers."""

from __future__ import annotations

from ..launch_expr import LaunchExpr
from ..model import POp, PValue
from ._base import pop


@pop("owned_instances")
class OwnedInstances(POp):
    """The flattened instances this program owns: `(pid - O_g) * BLOCK + arange(BLOCK)` (lanes, index)."""

    group: int
    block: str


@pop("chunk_lanes")
class ChunkLanes(POp):
    """`base + arange(BLOCK)` (lanes, index): one chunk of a workset run in order inside an instance."""

    base: PValue
    block: str


@pop("shape_value")
class ShapeValue(POp):
    """The runtime value of a launch expression over shape symbols (a uniform scalar)."""

    expr: LaunchExpr


@pop("tile_index")
class TileIndex(POp):
    """Position along tile axis `axis` of the result's tile (`arange(BLOCK)` broadcast to the tile)."""

    axis: int


@pop("barrier")
class Barrier(POp):
    """Orders this program's earlier memory effects before its later reads (intra-program only)."""

    def has_effects(self) -> bool:
        return True


@pop("scalar_param")
class ScalarParam(POp):
    """The launch value of a runtime scalar parameter of the ABI (a uniform scalar of its dtype)."""

    param: str
