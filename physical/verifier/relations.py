"""Composed coordinate relations against KIR: a physical access reaches the elements its KIR access names.

With the kernel at hand, every load and store of a group that maps a KIR `parallel` to program
instances is compared with its KIR op (found through its origin): each physical coordinate, as an
affine form over the group's decoded instance coordinates, ordered-loop indices and the access's tile
positions, must equal the KIR index item over the parallel's indices, the same loops' indices and
the slice positions. Coordinates that depend on loaded data (gathers, scatters, subregions) have no
affine relation to compare and are left to the bounds and provenance checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from kir import access as KA
from kir import control as KC
from kir import core as K
from kir.affine import kir_form
from kir.dims import Dim, DSym, PCmp, dim_bin

from .. import ops as P
from ..model import Group, PRegion
from .affine import Forms, forms_of
from .index import AccessSite, ProgramIndex


@dataclass(frozen=True)
class Mismatch:
    site: AccessSite
    axis: int
    physical: Dim
    kir: Dim
    undecided: str = ""  # the prover's note when Z3 left the equality undecided (no counterexample)


class KirForms:
    """Affine forms of KIR integer values over parallel and loop indices (by name and id), slice positions
    (`slice<j>` for the j-th sliced axis), shape symbols and constants."""

    def __init__(self, kernel: K.Kernel) -> None:
        self.ordinal = {id(op): n for n, op in enumerate(kernel.walk())}
        self.forms: dict[int, Dim] = {}
        self._walk(kernel.body, None)

    def _walk(self, region: K.Region, parallel: KC.Parallel | None) -> None:
        for op in region.ops:
            self._track(op)
            if isinstance(op, KC.Parallel) and parallel is None:
                for a in op.body.args:
                    self.forms[a.id] = kir_name(a)
            if isinstance(op, KC.For):
                self.forms[op.body.args[0].id] = kir_name(op.body.args[0])
            for r in op.regions():
                self._walk(r, op if isinstance(op, KC.Parallel) and parallel is None else parallel)

    def _track(self, op: K.Op) -> None:
        if len(op.results) != 1:
            return
        # `kir.affine`'s rules; no prover here, so quotients have no form (left to the bounds checks)
        form = kir_form(op, self.forms)
        if form is not None:
            self.forms[op.results[0].id] = form

    def index(self, index: K.Index) -> list[Dim | None]:
        out: list[Dim | None] = []
        j = 0
        for it in index:
            if isinstance(it, K.Value):
                out.append(self.forms.get(it.id))
            elif isinstance(it, K.Slice):
                out.append(dim_bin("+", it.start, DSym(f"slice{j}")))
                j += 1
            else:
                out.append(None)
        return out


def kir_name(v: K.Value) -> DSym:
    """How a KIR index value appears in forms and messages (`%t#5`: its name and id)."""
    return DSym(f"%{v.name or 'v'}#{v.id}")


def _canonical(ix: ProgramIndex, forms: Forms, group: Group, body: PRegion, kernel_ops: list[K.Op]
               ) -> dict[str, Dim] | None:
    """Physical atoms renamed to the KIR names they stand for (instance coordinates and loop indices), in
    `body`, one form of the group's body (each decodes its instances itself).

    None unless the group maps exactly one KIR `parallel` to program instances."""
    ordinals = [o.op for o in group.origins if o is not None and o.op is not None and o.op < len(kernel_ops)
                and isinstance(kernel_ops[o.op], KC.Parallel)]
    owned = [op for op in P.instance_ops(body) if isinstance(op, P.OwnedInstances) and op.results]
    if len(ordinals) != 1 or len(group.origins) != 1 or len(owned) != 1:
        return None
    forms.form(owned[0].results[0])
    src = forms.sources.get(id(owned[0]))
    if src is None:
        return None
    args = kernel_ops[ordinals[0]].body.args  # type: ignore[attr-defined]
    if len(args) != len(src.atoms):
        return None
    names: dict[str, Dim] = {atom: kir_name(a) for atom, a in zip(src.atoms, args)}
    if len(src.domain) == 1 and isinstance(src.flat, DSym):
        names[src.flat.name] = kir_name(args[0])
    for pl in ix.group_ops(group.id):
        op = pl.op
        if isinstance(op, P.For) and op.origin is not None and op.origin.op is not None and \
                op.origin.op < len(kernel_ops) and isinstance(kernel_ops[op.origin.op], KC.For):
            iv = forms.form(op.body.args[0]) if op.body.args else None
            if isinstance(iv, DSym):
                names[iv.name] = kir_name(kernel_ops[op.origin.op].body.args[0])  # type: ignore[attr-defined]
    return names


def relation_mismatches(ix: ProgramIndex, kernel: K.Kernel, access_tile) -> list[Mismatch]:
    kernel_ops = list(kernel.walk())
    kforms = KirForms(kernel)
    out: list[Mismatch] = []
    canon: dict[tuple[int, int], tuple[Forms, dict[str, Dim] | None]] = {}
    for site in ix.accesses:
        op = site.op
        if not isinstance(op, P.Load | P.Store) or op.origin is None or op.origin.op is None or \
                op.origin.op >= len(kernel_ops):
            continue
        kop = kernel_ops[op.origin.op]
        if not isinstance(kop, KA.Load | KA.Store) or len(kop.index) != len(site.access.coords):
            continue
        gid, body = site.placed.group, site.placed.form
        if (gid, id(body)) not in canon:
            g = ix.groups[gid]
            forms = forms_of(ix, g)
            canon[gid, id(body)] = (forms, _canonical(ix, forms, g, body, kernel_ops))
        forms, names = canon[gid, id(body)]
        if names is None:
            continue
        tile = access_tile(site)
        env = dict(names)
        for j in range(len(tile)):
            env[forms.tile_atom(tile, j).name] = DSym(f"slice{j}")
        for axis, (c, want) in enumerate(zip(site.access.coords, kforms.index(kop.index))):
            got = forms.form(c)
            if got is None or want is None:
                continue
            if got.symbols() & forms.per_copy - set(env):
                continue  # depends on loaded data or another per-member value: no affine relation to compare
            if want.symbols() - set(ix.program.symbols) - {v.name for v in env.values() if isinstance(v, DSym)}:
                continue  # a KIR index over values this group does not decode (a rebuilt or nested workset)
            mapped = got.substitute(env)
            mark = forms.prover.mark()
            if mapped != want and not forms.prover.proves(_facts(ix), PCmp("==", mapped, want)):
                out.append(Mismatch(site, axis, mapped, want, forms.prover.note(mark)))
    return out


def _facts(ix: ProgramIndex) -> list:
    from kir.solver import default_lower_bounds

    return list(default_lower_bounds(ix.program.symbols, ix.program.requires)) + list(ix.program.requires)


__all__ = ["relation_mismatches", "Mismatch", "KirForms", "kir_name"]
