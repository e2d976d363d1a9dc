"""Mutation tests of the construction verifier: for every rule, a valid program broken in exactly that way.

Each mutation takes a program built by `physical.construct`/`physical.lower` from a hand-built KIR
kernel, changes it with `dataclasses.replace`, and expects `physical.verifier.verify` to report that
rule, with its exact message, at the KIR source of the broken item.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import pytest

import intent
import physical
from kir import (
    INDEX_DTYPE,
    Alloc,
    Atomic,
    AtomicKind,
    Binary,
    BinaryFn,
    Builder,
    Constant,
    InitMode,
    Load,
    Parallel,
    Param,
    Reduce,
    ReduceKind,
    RefType,
    Role,
    Slice,
    Store,
    Yield,
    build_kernel,
    scalar,
)
from kir.core import Kernel
from kir.dims import DConst, DSym, dim_bin
from kir.dtypes import DType
from kir.errors import DiagnosticError, Loc
from kir.solver import ShapeSolver
from physical import ops as P
from physical.launch_expr import LBin, LConst, LConstexpr, LResidentPrograms, LScalar, ldim, lsum
from physical.model import (
    Access,
    AccessRelation,
    Fragment,
    Lifetime,
    Origin,
    POp,
    PRegion,
    Program,
    PValue,
)
from physical.passes import SplitReductions
from physical.verifier import RULES, PhysicalVerifyError, check, verify
from tests import samples

M, N, P_ = DSym("M"), DSym("N"), DSym("P")
f32 = DType.f32
HERE = "mutation.py"


# ---------------------------------------------------------------------------------------------- kernels


def _loc(line: int) -> Loc:
    return Loc(HERE, line, 5)


def _params(b: Builder, spec: list[tuple[str, object]]) -> tuple[Param, ...]:
    args = b.begin_region(tuple(t for _, t in spec), tuple(n for n, _ in spec))  # type: ignore[arg-type]
    return tuple(Param(n, a) for (n, _), a in zip(spec, args))


def two_groups() -> Kernel:
    """Row sums over (M) and a scaled copy over (P): two independent groups, two segments."""
    b = Builder(ShapeSolver(("M", "N", "P")))
    x, v, sums, scaled = _params(b, [("x", RefType(f32, (M, N), Role.IN)), ("v", RefType(f32, (P_,), Role.IN)),
                                     ("sums", RefType(f32, (M,), Role.OUT)),
                                     ("scaled", RefType(f32, (P_,), Role.OUT))])
    (i,) = b.begin_region((scalar(INDEX_DTYPE),), ("i",))
    row = b.add(Load, src=x.value, index=(i, Slice(DConst(0), N)), name="row", loc=_loc(10))
    s = b.add(Reduce, inputs=(row,), axes=(0,), kind=ReduceKind.sum, name="s", loc=_loc(10))
    b.make(Store, dst=sums.value, index=(i,), value=s, loc=_loc(10))
    b.make(Yield, values=())
    b.make(Parallel, domain=(M,), body=b.end_region(), loc=_loc(9))
    (p,) = b.begin_region((scalar(INDEX_DTYPE),), ("p",))
    vp = b.add(Load, src=v.value, index=(p,), loc=_loc(12))
    two = b.add(Constant, value=2.0, dtype=f32, loc=_loc(12))
    b.make(Store, dst=scaled.value, index=(p,), value=b.add(Binary, fn=BinaryFn.mul, lhs=vp, rhs=two, loc=_loc(12)),
           loc=_loc(12))
    b.make(Yield, values=())
    b.make(Parallel, domain=(P_,), body=b.end_region(), loc=_loc(11))
    b.make(Yield, values=())
    return build_kernel("two_groups", (x, v, sums, scaled), ("M", "N", "P"), b.end_region())


def staged_copy() -> Kernel:
    """A vector goes through an uninitialised local buffer: store it whole, then read it back whole."""
    b = Builder(ShapeSolver(("N",)))
    x, out = _params(b, [("x", RefType(f32, (N,), Role.IN)), ("out", RefType(f32, (N,), Role.OUT))])
    whole = (Slice(DConst(0), N),)
    buf = b.add(Alloc, dtype=f32, shape=(N,), init=InitMode.empty, name="buf", loc=_loc(20))
    row = b.add(Load, src=x.value, index=whole, name="row", loc=_loc(21))
    b.make(Store, dst=buf, index=whole, value=row, loc=_loc(21))
    back = b.add(Load, src=buf, index=whole, name="back", loc=_loc(22))
    b.make(Store, dst=out.value, index=whole, value=back, loc=_loc(23))
    b.make(Yield, values=())
    return build_kernel("staged_copy", (x, out), ("N",), b.end_region())


def scale_rows() -> Kernel:
    """Every row times one shared vector: its programs load the vector once, then walk their rows."""
    b = Builder(ShapeSolver(("M", "N")))
    x, w, out = _params(b, [("x", RefType(f32, (M, N), Role.IN)), ("w", RefType(f32, (N,), Role.IN)),
                            ("out", RefType(f32, (M, N), Role.OUT))])
    (i,) = b.begin_region((scalar(INDEX_DTYPE),), ("i",))
    row = b.add(Load, src=x.value, index=(i, Slice(DConst(0), N)), name="row", loc=_loc(31))
    vec = b.add(Load, src=w.value, index=(Slice(DConst(0), N),), name="vec", loc=_loc(32))
    b.make(Store, dst=out.value, index=(i, Slice(DConst(0), N)),
           value=b.add(Binary, fn=BinaryFn.mul, lhs=row, rhs=vec, loc=_loc(33)), loc=_loc(33))
    b.make(Yield, values=())
    b.make(Parallel, domain=(M,), body=b.end_region(), loc=_loc(30))
    b.make(Yield, values=())
    return build_kernel("scale_rows", (x, w, out), ("M", "N"), b.end_region())


KERNELS: dict[str, Callable[[], Kernel]] = {
    "softmax": samples.softmax, "vector_add": samples.vector_add, "segment_sum": samples.segment_sum,
    "recurrence": samples.recurrence, "histogram": samples.histogram, "two_groups": two_groups,
    "staged_copy": staged_copy, "two_copies": lambda: two_copies(), "tickets": lambda: tickets(),
    "scale_rows": scale_rows,
}


# ---------------------------------------------------------------------------------------------- editing programs


def rewrite(region: PRegion, fn: Callable[[POp], POp | list[POp] | None]) -> PRegion:
    """Apply `fn` to every op (innermost regions first): None keeps the op, a list replaces it."""
    ops: list[POp] = []
    for op in region.ops:
        changes = {f.name: rewrite(getattr(op, f.name), fn) for f in op.fields()
                   if isinstance(getattr(op, f.name), PRegion)}
        op = dataclasses.replace(op, **changes) if changes else op
        out = fn(op)
        ops.extend([op] if out is None else out if isinstance(out, list) else [out])
    return dataclasses.replace(region, ops=tuple(ops))


def edit(program: Program, fn: Callable[[POp], POp | list[POp] | None]) -> Program:
    return program.replace(groups=tuple(dataclasses.replace(g, body=rewrite(g.body, fn)) for g in program.groups))


def ops_of(program: Program, cls: type[POp]) -> list[POp]:
    """The ops of class `cls` a launch runs with every group's row held whole (a looped form recomputes the
    same work in chunks, with its own ops)."""
    return [op for g in program.groups for op in P.whole_form(g.body).walk() if isinstance(op, cls)]


def only(program: Program, cls: type[POp], pred: Callable[[POp], bool] = lambda op: True) -> POp:
    found = [op for op in ops_of(program, cls) if pred(op)]
    assert len(found) == 1, f"expected one {cls.NAME}, found {len(found)}"
    return found[0]


def swap(program: Program, old: POp, new: POp | list[POp] | None) -> Program:
    """Replace the op equal to `old` (None removes it)."""
    return edit(program, lambda op: (new if new is not None else []) if op == old else None)


def fresh_id(program: Program) -> int:
    ids = [v.id for op in program.walk() for v in op.results]
    ids += [a.id for op in program.walk() for r in op.regions() for a in r.args]
    return max(ids) + 1


def buffer_named(program: Program, name: str):
    return next(b for b in program.buffers if b.name == name)


def kir_op(kernel: Kernel, cls: type) -> object:
    return next(op for op in kernel.walk() if isinstance(op, cls))


# ---------------------------------------------------------------------------------------------- mutations
# Each returns (kernel, mutated program, the exact message expected).

Mutation = Callable[[], tuple[Kernel, Program, str]]
MUTATIONS: dict[str, Mutation] = {}


def mutation(rule: str) -> Callable[[Mutation], Mutation]:
    def deco(fn: Mutation) -> Mutation:
        MUTATIONS[rule] = fn
        return fn

    return deco


@mutation("self-contained")
def store_origin_holds_the_kir_op():
    k = samples.vector_add()
    p = physical.lower(k)
    st = only(p, P.Store)
    kop = kir_op(k, Store)
    broken = swap(p, st, dataclasses.replace(st, origin=Origin(0, kop)))  # type: ignore[arg-type]
    at = p.groups[0].body.ops.index(st)
    return k, broken, (f"[self-contained] program.groups[0].body.ops[{at}].origin.op is a Store; origins are KIR "
                       f"identities (integers) only")


@mutation("ssa-defined")
def store_of_an_undefined_value():
    k = samples.softmax()
    p = physical.lower(k)
    st = only(p, P.Store)
    ghost = PValue(fresh_id(p), st.value.type, "ghost")
    broken = swap(p, st, dataclasses.replace(st, value=ghost))
    return k, broken, (f"[ssa-defined] store (from store) uses %ghost{ghost.id} where it is not defined (no "
                       f"definition in this region or an enclosing one)")


@mutation("fragment-types")
def subtraction_result_with_the_lanes_axis_dropped():
    k = samples.softmax()
    p = physical.lower(k)
    sub = only(p, P.Binary, lambda op: op.fn is BinaryFn.sub)
    old = sub.results[0]
    new = PValue(old.id, Fragment(old.type.dtype, False, old.type.tile), old.name)
    broken = retype(p, old, new)
    return k, broken, (f"[fragment-types] binary (from binary): result {new.type} drops the lanes axis of its "
                       f"operands")


def retype(program: Program, old: PValue, new: PValue) -> Program:
    """Give one value a new type at its definition and at every use."""

    def sub(x: object) -> object:
        if isinstance(x, PValue):
            return new if x.id == old.id else x
        if isinstance(x, tuple):
            return tuple(sub(y) for y in x)
        if isinstance(x, PRegion):
            return PRegion(tuple(sub(a) for a in x.args), tuple(sub(o) for o in x.ops))  # type: ignore[misc]
        if isinstance(x, POp | AccessRelation) or dataclasses.is_dataclass(x) and type(x).__module__ == \
                "physical.model" and not isinstance(x, type):
            return dataclasses.replace(x, **{f.name: sub(getattr(x, f.name)) for f in dataclasses.fields(x)
                                             if f.name != "origin"})  # type: ignore[arg-type]
        return x

    return program.replace(groups=tuple(dataclasses.replace(g, body=sub(g.body)) for g in program.groups))


@mutation("launch-extent")
def segment_length_reads_device_data():
    k = samples.segment_sum()
    p = physical.lower(k)
    seg = p.segments[0]
    length = LBin("*", seg.length, LScalar("offsets"))
    broken = p.replace(segments=(dataclasses.replace(seg, length=length),), grid=lsum((length,)))
    return k, broken, ("[launch-extent] segment 0 length reads tensor parameter offsets: device data may not set a "
                       "launch extent")


@mutation("segments-partition")
def second_segment_overlaps_the_first():
    k = two_groups()
    p = physical.lower(k)
    assert len(p.segments) == 2
    second = dataclasses.replace(p.segments[1], offset=LConst(0))
    broken = p.replace(segments=(p.segments[0], second))
    return k, broken, (f"[segments-partition] segment of group 1 starts at 0, but the lengths before it sum to "
                       f"{p.segments[0].length}")


@mutation("ownership")
def store_without_the_lane_validity_guard():
    k = samples.vector_add()
    p = physical.lower(k)  # several instances per program: the last program's lanes run past N
    st = only(p, P.Store)
    broken = swap(p, st, dataclasses.replace(st, access=dataclasses.replace(st.access, mask=None)))
    return k, broken, ("[ownership] store (from store) is not masked by the lane-validity test flat < (instances): "
                       "programs whose lanes run past the domain would perform it")


@mutation("effect-coverage")
def store_left_uncovered():
    k = samples.recurrence()
    p = physical.lower(k)
    broken = swap(p, only(p, P.Store), None)
    n = next(n for n, op in enumerate(k.walk()) if isinstance(op, Store))
    return k, broken, f"[effect-coverage] KIR store (op {n}) is performed by no physical effect"


@mutation("structured-complete")
def reduction_identity_with_an_extra_component():
    k = samples.softmax()
    p = physical.lower(k)
    red = only(p, P.Reduce, lambda op: op.kind is ReduceKind.max)
    broken = swap(p, red, dataclasses.replace(red, identity=red.identity + (0.0,)))
    return k, broken, "[structured-complete] reduce (from reduce): reduce has 2 identity components for 1 accumulators"


@mutation("region-op-complete")
def region_fold_source_without_membership():
    k = samples.segment_sum()
    p = physical.lower(k)
    fold = ops_of(p, P.RegionFold)[0]  # the head piece (balanced segments add a tail and the parts' fold)
    src = fold.source
    y = src.ops[-1]
    source = dataclasses.replace(src, ops=src.ops[:-1] + (dataclasses.replace(y, values=y.values[:-1]),))
    broken = swap(p, fold, dataclasses.replace(fold, source=source))
    return k, broken, ("[region-op-complete] region_fold (from region_fold): region_fold source yields "
                       f"({y.values[0].type}); it yields the components and their membership")


@mutation("buffer-complete")
def external_view_with_an_instance_lifetime():
    k = samples.softmax()
    p = physical.lower(k)
    x = buffer_named(p, "x")
    bufs = tuple(dataclasses.replace(b, lifetime=Lifetime.INSTANCE) if b is x else b for b in p.buffers)
    return k, p.replace(buffers=bufs), ("[buffer-complete] buffer x is external_view but lives for instance "
                                        "(expected host)")


@mutation("buffer-init")
def buffer_read_before_its_first_write():
    k = staged_copy()
    p = physical.lower(k)
    buf = buffer_named(p, "buf")
    group = p.groups[0]
    ops = list(group.body.ops)
    loops = [op for op in ops if isinstance(op, P.For)]
    assert len(loops) == 2  # the store of buf, then (after a barrier) the read back
    reader = loops[1]
    assert any(isinstance(o, P.Load) and o.access.buffer == buf.id for o in reader.body.walk())
    step = next(op for op in ops if reader.step in op.results)
    for op in (step, reader):
        ops.remove(op)
    at = ops.index(loops[0])
    ops[at:at] = [step, reader]
    broken = p.replace(groups=(dataclasses.replace(group, body=dataclasses.replace(group.body, ops=tuple(ops))),))
    return k, broken, ("[buffer-init] load (from load at mutation.py:22) runs before store (from store at "
                       "mutation.py:21), but KIR orders it after: the order of buf's reads and writes changed")


@mutation("access-complete")
def masked_load_without_a_fill():
    k = samples.softmax()
    p = physical.lower(k)
    ld = only(p, P.Load)
    broken = swap(p, ld, dataclasses.replace(ld, access=dataclasses.replace(ld.access, fill=None)))
    return k, broken, ("[access-complete] load (from load) on x has no fill: inactive members would read undefined "
                       "values")


@mutation("coordinate-provenance")
def load_with_a_coordinate_missing():
    k = samples.softmax()
    p = physical.lower(k)
    ld = only(p, P.Load)
    broken = swap(p, ld, dataclasses.replace(ld, access=dataclasses.replace(ld.access, coords=ld.access.coords[:1])))
    return k, broken, "[coordinate-provenance] load (from load) gives 1 coordinates for rank-2 buffer x"


@mutation("narrowing-explicit")
def reduction_that_folds_the_padding():
    k = samples.softmax()
    p = physical.lower(k)
    red = only(p, P.Reduce, lambda op: op.kind is ReduceKind.sum)
    broken = swap(p, red, dataclasses.replace(red, member=None))
    tile = red.inputs[0].type.tile[0]
    return k, broken, (f"[narrowing-explicit] reduce (from reduce) would fold the padding of tile axis 0 ({tile}): "
                       f"its member set does not exclude positions past the extent")


@mutation("bounds-justified")
def access_without_justification():
    k = samples.recurrence()
    p = physical.lower(k)
    st = only(p, P.Store)
    broken = swap(p, st, dataclasses.replace(st, access=dataclasses.replace(st.access, bounds=None)))
    return k, broken, "[bounds-justified] store (from store) on h has no bounds justification (None)"


@mutation("ordered-dependence")
def load_of_what_the_next_instance_writes():
    k = samples.vector_add()
    p = physical.lower(k)
    out = buffer_named(p, "out")
    y = buffer_named(p, "y")
    ld = only(p, P.Load, lambda op: op.access.buffer == y.id)
    flat = ld.access.coords[0]
    last = PValue(fresh_id(p), Fragment(DType.i64, index=True), "last")
    mirror = PValue(last.id + 1, flat.type, "mirror")  # N - 1 - flat: in bounds, but another instance's element
    ops = [P.ShapeValue(results=(last,), expr=ldim(dim_bin("-", N, 1))),
           P.Binary(results=(mirror,), fn=BinaryFn.sub, lhs=last, rhs=flat),
           dataclasses.replace(ld, access=dataclasses.replace(ld.access, buffer=out.id, coords=(mirror,)))]
    broken = swap(p, ld, ops)  # type: ignore[arg-type]
    bufs = tuple(dataclasses.replace(b, access=physical.model.Access.READ_WRITE) if b is out else b for b in p.buffers)
    broken = broken.replace(buffers=bufs)
    return k, broken, ("[ordered-dependence] load (from load) may read out where another instance's store (from "
                       "store) writes: instances of group 0 would depend on each other")


@mutation("unordered-conflict")
def every_instance_stores_to_element_zero():
    k = samples.vector_add()
    p = physical.lower(k)
    st = only(p, P.Store)
    zero = PValue(fresh_id(p), Fragment(DType.i64), "zero")
    ops = [P.Const(results=(zero,), value=0, dtype=DType.i64),
           dataclasses.replace(st, access=dataclasses.replace(st.access, coords=(zero,)))]
    broken = swap(p, st, ops)  # type: ignore[arg-type]
    return k, broken, ("[unordered-conflict] store (from store) may write the element of out that it writes in "
                       "another instance, with neither unique, reduction nor atomic semantics")


@mutation("buffer-visibility")
def read_back_without_a_barrier():
    k = staged_copy()
    p = physical.lower(k)
    broken = swap(p, only(p, P.Barrier), None)
    return k, broken, ("[buffer-visibility] load (from load at mutation.py:22) reads buf after this program wrote "
                       "it, with no barrier between the write and the read")


LONG = intent.dims("N")


@intent.kernel
def long_cumsum(x: intent.f32[LONG], out: intent.Out[intent.f32[LONG]]):
    out[:] = intent.cumsum(x)


@mutation("lookback-protocol")
def scan_publishing_another_programs_slot():
    k = long_cumsum.kir
    p = physical.lower(k)  # the row is not bounded: it is split over programs that pass their totals on
    pub = only(p, P.PublishSlot)
    start = next(op.result for op in p.groups[0].body.ops if op.results and op.results[0].name == "chunk_start")
    broken = swap(p, pub, dataclasses.replace(pub, slot=start))
    return k, broken, ("[lookback-protocol] group 0: publish_slot writes a slot other than the program's own instance "
                       "(its ownership slice)")


@mutation("atomic-preserved")
def atomic_loses_its_memory_order():
    k = samples.histogram()
    p = physical.construct(k)  # the initial mapping: one atomic per element
    at = only(p, P.AtomicRMW)
    from kir.atomic import MemOrder

    broken = swap(p, at, dataclasses.replace(at, order=MemOrder.relaxed))
    return k, broken, ("[atomic-preserved] atomic_rmw (from atomic) uses memory order relaxed, but KIR asks for "
                       "acq_rel")


# ------------------------------------------------------------------------------------------ more ways to break rules
# A second mutation for several rules: other obligations the same rule owns.

MORE: dict[str, tuple[str, Mutation]] = {}


def more(name: str, rule_name: str) -> Callable[[Mutation], Mutation]:
    def deco(fn: Mutation) -> Mutation:
        MORE[name] = (rule_name, fn)
        return fn

    return deco


@more("segment_too_short", "ownership")
def segment_with_too_few_programs():
    k = samples.softmax()
    p = physical.lower(k)
    seg = p.segments[0]
    length = LBin("cdiv", seg.length, LConst(2))
    broken = p.replace(segments=(dataclasses.replace(seg, length=length),), grid=length)
    return k, broken, (f"[ownership] segment of group 0 (parallel) has {length} programs, but its domain needs "
                       f"cdiv(M, BLOCK_I0)")


@more("atomic_twice", "effect-coverage")
def atomic_performed_twice():
    k = samples.histogram()
    p = physical.construct(k)  # the initial mapping: one atomic per element
    at = only(p, P.AtomicRMW)
    again = dataclasses.replace(at, results=(PValue(fresh_id(p), at.results[0].type, "again"),))
    broken = swap(p, at, [at, again])
    return k, broken, ("[effect-coverage] atomic_rmw (from atomic) is performed by 2 physical effects in group 0; it "
                       "would happen 2 times per instance")


@more("guard_outside_the_mask", "bounds-justified")
def guard_that_is_not_part_of_the_mask():
    k = samples.histogram()
    p = physical.construct(k)  # the initial mapping: one atomic per element
    at = only(p, P.AtomicRMW)
    lane_valid = only(p, P.Compare, lambda op: op.lhs.name == "flat").results[0]
    broken = swap(p, at, dataclasses.replace(at, access=dataclasses.replace(at.access, mask=lane_valid)))
    return k, broken, (f"[bounds-justified] atomic_rmw (from atomic) on counts: guard %{at.access.bounds.mask.id} is "
                       f"not part of the access mask, so it guards nothing")


@more("proof_without_its_premise", "bounds-justified")
def proof_that_no_longer_holds():
    k = samples.recurrence()
    p = physical.lower(k)  # lanes past C exist, and only the lane-validity mask keeps them off a
    ld = only(p, P.Load, lambda op: op.access.buffer == buffer_named(p, "a").id)
    broken = swap(p, ld, dataclasses.replace(ld, access=dataclasses.replace(ld.access, mask=None)))
    return k, broken, (f"[bounds-justified] load (from load) on a: the bounds proof '{ld.access.bounds.predicate}' "
                       f"does not hold for coordinate 0 (re-proving from the mask failed)")


@more("unique_not_stated", "unordered-conflict")
def store_claims_unique_writes_kir_never_stated():
    k, broken, _ = every_instance_stores_to_element_zero()
    st = only(broken, P.Store)
    broken = swap(broken, st, dataclasses.replace(st, unique=True))
    return k, broken, "[unordered-conflict] store (from store) claims unique writes, which its KIR op does not state"


@more("block_scope_on_a_shared_buffer", "atomic-preserved")
def atomic_with_block_scope_on_an_external_buffer():
    from physical.ops.atomic import Sharing

    k = samples.histogram()
    p = physical.construct(k)  # the initial mapping: one atomic per element
    at = only(p, P.AtomicRMW)
    broken = swap(p, at, dataclasses.replace(at, sharing=Sharing.PROGRAM, scope="cta"))
    return k, broken, ("[atomic-preserved] atomic_rmw (from atomic) treats external_view buffer counts as private to "
                       "one program; other programs touch it, so it is shared by the invocation")


@more("chunk_start_leaks", "region-op-complete")
def region_fold_component_depends_on_the_chunk_start():
    k = samples.segment_sum()
    p = physical.lower(k)
    fold = ops_of(p, P.RegionFold)[0]  # the head piece (balanced segments add a tail and the parts' fold)
    src = fold.source
    start = src.args[0]
    elem = src.yielded[0]
    as_float = PValue(fresh_id(p), Fragment(elem.type.dtype), "startf")
    leak = PValue(as_float.id + 1, elem.type, "leak")
    y = src.ops[-1]
    ops = src.ops[:-1] + (P.Cast(results=(as_float,), x=start, dtype=elem.type.dtype),
                          P.Binary(results=(leak,), fn=BinaryFn.add, lhs=elem, rhs=as_float),
                          dataclasses.replace(y, values=(leak,) + y.values[1:]))
    broken = swap(p, fold, dataclasses.replace(fold, source=dataclasses.replace(src, ops=ops)))
    return k, broken, (f"[region-op-complete] region_fold (from region_fold): region_fold component %{leak.id} "
                       f"depends on the chunk's start or extent: the chunking would change the result")


@more("combine_captures", "structured-complete")
def combine_region_reads_a_value_of_the_instance():
    k = samples.softmax()
    p = physical.lower(k)
    red = only(p, P.Reduce, lambda op: op.kind is ReduceKind.sum)
    n = next(op for op in p.walk() if isinstance(op, P.ShapeValue) and str(op.expr) == "N").results[0]
    n_float = PValue(fresh_id(p), Fragment(f32), "n")
    comb = red.combine
    add = comb.ops[0]
    ops = (dataclasses.replace(add, rhs=n_float), comb.ops[1])
    broken = swap(p, red, [P.Cast(results=(n_float,), x=n, dtype=f32),
                           dataclasses.replace(red, combine=dataclasses.replace(comb, ops=ops))])
    return k, broken, (f"[structured-complete] reduce (from reduce): reduce combine region uses %n{n_float.id} from "
                       f"outside; a combine is a closed function of its arguments and literals")


@more("default_filled", "buffer-init")
def uninitialised_buffer_gets_a_default_fill():
    k = staged_copy()
    p = physical.lower(k)
    buf = buffer_named(p, "buf")
    ws = tuple(dataclasses.replace(w, fill=0.0) if w.buffer == buf.id else w for w in p.workspaces)
    return k, p.replace(workspaces=ws), ("[buffer-init] uninitialised buffer buf is default-filled with 0.0; the "
                                         "author's first-write obligation must stand")


@more("groups_share_an_output", "ordered-dependence")
def second_group_writes_the_first_groups_output():
    k = two_copies()
    p = physical.lower(k)
    assert len(p.groups) == 2
    a, b = buffer_named(p, "a"), buffer_named(p, "b")
    st = only(p, P.Store, lambda op: op.access.buffer == b.id)
    broken = swap(p, st, dataclasses.replace(st, access=dataclasses.replace(st.access, buffer=a.id)))
    return k, broken, (
        "[ordered-dependence] store (from store at mutation.py:31) in group 0 writes a, which store (from store at "
        "mutation.py:33) in group 1 also touches: groups run concurrently, so the dependence would be broken")


def two_copies() -> Kernel:
    """a[n] = x[n] and b[n] = y[n] as two parallel loops: two independent groups over the same domain."""
    b = Builder(ShapeSolver(("N",)))
    x, y, a, bb = _params(b, [("x", RefType(f32, (N,), Role.IN)), ("y", RefType(f32, (N,), Role.IN)),
                              ("a", RefType(f32, (N,), Role.OUT)), ("b", RefType(f32, (N,), Role.OUT))])
    for line, src, dst in ((31, x, a), (33, y, bb)):
        (n,) = b.begin_region((scalar(INDEX_DTYPE),), ("n",))
        b.make(Store, dst=dst.value, index=(n,), value=b.add(Load, src=src.value, index=(n,), loc=_loc(line)),
               loc=_loc(line))
        b.make(Yield, values=())
        b.make(Parallel, domain=(N,), body=b.end_region(), loc=_loc(line - 1))
    b.make(Yield, values=())
    return build_kernel("two_copies", (x, y, a, bb), ("N",), b.end_region())


@more("grid_too_small", "segments-partition")
def grid_smaller_than_the_segments():
    k = two_groups()
    p = physical.lower(k)
    broken = p.replace(grid=p.segments[0].length)
    return k, broken, (f"[segments-partition] grid is {p.segments[0].length}, but the segment lengths sum to "
                       f"{lsum((p.segments[0].length, p.segments[1].length))}")


@more("transposed_coordinates", "coordinate-provenance")
def load_with_its_coordinates_transposed():
    k = samples.recurrence()
    p = physical.lower(k)
    ld = only(p, P.Load, lambda op: op.access.buffer == buffer_named(p, "a").id)
    c, t = ld.access.coords
    broken = swap(p, ld, dataclasses.replace(ld, access=dataclasses.replace(ld.access, coords=(t, c))))
    kc, kt = kir_op(k, Load).index  # type: ignore[attr-defined]
    return k, broken, (f"[coordinate-provenance] load (from load) on a: coordinate 0 is %t#{kt.id}, but the KIR "
                       f"access names %c#{kc.id}")


@more("tile_store_past_the_domain", "ownership")
def tiled_store_without_its_domain_mask():
    k = samples.matmul()
    p = physical.lower(k)  # a program owns a tile of (M, N); tiles at the edges reach past M and N
    assert p.groups[0].tiles
    st = only(p, P.Store)
    broken = swap(p, st, dataclasses.replace(st, access=dataclasses.replace(st.access, mask=None)))
    rows, cols = p.groups[0].tiles
    return k, broken, (f"[ownership] store in tile group 0 is not masked by {rows} positions below M: positions past "
                       f"the domain would perform it")


@more("aggregated_atomic_and_its_fallback_both_run", "effect-coverage")
def aggregated_atomic_also_performed_outside_its_branch():
    k = samples.histogram()
    p = physical.lower(k)  # a uniform `if` picks bin-aggregated atomics or the per-element fallback
    branch = only(p, P.If)
    fallback = only(p, P.AtomicRMW, lambda op: any(op is o for o in branch.else_.ops))
    again = dataclasses.replace(fallback, results=(PValue(fresh_id(p), fallback.results[0].type, "again"),))
    broken = swap(p, branch, [branch, again])
    return k, broken, ("[effect-coverage] atomic_rmw (from atomic) is performed by 3 physical effects in group 0; it "
                       "would happen 3 times per instance")


@more("old_value_dropped", "atomic-preserved")
def atomic_whose_old_value_is_lost():
    k = tickets()
    p = physical.lower(k)
    st = only(p, P.Store)
    zero = PValue(fresh_id(p), Fragment(DType.i32), "zero")
    broken = swap(p, st, [P.Const(results=(zero,), value=0, dtype=DType.i32), dataclasses.replace(st, value=zero)])
    return k, broken, ("[atomic-preserved] atomic_rmw (from atomic at mutation.py:41) drops the old value its KIR op "
                       "returns to later computation")


def tickets() -> Kernel:
    """Every element takes a ticket from its bin's counter: the atomic's old value is the result."""
    E, B = DSym("E"), DSym("B")
    b = Builder(ShapeSolver(("E", "B")))
    x, counts, out = _params(b, [("x", RefType(DType.i32, (E,), Role.IN)),
                                 ("counts", RefType(DType.i32, (B,), Role.INOUT)),
                                 ("out", RefType(DType.i32, (E,), Role.OUT))])
    (e,) = b.begin_region((scalar(INDEX_DTYPE),), ("e",))
    one = b.add(Constant, value=1, dtype=DType.i32)
    old = b.add(Atomic, kind=AtomicKind.add, dst=counts.value, indices=(b.add(Load, src=x.value, index=(e,)),),
                value=one, loc=_loc(41))
    b.make(Store, dst=out.value, index=(e,), value=old, loc=_loc(42))
    b.make(Yield, values=())
    b.make(Parallel, domain=(E,), body=b.end_region())
    b.make(Yield, values=())
    return build_kernel("tickets", (x, counts, out), ("E", "B"), b.end_region())


@more("constexpr_in_a_host_extent", "launch-extent")
def segment_length_refers_to_a_constexpr():
    from physical.launch_expr import LConstexpr, lcdiv, ldim

    k = samples.vector_add()
    p = physical.lower(k)
    length = lcdiv(ldim(N), LConstexpr("BLOCK_I0"))
    broken = p.replace(segments=(dataclasses.replace(p.segments[0], length=length),), grid=length)
    return k, broken, ("[launch-extent] segment 0 length reads constexpr BLOCK_I0; host-side extents are written out, "
                       "not referenced")


@more("constexpr_defined_twice", "launch-extent")
def a_constexpr_defined_twice():
    from physical.launch_expr import LConst

    k = samples.vector_add()
    p = physical.lower(k)
    broken = p.replace(constexprs=p.constexprs + (("BLOCK_I0", LConst(2)),))
    return k, broken, "[launch-extent] constexpr BLOCK_I0 defined twice (the kernel and the launcher would disagree)"


@mutation("loop-invariant")
def owned_instances_decoded_before_the_loop():
    k = scale_rows()
    p = physical.lower(k)
    g = p.groups[0]
    form = P.whole_form(g.body)
    loop = P.block_loop(form.ops)
    assert loop is not None
    owned = next(op for op in loop.body.ops if isinstance(op, P.OwnedInstances))
    inner = dataclasses.replace(loop.body, ops=tuple(op for op in loop.body.ops if op is not owned))
    new = dataclasses.replace(form, ops=tuple(x for op in form.ops
                                              for x in ((owned, dataclasses.replace(loop, body=inner))
                                                        if op is loop else (op,))))
    broken = p.replace(groups=(dataclasses.replace(g, body=P.with_form(g.body, form, new)),))
    return k, broken, ("[loop-invariant] owned_instances of group 0 runs before the loop over blocks: every block "
                       "would decode the first block's instances")


@more("hoisted_load_of_written_memory", "loop-invariant")
def hoisted_load_of_a_vector_the_kernel_writes():
    k = scale_rows()
    p = physical.lower(k)
    w = buffer_named(p, "w")
    buffers = tuple(dataclasses.replace(b, access=Access.READ_WRITE) if b is w else b for b in p.buffers)
    broken = p.replace(buffers=buffers)
    return k, broken, ("[loop-invariant] load (from load at mutation.py:32) runs once per program, before the loop "
                       "over blocks of group 0, but it reads w, which the kernel writes or which is no read-only "
                       "tensor parameter")


@more("persistent_segment_without_its_minimum", "ownership")
def persistent_segment_launches_a_program_per_block():
    k = scale_rows()
    p = physical.lower(k)
    seg = p.segments[0]
    length = LResidentPrograms(LConst(4))
    broken = p.replace(segments=(dataclasses.replace(seg, length=length),), grid=length)
    return k, broken, ("[ownership] segment of group 0 (parallel) has resident_programs(4) programs: 1056 for M=2, "
                       "N=2 on 132 multiprocessors, where it needs min(blocks, resident programs) = 1, as "
                       "BLOCK_I0_PERSISTENT is set")


# ---------------------------------------------------------------------------------------------- invocation workspaces


def split_rows() -> tuple[Kernel, Program]:
    """two_groups with its row sums split across programs: the looped form (slots, ticket, combine) as the body
    of its group (the program a launch that selects it runs)."""
    k = two_groups()
    lowered = physical.lower(k)
    if SplitReductions().legal(lowered) is True:  # where the pipeline has not split it already
        lowered = SplitReductions().run(lowered)
    g = lowered.groups[0]
    choice = P.looped_rows(g.body)
    assert choice is not None and P.block_loop(choice.whole.ops) is None
    p = lowered.replace(groups=(dataclasses.replace(g, body=choice.looped),) + lowered.groups[1:])
    assert any(isinstance(op, P.SplitIndex) for op in p.groups[0].body.ops)
    return k, p


def _with_ops(p: Program, ops: list[POp]) -> Program:
    g = p.groups[0]
    return p.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),)
                     + p.groups[1:])


def _workspace_ops(p: Program, cls: type, name: str) -> list[POp]:
    buf = buffer_named(p, name)
    return [op for op in _shared(p)[2] if isinstance(op, cls) and op.access.buffer == buf.id]


def _shared(p: Program) -> tuple[list[POp], POp, list[POp]]:
    """The group's ops, the branch that shares blocks between programs (the `if` on SPLIT_0) and its ops."""
    ops = list(p.groups[0].body.ops)
    branch = next(op for op in ops if isinstance(op, P.If) and op.flag is not None)
    return ops, branch, list(branch.then_.ops)


