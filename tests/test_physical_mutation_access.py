"""Mutation tests of the construction verifier, buffers and accesses: declarations, initialisation, coordinates,
masks, bounds and visibility.

Each mutation breaks a valid program in exactly one way (see `tests/mutations.py`) and expects the rule's
exact message at the KIR source of the broken item.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

import physical
from kir import Load, ReduceKind
from physical import ops as P
from physical.launch_expr import LConstexpr
from physical.model import Lifetime
from physical.verifier import PhysicalVerifyError, check, verify
from physical.verifier import index as verifier_index
from physical.verifier.index import index_of
from tests import samples
from tests.mutations import (
    HERE,
    Mutations,
    assert_reported,
    buffer_named,
    kir_op,
    only,
    shared_branch,
    split_rows,
    staged_copy,
    swap,
    with_shared,
    workspace_ops,
)

FAMILY = Mutations()
mutation = FAMILY.rule
more = FAMILY.also


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


@more("default_filled", "buffer-init")
def uninitialised_buffer_gets_a_default_fill():
    k = staged_copy()
    p = physical.lower(k)
    buf = buffer_named(p, "buf")
    ws = tuple(dataclasses.replace(w, fill=0.0) if w.buffer == buf.id else w for w in p.workspaces)
    return k, p.replace(workspaces=ws), ("[buffer-init] uninitialised buffer buf is default-filled with 0.0; the "
                                         "author's first-write obligation must stand")


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


@mutation("narrowing-explicit")
def reduction_that_folds_the_padding():
    k = samples.softmax()
    p = physical.lower(k)
    red = only(p, P.Reduce, lambda op: op.kind is ReduceKind.sum)
    broken = swap(p, red, dataclasses.replace(red, member=None))
    tile = red.inputs[0].type.tile[0]
    return k, broken, (f"[narrowing-explicit] reduce (from reduce) would fold the padding of tile axis 0 ({tile}): "
                       f"its member set does not exclude positions past the extent")


def _slot_read(p):
    """The split reduction's read of its slots (a tile of BLOCK_SPLITS_0 positions, SPLITS_0 of them slots) and the
    ops of the branch that holds it."""
    ops = shared_branch(p)[2]
    (read,) = workspace_ops(p, P.Load, "partial")
    return ops, read


@more("slot_padding_folded_as_a_value", "narrowing-explicit")
def slot_read_that_fills_its_padding_with_no_identity():
    # The fold of the slots takes every position of the slot tile: positions past SPLITS_0 must read the sum's
    # identity. Only a launch where SPLITS_0 is no power of two (few long rows on a device) has such positions.
    k, p = split_rows()
    ops, read = _slot_read(p)
    ops[ops.index(read)] = dataclasses.replace(read, access=dataclasses.replace(read.access, fill=1.0))
    return k, with_shared(p, ops), ("[narrowing-explicit] reduce (from reduce at mutation.py:10) would fold the "
                                    "padding of tile axis 0 (SPLITS_0:BLOCK_SPLITS_0): its member set does not "
                                    "exclude positions past the extent")


@more("slot_padding_of_the_wrong_zero", "narrowing-explicit")
def slot_read_that_fills_its_padding_with_positive_zero():
    # The float sum's identity is -0.0: a padding of +0.0 would turn a row of negative zeros into +0.0.
    k, p = split_rows()
    ops, read = _slot_read(p)
    assert math.copysign(1.0, read.access.fill) == -1.0 and read.access.fill == 0.0
    ops[ops.index(read)] = dataclasses.replace(read, access=dataclasses.replace(read.access, fill=0.0))
    return k, with_shared(p, ops), ("[narrowing-explicit] reduce (from reduce at mutation.py:10) would fold the "
                                    "padding of tile axis 0 (SPLITS_0:BLOCK_SPLITS_0): its member set does not "
                                    "exclude positions past the extent")


@more("slot_read_past_the_split_count", "narrowing-explicit")
def slot_read_bounded_by_the_block_not_the_split_count():
    k, p = split_rows()
    ops, _ = _slot_read(p)
    count = next(op for op in ops if isinstance(op, P.ShapeValue) and op.results[0].name == "splits")
    ops[ops.index(count)] = dataclasses.replace(count, expr=LConstexpr("BLOCK_SPLITS_0"))
    return k, with_shared(p, ops), ("[narrowing-explicit] load (from reduce at mutation.py:10) on partial: its mask "
                                    "does not exclude the padding of tile axis 0 (SPLITS_0:BLOCK_SPLITS_0)")


def test_a_split_reduction_reads_its_slots_below_the_split_count_and_folds_identity_padding():
    """The slot read's mask `position < SPLITS_0` excludes the slot tile's padding (SPLITS_0 the constexpr, also
    the tile's extent), and the fold of the slots folds that padding as the sum's identity: both are proven on
    the sample launch where the split count is no power of two."""
    k, p = split_rows()
    envs = index_of(p).envs
    assert any(env["SPLITS_0"] < env["BLOCK_SPLITS_0"] for env in envs)
    assert not [v for v in check(p, k) if v.rule == "narrowing-explicit"]


def test_identity_padding_is_caught_only_because_a_sample_selects_the_split(monkeypatch):
    k, broken, _ = slot_read_that_fills_its_padding_with_no_identity()
    assert "narrowing-explicit" in {v.rule for v in check(broken, k)}
    monkeypatch.setattr(verifier_index, "LONG", (3,))  # no long rows: SPLITS_0 is 1 on every sample
    k, broken, _ = slot_read_that_fills_its_padding_with_no_identity()
    assert all(env["SPLITS_0"] == 1 for env in index_of(broken).envs)
    assert "narrowing-explicit" not in {v.rule for v in check(broken, k)}


@mutation("bounds-justified")
def access_without_justification():
    k = samples.recurrence()
    p = physical.lower(k)
    st = only(p, P.Store)
    broken = swap(p, st, dataclasses.replace(st, access=dataclasses.replace(st.access, bounds=None)))
    return k, broken, "[bounds-justified] store (from store) on h has no bounds justification (None)"


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


@mutation("buffer-visibility")
def read_back_without_a_barrier():
    k = staged_copy()
    p = physical.lower(k)
    broken = swap(p, only(p, P.Barrier), None)
    return k, broken, ("[buffer-visibility] load (from load at mutation.py:22) reads buf after this program wrote "
                       "it, with no barrier between the write and the read")


@pytest.mark.parametrize("rule", ["buffer-init", "buffer-visibility"])
def test_violations_point_at_the_kir_source(rule):
    kernel, broken, _ = FAMILY.first[rule]()
    with pytest.raises(PhysicalVerifyError) as info:
        verify(broken, kernel)
    assert (info.value.file, info.value.line, info.value.col) in ((HERE, 22, 5), (HERE, 21, 5))
    assert re.match(rf"{HERE}:2[12]:5: error: \[{rule}\] ", str(info.value))


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("rule", sorted(FAMILY.first))
def test_mutation_is_reported_by_its_rule(rule):
    assert_reported(rule, *FAMILY.first[rule]())


@pytest.mark.parametrize("name", sorted(FAMILY.more))
def test_more_mutations_are_reported_by_their_rule(name):
    rule, make = FAMILY.more[name]
    assert_reported(rule, *make())
