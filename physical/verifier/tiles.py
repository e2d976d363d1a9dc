"""Tile ownership, tile-level contractions, aggregated histograms, register layout ops, device checks.

* forms (for the Z3 rules): a tile-owning program's coordinates are `T_k * B_k + p` over the tile
  atoms `T_k` (in `[0, cdiv(D_k, B_k))`, one program's tile) and the tile position `p` in `[0, B_k)`;
  two different programs differ in some `T_k` or leading coordinate.
* ownership: a tile group decodes its instances with exactly one `owned_tile` of its own blocks, its
  segment has prod(leading extents) * prod(cdiv(D_k, B_k)) programs, and every effect is masked so
  that each tiled coordinate stays below its domain extent (positions past it are no instances).
* exclusivity: the two branches of one `if` never both run, so one KIR effect may appear once in
  each (a specialised path and its general fallback).
"""

from __future__ import annotations

from kir.dims import DBin, DConst, Dim, DSym, PCmp

from .. import ops as P
from ..launch_expr import LConst
from ..model import Group, POp, PValue, TileAxis
from .index import ProgramIndex, evaluate

# ---------------------------------------------------------------------------------------------- ownership


def constant_block(ix: ProgramIndex, name: str) -> int | None:
    e = ix.constexprs.get(name)
    return e.value if isinstance(e, LConst) else None


def tile_domain(ix: ProgramIndex, group: Group) -> tuple[Dim, ...] | None:
    """The domain of the tiles: leading extents, then cdiv(D_k, B_k) per tiled axis (constant blocks)."""
    own = group.ownership
    if not own.tiled or len(own.tiles) > len(group.domain):
        return None
    lead, tiled = own.axes(group.domain)
    out = list(lead)
    for d, name in zip(tiled, own.tiles):
        b = constant_block(ix, name)
        if b is None or b < 1:
            return None
        out.append(DBin("//", DBin("+", d, DConst(b - 1)), DConst(b)) if b > 1 else d)
    return tuple(out)