def _with_shared(p: Program, inner: list[POp]) -> Program:
    ops, branch, _ = _shared(p)
    ops[ops.index(branch)] = dataclasses.replace(branch, then_=dataclasses.replace(branch.then_, ops=tuple(inner)))
    return _with_ops(p, ops)


@mutation("workspace-protocol")
def slot_written_at_another_programs_slot():
    k, p = split_rows()
    top, _, ops = _shared(p)
    (write,) = _workspace_ops(p, P.Store, "partial")
    per = next(op for op in top if isinstance(op, P.ShapeValue) and op.results[0].name == "chunks_per_split")
    other = per.results[0]
    ops[ops.index(write)] = dataclasses.replace(write, access=dataclasses.replace(write.access, copy=other))
    return k, _with_shared(p, ops), (f"[workspace-protocol] store (from reduce at mutation.py:10) writes slot array "
                                  f"partial at slot %{other.id}, not its program's split position: two programs "
                                  f"would write one slot")


@more("counter_not_reset", "workspace-protocol")
def ticket_counter_left_for_the_next_launch():
    k, p = split_rows()
    ops = _shared(p)[2]
    (reset,) = _workspace_ops(p, P.Store, "arrivals")
    ops.remove(reset)
    return k, _with_shared(p, ops), ("[workspace-protocol] ticket counter arrivals is not reset by the program that "
                                  "draws the last ticket: the next launch would start from a stale count")


