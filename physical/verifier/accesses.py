"""Access relations: complete coordinates, explicit narrowings, justified bounds.

* access-complete: every access names a known buffer, reads give the buffer's dtype and have a fill
  for inactive members, writes store the buffer's dtype, and the mask is a pred.
* coordinate-provenance: one integer coordinate per buffer axis, shaped like the access (scalar,
  lanes, or the access's tile), whose SSA comes from program coordinates, tile positions, loop
  indices, launch values and loaded data, never from a combine region's arguments.
* narrowing-explicit: every member set (access masks, guards, reduction/scan/contract/histogram
  members, region-op activity) is a typed pred SSA value shaped like what it narrows, and where a
  tile holds padding past its extent, the member set provably excludes it (or, for a reduce, its inputs are
  loads whose masks exclude it and whose fill is the fold's identity: the padding folds nothing).
* bounds-justified: every access has one justification, and it holds: a guard is part of the mask
  and implies the coordinates are in range; a proof is re-proven (Z3) from the mask's facts; an
  assumption states its reason.
"""

from __future__ import annotations

from kir.core import Kernel
from kir.dims import DConst, PAnd, PCmp, Pred
from kir.pointwise import literal_fits
from kir.reduce import identical_literal

from .. import ops as P
from ..model import Access, AccessRelation, AssumeInBounds, Guard, POp, Program, Proven, PValue, TileAxis, Trait
from .affine import Forms, forms_of
from .base import Reporter, describe, rule
from .index import AccessSite, ProgramIndex, index_of

# ---------------------------------------------------------------------------------------------- helpers


def access_data(op: POp) -> PValue | None:
    """The value an access reads into or writes from: what a reading op gives (a load's, an atomic's old value, a
    ticket), else the value a write stores."""
    if op.has(Trait.READS):
        return op.results[0] if len(op.results) == 1 else None
    if op.has(Trait.WRITES):
        return op.value  # type: ignore[attr-defined]
    return None


def access_tile(site: AccessSite) -> tuple[TileAxis, ...]:
    """The tile the access touches: that of its coordinates, mask and data (they must agree)."""
    vals = list(site.access.coords)
    if site.access.mask is not None:
        vals.append(site.access.mask)
    data = access_data(site.op)
    if data is not None:
        vals.append(data)
    if site.op.has(Trait.READS | Trait.WRITES):  # an atomic update: the operands it combines with memory, too
        own = {x.id for x in site.access.operands()}
        vals += [v for v in site.op.operands() if v.id not in own]
    tiles = [v.type.tile for v in vals if v.type.tile]
    return tiles[0] if tiles else ()


def padded_axes(ix: ProgramIndex, tile: tuple[TileAxis, ...], axes: tuple[int, ...] | None = None) -> list[int]:
    """Tile axes whose block can exceed their extent on some launch (positions there are padding)."""
    out = []
    for k, ax in enumerate(tile):
        if axes is not None and k not in axes:
            continue
        block = ix.constexprs.get(ax.block)
        if block is None:
            continue
        pairs = zip(ix.values(block), ix.values(ax.extent))
        if any(b is None or e is None or b > e for b, e in pairs):
            out.append(k)
    return out


def excludes_padding(forms: Forms, member: PValue | None, tile: tuple[TileAxis, ...], axes: list[int]) -> list[int]:
    """The padded axes whose positions past the extent the member set does not exclude."""
    if not axes:
        return []
    fact = forms.fact(member)
    hyps = forms.base_facts() + ([fact] if fact is not None else [])
    return [k for k in axes
            if not forms.prover.proves(hyps, PCmp("<", forms.tile_atom(tile, k), forms.extent_dim(tile[k].extent)))]


# ---------------------------------------------------------------------------------------------- access-complete


