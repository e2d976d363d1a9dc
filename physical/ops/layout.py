"""Layout ops on register fragments.

Whole-tensor writes compose slices, concatenations and reshapes into access coordinates
(physical/worksets.py); inside an instance, a value already held in a tile is rearranged in
registers by `tile_slice`, `tile_concat` and `tile_reshape`. Result positions past a result axis'
extent (padding) hold unspecified values of the operand.
"""

from __future__ import annotations

from ..model import POp, PValue
from ._base import INVARIANT, POSITIONWISE, PURE, pop


@pop("broadcast", PURE | POSITIONWISE | INVARIANT)
class Broadcast(POp):
    """Broadcast `x` to the result fragment: operand tile axis k becomes result tile axis `dims[k]`
    (extent equal, or 1); lanes are added when the result has them."""

    x: PValue
    dims: tuple[int, ...]


@pop("permute", PURE)
class Permute(POp):
    """Result tile axis k is operand tile axis `perm[k]` (lanes stay leading)."""

    x: PValue
    perm: tuple[int, ...]


@pop("expand_dims", PURE)
class ExpandDims(POp):
    """Insert a tile axis of extent 1 at tile position `axis`."""

    x: PValue
    axis: int


@pop("squeeze", PURE)
class Squeeze(POp):
    """Remove the extent-1 tile axis at tile position `axis`."""

    x: PValue
    axis: int


@pop("tile_slice", PURE)
class TileSlice(POp):
    """Result position j along tile axis a is operand position `starts[a] + j * steps[a]` (starts are
    uniform index values, steps positive constants); lanes stay leading."""

    x: PValue
    starts: tuple[PValue, ...]
    steps: tuple[int, ...]


@pop("tile_concat", PURE)
class TileConcat(POp):
    """Concatenation of `parts` along tile axis `axis`: part k occupies the positions from the sum of
    the earlier parts' extents on; all other axes (and the lanes) agree with the result."""

    parts: tuple[PValue, ...]
    axis: int


@pop("tile_reshape", PURE)
class TileReshape(POp):
    """The operand's members in row-major order over its tile extents, regrouped row-major over the
    result's tile extents (equal element counts); lanes stay leading."""

    x: PValue
