"""Analyses over KIR that construction needs (def-use, effects, instance variance, disjoint writes), and
over physical programs what passes and the verifier both ask (captured values, written buffers, what
a persistent program may compute once): a pass decides with these, the verifier checks with them.

The def-use and statement-dependence graphs are networkx graphs; the disjointness of writes from
different instances is decided with Z3 over affine forms of the write coordinates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import networkx as nx

from kir import access as KA
from kir import atomic as KT
from kir import control as KC
from kir import core as K
from kir import region as KG
from kir.affine import Products, kir_form
from kir.dims import DConst, Dim, DSym, PAnd, PCmp, PNot, POr, dim_bin
from kir.dtypes import DType
from kir.layout import Broadcast
from kir.pointwise import Iota
from kir.solver import ShapeSolver

from . import ops as P
from .model import Access, BufferScope, POp, PRegion, Program, PValue, Trait

# ---------------------------------------------------------------------------------------------- def-use


def def_use_graph(region: K.Region) -> nx.DiGraph:
    """Nodes are value ids and `id(op)`s; edges value -> op (use) and op -> value (definition)."""
    g = nx.DiGraph()
    for op in region.walk():
        g.add_node(id(op), op=op)
        for v in op.operands():
            g.add_edge(v.id, id(op))
        for v in op.results:
            g.add_edge(id(op), v.id)
        for r in op.regions():
            for a in r.args:
                g.add_edge(id(op), a.id)
    return g


def defined_inside(op: K.Op) -> set[int]:
    out = {v.id for v in op.results}
    for r in op.regions():
        out.update(a.id for a in r.args)
        for o in r.walk():
            out.update(v.id for v in o.results)
            for rr in o.regions():
                out.update(a.id for a in rr.args)
    return out


def captured(op: K.Op) -> set[int]:
    """Values an op (with its nested regions) uses but does not define."""
    inner = defined_inside(op) - {v.id for v in op.results}
    used = {v.id for v in op.operands()}
    for r in op.regions():
        for o in r.walk():
            used.update(v.id for v in o.operands())
    return used - inner


# ---------------------------------------------------------------------------------------------- effects


@dataclass
class Effects:
    reads: set[int] = field(default_factory=set)        # buffer (ref value) ids read
    writes: set[int] = field(default_factory=set)       # written by plain stores / scatters / region scans
    atomics: dict[int, set[str]] = field(default_factory=dict)  # buffer -> atomic kinds used

    def merge(self, other: Effects) -> None:
        self.reads |= other.reads
        self.writes |= other.writes
        for b, ks in other.atomics.items():
            self.atomics.setdefault(b, set()).update(ks)

    def touched(self) -> set[int]:
        return self.reads | self.writes | set(self.atomics)


def effects_of(ops: Iterable[K.Op]) -> Effects:
    e = Effects()
    for top in ops:
        for op in [top, *[o for r in top.regions() for o in r.walk()]]:
            if op.has(K.OpTrait.ATOMIC):
                kind = str(op.kind) if isinstance(op, KT.Atomic) else "cas"
                e.atomics.setdefault(op.dst.id, set()).add(kind)  # type: ignore[attr-defined]
                continue
            if op.has(K.OpTrait.READS):
                e.reads.add(op.src.id)  # type: ignore[attr-defined]
            if op.has(K.OpTrait.WRITES):
                e.writes.add(op.dst.id)  # type: ignore[attr-defined]
    return e


def conflict(a: Effects, b: Effects) -> set[int]:
    """Buffers through which two statements depend on each other (order would be observable)."""
    out = set()
    for buf in a.touched() & b.touched():
        a_atomic_only = buf not in a.writes and buf not in a.reads
        b_atomic_only = buf not in b.writes and buf not in b.reads
        kinds = a.atomics.get(buf, set()) | b.atomics.get(buf, set())
        if a_atomic_only and b_atomic_only and len(kinds) == 1 and kinds <= KT.COMMUTING_KINDS:
            continue  # the same commuting atomic from both sides: any interleaving gives one result
        if buf in a.writes or buf in b.writes or buf in a.atomics or buf in b.atomics:
            out.add(buf)
    return out


# ---------------------------------------------------------------------------------------------- variance


def variant_values(region: K.Region, seeds: Iterable[int], lanes_context: bool) -> frozenset[int]:
    """KIR values that differ between the instances one program owns (fixpoint over loops)."""
    var = set(seeds)
    ops = list(region.walk())
    # Buffers allocated in the region have one copy per instance: what is read from them varies.
    private = {v.id for o in ops for v in o.results if isinstance(v.type, K.RefType)} if lanes_context else set()
    changed = True
    while changed:
        changed = False

        def mark(vs: Iterable[K.Value]) -> None:
            nonlocal changed
            for v in vs:
                if v.id not in var:
                    var.add(v.id)
                    changed = True

        for op in ops:
            ins = {v.id for v in op.operands()}
            any_in = bool(ins & var)
            if isinstance(op, KC.For):
                if {op.start.id, op.stop.id, op.step.id} & var:
                    mark([op.body.args[0]])
                for init, arg, y, res in zip(op.inits, op.body.args[1:], op.body.yielded, op.results):
                    if init.id in var or y.id in var or arg.id in var:
                        mark([arg, res])
            elif isinstance(op, KC.While):
                cond_var = any(v.id in var for v in op.cond.yielded)
                for init, ca, ba, y, res in zip(op.inits, op.cond.args, op.body.args, op.body.yielded, op.results):
                    if cond_var or init.id in var or y.id in var or ba.id in var:
                        mark([ca, ba, res])
            elif isinstance(op, KC.If):
                for res, a, b in zip(op.results, op.then_.yielded, op.else_.yielded):
                    if op.cond.id in var or a.id in var or b.id in var:
                        mark([res])
            elif op.has(K.OpTrait.ATOMIC):
                if lanes_context or any_in:
                    mark(op.results)
            elif op.has(K.OpTrait.READS):
                if any_in or op.src.id in private:
                    mark(op.results)
            elif any_in:
                mark(op.results)
    return frozenset(var)


# ---------------------------------------------------------------------------------------------- disjoint writes


_POS = "_P{}"  # the position of an element along axis {} of an index tensor (see AffineForms.coords)


class AffineForms:
    """Affine forms of KIR integer values in terms of named symbols (parallel indices, loop ivs)."""

    def __init__(self, suffix: str, solver: ShapeSolver | None = None, shared: frozenset[int] = frozenset()
                 ) -> None:
        self.suffix = suffix
        self.forms: dict[int, Dim] = {}
        self.facts: list[PCmp] = []
        self.solver = solver  # proves dividends non-negative, where `//` and `%` keep their affine meaning
        # integer scalars equal in every instance (`shared_values`): without a form of their own, each is one
        # symbol common to all instances' copies of the forms (no suffix), so `b + s` compares across instances
        self.shared = shared

    def _nonnegative(self, d: Dim) -> bool:
        if self.solver is None:
            return False
        before = len(self.solver.facts)
        self.solver.facts += self.facts
        try:
            return self.solver.proves(PCmp(">=", d, DConst(0)))
        finally:
            del self.solver.facts[before:]

    def sym(self, v: K.Value, lo: Dim | None = None, hi: Dim | None = None) -> Dim:
        s = DSym(f"_v{v.id}{self.suffix}")
        self.forms[v.id] = s
        if lo is not None:
            self.facts.append(PCmp(">=", s, lo))
        if hi is not None:
            self.facts.append(PCmp("<", s, hi))
        return s

    def walk(self, region: K.Region) -> None:
        for op in region.ops:
            self.track(op)
            if isinstance(op, KC.For):
                lo, hi = self.forms.get(op.start.id), self.forms.get(op.stop.id)
                self.sym(op.body.args[0], lo, hi)
            for r in op.regions():
                self.walk(r)

    def track(self, op: K.Op) -> None:
        if not op.results:
            return
        r = op.results[0]
        if isinstance(op, Iota):
            # An index vector: element k is k. `_P{axis}` stands for the position of an element in the tensor
            # (`coords` gives each access its own positions), so `2 * iota + 1` is the affine form `2 * _P0 + 1`.
            self.forms[r.id] = DSym(_POS.format(0))
            self.facts.append(PCmp(">=", DSym(_POS.format(0)), DConst(0)))
        elif isinstance(op, Broadcast) and op.x.id in self.forms:
            env: dict[str, Dim] = {_POS.format(k): DSym(_POS.format(d)) for k, d in enumerate(op.dims)}
            self.forms[r.id] = self.forms[op.x.id].substitute(env)
        else:
            # a launch-known factor (`h * (D // H)`, a head's window) keeps a form Z3 reasons about
            form = kir_form(op, self.forms, self._nonnegative, Products.LAUNCH)
            if form is None and r.id in self.shared:
                form = shared_symbol(r)
            if form is not None:
                self.forms[r.id] = form

    def coords(self, index: K.Index, tag: str) -> list[Dim] | None:
        out: list[Dim] = []
        positions: dict[str, Dim] = {}
        for ax, it in enumerate(index):
            if isinstance(it, K.Value):
                f = self.forms.get(it.id)
                if f is None:
                    return None
                shape = it.type.shape if isinstance(it.type, K.TensorType) else ()
                for k, extent in enumerate(shape):  # this access's own element positions
                    name = _POS.format(k)
                    if name in f.symbols() and name not in positions:
                        q = DSym(f"_q{k}{tag}{self.suffix}")
                        positions[name] = q
                        self.facts += [PCmp(">=", q, DConst(0)), PCmp("<", q, extent)]
                if f.symbols() & {_POS.format(k) for k in range(len(shape))}:
                    f = f.substitute(positions)
                out.append(f)
            elif isinstance(it, K.Slice):
                s = DSym(f"_s{ax}{tag}{self.suffix}")
                self.facts += [PCmp(">=", s, DConst(0)), PCmp("<", s, it.extent)]
                out.append(dim_bin("+", it.start, s))
            elif isinstance(it, K.DynSlice):  # a data-dependent subregion: some element of [begin, end)
                lo, hi = self.forms.get(it.begin.id), self.forms.get(it.end.id)
                if lo is None or hi is None:
                    return None
                t = DSym(f"_t{ax}{tag}{self.suffix}")
                self.facts += [PCmp(">=", t, lo), PCmp("<", t, hi)]
                out.append(t)
            else:
                return None
        return out


def shared_symbol(v: K.Value) -> DSym:
    """The symbol of an integer scalar that every instance sees equal (see `AffineForms.shared`)."""
    return DSym(f"_u{v.id}")


def _int_scalar(v: K.Value) -> bool:
    t = v.type
    return isinstance(t, K.TensorType) and t.is_scalar and isinstance(t.dtype, DType) and t.dtype.is_int


def shared_values(kernel: K.Kernel, par: KC.Parallel, written: set[int]) -> frozenset[int]:
    """The values every instance of `par` computes alike: kernel scalars, what the kernel computes before the
    loop, and the pure ops of the loop's body over such values, loads included while the loop does not write
    what they read (a load of a buffer the loop writes may see another instance's write). Nested regions are
    left out (a loop's index differs between its iterations)."""
    out = {p.value.id for p in kernel.params}
    defs = {v.id: op for op in kernel.body.ops for v in op.results}

    def pure(op: K.Op) -> bool:
        if op.has_effects() or op.regions() or op.has(K.OpTrait.ATOMIC):
            return False
        return not op.has(K.OpTrait.READS) or op.src.id not in written  # type: ignore[attr-defined]

    def outside(vid: int, seen: set[int]) -> bool:  # a value of the kernel's top level, computed alike
        if vid in out:
            return True
        op = defs.get(vid)
        if op is None or vid in seen or not pure(op):
            return False
        seen.add(vid)
        if all(outside(v.id, seen) for v in op.operands()):
            out.update(r.id for r in op.results)
            return True
        return False

    inside = defined_inside(par)
    for v in captured(par):
        if v not in inside:
            outside(v, set())
    for op in par.body.ops:
        if pure(op) and all(v.id in out for v in op.operands()):
            out.update(r.id for r in op.results)
    return frozenset(out)


def _writes(body: K.Region) -> list[K.Op]:
    """The plain writes of `body` (atomics may share elements between instances by design)."""
    return [o for o in body.walk() if o.has(K.OpTrait.WRITES) and not o.has(K.OpTrait.ATOMIC)]


def _reads(body: K.Region, bufs: set[int]) -> list[K.Op]:
    """The ops of `body` that only read, from one of `bufs` (a region scan is checked among the writes)."""
    return [o for o in body.walk() if o.has(K.OpTrait.READS) and not o.has(K.OpTrait.WRITES) and
            o.src.id in bufs]  # type: ignore[attr-defined]


def _index_of(op: K.Op) -> K.Index | None:
    """The coordinates an access reaches: its index, or the index tensors of a gather/scatter (affine when they
    are built from `iota`, as a strided-slice store `out[i, 0:D:2] = v` is); a region scan's is its target's, a
    region fold's its source's (a subregion `b:e` reaches some element of `[b, e)`)."""
    if isinstance(op, KA.Store | KA.Load | KG.RegionFold):
        return op.index
    if isinstance(op, KG.RegionScan):
        return op.dst_index
    if isinstance(op, KA.Scatter):
        return op.indices
    if isinstance(op, KA.Gather):
        return op.indices
    return None


def instances_independent(kernel: K.Kernel, par: KC.Parallel) -> tuple[bool, str]:
    """Whether different instances write disjoint elements and never read what another one writes.

    Returns (ok, reason); the reason names the first statement that could not be proven.
    """
    solver = kernel.solver()
    touched = effects_of([par])
    shared = shared_values(kernel, par, touched.writes | set(touched.atomics))
    outer = _outer_forms(kernel, shared, solver)
    fa, fb = AffineForms("a", solver, shared), AffineForms("b", solver, shared)
    for f in (fa, fb):
        f.forms.update(outer)
        for a, d in zip(par.body.args, par.domain):
            f.sym(a, DConst(0), d)
        f.walk(par.body)
    differ = POr(tuple(PCmp("!=", fa.forms[a.id], fb.forms[a.id]) for a in par.body.args))
    # Buffers allocated inside the body are private to each instance: no other instance sees them.
    private = {v.id for o in par.body.walk() for v in o.results if isinstance(v.type, K.RefType)}
    writes = [w for w in _writes(par.body) if w.dst.id not in private]  # type: ignore[attr-defined]
    written = {w.dst.id for w in writes}  # type: ignore[attr-defined]
    # (access, the index it reaches): a write reaches its target's index, a read its source's
    targets = [(w, _index_of(w)) for w in writes]
    sources = [(r, _index_of(r)) for r in _reads(par.body, written)] + _scan_sources(writes, written)
    pairs = [(x, y, False) for x in targets for y in targets if x[0].dst.id == y[0].dst.id]  # type: ignore
    pairs += [(r, w, True) for r in sources for w in targets if w[0].dst.id == r[0].src.id]  # type: ignore
    for n, ((x, ix), (y, iy), reading) in enumerate(pairs):
        if isinstance(x, KA.Scatter | KA.Store) and x is y and x.unique:
            continue
        if isinstance(x, KG.RegionScan) and isinstance(y, KG.RegionScan) and ix is x.dst_index and \
                _segments_disjoint(x, y, par.body, fa, fb, differ, solver, written):
            continue
        if ix is None or iy is None:
            what, reads = (x, reading) if ix is None else (y, False)
            return False, f"{_what(what)} {'reads' if reads else 'writes'} through a tensor of indices"
        # each pair its own position symbols: two accesses' subregions along one axis bound different positions
        cx, cy = fa.coords(ix, f"x{n}"), fb.coords(iy, f"y{n}")
        if cx is None or cy is None:
            return False, f"the index of {_what(x if cx is None else y)} is not an affine function of the loop indices"
        same = PAnd(tuple(PCmp("==", p, q) for p, q in zip(cx, cy)))
        before = len(solver.facts)
        solver.facts += fa.facts + fb.facts
        try:
            # Collision possible unless (differ and same) is unsatisfiable.
            goal = PNot(PAnd((differ, same)))
            cex = solver.prove(goal)
            if cex:  # show the smallest sizes, then the smallest instances: the same note on every run
                order = [*sorted({n for d in par.domain for n in d.symbols()}),
                         *(f"_v{a.id}{t}" for t in "ab" for a in par.body.args)]
                cex = solver.smallest_counterexample(goal, order) or cex
        finally:
            del solver.facts[before:]
        if cex is not None:
            return False, _collision(x, y, par, cex, reading)
    return True, ""


def _scan_sources(writes: list[K.Op], written: set[int]) -> list[tuple[K.Op, K.Index | None]]:
    """The reads of region scans from buffers the loop writes, as (scan, its source's index); a scan reading
    exactly the elements it writes (`out[b:e] = cumsum(out[b:e])`) is left out: its writes are checked."""
    return [(w, w.src_index) for w in writes if isinstance(w, KG.RegionScan) and w.src.id in written and
            not (w.src.id == w.dst.id and w.src_index == w.dst_index)]


def _outer_forms(kernel: K.Kernel, shared: frozenset[int], solver: ShapeSolver) -> dict[int, Dim]:
    """Forms of the integer scalars the kernel computes alike for every instance before a loop: `shared`
    values of its top level (kernel scalars and what is computed from them), as `AffineForms` would track them
    in the loop's body."""
    top = AffineForms("", solver, shared)
    scalars: set[int] = set()
    for p in kernel.params:
        if p.value.id in shared and _int_scalar(p.value):
            top.forms[p.value.id] = shared_symbol(p.value)
            scalars.add(p.value.id)
    for op in kernel.body.ops:
        if op.results and all(r.id in shared for r in op.results):
            top.track(op)
            scalars.update(r.id for r in op.results if _int_scalar(r))
    return {k: f for k, f in top.forms.items() if k in scalars}


def _segment_bounds(op: KG.RegionScan, producers: dict[int, K.Op], written: set[int]
                    ) -> tuple[int, KA.Load, KA.Load, K.Index] | None:
    """(axis, the loads of `offsets[i]` and `offsets[j]`, the target's other index items) of a region scan whose
    target subregion is bounded by two elements of one tensor the loop does not write, else None."""
    dyn = [k for k, it in enumerate(op.dst_index) if isinstance(it, K.DynSlice)]
    if len(dyn) != 1:
        return None
    it = op.dst_index[dyn[0]]
    assert isinstance(it, K.DynSlice)
    lo, hi = producers.get(it.begin.id), producers.get(it.end.id)
    if not (isinstance(lo, KA.Load) and isinstance(hi, KA.Load)) or lo.src.id != hi.src.id or \
            lo.src.id in written or len(lo.index) != 1 or len(hi.index) != 1:
        return None
    return dyn[0], lo, hi, tuple(x for k, x in enumerate(op.dst_index) if k != dyn[0])


def _segments_disjoint(x: KG.RegionScan, y: KG.RegionScan, body: K.Region, fa: AffineForms, fb: AffineForms,
                       differ: POr, solver: ShapeSolver, written: set[int]) -> bool:
    """Whether two instances' region scans write disjoint elements: each target is a segment
    `dst[offsets[i]:offsets[i + 1]]` of one offsets tensor the loop does not write, and two instances whose
    segment numbers `i` agree differ in the target's other coordinates. Segments of different numbers are
    disjoint because segment offsets are non-decreasing (as CSR offsets are; the oracle checks it under
    `checks=True`)."""
    producers = {v.id: op for op in body.walk() for v in op.results}
    bx, by = _segment_bounds(x, producers, written), _segment_bounds(y, producers, written)
    if bx is None or by is None or bx[0] != by[0] or bx[1].src.id != by[1].src.id or len(bx[3]) != len(by[3]):
        return False
    ends = []
    for forms, (_, lo, hi, _) in ((fa, bx), (fb, by)):
        f, g = forms.coords(lo.index, "lo"), forms.coords(hi.index, "hi")
        if f is None or g is None:
            return False
        ends.append((f[0], g[0]))
    cx, cy = fa.coords(bx[3], "x"), fb.coords(by[3], "y")
    if cx is None or cy is None:
        return False
    before = len(solver.facts)
    solver.facts += fa.facts + fb.facts
    try:
        # each segment ends where the next one begins ...
        if not all(solver.proves(PCmp("==", g, dim_bin("+", f, DConst(1)))) for f, g in ends):
            return False
        # ... and instances with one segment number write different elements of it
        same = PAnd((PCmp("==", ends[0][0], ends[1][0]), *(PCmp("==", p, q) for p, q in zip(cx, cy))))
        return solver.prove(PNot(PAnd((differ, same)))) is None
    finally:
        del solver.facts[before:]


def _collision(x: K.Op, y: K.Op, par: KC.Parallel, cex: dict[str, int], reading: bool) -> str:
    """`store at k.py:9 in instance (r=1) and store at k.py:9 in instance (r=0) write the same element`."""
    if not cex:  # the solver gave up: no instances to show
        return f"{_what(x)} and {_what(y)} may touch the same element"

    def instance(tag: str) -> str:
        return ", ".join(f"{a.name or f'i{k}'}={cex.get(f'_v{a.id}{tag}', '?')}" for k, a in enumerate(par.body.args))

    sizes = sorted({n for d in par.domain for n in d.symbols() if n in cex})
    given = f" (with {', '.join(f'{n}={cex[n]}' for n in sizes)})" if sizes else ""
    if not reading:
        return f"{_what(x)} in instance ({instance('a')}) and {_what(y)} in instance ({instance('b')}) write the " \
               f"same element{given}"
    return f"{_what(x)} in instance ({instance('a')}) reads the element that {_what(y)} in instance " \
           f"({instance('b')}) writes{given}"


def _what(op: K.Op) -> str:
    where = f" at {op.loc}" if op.loc else ""
    return f"{op.NAME}{where}"




# ---------------------------------------------------------------------------------------------- physical programs


def producer(ops: tuple[POp, ...], v: PValue) -> POp | None:
    """The op among `ops` that defines `v`, if any."""
    return next((op for op in ops if any(r.id == v.id for r in op.results)), None)


def captures(region: PRegion) -> list[PValue]:
    """Values the region uses that it does not define itself (in first-use order)."""
    inner: set[int] = {a.id for a in region.args}
    used: list[PValue] = []
    for op in region.walk():
        inner.update(v.id for v in op.results)
        for r in op.regions():
            inner.update(a.id for a in r.args)
    for op in region.walk():
        used.extend(v for v in op.operands() if v.id not in inner)
    seen: set[int] = set()
    return [v for v in used if not (v.id in seen or seen.add(v.id))]  # type: ignore[func-returns-value]


def free_values(op: POp) -> list[PValue]:
    """The values `op` reads from outside itself: its operands and what its regions capture."""
    return [*op.operands(), *(v for region in op.regions() for v in captures(region))]


def written_buffers(program: Program) -> set[int]:
    """Buffers some op of the program writes through an access (stores, atomics, region scans' emitted
    stores), in any group body (every form of it)."""
    return {op.access.buffer for op in program.walk()
            if op.has(Trait.WRITES) and getattr(op, "access", None) is not None}


def not_invariant(program: Program, op: POp, invariant: set[int], written: set[int]) -> str | None:
    """Why `op` may not run once per program, before a loop over blocks of instances (None when it may):
    it must be declared invariant (its nested ops too), read only `invariant` values, and load only
    read-only tensor parameters that no op of the kernel (`written`) writes."""
    if not op.has(Trait.INVARIANT):
        return f"{op.NAME} is not a pure op"
    for inner in [op, *(i for r in op.regions() for i in r.walk())]:
        if isinstance(inner, P.Load):
            buf = program.buffer(inner.access.buffer)
            if buf.scope is not BufferScope.EXTERNAL_VIEW or buf.access is not Access.READ or buf.id in written:
                return f"it reads {buf.name}, which the kernel writes or which is no read-only tensor parameter"
        elif inner is not op and not (inner.has(Trait.INVARIANT) or inner.TERMINATOR):
            return f"its region holds {inner.NAME}"
    for v in free_values(op):
        if v.id not in invariant:
            return f"it reads %{v.name or 'p'}{v.id}, which varies with the block of instances"
    return None


__all__ = ["def_use_graph", "captured", "defined_inside", "Effects", "effects_of", "conflict", "variant_values",
           "instances_independent", "AffineForms", "captures", "free_values", "written_buffers", "not_invariant"]