@more("slots_combined_out_of_order", "workspace-protocol")
def slots_read_in_reverse_order():
    k, p = split_rows()
    outer, _, ops = _shared(p)
    (read,) = _workspace_ops(p, P.Load, "partial")
    pos = read.access.copy
    top = max(v.id for op in p.walk() for v in op.results) + 100
    last = PValue(top + 1, Fragment(DType.i64, index=True))
    rev = PValue(top + 2, pos.type)
    splits = next(op.splits for op in outer if isinstance(op, P.SplitIndex))
    at = ops.index(read)
    ops[at:at] = [P.ShapeValue(results=(last,), expr=LBin("-", LConstexpr(splits), LConst(1))),
                  P.Binary(results=(rev,), fn=BinaryFn.sub, lhs=last, rhs=pos)]
    ops[at + 2] = dataclasses.replace(read, access=dataclasses.replace(read.access, copy=rev))
    return k, _with_shared(p, ops), ("[workspace-protocol] load (from reduce at mutation.py:10) reads slot array "
                                  "partial out of slot order: the slot must be the position along a tile axis that "
                                  "one reduce folds, so that the partials always meet in the same order")


@more("slot_written_after_the_ticket", "workspace-protocol")
def slot_published_after_the_ticket():
    k, p = split_rows()
    ops = _shared(p)[2]
    (write,) = _workspace_ops(p, P.Store, "partial")
    (ticket,) = [op for op in ops if isinstance(op, P.Ticket)]
    ops.remove(write)
    ops.insert(ops.index(ticket) + 1, write)
    return k, _with_shared(p, ops), ("[workspace-protocol] store (from reduce at mutation.py:10) writes slot array "
                                  "partial after its program's ticket (or with no ticket): the last holder may read "
                                  "the slot before the write is released")


