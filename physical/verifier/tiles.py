"""Tile ownership, tile-level contractions, aggregated histograms, register layout ops, device checks.

* typing (fragment-types): `owned_tile`, `matmul`, `bincount`, `tile_slice`, `tile_concat` and
  `tile_reshape` results follow from their operands; a `check` tests a pred and names what failed.
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
from kir.dtypes import DType

from .. import ops as P
from ..launch_expr import LConst
from ..model import Group, POp, PValue, TileAxis
from ..ops.access import DEVICE_CHECK
from .fragments import types
from .index import ProgramIndex, evaluate

# ---------------------------------------------------------------------------------------------- typing


def _one(op: POp) -> list[str]:
    return [] if len(op.results) == 1 else [f"has {len(op.results)} results, expected 1"]


@types(P.OwnedTile)
def _owned_tile(op: P.OwnedTile) -> list[str]:  # type: ignore[override]
    out: list[str] = []
    nt = len(op.blocks)
    if nt == 0 or len(op.results) < nt:
        return [f"owns tiles of {nt} axes but has {len(op.results)} results"]
    if op.group_m < 1:
        out.append(f"group_m {op.group_m} must be at least 1")
    lead = op.results[:len(op.results) - nt]
    for r in lead:
        if not (r.type.is_scalar and r.type.dtype.is_int):
            out.append(f"a leading coordinate is a uniform integer scalar, got {r.type}")
    for r, b in zip(op.results[len(lead):], op.blocks):
        t = r.type
        if not t.dtype.is_int or t.lanes or len(t.tile) != 1 or t.tile[0].block != b:
            out.append(f"a tiled coordinate is an integer tile of one axis held in {b}, got {t}")
    return out


@types(P.MatMul)
def _matmul(op: P.MatMul) -> list[str]:  # type: ignore[override]
    out = _one(op)
    a, b, c = op.lhs.type, op.rhs.type, op.acc.type
    if any(t.lanes for t in (a, b, c)) or min(len(a.tile), len(b.tile), len(c.tile)) < 2:
        return out + [f"matmul takes lane-free tiles of rank >= 2, got {a}, {b}, {c}"]
    if a.dtype != b.dtype:
        out.append(f"matmul operands are {a.dtype} and {b.dtype}")
    want_acc = DType.i32 if a.dtype.is_int else DType.f32
    if c.dtype != want_acc and not (a.dtype == DType.f64 and c.dtype == DType.f64):
        out.append(f"matmul of {a.dtype} accumulates in {want_acc}, not {c.dtype}")
    if a.tile[-1].extent != b.tile[-2].extent or a.tile[-1].block != b.tile[-2].block:
        out.append(f"matmul contracted axes differ: {a.tile[-1]} and {b.tile[-2]}")
    if a.tile[:-1] != c.tile[:-1] or b.tile[:-2] + b.tile[-1:] != c.tile[:-2] + c.tile[-1:]:
        out.append(f"matmul accumulator {c} is not shaped [.., M, N] for {a} @ {b}")
    if op.results and op.results[0].type != c:
        out.append(f"result {op.results[0].type} is not the accumulator's type {c}")
    return out


@types(P.BinCount)
def _bincount(op: P.BinCount) -> list[str]:  # type: ignore[override]
    out = _one(op)
    if not op.values.type.dtype.is_int:
        out.append(f"bincount counts integers, got {op.values.type}")
    if not (op.base.type.is_scalar and op.base.type.dtype.is_int):
        out.append(f"bincount base is a uniform integer, got {op.base.type}")
    if op.member is not None and not op.member.type.dtype.is_pred:
        out.append(f"bincount member is {op.member.type}, not pred")
    if op.results:
        r = op.results[0].type
        if r.dtype != DType.i32 or r.lanes or len(r.tile) != 1:
            out.append(f"bincount gives uniform i32 counts over one bins axis, got {r}")
    return out


@types(P.TileSlice)
def _tile_slice(op: P.TileSlice) -> list[str]:  # type: ignore[override]
    out = _one(op)
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


@types(P.TileConcat)
def _tile_concat(op: P.TileConcat) -> list[str]:  # type: ignore[override]
    out = _one(op)
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


@types(P.TileReshape)
def _tile_reshape(op: P.TileReshape) -> list[str]:  # type: ignore[override]
    out = _one(op)
    if op.results:
        r, x = op.results[0].type, op.x.type
        if (r.dtype, r.lanes, r.index) != (x.dtype, x.lanes, x.index) or not x.tile or not r.tile:
            out.append(f"result {r} is not a regrouping of {x}")
    return out


@types(P.Check)
def _check(op: P.Check) -> list[str]:  # type: ignore[override]
    out = [] if not op.results else [f"has {len(op.results)} results, expected 0"]
    if not op.cond.type.dtype.is_pred:
        out.append(f"a check tests a pred, got {op.cond.type}")
    if not op.message.startswith(DEVICE_CHECK):
        out.append(f"check message {op.message!r} must start with {DEVICE_CHECK!r}")
    return out


# ---------------------------------------------------------------------------------------------- ownership


def constant_block(ix: ProgramIndex, name: str) -> int | None:
    e = ix.constexprs.get(name)
    return e.value if isinstance(e, LConst) else None


def tile_domain(ix: ProgramIndex, group: Group) -> tuple[Dim, ...] | None:
    """The domain of the tiles: leading extents, then cdiv(D_k, B_k) per tiled axis (constant blocks)."""
    nt = len(group.tiles)
    if nt == 0 or nt > len(group.domain):
        return None
    out = list(group.domain[:len(group.domain) - nt])
    for d, name in zip(group.domain[len(group.domain) - nt:], group.tiles):
        b = constant_block(ix, name)
        if b is None or b < 1:
            return None
        out.append(DBin("//", DBin("+", d, DConst(b - 1)), DConst(b)) if b > 1 else d)
    return tuple(out)


def tile_programs(ix: ProgramIndex, group: Group) -> list[int | None]:
    """prod(leading extents) * prod(cdiv(D_k, B_k)) on every sample."""
    out: list[int | None] = []
    nt = len(group.tiles)
    for env in ix.envs:
        n: int | None = 1
        for k, d in enumerate(group.domain):
            v = evaluate(d, env)
            j = k - (len(group.domain) - nt)
            b = env.get(group.tiles[j]) if j >= 0 else 1
            if v is None or n is None or not b:
                n = None
                break
            n *= -(-v // b)
        out.append(n)
    return out


def tile_programs_text(group: Group) -> str:
    lead = len(group.domain) - len(group.tiles)
    parts = [str(d) for d in group.domain[:lead]]
    parts += [f"cdiv({d}, {b})" for d, b in zip(group.domain[lead:], group.tiles)]
    return " * ".join(parts)


def owned_tile_ops(group: Group) -> list[P.OwnedTile]:
    return [op for op in group.body.ops if isinstance(op, P.OwnedTile)]


def check_tile_group(ix: ProgramIndex, group: Group) -> list[tuple[str, POp | None]]:
    """Problems of a tile group's ownership: its one owned_tile, and effects masked to the domain."""
    from .affine import forms_of, proves

    top = owned_tile_ops(group)
    nested = [pl.op for pl in ix.group_ops(group.id) if isinstance(pl.op, P.OwnedTile) and pl.parents]
    out: list[tuple[str, POp | None]] = [(f"owned_tile inside a nested region of group {group.id}", op)
                                         for op in nested]
    if len(top) != 1:
        return out + [(f"tile group {group.id} ({group.name}) has {len(top)} owned_tile; its programs must decode "
                       f"their tile exactly once", None)]
    tile_op = top[0]
    if tile_op.group != group.id or tile_op.blocks != group.tiles or len(tile_op.results) != len(group.domain):
        return out + [(f"owned_tile in group {group.id} decodes group {tile_op.group} in blocks "
                       f"{list(tile_op.blocks)}; it must decode its own {len(group.domain)} axes in blocks "
                       f"{list(group.tiles)}", tile_op)]
    if any(isinstance(pl.op, P.OwnedInstances) for pl in ix.group_ops(group.id)):
        out.append((f"tile group {group.id} also decodes owned_instances", None))
    forms = forms_of(ix, group)
    forms.form(tile_op.results[0])
    src = forms.sources.get(id(tile_op))
    if src is None:
        return out + [(f"tile group {group.id}: its blocks {list(group.tiles)} are no constants, so its tiles "
                       f"cannot be checked", tile_op)]
    nt = len(group.tiles)
    lead = len(group.domain) - nt
    for pl in ix.group_ops(group.id):
        op = pl.op
        if not isinstance(op, P.Store | P.AtomicRMW | P.AtomicCAS):
            continue
        tile = _access_tile(op)
        fact = forms.fact(op.access.mask)
        hyps = forms.base_facts() + ([fact] if fact is not None else [])
        for j in range(nt):
            block = constant_block(ix, group.tiles[j]) or 1
            axis = tile_op.results[lead + j].type.tile[0]
            where = [t for t, ax in enumerate(tile) if ax == axis]
            if not where:
                out.append((f"{op.NAME} in tile group {group.id} is not shaped over tile axis {axis}: each "
                            f"position of the tile would perform it", op))
                continue
            coord: Dim = DBin("+", DBin("*", DSym(src.atoms[lead + j]), DConst(block)),
                              forms.tile_atom(tile, where[0]))
            if not proves(hyps, PCmp("<", coord, group.domain[lead + j])):
                out.append((f"{op.NAME} in tile group {group.id} is not masked by {axis.block} positions below "
                            f"{group.domain[lead + j]}: positions past the domain would perform it", op))
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
        tdom = tile_domain(ix, group) if op.blocks == group.tiles else None
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
    """For each enclosing `if`, which branch (0 then, 1 else) holds `op`."""
    pl = ix.place.get(id(op))
    out: dict[int, int] = {}
    if pl is None:
        return out
    chain = list(pl.parents) + [op]
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, P.If):
            out[id(parent)] = 0 if any(o is child for o in parent.then_.walk()) else 1
    return out


def exclusive(ix: ProgramIndex, a: POp, b: POp) -> bool:
    """Whether `a` and `b` lie in different branches of one `if` (so at most one of them runs)."""
    pa, pb = branch_path(ix, a), branch_path(ix, b)
    return any(k in pb and pb[k] != v for k, v in pa.items())


__all__ = ["tile_domain", "tile_programs", "tile_programs_text", "check_tile_group", "owned_tile_form",
           "position_bound", "exclusive", "constant_block"]
