"""Ownership enlargement: a program owns BLOCK_I consecutive instances instead of one.

Lanes are independent instances of a workset, so merging them into one program is legal whenever the
group's instances are independent (construction proved it for every mapped group). It pays when the
work per instance is small: scalar bodies take up to 1024 instances; bodies holding tiles take as
many as keep BLOCK_I * (largest tile) within 4096 elements. num_warps follows the largest block. A group
folding or scanning data-dependent subregions takes no more lanes than leave every resident program of the
device an instance (`next_pow2(cdiv(instances, resident_programs))`): its programs run to their longest lane.
Where consecutive instances along the innermost domain axis share their subregion (the columns of a jagged
tensor's segment: `shared_along_inner_axis`), a program takes at least a run of them (`next_pow2` of that axis,
within the tile budget): its lanes are equally long and read neighbouring elements of each row.
"""

from __future__ import annotations

import dataclasses

from kir.pointwise import BinaryFn

from ..construct import segments_for
from ..launch_expr import (
    LaunchExpr,
    LBin,
    LConst,
    LNextPow2,
    LResidentPrograms,
    LWarps,
    lcdiv,
    ldim,
    lmax,
    lmin,
    lmul,
    lprod,
)
from ..model import Group, Program
from ..ops import Binary, ChunkLanes, Contract, Load, OwnedInstances, RegionFold, RegionScan, ShapeValue
from . import Pass, PassContext

SCALAR_LANES = 1024
TILE_BUDGET = 4096
# Per-lane contractions stream both operands per lane; larger blocks amortise the program's fixed cost.
CONTRACT_BUDGET = 16384
# the warps a region fold's program is sized for when counting the programs that keep the device busy
REGION_WARPS = 4


def tile_elements(program: Program, group: Group) -> LaunchExpr:
    """The largest tile (product of its blocks) any value of the group holds, as a launch expression."""
    blocks = dict(program.constexprs)
    sizes: dict[tuple[str, ...], LaunchExpr] = {}
    for op in group.body.walk():
        for v in (*op.results, *[a for r in op.regions() for a in r.args]):
            names = tuple(t.block for t in v.type.tile)
            if names and names not in sizes:
                sizes[names] = lprod(tuple(blocks[n] for n in names))
    if not sizes:
        return LConst(1)
    return lmax(*sizes.values())


def shared_along_inner_axis(group: Group) -> bool:
    """Whether consecutive instances along the group's innermost domain axis fold or scan the same subregion: the
    bounds of its region folds and scans reach the instance only through `flat // extent` (the columns of a
    jagged tensor's segment, `for s in parallel(J): for c in parallel(D): out[offsets[s]:offsets[s + 1], c] =
    ...`), or not at all (bounds every instance shares: a top-level `out[b:e, :] = intent.cumsum(values[b:e, :],
    axis=0)` scans `b:e` of every column)."""
    if not group.domain:
        return False
    ops = group.body.ops
    owned = [op for op in ops if isinstance(op, OwnedInstances)]
    regions = [op for op in ops if isinstance(op, RegionFold | RegionScan)]
    if len(owned) != 1 or not regions:
        return False
    flat = owned[0].results[0].id
    defs = {v.id: op for op in ops for v in op.results}
    pending = [v for op in regions for v in (op.begin, op.end)]  # type: ignore[attr-defined]
    seen: set[int] = set()
    while pending:
        v = pending.pop()
        if v.id == flat:
            return False
        if v.id in seen:
            continue
        seen.add(v.id)
        op = defs.get(v.id)
        if op is None:
            continue
        if isinstance(op, Binary) and op.fn is BinaryFn.floordiv and op.lhs.id == flat \
                and isinstance(defs.get(op.rhs.id), ShapeValue):
            continue  # the outer coordinate: the same for a run of consecutive instances
        if op.regions():
            return False
        # a load's position matters, not its lanes' validity mask
        pending += list(op.access.coords) if isinstance(op, Load) else list(op.operands())
    return True


def _has_lanes(group: Group) -> bool:
    return any(isinstance(op, OwnedInstances | ChunkLanes) for op in group.body.walk())


class EnlargeOwnership(Pass):
    name = "enlarge-ownership"

    def legal(self, program: Program, ctx: PassContext | None = None) -> bool | str:
        for g in program.groups:
            if g.domain and g.serial:
                return f"group {g.id} maps instances to programs but is marked serial"
        return True

    def profitable(self, program: Program, ctx: PassContext | None = None) -> bool:
        consts = dict(program.constexprs)
        return any(_has_lanes(g) and consts[g.block] == LConst(1) for g in program.groups)

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        consts = dict(program.constexprs)
        largest: list[LaunchExpr] = []
        for g in program.groups:
            tile = tile_elements(program, g)
            if _has_lanes(g):
                limit = CONTRACT_BUDGET if any(isinstance(o, Contract) for o in g.body.walk()) else TILE_BUDGET
                budget = LConst(SCALAR_LANES) if tile == LConst(1) else \
                    lmax(LConst(1), LBin("//", LConst(limit), tile))
                if g.domain:
                    total = lprod(tuple(ldim(d) for d in g.domain))
                    consts[g.block] = lmin(budget, LNextPow2(total))
                    if any(isinstance(o, RegionFold | RegionScan) for o in g.body.walk()):
                        # a lane's work is its subregion, unknown before the launch, and a program runs to
                        # its longest lane: few instances are spread over the device (one per program when
                        # there are fewer than it keeps busy) rather than packed into a few programs
                        spread = LNextPow2(lcdiv(total, LResidentPrograms(LConst(REGION_WARPS))))
                        if shared_along_inner_axis(g):  # a run of instances with one subregion: equal lanes, and
                            # the neighbours along the innermost axis read neighbouring elements (whole sectors)
                            spread = lmax(spread, LNextPow2(ldim(g.domain[-1])))
                        consts[g.block] = lmin(budget, LNextPow2(total), spread)
                else:
                    consts[g.block] = lmin(budget, LConst(SCALAR_LANES))
            largest.append(lmul(consts[g.block], tile))
        constexprs = tuple((n, consts[n]) for n, _ in program.constexprs)
        segments, grid = segments_for(program.groups, consts)
        warps = LWarps(lmax(*largest)) if largest else 4
        return dataclasses.replace(program, constexprs=constexprs, segments=segments, grid=grid, num_warps=warps)
