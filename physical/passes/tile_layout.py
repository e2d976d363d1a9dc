"""Tiles follow memory layout for element-wise groups: a permute is copied tile by tile.

Construction maps a multi-axis workset row-major onto the lanes of a program: consecutive lanes are
consecutive instances of the last domain axis. An access whose unit-stride (last) coordinate follows
an earlier domain axis instead, the store of `out[c, r] = x[r, c]` or the load of
`out[b, c, h, w] = x[b, h, w, c]` (NHWC to NCHW), then touches one 32-byte sector per lane. This pass
gives such a group tile ownership (`Group.ownership`, tiles) over two domain axes: the one that access's
unit-stride coordinate follows (m) and the last one (n), which the other accesses walk contiguously.
Every program owns one coordinate of each other axis and a BLOCK_LM x BLOCK_LN tile of m and n, and
every value becomes a tile over both, so each access walks contiguous memory along whichever tile
axis its unit-stride coordinate follows (Triton converts the layout between a load and a store
through shared memory):

    rows, cols = owned_tile(...)                 [BLOCK_LM] along m, [BLOCK_LN] along n
    v = load x[rows[:, None], cols[None, :]]     coalesced along cols
    store out[cols[None, :], rows[:, None]] = v  coalesced along rows

`owned_tile` tiles the trailing axes of a group's domain, so when m is not the second-to-last axis
the tiled group's domain lists its axes with m moved there: `(B, C, H, W)` tiled over C and W owns
the workset `(B, H, C, W)`, the same instances in another program order.

Legality: the group maps instances over two or more axes, holds only element-wise work, loads and
stores (no control, local buffers, tiles, atomics or structured ops), decodes its instances once,
row-major, does not read a buffer it writes, and each store writes one element per instance. The
instances stay independent (construction proved it); tiling regroups them without reordering the
arithmetic of any one, so results are bit for bit the per-lane ones. Profitability: an access whose
last coordinate follows a leading domain axis and not the last one.
"""

from __future__ import annotations

import dataclasses

from kir.dims import DConst
from kir.dtypes import DType
from kir.pointwise import CmpFn

from .. import ops as P
from ..builder import Builder
from ..construct import segments_for
from ..launch_expr import LaunchExpr, LConst, LWarps, ldim, lmax, lmul
from ..model import Fragment, Group, Ownership, POp, PRegion, Program, TileAxis
from . import Pass, PassContext
from .enlarge import tile_elements
from .tile_contract import (
    M,
    Match,
    N,
    NotTileable,
    Tiler,
    _decode,
    check_effects,
    elementwise_op,
    prune,
)

TILE = 64  # BLOCK_LM = BLOCK_LN: 4096 elements, the element budget of a program (`enlarge.TILE_BUDGET`)


def match_layout(group: Group, tiled: tuple[int, int] | None = None) -> Match:
    """The element-wise structure of `group` with domain axes `tiled` (default: the two trailing ones)
    named m and n, or NotTileable with the reason."""
    if len(group.domain) < 2 or group.ownership.tiled or group.serial or P.looped_rows(group.body) is not None or \
            P.block_loop(group.body.ops) is not None:
        raise NotTileable("the group does not map two or more free axes to blocks of instances")
    ops = [op for op in group.body.ops if not isinstance(op, P.Yield)]
    if any(op.regions() for op in ops):
        raise NotTileable("the group holds control flow")
    owned = [op for op in ops if isinstance(op, P.OwnedInstances)]
    if len(owned) != 1:
        raise NotTileable("the group does not decode its instances once")
    k_axis = TileAxis(DConst(1), "_")  # no contracted axis: no tile of the body may exist
    m = Match(group, owned[0].result, {}, {id(owned[0])}, None, None, k_axis, {}, ops, tiled)  # type: ignore[arg-type]
    _decode(m, ops)
    for op in ops:
        if m.decode_deps(op):
            continue
        if any(r.type.tile for r in op.results):
            raise NotTileable(f"the group holds a tile ({op.NAME})")
        deps = frozenset().union(*(m.deps.get(v.id, frozenset()) for v in op.operands()))
        if m.uniform_deps(op, not any(r.type.lanes for r in op.results), deps, "its instances"):
            continue
        if not elementwise_op(op):
            raise NotTileable(f"the group computes {op.NAME} per instance")
        for r in op.results:
            m.deps[r.id] = deps
    check_effects(m, ops)
    return m


def layout_axes(m: Match) -> tuple[int, int] | None:
    """The domain axes to tile, (m, n): n the last, m the one the unit-stride coordinate of an access
    follows where that coordinate does not follow the last axis (of several, the latest); None when
    every access walks memory along the last axis already."""
    last = m.rank - 1
    axes = {m.axis_name(j): j for j in range(m.rank)}
    for op in m.ops:
        if isinstance(op, P.Load | P.Store) and op.access.coords:
            follows = [axes[d] for d in m.deps.get(op.access.coords[-1].id, frozenset()) if d in axes]
            if follows and last not in follows:
                return max(follows), last
    return None


def tiled_domain(rank: int, axes: tuple[int, int]) -> tuple[int, ...]:
    """The tiled group's domain as positions of the original one: the untiled axes in order, then m, n."""
    return tuple(j for j in range(rank) if j not in axes) + axes


