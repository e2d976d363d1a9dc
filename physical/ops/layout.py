"""Layout ops on register fragments.

Whole-tensor writes compose slices, concatenations and reshapes into access coordinates
(physical/worksets.py); inside an instance, a value already held in a tile is rearranged in
registers by `tile_slice`, `tile_concat` and `tile_reshape`. Result positions past a result axis'
extent (padding) hold unspecified values of the operand.
"""

from __future__ import annotations

from kir.dims import DConst

from ..model import Fragment, POp, PValue
from ._base import INVARIANT, POSITIONWISE, PURE, pop, results_problem, typing_rule


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


# ---------------------------------------------------------------------------------------------- typing


@typing_rule(Broadcast, one_result=True)
def _broadcast(op: Broadcast, r: Fragment) -> list[str]:
    x = op.x.type
    out = [] if r.dtype == x.dtype else [f"result is {r.dtype} but the operand is {x.dtype}"]
    if len(op.dims) != len(x.tile) or len(set(op.dims)) != len(op.dims) or \
            any(not 0 <= d < len(r.tile) for d in op.dims):
        return out + [f"dims {list(op.dims)} do not place the operand's {len(x.tile)} tile axes in {r}"]
    for k, d in enumerate(op.dims):
        if x.tile[k].extent != r.tile[d].extent and x.tile[k].extent != DConst(1):
            out.append(f"operand axis {k} ({x.tile[k]}) cannot broadcast to result axis {d} ({r.tile[d]})")
    if x.lanes and not r.lanes:
        out.append("drops the lanes axis")
    return out


@typing_rule(Permute, one_result=True)
def _permute(op: Permute, r: Fragment) -> list[str]:
    x = op.x.type
    if sorted(op.perm) != list(range(len(x.tile))) or len(r.tile) != len(x.tile):
        return [f"perm {list(op.perm)} is not a permutation of the operand's {len(x.tile)} tile axes"]
    if tuple(x.tile[p] for p in op.perm) != r.tile or r.lanes != x.lanes or r.dtype != x.dtype:
        return [f"result {r} is not {x} permuted by {list(op.perm)}"]
    return []


@typing_rule(ExpandDims, Squeeze, one_result=True)
def _expand_squeeze(op: ExpandDims | Squeeze, r: Fragment) -> list[str]:
    x = op.x.type
    small, big = (x, r) if isinstance(op, ExpandDims) else (r, x)
    if not 0 <= op.axis < len(big.tile) or big.tile[op.axis].extent != DConst(1) or \
            big.tile[:op.axis] + big.tile[op.axis + 1:] != small.tile:
        return [f"{x} -> {r} is not a {op.NAME} of an extent-1 axis at {op.axis}"]
    if r.lanes != x.lanes or r.dtype != x.dtype:
        return [f"result {r} changes the lanes or dtype of {x}"]
    return []


@typing_rule(TileSlice)
def _tile_slice(op: TileSlice) -> list[str]:
    out = results_problem(op, 1)
    x = op.x.type
    if not op.results:
        return out
    r = op.results[0].type
    if (r.dtype, r.lanes, r.index, len(r.tile)) != (x.dtype, x.lanes, x.index, len(x.tile)):
        out.append(f"result {r} is not a slice of {x}")
    if len(op.starts) != len(x.tile) or len(op.steps) != len(x.tile):
        out.append(f"{len(op.starts)} starts and {len(op.steps)} steps for {len(x.tile)} tile axes")
    if any(not (s.type.is_scalar and s.type.dtype.is_int) for s in op.starts):
        out.append("slice starts are uniform integers")
    if any(st < 1 for st in op.steps):
        out.append(f"slice steps {list(op.steps)} must be positive")
    return out


@typing_rule(TileConcat)
def _tile_concat(op: TileConcat) -> list[str]:
    out = results_problem(op, 1)
    if not op.results or not op.parts:
        return out + ["concat needs parts and a result"]
    r = op.results[0].type
    if not 0 <= op.axis < len(r.tile):
        return out + [f"axis {op.axis} is no tile axis of {r}"]
    for x in op.parts:
        t = x.type
        if (t.dtype, t.lanes, t.index, len(t.tile)) != (r.dtype, r.lanes, r.index, len(r.tile)) or \
                t.tile[:op.axis] + t.tile[op.axis + 1:] != r.tile[:op.axis] + r.tile[op.axis + 1:]:
            out.append(f"part {t} does not fit result {r} outside axis {op.axis}")
    return out


@typing_rule(TileReshape)
def _tile_reshape(op: TileReshape) -> list[str]:
    out = results_problem(op, 1)
    if op.results:
        r, x = op.results[0].type, op.x.type
        if (r.dtype, r.lanes, r.index) != (x.dtype, x.lanes, x.index) or not x.tile or not r.tile:
            out.append(f"result {r} is not a regrouping of {x}")
    return out
