"""Choosing 32- or 64-bit index arithmetic for one launch.

The generated source computes every offset under the `INDEX_64` constexpr flag: in 64 bits when
it is true, in 32 bits otherwise. The launcher passes `INDEX_64=False` only when every integer
the kernel body can compute while indexing provably fits in int32; any doubt chooses 64 bits, so
index arithmetic never silently wraps.

At launch every size is concrete, so the proof is interval arithmetic on concrete values, which is
exact (no symbolic reasoning can do better once the sizes are known):

* a tensor's reachable element offset is `sum over axes of (extent - 2 + tile) * |stride|`: lanes
  of a rounded-up tile compute offsets up to `tile - 1` past the last valid coordinate of an axis
  before the mask discards them, and those masked offsets must not wrap either, or the mask itself
  (a comparison of the wrapped coordinate) would be wrong;
* every extent, every launch value (grid, symbol values, workspace sizes, integer constexprs) must
  fit, and so must `grid * tile`, the first offset a program computes from its id;
* `tile` is the largest integer constexpr (the emitter's tile sizes are constexprs), at least 1.

Zero-stride (broadcast) axes contribute nothing to a tensor's offsets; an empty tensor has no
reachable offset at all. Bounds are checked with `< INT32_MAX` so that one more increment
(`offset + 1` in a bound comparison) cannot wrap either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class TensorExtent:
    """The concrete geometry of one tensor argument (or workspace) of a launch."""

    name: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True)
class IndexWidth:
    """The choice for one launch and the value that forced it (for `explain` and tests)."""

    index64: bool
    reason: str

    @property
    def bits(self) -> int:
        return 64 if self.index64 else 32


def reachable_offset(extent: TensorExtent, tile: int) -> int:
    """The largest element offset (masked lanes included) the kernel can compute for `extent`."""
    if any(e == 0 for e in extent.shape):
        return 0
    # A tile rounded up over an axis of extent e reaches coordinate e - 1 + (tile - 1).
    return sum((e + tile - 2) * abs(s) for e, s in zip(extent.shape, extent.strides))


def choose_index_width(tensors: Iterable[TensorExtent], launch_values: Mapping[str, int], grid: int,
                       tile: int = 1) -> IndexWidth:
    """64 bits unless every offset and launch value is proven to fit in int32 (see the module doc)."""
    tile = max(int(tile), 1)
    largest = ("", -1, "")
    for t in tensors:
        if t.shape and max(t.shape) >= INT32_MAX:  # coordinates are compared against extents
            return IndexWidth(True, f"parameter {t.name} has extent {max(t.shape)} (shape {t.shape}), which does not "
                                    f"fit in 32 bits")
        reach = reachable_offset(t, tile)
        if reach > largest[1]:
            largest = (f"parameter {t.name}", reach, f"shape {t.shape}, strides {t.strides}")
        if reach >= INT32_MAX:
            return IndexWidth(True, f"parameter {t.name} can reach element offset {reach} "
                                    f"(shape {t.shape}, strides {t.strides}, tile {tile})")
    for name, value in launch_values.items():
        if abs(int(value)) >= INT32_MAX:
            return IndexWidth(True, f"{name} = {value} does not fit in 32 bits")
    if grid * tile >= INT32_MAX:
        return IndexWidth(True, f"grid {grid} x tile {tile} = {grid * tile} does not fit in 32 bits")
    what = f"; largest offset {largest[1]} ({largest[0]}, {largest[2]})" if largest[1] >= 0 else ""
    return IndexWidth(False, f"every offset and launch value fits in 32 bits{what}")