def tile_programs(ix: ProgramIndex, group: Group) -> list[int | None]:
    """prod(leading extents) * prod(cdiv(D_k, B_k)) on every sample."""
    out: list[int | None] = []
    nt = len(group.ownership.tiles)
    for env in ix.envs:
        n: int | None = 1
        for k, d in enumerate(group.domain):
            v = evaluate(d, env)
            j = k - (len(group.domain) - nt)
            b = env.get(group.ownership.tiles[j]) if j >= 0 else 1
            if v is None or n is None or not b:
                n = None
                break
            n *= -(-v // b)
        out.append(n)
    return out


def tile_programs_text(group: Group) -> str:
    lead, tiled = group.ownership.axes(group.domain)
    parts = [str(d) for d in lead]
    parts += [f"cdiv({d}, {b})" for d, b in zip(tiled, group.ownership.tiles)]
    return " * ".join(parts)


def owned_tile_ops(group: Group) -> list[P.OwnedTile]:
    return [op for op in group.body.ops if isinstance(op, P.OwnedTile)]


def check_tile_group(ix: ProgramIndex, group: Group) -> list[tuple[str, POp | None]]:
    """Problems of a tile group's ownership: its one owned_tile, and effects masked to the domain."""
    from .affine import forms_of

    top = owned_tile_ops(group)
    nested = [pl.op for pl in ix.group_ops(group.id) if isinstance(pl.op, P.OwnedTile) and pl.parents]
    out: list[tuple[str, POp | None]] = [(f"owned_tile inside a nested region of group {group.id}", op)
                                         for op in nested]
    if len(top) != 1:
        return out + [(f"tile group {group.id} ({group.name}) has {len(top)} owned_tile; its programs must decode "
                       f"their tile exactly once", None)]
    tile_op = top[0]
    if tile_op.group != group.id or tile_op.blocks != group.ownership.tiles or \
            len(tile_op.results) != len(group.domain):
        return out + [(f"owned_tile in group {group.id} decodes group {tile_op.group} in blocks "
                       f"{list(tile_op.blocks)}; it must decode its own {len(group.domain)} axes in blocks "
                       f"{list(group.ownership.tiles)}", tile_op)]
    if any(isinstance(pl.op, P.OwnedInstances) for pl in ix.group_ops(group.id)):
        out.append((f"tile group {group.id} also decodes owned_instances", None))
    forms = forms_of(ix, group)
    forms.form(tile_op.results[0])
    src = forms.sources.get(id(tile_op))
    if src is None:
        return out + [(f"tile group {group.id}: its blocks {list(group.ownership.tiles)} are no constants, so its "
                       f"tiles "
                       f"cannot be checked", tile_op)]
    nt = len(group.ownership.tiles)
    lead = len(group.domain) - nt
    for pl in ix.group_ops(group.id):
        op = pl.op
        if not isinstance(op, P.Store | P.AtomicRMW | P.AtomicCAS):
            continue
        tile = _access_tile(op)
        fact = forms.fact(op.access.mask)
        hyps = forms.base_facts() + ([fact] if fact is not None else [])
        for j in range(nt):
            block = constant_block(ix, group.ownership.tiles[j]) or 1
            axis = tile_op.results[lead + j].type.tile[0]
            where = [t for t, ax in enumerate(tile) if ax == axis]
            if not where:
                out.append((f"{op.NAME} in tile group {group.id} is not shaped over tile axis {axis}: each "
                            f"position of the tile would perform it", op))
                continue
            coord: Dim = DBin("+", DBin("*", DSym(src.atoms[lead + j]), DConst(block)),
                              forms.tile_atom(tile, where[0]))
            mark = forms.prover.mark()
            if not forms.prover.proves(hyps, PCmp("<", coord, group.domain[lead + j])):
                out.append((f"{op.NAME} in tile group {group.id} is not masked by {axis.block} positions below "
                            f"{group.domain[lead + j]}: positions past the domain would perform it"
                            f"{forms.prover.note(mark)}", op))
    return out


def _access_tile(op: P.Store | P.AtomicRMW | P.AtomicCAS) -> tuple[TileAxis, ...]:
    vals: list[PValue] = list(op.access.operands()) + [op.value]
    tiles = [v.type.tile for v in vals if v.type.tile]
    return tiles[0] if tiles else ()


def owned_tile_form(forms, op: P.OwnedTile, k: int, v: PValue) -> Dim:
    """Forms of owned_tile's results (see the module docstring); registers the tile source once."""
    ix: ProgramIndex = forms.ix
    group: Group = forms.group
    src = forms.sources.get(id(op))
    if src is None:
        tdom = tile_domain(ix, group) if op.blocks == group.ownership.tiles else None
        if tdom is None:
            return forms.opaque(v)
        flat = forms.atom("f")
        forms.facts.append(PCmp(">=", flat, DConst(0)))
        src = forms._source(id(op), tdom, flat, True)
    lead = len(op.results) - len(op.blocks)
    if k < lead:
        return DSym(src.atoms[k])
    block = constant_block(ix, op.blocks[k - lead]) or 1
    pos = forms.tile_atom(v.type.tile, 0)
    return DBin("+", DBin("*", DSym(src.atoms[k]), DConst(block)), pos)


def position_bound(ix: ProgramIndex, axis: TileAxis) -> Dim | None:
    """Tile positions along `axis` lie below its block; a constant block makes that a fact."""
    b = constant_block(ix, axis.block)
    return DConst(b) if b is not None else None


# ---------------------------------------------------------------------------------------------- exclusivity


def branch_path(ix: ProgramIndex, op: POp) -> dict[int, int]:
    """For each enclosing `if`, which branch (0 then, 1 else) holds `op`; for an enclosing `looped_rows`, which
    form (0 whole, 1 looped, 2 split): a launch runs one of them."""
    pl = ix.place.get(id(op))
    out: dict[int, int] = {}
    if pl is None:
        return out
    chain = list(pl.parents) + [op]
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, P.If):
            out[id(parent)] = 0 if any(o is child for o in parent.then_.walk()) else 1
        elif isinstance(parent, P.LoopedRows):
            out[id(parent)] = next(k for k, r in enumerate(parent.regions()) if any(o is child for o in r.walk()))
    return out


def exclusive(ix: ProgramIndex, a: POp, b: POp) -> bool:
    """Whether `a` and `b` lie in different branches of one `if` or forms of one body (so at most one runs)."""
    pa, pb = branch_path(ix, a), branch_path(ix, b)
    return any(k in pb and pb[k] != v for k, v in pa.items())


__all__ = ["tile_domain", "tile_programs", "tile_programs_text", "check_tile_group", "owned_tile_form",
           "position_bound", "exclusive", "constant_block"]
