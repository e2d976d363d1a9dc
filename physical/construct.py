"""Initial physical program (seed 001 section 4): worksets, execution groups, segments, buffers.

1. Top-level statements are found: `parallel` blocks, whole-tensor writes (rebuilt as parallel writes
   over their result axes, physical/worksets.py), indexed writes over index tensors, and everything
   else (ordered loops, branches, scalar code) as single-instance statements.
2. A parallel statement maps its instances to programs when Z3 proves that different instances
   write disjoint elements and never read what another writes; otherwise it runs in order.
3. Statements that depend on each other (a buffer one writes and the other touches, or a value one
   produces for the other) or share a structured producer form one group; a group of several
   statements runs them in order inside one instance, with a performance note.
4. Each group's body is lowered (physical/lower); segments get `L_g` and `O_g`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from kir import access as KA
from kir import atomic as KT
from kir import control as KCt
from kir import core as K
from kir import reduce as KR
from kir import scan as KS
from kir.dims import DConst, Dim, PCmp, dim_bin
from kir.dtypes import DType
from kir.errors import DiagnosticError
from kir.pointwise import CmpFn

from . import ops as P
from .analysis import Effects, captured, conflict, effects_of, instances_independent, variant_values
from .launch_expr import LaunchExpr, LConst, LConstexpr, ldim, lprod, lsum
from .lower import Lowerer, ProgramState, lower_ops
from .lower.context import group_block
from .lower.control import decode, note_loop_writes
from .model import (
    Access,
    Buffer,
    BufferInit,
    BufferScope,
    Fragment,
    Group,
    KirOpInfo,
    Lifetime,
    Origin,
    Ownership,
    ParamKind,
    Program,
    ProgramParam,
    Segment,
)
from .share_loads import share_loads
from .worksets import CannotBind, Rebuilder, flatten_nest, parallel_indexed, parallel_store, recomputed_per_instance

SMALL_EXTENT = 65536  # elements one program reduces in a few microseconds: no note below it


@dataclass
class Statement:
    index: int
    orig: K.Op
    op: K.Op                      # what is lowered: the original op or a rebuilt parallel
    parallel: KCt.Parallel | None = None
    independent: bool = False
    reason: str = ""
    prelude: list[K.Op] = field(default_factory=list)
    effects: Effects = field(default_factory=Effects)


def _author_names(st: Statement) -> tuple[str | None, ...]:
    """The names the author gave a statement's parallel indices; none for a parallel Intent made (a
    whole-tensor store): its coordinates are positions along the domain."""
    if st.parallel is None or not isinstance(st.orig, KCt.Parallel):
        return ()
    return tuple(a.name for a in st.parallel.body.args)


def construct(kernel: K.Kernel) -> Program:
    """Build the initial physical program of a specialised, verified kernel."""
    if kernel.dtype_vars:
        raise DiagnosticError(f"kernel {kernel.name} is generic over {', '.join(str(v) for v in kernel.dtype_vars)}; "
                              f"specialise it before physical construction", kernel.loc)
    origins, infos = _origins(kernel)
    state = ProgramState(kernel, origins)
    params = _params(kernel, state)
    top = [op for op in kernel.body.ops if not op.TERMINATOR]
    defs = {v.id: op for op in top for v in op.results}
    origin_ids: dict[int, int] = {}
    rb = Rebuilder(kernel, kernel.solver(), defs, origin_ids)
    stmts = _statements(kernel, top, rb, state)
    for new_id, orig_id in origin_ids.items():
        if orig_id in origins:
            origins[new_id] = origins[orig_id]
    _preludes(stmts, top, defs)
    _one_program_notes(kernel, stmts, state)
    components = _components(stmts)
    groups: list[Group] = []
    for comp in components:
        groups.append(_lower_group(state, len(groups), comp, top, kernel))
    constexprs = [(g.block, LConst(1)) for g in groups] + sorted(state.blocks.items())
    segments, grid = segments_for(groups, dict(constexprs))
    buffers = tuple(sorted(state.buffers.values(), key=lambda b: b.id))
    # the last step: what a group body reads twice from a buffer nothing writes, it reads once (share_loads.py)
    program = Program(name=kernel.name, params=params, workspaces=tuple(state.workspaces), symbols=kernel.symbols,
                      segments=segments, groups=tuple(groups), buffers=buffers, constexprs=tuple(constexprs), grid=grid,
                      num_warps=4, notes=tuple(state.notes), origins=infos, requires=kernel.requires + kernel.axioms,
                      checks=kernel.checks, symbol_names=tuple(state.symbol_names.items()))
    return share_loads(program)


def segments_for(groups: list[Group] | tuple[Group, ...], constexprs: dict[str, LaunchExpr]
                 ) -> tuple[tuple[Segment, ...], LaunchExpr]:
    """Segment g: L_g = cdiv(prod(domain), BLOCK_I) (1 for a single instance), O_g = sum of earlier L.

    A tile-owning group has prod(leading extents) * prod(cdiv(D_k, B_k)) programs (`Ownership.programs`)."""
    segs = []
    lengths: list[LaunchExpr] = []
    for g in groups:
        length = g.ownership.programs(g.domain, constexprs)
        segs.append(Segment(g.id, length, lsum(tuple(lengths))))
        lengths.append(length)
    return tuple(segs), lsum(tuple(lengths))


# ---------------------------------------------------------------------------------------------- setup


def _origins(kernel: K.Kernel) -> tuple[dict[int, Origin], tuple[KirOpInfo, ...]]:
    origins: dict[int, Origin] = {}
    infos = []
    region_no = 0
    for n, op in enumerate(kernel.walk()):
        first = op.results[0].id if op.results else None
        origins[id(op)] = Origin(0, n, first, None, None)
        detail = ""
        for attr in ("kind", "fn"):
            if hasattr(op, attr):
                detail = str(getattr(op, attr))
        infos.append(KirOpInfo(n, op.NAME, op.loc, detail))
        region_no += len(op.regions())
    return origins, tuple(infos)


def _params(kernel: K.Kernel, state: ProgramState) -> tuple[ProgramParam, ...]:
    eff = effects_of(kernel.body.ops)
    out = []
    for p in kernel.params:
        t = p.type
        if not isinstance(t.dtype, DType):
            raise DiagnosticError(f"parameter {p.name} has dtype variable {t.dtype}; specialise the kernel first",
                                  kernel.loc)
        if isinstance(t, K.RefType):
            bid = state.fresh()
            written = p.value.id in eff.writes or p.value.id in eff.atomics
            read = p.value.id in eff.reads or (p.value.id in eff.atomics)
            access = Access.READ_WRITE if written and read else Access.WRITE if written else Access.READ
            state.buffers[bid] = Buffer(bid, p.name, t.dtype, t.shape, BufferScope.EXTERNAL_VIEW, BufferInit.EXTERNAL,
                                        Lifetime.HOST, access, param=p.name, origin=Origin(0, None, p.value.id))
            state.ref_buffer[p.value.id] = bid
            out.append(ProgramParam(p.name, ParamKind.TENSOR, t.dtype, t.shape, str(t.role), bid))
        else:
            out.append(ProgramParam(p.name, ParamKind.SCALAR, t.dtype))
    return tuple(out)


# ---------------------------------------------------------------------------------------------- statements


def _is_statement(op: K.Op) -> bool:
    return op.has_effects() or isinstance(op, KCt.Parallel)


def _statements(kernel: K.Kernel, top: list[K.Op], rb: Rebuilder, state: ProgramState) -> list[Statement]:
    used_later = {v.id for op in top for v in op.operands()} | \
        {i for op in top for i in captured(op)}
    stmts: list[Statement] = []
    for n, op in enumerate(top):
        if not _is_statement(op):
            continue
        st = Statement(n, op, op)
        if isinstance(op, KCt.Parallel):
            st.parallel = flatten_nest(rb, op)
        elif isinstance(op, KA.Store) and any(isinstance(it, K.Slice) for it in op.index):
            nslices = sum(1 for it in op.index if isinstance(it, K.Slice))
            redundant: KCt.Parallel | None = None  # binds, but recomputes a structured op per instance
            why = ""
            for bound in range(nslices, 0, -1):
                try:
                    par = parallel_store(rb, op, bound)
                except CannotBind as exc:
                    why = why or str(exc)
                    continue
                if recomputed_per_instance(list(par.body.ops), par.body.args) is None:
                    st.parallel = par
                    break
                redundant = redundant or par
            if st.parallel is None:
                st.parallel = redundant
            if st.parallel is None:
                state.note(f"the whole-tensor write runs in one program instance (one multiprocessor does all of "
                           f"it): its value cannot be computed per element ({why})", op.loc)
        elif isinstance(op, KA.Scatter | KT.Atomic | KT.AtomicCAS) and \
                any(isinstance(v.type, K.TensorType) and v.type.rank for v in op.operands()[1:]) and \
                not any(v.id in used_later for v in op.results):
            try:
                st.parallel = parallel_indexed(rb, op)
            except CannotBind:
                st.parallel = None
        if st.parallel is not None:
            st.op = st.parallel
            st.independent, st.reason = instances_independent(kernel, st.parallel)
            if not st.independent:
                state.note(f"instances of this parallel loop may conflict: {st.reason}; it runs in order inside one "
                           f"program instance. State disjoint writes with unique=True, or use an atomic, to run it in "
                           f"parallel", op.loc)
        stmts.append(st)
    return stmts


def _preludes(stmts: list[Statement], top: list[K.Op], defs: dict[int, K.Op]) -> None:
    """The top-level pure ops each statement needs, in program order, and its effects."""
    order = {id(op): n for n, op in enumerate(top)}
    for st in stmts:
        need: dict[int, K.Op] = {}
        work = list(captured(st.op))
        while work:
            vid = work.pop()
            op = defs.get(vid)
            if op is None or _is_statement(op) or id(op) in need:
                continue
            need[id(op)] = op
            work.extend(captured(op))
        st.prelude = sorted(need.values(), key=lambda o: order[id(o)])
        st.effects = effects_of([st.op, *st.prelude])


def _one_program_notes(kernel: K.Kernel, stmts: list[Statement], state: ProgramState) -> None:
    """A performance note for each structured op over a size-dependent extent that a statement without
    a workset runs in one program instance (`out[0] = intent.sum(x)`): one multiprocessor does it all."""
    solver = kernel.solver()
    for st in stmts:
        if st.parallel is not None or (isinstance(st.orig, KA.Store) and
                                       any(isinstance(it, K.Slice) for it in st.orig.index)):
            continue  # a workset, or a whole-tensor write that already has its note
        for op in st.prelude:
            if not isinstance(op, KR.Reduce | KS.Scan):
                continue
            t = op.inputs[0].type
            assert isinstance(t, K.TensorType)
            axes = op.axes if isinstance(op, KR.Reduce) else (op.axis,)
            extent: Dim = DConst(1)
            for a in axes:
                extent = dim_bin("*", extent, t.shape[a])
            if extent.is_const or solver.proves(PCmp("<=", extent, DConst(SMALL_EXTENT))):
                continue
            what = "reduction" if isinstance(op, KR.Reduce) else "scan"
            # passes/split_reduce.py removes the note where it splits the reduction across programs
            why = "a reduction is split across programs only where its row is walked in chunks and its result " \
                "is only stored" if what == "reduction" else "scans are not yet split across programs"
            state.note(f"the {op.kind} {what} over {extent} elements runs in one program instance: the statement "
                       f"writes no axis that could spread it over programs, so one multiprocessor does all of it "
                       f"({why})", op.loc or st.orig.loc)


def _components(stmts: list[Statement]) -> list[list[Statement]]:
    g = nx.Graph()
    g.add_nodes_from(range(len(stmts)))
    results = {v.id: k for k, st in enumerate(stmts) for v in st.orig.results}
    for a in range(len(stmts)):
        for b in range(a + 1, len(stmts)):
            sa, sb = stmts[a], stmts[b]
            flows = any(results.get(v) == a for v in _uses(sb)) or any(results.get(v) == b for v in _uses(sa))
            if flows or conflict(sa.effects, sb.effects):
                g.add_edge(a, b, kind="dependence")
            elif {id(o) for o in sa.prelude if o.has(K.OpTrait.STRUCTURED)} & \
                    {id(o) for o in sb.prelude if o.has(K.OpTrait.STRUCTURED)}:
                g.add_edge(a, b, kind="shared producer")
    comps = [sorted(c) for c in nx.connected_components(g)]
    comps.sort(key=lambda c: c[0])
    return [[stmts[k] for k in c] for c in comps]


def _uses(st: Statement) -> set[int]:
    out = set(captured(st.op))
    for op in st.prelude:
        out |= captured(op)
    return out


# ---------------------------------------------------------------------------------------------- groups


def _same_domain(kernel: K.Kernel, a: tuple[Dim, ...], b: tuple[Dim, ...]) -> bool:
    if len(a) != len(b):
        return False
    s = kernel.solver()
    return all(x == y or s.equal(x, y) is None for x, y in zip(a, b))


def _lower_group(state: ProgramState, gid: int, comp: list[Statement], top: list[K.Op], kernel: K.Kernel) -> Group:
    block = group_block(gid)
    mapped = all(st.parallel is not None and st.independent for st in comp) and \
        all(_same_domain(kernel, comp[0].parallel.domain, st.parallel.domain) for st in comp)  # type: ignore
    if mapped and len(comp) > 1:
        mapped = not any(conflict(a.effects, b.effects) for a in comp for b in comp if a is not b)
    first = comp[0].orig
    lw = Lowerer(state, gid, block)
    lw.begin()
    for prm in kernel.params:
        if not isinstance(prm.type, K.RefType):
            lw.bind(prm.value, lw.add(P.ScalarParam, Fragment(prm.type.dtype), name=prm.name,  # type: ignore
                                      param=prm.name))
    if mapped:
        domain = comp[0].parallel.domain  # type: ignore[union-attr]
        flat = lw.add(P.OwnedInstances, Fragment(DType.i64, True, (), True), name="flat", group=gid, block=block)
        _enter_lanes(lw, flat, domain)
        coords = decode(lw, flat, domain, _author_names(comp[0]))
        preludes: dict[int, K.Op] = {}
        for st in comp:
            preludes.update({id(o): o for o in st.prelude})
        lower_ops(lw, tuple(sorted(preludes.values(), key=lambda o: top.index(o))))
        for st in comp:
            par = st.parallel
            assert par is not None
            lw.variant = set(variant_values(par.body, [a.id for a in par.body.args], True))
            for ka, pa in zip(par.body.args, coords):
                lw.bind(ka, pa)
            lower_ops(lw, par.body.ops)
        body = lw.finish(())
        return Group(gid, _group_name(comp), domain, Ownership(block), body, False, tuple(state.origins.get(id(s.orig))
                                                                              for s in comp), first.loc)
    serial = len(comp) > 1 or any(st.parallel is not None and not st.independent for st in comp)
    if len(comp) > 1:
        names = ", ".join(f"{st.orig.NAME}" + (f" at line {st.orig.loc.line}" if st.orig.loc else "") for st in comp)
        state.note(f"statements {names} depend on each other or share a producer; they run in order inside one "
                   f"program instance. Split them into separate kernels to run them in parallel", first.loc)
    members = {id(st.orig): st for st in comp}
    needed = {id(o) for st in comp for o in st.prelude}
    done_first = False
    for op in top:
        if id(op) in needed:
            lower_ops(lw, (op,))
        elif id(op) in members:
            st = members[id(op)]
            if done_first:
                lw.add_barrier()
            done_first = True
            if st.parallel is None:
                lower_ops(lw, (st.op,))
            else:
                _serial_parallel(lw, st.parallel, st.independent, block, _author_names(st))
    body = lw.finish(())
    return Group(gid, _group_name(comp), (), Ownership(block), body, serial,
                 tuple(state.origins.get(id(s.orig)) for s in comp), first.loc)


def _enter_lanes(lw: Lowerer, flat, domain: tuple[Dim, ...]) -> None:
    total = lw.shape_value(lprod(tuple(ldim(d) for d in domain)), name="total")
    lw.lane_valid = lw.compare(CmpFn.lt, flat, total)
    lw.instance_flat = flat
    count: Dim = DConst(1)
    for d in domain:
        count = dim_bin("*", count, d)
    lw.instance_count = count


def _serial_parallel(lw: Lowerer, par: KCt.Parallel, independent: bool, block: str,
                     names: tuple[str | None, ...] = ()) -> None:
    """Run a parallel statement inside the instance: lane chunks when independent, else one by one."""
    total = lw.shape_value(lprod(tuple(ldim(d) for d in par.domain)), name="total")
    zero = lw.shape_value(DConst(0))
    saved = lw.lane_valid, lw.instance_flat, lw.instance_count
    if independent:
        step = lw.add(P.ShapeValue, Fragment(DType.i64, index=True), expr=LConstexpr(block))
        (base,) = lw.begin((Fragment(DType.i64, index=True),), ("base",))
        flat = lw.add(P.ChunkLanes, Fragment(DType.i64, True, (), True), name="flat", base=base, block=block)
        _enter_lanes(lw, flat, par.domain)
        lw.variant = set(variant_values(par.body, [a.id for a in par.body.args], True))
    else:
        step = lw.shape_value(DConst(1))
        (flat,) = lw.begin((Fragment(DType.i64, index=True),), ("flat",))
        # one instance at a time: a private buffer needs a single copy, reused in order
        lw.lane_valid, lw.instance_flat, lw.instance_count = None, None, DConst(1)
        lw.variant = set()
    coords = decode(lw, flat, par.domain, names)
    for ka, pa in zip(par.body.args, coords):
        lw.bind(ka, pa)
    if not independent:
        # instance k + 1 may read what instance k wrote (buf[r] = buf[r + 1]); the scalar write and read need not
        # be the same thread's, so the read waits behind a barrier, as in an ordered `for`
        note_loop_writes(lw, par.body)
    with lw.loop_body():
        lower_ops(lw, par.body.ops)
    body = lw.finish(())
    lw.lane_valid, lw.instance_flat, lw.instance_count = saved
    lw.emit(P.For, (), start=zero, stop=total, step=step, inits=(), body=body)


def _group_name(comp: list[Statement]) -> str:
    return "+".join(st.orig.NAME for st in comp)


__all__ = ["construct", "segments_for", "Statement"]
