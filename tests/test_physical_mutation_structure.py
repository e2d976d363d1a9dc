"""Mutation tests of the construction verifier, values, types, launch extents, structured ops and what a persistent
program hoists.

Each mutation breaks a valid program in exactly one way (see `tests/mutations.py`) and expects the rule's
exact message at the KIR source of the broken item.
"""

from __future__ import annotations

import dataclasses

import pytest

import physical
from kir import BinaryFn, ReduceKind, Store
from physical import ops as P
from physical.launch_expr import LBin, LScalar, lsum
from physical.model import Access, Fragment, Origin, PValue
from tests import samples
from tests.mutations import (
    Mutations,
    N,
    assert_reported,
    buffer_named,
    f32,
    fresh_id,
    kir_op,
    only,
    ops_of,
    retype,
    scale_rows,
    swap,
)

FAMILY = Mutations()
mutation = FAMILY.rule
more = FAMILY.also


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


@mutation("launch-extent")
def segment_length_reads_device_data():
    k = samples.segment_sum()
    p = physical.lower(k)
    seg = p.segments[0]
    length = LBin("*", seg.length, LScalar("offsets"))
    broken = p.replace(segments=(dataclasses.replace(seg, length=length),), grid=lsum((length,)))
    return k, broken, ("[launch-extent] segment 0 length reads tensor parameter offsets: device data may not set a "
                       "launch extent")


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


@mutation("structured-complete")
def reduction_identity_with_an_extra_component():
    k = samples.softmax()
    p = physical.lower(k)
    red = only(p, P.Reduce, lambda op: op.kind is ReduceKind.max)
    broken = swap(p, red, dataclasses.replace(red, identity=red.identity + (0.0,)))
    return k, broken, "[structured-complete] reduce (from reduce): reduce has 2 identity components for 1 accumulators"


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


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("rule", sorted(FAMILY.first))
def test_mutation_is_reported_by_its_rule(rule):
    assert_reported(rule, *FAMILY.first[rule]())


@pytest.mark.parametrize("name", sorted(FAMILY.more))
def test_more_mutations_are_reported_by_their_rule(name):
    rule, make = FAMILY.more[name]
    assert_reported(rule, *make())