class LayoutTiler(Tiler):
    """Rebuilds a matched element-wise group on BLOCK_LM x BLOCK_LN tiles."""

    def __init__(self, m: Match, b: Builder, blocks: tuple[str, str]) -> None:
        self.m = m
        self.b = b
        self.origin = next((op.origin for op in m.ops if isinstance(op, P.Store)), None)
        self.tm = TileAxis(DConst(TILE), blocks[0])
        self.tn = TileAxis(DConst(TILE), blocks[1])
        self.memo = {}
        self.ops = {v.id: op for op in m.ops for v in op.results}
        self.coords = {}
        self.valid = {}

    def layout_body(self, uniform_ops: list[POp]) -> PRegion:
        m, b = self.m, self.b
        b.begin()
        for op in uniform_ops:
            b.put(op)
        domain = m.group.domain
        assert m.tiled is not None
        order = tiled_domain(len(domain), m.tiled)
        lead = len(domain) - 2
        types = tuple(self.index() for _ in range(lead)) + (self.index((self.tm,)), self.index((self.tn,)))
        names = tuple(f"o{j}" for j in order[:lead]) + ("rows", "cols")
        tile_op = P.OwnedTile(results=tuple(b.fresh(t, n) for t, n in zip(types, names)), origin=self.origin,
                              group=m.group.id, blocks=(self.tm.block, self.tn.block), group_m=1)
        b.put(tile_op)
        for j, r in zip(order, tile_op.results):
            self.coords[m.axis_name(j)] = r
        for name, axis, extent in ((M, self.tm, domain[m.tiled[0]]), (N, self.tn, domain[m.tiled[1]])):
            self.valid[name] = b.add(P.Compare, Fragment(DType.pred, False, (axis,)), self.origin, f"in_{name}",
                                     fn=CmpFn.lt, lhs=self.coords[name], rhs=self.shape(ldim(extent)))
        tile = (self.tm, self.tn)
        for op in m.ops:
            if isinstance(op, P.Store):
                b.put(P.Store(origin=op.origin, access=self.access(op.access, tile), value=self.spread_at(op.value),
                              unique=op.unique))
        b.put(P.Yield(origin=None, values=()))
        return PRegion(m.group.body.args, tuple(prune(b.end(), {id(op) for op in uniform_ops})))

    def spread_at(self, v) -> object:
        tile = (self.tm, self.tn)
        x = self.at(v, tile)
        return x if x.type.tile == tile else self.spread(x, tile, x.type.tile)


class TileLayout(Pass):
    name = "tile-layout"

    def make_plan(self, program: Program) -> tuple[Match | str | None, ...]:
        """Per group: the layout match to tile, None (tileable, but no access walks an earlier axis), or the
        reason it is not tileable."""
        out: list[Match | str | None] = []
        for g in program.groups:
            try:
                axes = layout_axes(match_layout(g))
                out.append(match_layout(g, axes) if axes is not None else None)
            except NotTileable as exc:
                out.append(f"group {g.id}: {exc}")
        return tuple(out)

    def plans(self, program: Program, ctx: PassContext | None = None) -> dict[int, Match]:
        return {g.id: m for g, m in zip(program.groups, self.plan(program, ctx))  # type: ignore[call-overload]
                if isinstance(m, Match)}

    def legal(self, program: Program, ctx: PassContext | None = None) -> bool | str:
        reasons = self.plan(program, ctx)
        if any(not isinstance(r, str) for r in reasons):  # type: ignore[attr-defined]
            return True
        return "; ".join(reasons) or "the program has no groups"  # type: ignore[arg-type]

    def profitable(self, program: Program, ctx: PassContext | None = None) -> bool:
        return bool(self.plans(program, ctx))

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        plans = self.plans(program, ctx)
        consts = dict(program.constexprs)
        builder = Builder.after(program)
        groups: list[Group] = []
        warps: list[LaunchExpr] = []
        for g in program.groups:
            m = plans.get(g.id)
            if m is None:
                groups.append(g)
                warps.append(lmul(consts[g.block], tile_elements(program, g)))
                continue
            blocks = _fresh(consts, g.id)
            for name in blocks:
                consts[name] = LConst(TILE)
            consts[g.block] = LConst(1)
            tiler = LayoutTiler(m, builder, blocks)
            uniform = [op for op in m.ops if id(op) not in m.decode_ops and not isinstance(op, P.OwnedInstances)
                       and op.results and not m.deps.get(op.results[0].id) and not op.results[0].type.lanes]
            assert m.tiled is not None
            domain = tuple(g.domain[j] for j in tiled_domain(len(g.domain), m.tiled))
            groups.append(dataclasses.replace(g, domain=domain, body=tiler.layout_body(uniform),
                                              ownership=Ownership(g.block, blocks)))
            warps.append(LConst(TILE * TILE))
        order = [n for n, _ in program.constexprs] + [n for n in consts if n not in dict(program.constexprs)]
        segments, grid = segments_for(groups, consts)
        return dataclasses.replace(program, groups=tuple(groups), constexprs=tuple((n, consts[n]) for n in order),
                                   segments=segments, grid=grid, num_warps=LWarps(lmax(*warps)))


def _fresh(consts: dict[str, LaunchExpr], gid: int) -> tuple[str, str]:
    out = []
    for base in ("BLOCK_LM", "BLOCK_LN"):
        name = f"{base}{gid}"
        while name in consts:
            name += "_"
        out.append(name)
    return out[0], out[1]


__all__ = ["TileLayout", "match_layout", "layout_axes", "tiled_domain", "TILE"]
