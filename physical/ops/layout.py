"""Layout ops on register fragments (slices, concats and reshapes compose into coordinates instead)."""

from __future__ import annotations

from ..model import POp, PValue
from ._base import pop


@pop("broadcast")
class Broadcast(POp):
    """Broadcast `x` to the result fragment: operand tile axis k becomes result tile axis `dims[k]`
    (extent equal, or 1); lanes are added when the result has them."""

    x: PValue
    dims: tuple[int, ...]


@pop("permute")
class Permute(POp):
    """Result tile axis k is operand tile axis `perm[k]` (lanes stay leading)."""

    x: PValue
    perm: tuple[int, ...]


@pop("expand_dims")
class ExpandDims(POp):
    """Insert a tile axis of extent 1 at tile position `axis`."""

    x: PValue
    axis: int


@pop("squeeze")
class Squeeze(POp):
    """Remove the extent-1 tile axis at tile position `axis`."""

    x: PValue
    axis: int