@mutation("split-effects")
def output_stored_by_every_split():
    k, p = split_rows()
    ops = list(p.groups[0].body.ops)
    store = next(op for op in ops if isinstance(op, P.Store) and op.access.buffer != buffer_named(p, "partial").id
                 and op.access.buffer != buffer_named(p, "arrivals").id)
    flat = next(op.results[0] for op in ops if isinstance(op, P.OwnedInstances))
    lane_ok = next(op.results[0] for op in ops if isinstance(op, P.Compare) and op.lhs.id == flat.id)
    ops[ops.index(store)] = dataclasses.replace(store, access=dataclasses.replace(store.access, mask=lane_ok))
    return k, _with_ops(p, ops), ("[split-effects] store (from store at mutation.py:10) writes sums in every program "
                                  "that shares its block: a group split over programs writes outside its workspace "
                                  "only as the holder of the last ticket")


# ---------------------------------------------------------------------------------------------- tests


def test_every_rule_has_a_mutation():
    assert sorted(MUTATIONS) == sorted(RULES)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_unmutated_programs_verify(name):
    k = KERNELS[name]()
    assert check(physical.construct(k), k) == []
    assert check(physical.lower(k), k) == []


@pytest.mark.parametrize("rule", sorted(MUTATIONS))
def test_mutation_is_reported_by_its_rule(rule):
    kernel, broken, message = MUTATIONS[rule]()
    with pytest.raises(PhysicalVerifyError) as info:
        verify(broken, kernel)
    err = info.value
    assert err.rule == rule
    assert err.message == message
    assert isinstance(err, DiagnosticError)
    assert rule in {v.rule for v in check(broken, kernel)}


@pytest.mark.parametrize("rule", ["buffer-init", "buffer-visibility"])
def test_violations_point_at_the_kir_source(rule):
    kernel, broken, _ = MUTATIONS[rule]()
    with pytest.raises(PhysicalVerifyError) as info:
        verify(broken, kernel)
    assert (info.value.file, info.value.line, info.value.col) in ((HERE, 22, 5), (HERE, 21, 5))
    assert re.match(rf"{HERE}:2[12]:5: error: \[{rule}\] ", str(info.value))


def test_the_pipeline_verifier_runs_every_rule():
    kernel, broken, message = MUTATIONS["unordered-conflict"]()
    with pytest.raises(PhysicalVerifyError) as info:
        physical.verify(broken)
    assert info.value.message == message


@pytest.mark.parametrize("name", sorted(MORE))
def test_more_mutations_are_reported_by_their_rule(name):
    rule_name, make = MORE[name]
    kernel, broken, message = make()
    with pytest.raises(PhysicalVerifyError) as info:
        verify(broken, kernel)
    assert info.value.rule == rule_name
    assert info.value.message == message
