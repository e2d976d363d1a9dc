"""The forms of a group's body as an op (`looped_rows`): one walker, one verifier run, one printer and emitter path.

A row a launch may walk in chunks makes its group's body one `looped_rows` op whose regions are the body in
each form (`whole`: flag 0, `looped`: flag 1). The verifier checks both regions in its one run; these tests
break the rules that belong to the op (its placement, its constexprs, its typing, and a persistent group's
loop over blocks, which only the whole form holds) and check the exact messages.
"""

from __future__ import annotations

import dataclasses
import importlib
import os

import pytest
import torch

import emit_triton
import intent
import physical
from intent import Out, dims, f32, parallel
from physical import ops as P
from physical.builder import max_value_id, region_values
from physical.launch_expr import LConst, LSelect
from physical.model import DType, Fragment, Program
from physical.passes.looped import BUDGET_VARIABLE
from physical.verifier import PhysicalVerifyError, check, verify

M, N = dims("M N")


@intent.kernel
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        e = intent.exp(x[i, :] - intent.max(x[i, :]))
        out[i, :] = e / intent.sum(e)


@intent.kernel
def scale_rows(x: f32[M, N], w: f32[N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = x[i, :] * w


def _args(kernel) -> dict:
    args = {"x": torch.ones(2, 5), "out": torch.empty(2, 5)}
    if kernel is scale_rows:
        args["w"] = torch.ones(5)
    return args


def lowered(kernel, budget: int | None = None):
    """The specialised kernel and its program (`budget`: the looped form's row budget, forced low)."""
    old = os.environ.get(BUDGET_VARIABLE)
    if budget is not None:
        os.environ[BUDGET_VARIABLE] = str(budget)
    try:
        k = kernel.specialize(_args(kernel))
        return k, physical.lower(k)
    finally:
        if old is None:
            os.environ.pop(BUDGET_VARIABLE, None)
        else:
            os.environ[BUDGET_VARIABLE] = old


def _choice(p: Program) -> P.LoopedRows:
    choice = P.looped_rows(p.groups[0].body)
    assert choice is not None
    return choice


def _with_body(p: Program, body) -> Program:
    g = p.groups[0]
    return p.replace(groups=(dataclasses.replace(g, body=body),) + p.groups[1:])


def _with_choice(p: Program, **changes) -> Program:
    body = p.groups[0].body
    choice = _choice(p)
    new = dataclasses.replace(choice, **changes)
    return _with_body(p, dataclasses.replace(body, ops=tuple(new if op is choice else op for op in body.ops)))


def _reported(kernel, broken: Program) -> tuple[str, str]:
    with pytest.raises(PhysicalVerifyError) as info:
        verify(broken, kernel)
    return info.value.rule, info.value.message


# ---------------------------------------------------------------------------------------------- the op


def test_the_body_is_one_op_whose_regions_are_the_forms():
    _, p = lowered(softmax)
    body = p.groups[0].body
    choice = _choice(p)
    assert [op.NAME for op in body.ops] == ["looped_rows", "yield"]
    assert P.forms(body) == (choice.whole, choice.looped)
    assert choice.flag == "BLOCK_N_LOOPED" and choice.loops == 3
    # the ordinary walker reaches both forms, and every value is defined once in the program
    walked = list(p.walk())
    assert any(op is choice.whole.ops[0] for op in walked) and any(op is choice.looped.ops[0] for op in walked)
    ids = [v.id for v in region_values(body)]
    assert len(ids) == len(set(ids)) and max_value_id(p) == max(ids)


def test_the_verifier_runs_once_and_sees_both_forms(monkeypatch):
    entry = importlib.import_module("physical.verify")  # the module (the package exports its function under that name)
    k, p = lowered(softmax)
    calls = []
    real = entry.verify_rules
    monkeypatch.setattr(entry, "verify_rules", lambda program, kernel=None, proofs=None: calls.append(program) or
                        real(program, kernel, proofs))
    physical.verify(p, k)
    assert calls == [p]
    # a fault in the looped form alone is found by that one run
    rule, message = _reported(k, _store_twice_in_the_looped_form(p))
    assert (rule, message) == ("effect-coverage", "[effect-coverage] store (from store at test_physical_forms.py:36) "
                               "is performed by 3 physical effects in group 0, 2 of them in one run; it would happen 2 "
                               "times per instance")


def _store_twice_in_the_looped_form(p: Program) -> Program:
    """The looped form with its store (inside its last pass over the row) made twice."""
    looped = _choice(p).looped
    last = [op for op in looped.ops if isinstance(op, P.For)][-1]
    store = next(op for op in last.body.ops if isinstance(op, P.Store))
    body = dataclasses.replace(last.body, ops=last.body.ops[:-1] + (store, last.body.ops[-1]))
    twice = dataclasses.replace(looped, ops=tuple(dataclasses.replace(op, body=body) if op is last else op
                                                  for op in looped.ops))
    return _with_choice(p, looped=twice)


def test_the_emitter_selects_the_form_with_its_constexpr():
    _, p = lowered(softmax)
    src = emit_triton.emit(p).source
    assert "    if BLOCK_N_LOOPED:\n" in src and "if True" not in src and "pass\n" not in src
    fixed = p.replace(constexprs=tuple((n, LConst(0) if n == "BLOCK_N_LOOPED" else e) for n, e in p.constexprs))
    src = emit_triton.emit(fixed).source
    assert "if BLOCK_N_LOOPED" not in src and "for chunk_index" not in src  # only the whole form


def test_the_printer_prints_the_op_and_both_regions():
    _, p = lowered(softmax)
    text = physical.print_program(p)
    assert "  looped_rows flag=BLOCK_N_LOOPED axis=N:BLOCK_N chunk=4096:BLOCK_N_CHUNK loops=3 {" in text
    assert text.count("  } {\n") >= 1  # the second region, as any op with two regions prints it


# ---------------------------------------------------------------------------------------------- its rules


def test_the_forms_are_the_only_op_of_the_body():
    k, p = lowered(softmax)
    body = p.groups[0].body
    extra = P.ShapeValue(results=(physical.model.PValue(max_value_id(p) + 1, Fragment(DType.i64, index=True)),),
                         expr=LConst(1))
    rule, message = _reported(k, _with_body(p, dataclasses.replace(body, ops=(extra,) + body.ops)))
    assert (rule, message) == ("structured-complete", "[structured-complete] looped_rows: the forms of group 0's "
                               "body must be the only op at the top of its body")


def test_the_flag_of_the_forms_is_a_constexpr():
    k, p = lowered(softmax)
    rule, message = _reported(k, _with_choice(p, flag="NO_SUCH_FLAG"))
    assert (rule, message) == ("structured-complete", "[structured-complete] looped_rows: NO_SUCH_FLAG is no "
                               "constexpr; a launch selects a form and sizes its row with constexprs")


def test_a_looped_form_walks_its_row_at_least_once():
    k, p = lowered(softmax)
    rule, message = _reported(k, _with_choice(p, loops=0))
    assert (rule, message) == ("fragment-types", "[fragment-types] looped_rows: a looped form walks its row at "
                               "least once, got 0 passes")


def test_a_form_without_the_loop_over_blocks_runs_only_where_the_loop_is_off():
    k, p = lowered(scale_rows, budget=16)
    choice = _choice(p)
    loop = P.block_loop(choice.whole.ops)
    assert loop is not None and P.block_loop(choice.looped.ops) is None
    assert check(p, k) == []
    # the persistent flag forgets that the looped form streams its rows (it was `0 if LOOPED else fits`)
    consts = dict(p.constexprs)
    fits = consts[loop.flag]
    assert isinstance(fits, LSelect) and fits.cond == consts[choice.flag] and fits.when_set == LConst(0)
    broken = p.replace(constexprs=tuple((n, fits.otherwise if n == loop.flag else e) for n, e in p.constexprs))
    rule, message = _reported(k, broken)
    assert rule == "ownership"
    assert message == ("[ownership] group 0 (parallel) runs its looped form, which holds no loop over blocks of "
                       "instances, while BLOCK_N_LOOPED = 1 and BLOCK_I0_PERSISTENT = 1 (M=97, N=131 on 0 "
                       "multiprocessors): its programs would skip the blocks the loop gives them")


def test_effects_of_the_two_forms_are_exclusive():
    k, p = lowered(softmax)
    assert check(p, k) == []  # one store per form: a launch runs one of them, so the store happens once
    rule, message = _reported(k, _store_twice_in_the_looped_form(p))  # but twice in one form is twice
    assert (rule, message) == ("effect-coverage", "[effect-coverage] store (from store at test_physical_forms.py:36) "
                               "is performed by 3 physical effects in group 0, 2 of them in one run; it would happen 2 "
                               "times per instance")
