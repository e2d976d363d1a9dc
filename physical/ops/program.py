"""Program-space ops: which instances a program owns, shape values, tile coordinates, barriers."""

from __future__ import annotations

from ..launch_expr import LaunchExpr
from ..model import POp, PValue
from ._base import EFFECTS, INVARIANT, NO_TRAITS, POSITIONWISE, PURE, UNIFORM, pop


@pop("owned_instances", NO_TRAITS)
class OwnedInstances(POp):
    """The flattened instances this program owns: `(pid - O_g) * BLOCK + arange(BLOCK)` (lanes, index).

    With `splits` (a constexpr S), S consecutive programs own each block and split its work between them
    (`split_index` tells them apart): the block is `(pid - O_g) // S`.
    """

    group: int
    block: str
    splits: str | None = None


@pop("owned_tile", NO_TRAITS)
class OwnedTile(POp):
    """The instances a tile-owning program owns (groups with `tiles`): one result per domain axis.

    Leading axes give one coordinate each (uniform index scalars). Trailing axis k gives the block
    `tile_k * B_k + arange(B_k)` (a one-axis index tile of extent and block `blocks[k]`); positions
    past the domain extent are no instances, so effects are masked by `coordinate < extent`. Programs
    enumerate tiles row-major, except that with `group_m > 1` the two trailing axes are visited in
    bands of `group_m` tile rows (column by column inside a band), so that concurrent programs
    share operand rows and columns in cache.
    """

    group: int
    blocks: tuple[str, ...]
    group_m: int = 1


@pop("chunk_lanes", PURE)
class ChunkLanes(POp):
    """`base + arange(BLOCK)` (lanes, index): one chunk of a workset run in order inside an instance."""

    base: PValue
    block: str


@pop("shape_value", PURE | UNIFORM | INVARIANT)
class ShapeValue(POp):
    """The runtime value of a launch expression over shape symbols (a uniform scalar)."""

    expr: LaunchExpr


@pop("tile_index", PURE | POSITIONWISE | INVARIANT)
class TileIndex(POp):
    """Position along tile axis `axis` of the result's tile (`arange(BLOCK)` broadcast to the tile)."""

    axis: int


@pop("barrier", EFFECTS)
class Barrier(POp):
    """Orders this program's earlier memory effects before its later reads (intra-program only)."""


@pop("scalar_param", PURE | UNIFORM | INVARIANT)
class ScalarParam(POp):
    """The launch value of a runtime scalar parameter of the ABI (a uniform scalar of its dtype)."""

    param: str