@rule("access-complete")
def check_access_complete(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """coordinates, validity and fill/effect are complete for every access"""
    ix = index_of(program)
    for site in ix.accesses:
        op, a = site.op, site.access
        buf = ix.buffers.get(a.buffer)
        if buf is None:
            report(f"{describe(program, op)} accesses buffer {a.buffer}, which the program does not have", op,
                   site.placed.group)
            continue
        data = access_data(op)
        if op.has(Trait.READS) and data is None:
            report(f"{describe(program, op)} on {buf.name} gives {len(op.results)} results; a read gives one value",
                   op, site.placed.group)
        elif data is not None and data.type.dtype != buf.dtype:
            report(f"{describe(program, op)} {'reads' if site.kind is Access.READ else 'writes'} "
                   f"{data.type.dtype} through {buf.dtype} buffer {buf.name}", op, site.placed.group)
        if site.kind is not Access.WRITE:
            if a.fill is None:
                report(f"{describe(program, op)} on {buf.name} has no fill: inactive members would read "
                       f"undefined values", op, site.placed.group)
            elif not literal_fits(a.fill, buf.dtype):
                report(f"{describe(program, op)} on {buf.name}: fill {a.fill!r} does not fit {buf.dtype}", op,
                       site.placed.group)
        if a.mask is not None and not a.mask.type.dtype.is_pred:
            report(f"{describe(program, op)} on {buf.name}: mask is {a.mask.type}, not pred", op, site.placed.group)


# ---------------------------------------------------------------------------------------------- provenance


_COMBINE_FIELDS = ("combine",)


def _combine_args(ix: ProgramIndex) -> set[int]:
    out: set[int] = set()
    for pl in ix.placed:
        for name in _COMBINE_FIELDS:
            r = getattr(pl.op, name, None)
            if r is not None and hasattr(r, "args"):
                out.update(a.id for a in r.args)
    return out


@rule("coordinate-provenance")
def check_provenance(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """every physical coordinate has source identity and rank and complete SSA provenance (program coordinates, tile
    positions, loop indices, launch values, loaded data); with the kernel, composed coordinates equal the KIR access
    relation"""
    ix = index_of(program)
    banned = _combine_args(ix)
    for site in ix.accesses:
        op, a = site.op, site.access
        buf = ix.buffers.get(a.buffer)
        if buf is None:
            continue
        if len(a.coords) != buf.rank:
            report(f"{describe(program, op)} gives {len(a.coords)} coordinates for rank-{buf.rank} buffer {buf.name}",
                   op, site.placed.group)
        tile = access_tile(site)
        for k, c in enumerate(a.coords + ((a.copy,) if a.copy is not None else ())):
            what = f"coordinate {k}" if k < len(a.coords) else "copy index"
            if not c.type.dtype.is_int:
                report(f"{describe(program, op)} on {buf.name}: {what} is {c.type}, not an integer", op,
                       site.placed.group)
            if c.type.tile and c.type.tile != tile:
                report(f"{describe(program, op)} on {buf.name}: {what} has tile {c.type} but the access touches "
                       f"{list(map(str, tile))}", op, site.placed.group)
            origin = _foreign_root(ix, c, banned)
            if origin is not None:
                report(f"{describe(program, op)} on {buf.name}: {what} derives from {origin}, which is no program "
                       f"coordinate, loop index, launch value or loaded datum", op, site.placed.group)
    if kernel is not None:
        from .relations import relation_mismatches

        for m in relation_mismatches(ix, kernel, access_tile):
            buf = ix.buffers[m.site.access.buffer]
            report(f"{describe(program, m.site.op)} on {buf.name}: coordinate {m.axis} is {m.physical}, but the KIR "
                   f"access names {m.kir}{m.undecided}", m.site.op, m.site.placed.group)


def _foreign_root(ix: ProgramIndex, v: PValue, banned: set[int]) -> str | None:
    seen: set[int] = set()
    work = [v]
    while work:
        x = work.pop()
        if x.id in seen:
            continue
        seen.add(x.id)
        if x.id in banned:
            return f"combine argument %{x.name or 'p'}{x.id}"
        d = ix.defs.get(x.id)
        if d is None:
            return f"undefined %{x.id}"
        if d.is_arg or d.op is None or d.op.has(Trait.READS):  # data read from memory
            continue
        work.extend(d.op.operands())
    return None


# ---------------------------------------------------------------------------------------------- narrowing


def _member_sites(ix: ProgramIndex):
    """(op, member value, tile it narrows, axes whose padding it must exclude or None, group)."""
    for pl in ix.placed:
        op = pl.op
        if isinstance(op, P.Reduce | P.Scan) and op.inputs:
            tile = op.inputs[0].type.tile
            yield op, op.member, tile, op.axes if isinstance(op, P.Reduce) else (op.axis,), pl.group
        elif isinstance(op, P.Contract):
            yield op, op.member, op.lhs.type.tile, op.axes, pl.group
        elif isinstance(op, P.Histogram) and op.values.type.tile:
            yield op, op.member, op.values.type.tile, (len(op.values.type.tile) - 1,), pl.group
        elif isinstance(op, P.RegionFold | P.RegionScan):
            yield op, op.active, (), None, pl.group
        elif isinstance(op, P.AllocBuffer):
            yield op, op.active, (), None, pl.group


@rule("narrowing-explicit")
def check_narrowing(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """every active-member or range narrowing is an explicit typed pred subset of the original relation; padding past a
    tile's extent is never a member (a reduce may fold padding its loads fill with the fold's identity)"""
    ix = index_of(program)
    for site in ix.accesses:
        op, a = site.op, site.access
        tile = access_tile(site)
        masks = [("mask", a.mask)] + ([("guard", a.bounds.mask)] if isinstance(a.bounds, Guard) else [])
        for name, m in masks:
            problem = _mask_shape(ix, m, tile)
            if problem is not None:
                report(f"{describe(program, op)} {name}: {problem}", op, site.placed.group)
        g = ix.groups.get(site.placed.group)
        if g is None or a.buffer not in ix.buffers:
            continue
        forms = forms_of(ix, g)
        mark = forms.prover.mark()
        missing = excludes_padding(forms, a.mask, tile, padded_axes(ix, tile))
        for k in missing:
            report(f"{describe(program, op)} on {ix.buffers[a.buffer].name}: its mask does not exclude the padding "
                   f"of tile axis {k} ({tile[k]}){forms.prover.note(mark)}", op, site.placed.group)
    for op, member, tile, axes, gid in _member_sites(ix):
        problem = _mask_shape(ix, member, tile)
        if problem is not None:
            report(f"{describe(program, op)} member: {problem}", op, gid)
            continue
        if axes is None:
            continue
        forms = forms_of(ix, ix.groups[gid])
        mark = forms.prover.mark()
        missing = excludes_padding(forms, member, tile, padded_axes(ix, tile, tuple(axes)))
        for k in missing:
            if _identity_padding(ix, forms, op, k):
                continue
            report(f"{describe(program, op)} would fold the padding of tile axis {k} ({tile[k]}): its member set "
                   f"does not exclude positions past the extent{forms.prover.note(mark)}", op, gid)


def _identity_padding(ix: ProgramIndex, forms: Forms, op: POp, axis: int) -> bool:
    """Whether a reduce's padding along tile `axis` holds its identity, so that folding it changes nothing: each
    input is a load whose mask excludes that padding and whose fill is the identity's component as a literal (a
    fold of the slots of a workspace, read `position < SPLITS_g`, the rest the combine's identity, NaN included)."""
    if not isinstance(op, P.Reduce) or len(op.inputs) != len(op.identity):
        return False
    for x, ident in zip(op.inputs, op.identity):
        load = ix.producer(x)
        if not isinstance(load, P.Load) or load.access.fill is None or x.type.tile != op.inputs[0].type.tile:
            return False
        if not identical_literal(load.access.fill, ident):
            return False
        if excludes_padding(forms, load.access.mask, x.type.tile, [axis]):
            return False
    return True


def _mask_shape(ix: ProgramIndex, m: PValue | None, tile: tuple[TileAxis, ...]) -> str | None:
    if m is None:
        return None
    if not m.type.dtype.is_pred:
        return f"%{m.id} is {m.type}, not a pred"
    if m.type.tile and m.type.tile != tile:
        return f"%{m.id} has tile {m.type}, not the tile it narrows ({', '.join(map(str, tile)) or 'scalar'})"
    if m.id not in ix.defs:
        return f"%{m.id} has no definition"
    return None


# ---------------------------------------------------------------------------------------------- bounds


@rule("bounds-justified")
def check_bounds(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """every access is proven within its buffer by an explicit guard, a verified relation or an explicit
    assume_in_bounds"""
    ix = index_of(program)
    for site in ix.accesses:
        op, a = site.op, site.access
        buf = ix.buffers.get(a.buffer)
        g = ix.groups.get(site.placed.group)
        if buf is None or g is None or len(a.coords) != buf.rank:
            continue
        forms = forms_of(ix, g)
        mark = forms.prover.mark()
        if isinstance(a.bounds, Guard):
            if not ix.is_conjunct(a.mask, a.bounds.mask):
                report(f"{describe(program, op)} on {buf.name}: guard %{a.bounds.mask.id} is not part of the access "
                       f"mask, so it guards nothing", op, site.placed.group)
                continue
            fact = forms.fact(a.bounds.mask)
            bad = _unproven(forms, a, buf.shape, fact)
            if bad:
                report(f"{describe(program, op)} on {buf.name}: guard %{a.bounds.mask.id} does not keep coordinate "
                       f"{', '.join(map(str, bad))} within [0, extent){forms.prover.note(mark)}", op,
                       site.placed.group)
        elif isinstance(a.bounds, Proven):
            bad = _unproven(forms, a, buf.shape, forms.fact(a.mask))
            if bad:
                report(f"{describe(program, op)} on {buf.name}: the bounds proof '{a.bounds.predicate}' does not hold "
                       f"for coordinate {', '.join(map(str, bad))} (re-proving from the mask failed)"
                       f"{forms.prover.note(mark)}", op, site.placed.group)
        elif isinstance(a.bounds, AssumeInBounds):
            if not a.bounds.reason.strip():
                report(f"{describe(program, op)} on {buf.name}: assume_in_bounds without a stated reason", op,
                       site.placed.group)
        else:
            report(f"{describe(program, op)} on {buf.name} has no bounds justification ({a.bounds!r:.40})", op,
                   site.placed.group)
            continue
        mark = forms.prover.mark()
        if a.copy is not None and buf.copies is not None and not _copy_in_range(forms, a, buf.copies):
            report(f"{describe(program, op)} on {buf.name}: copy index %{a.copy.name or 'p'}{a.copy.id} is not "
                   f"proven within the {buf.copies} copies of its workspace{forms.prover.note(mark)}", op,
                   site.placed.group)


def _copy_in_range(forms: Forms, a: AccessRelation, copies) -> bool:
    fact = forms.fact(a.mask)
    hyps = forms.base_facts() + ([fact] if fact is not None else [])
    c = forms.form(a.copy)  # type: ignore[arg-type]
    n = forms.launch_dim(copies)
    return c is not None and forms.prover.proves(hyps, PAnd((PCmp(">=", c, DConst(0)), PCmp("<", c, n))))


def _unproven(forms: Forms, a: AccessRelation, shape: tuple, fact: Pred | None) -> list[int]:
    hyps = forms.base_facts() + ([fact] if fact is not None else [])
    bad = []
    for k, (c, extent) in enumerate(zip(a.coords, shape)):
        f = forms.form(c)
        if f is None or not forms.prover.proves(hyps, PAnd((PCmp(">=", f, DConst(0)), PCmp("<", f, extent)))):
            bad.append(k)
    return bad


__all__ = ["check_access_complete", "check_provenance", "check_narrowing", "check_bounds", "access_tile",
           "access_data", "padded_axes"]
