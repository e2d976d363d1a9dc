"""The physical builder (one numbering of values) and the pattern-rewrite driver."""

from __future__ import annotations

import dataclasses

import pytest

import physical.ops as P
from kir.dims import DConst
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from physical.builder import Builder, max_value_id
from physical.model import AccessRelation, AssumeInBounds, Fragment, Group, Ownership, PRegion, Program, TileAxis
from physical.rewrite import Patterns, Replace, dead_code, map_operands, rewrite_ops

I32 = Fragment(DType.i32)
PRED = Fragment(DType.pred)


def _consts(b: Builder, *values: int):
    return [b.add(P.Const, I32, value=v, dtype=DType.i32) for v in values]


def test_builder_numbers_values_in_order_and_nests_regions():
    b = Builder(10)
    x, y = _consts(b, 1, 2)
    assert (x.id, y.id) == (11, 12)
    (arg,) = b.begin((I32,), ("acc",))
    s = b.add(P.Binary, I32, fn=BinaryFn.add, lhs=arg, rhs=x)
    body = b.finish((s,))
    assert body.args == (arg,) and arg.id == 13 and s.id == 14
    assert isinstance(body.ops[-1], P.Yield) and body.yielded == (s,)
    assert [op.NAME for op in b.ops] == ["const", "const"] and b.next_id == 14


def _program(body: PRegion, looped: PRegion | None = None) -> Program:
    if looped is not None:  # the body in two forms, as the looped-rows pass writes it
        axis = TileAxis(DConst(8), "BLOCK_N")
        body = PRegion((), (P.LoopedRows(flag="F", axis=axis, chunk=axis, loops=1, whole=body, looped=looped),))
    g = Group(0, "g", (), Ownership("BLOCK_I"), body)
    return Program("p", (), (), (), (), (g,), (), (), None)  # type: ignore[arg-type]


def test_max_value_id_sees_both_forms_and_region_arguments():
    b = Builder()
    _consts(b, 1)
    b.begin((I32,))
    inner = b.finish(())
    body = PRegion((), (*b.ops, P.If(cond=b.ops[0].result, then_=inner, else_=PRegion((), ()))))
    assert max_value_id(_program(body)) == 2
    b2 = Builder(40)
    _consts(b2, 7)
    assert max_value_id(_program(body, PRegion((), tuple(b2.ops)))) == 41
    assert Builder.after(_program(body)).fresh(I32).id == 3


def test_rewrites_reach_a_fixpoint_and_rename_later_uses():
    b = Builder()
    x, zero = _consts(b, 5, 0)
    s = b.add(P.Binary, I32, fn=BinaryFn.add, lhs=x, rhs=zero)       # x + 0 -> x
    t = b.add(P.Binary, I32, fn=BinaryFn.add, lhs=s, rhs=zero)       # (x + 0) + 0 -> x, after the first
    c = b.add(P.Compare, PRED, fn=CmpFn.lt, lhs=t, rhs=x)
    patterns = Patterns()

    @patterns.on(P.Binary)
    def add_zero(op, rw):
        return Replace.by(op.lhs) if op.fn is BinaryFn.add and op.rhs == zero else None

    out = rewrite_ops(b.ops, patterns)
    assert [op.NAME for op in out] == ["const", "const", "compare"]
    assert out[-1].lhs == x and out[-1].results == (c,)
    pruned = rewrite_ops(out, dead_code(lambda op: isinstance(op, P.Const)), uses={c.id})
    assert [op.NAME for op in pruned] == ["const", "compare"]


def test_rewrites_apply_inside_nested_regions():
    b = Builder()
    (x,) = _consts(b, 5)
    b.begin()
    dead = b.add(P.Const, I32, value=9, dtype=DType.i32)
    then = b.finish(())
    cond = b.add(P.Compare, PRED, fn=CmpFn.lt, lhs=x, rhs=x)
    op = P.If(cond=cond, then_=then, else_=PRegion((), ()))
    (out_if,) = [o for o in rewrite_ops([op], dead_code(lambda o: o.result == dead))]
    assert [o.NAME for o in out_if.then_.ops] == ["yield"]


def test_a_rewrite_that_never_settles_is_reported():
    b = Builder()
    (x,) = _consts(b, 1)
    patterns = Patterns()

    @patterns.on(P.Const)
    def again(op, rw):
        return Replace((dataclasses.replace(op, value=op.value + 1),), op.results)

    with pytest.raises(RuntimeError, match="physical rewrites did not reach a fixpoint in 64 sweeps "
                                           r"\(patterns: const\)"):
        rewrite_ops(b.ops, patterns)


def test_a_replacement_must_cover_the_results_it_removes():
    b = Builder()
    x, y = _consts(b, 1, 2)
    s = b.add(P.Binary, I32, fn=BinaryFn.add, lhs=x, rhs=y)
    b.add(P.Compare, PRED, fn=CmpFn.lt, lhs=s, rhs=x)  # a use of s
    patterns = Patterns()

    @patterns.on(P.Binary)
    def gone(op, rw):
        return Replace.drop()

    with pytest.raises(ValueError, match="rewrite gone replaces the 1 results of binary by 0 values"):
        rewrite_ops(b.ops, patterns)


def test_map_operands_renames_access_relations():
    b = Builder()
    i, m = _consts(b, 1, 2)
    j = b.fresh(I32)
    load = P.Load(results=(b.fresh(I32),), access=AccessRelation(0, (i,), m, AssumeInBounds("test"), fill=0))
    out = map_operands(load, lambda v: j if v == i else v)
    assert out.access.coords == (j,) and out.access.mask == m and out.results == load.results
