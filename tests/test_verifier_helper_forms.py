"""The affine forms of a group with helper programs (physical/verifier/affine.py): helper_index tells programs
apart, a helper's lanes are the instances of its helper_block (where that is not negative), uniform `if` and
`select` results follow their conditions, and a flag constexpr that a launch sets to 0 is not taken to be at
least 1."""

from __future__ import annotations

import physical
from kir.dims import DConst, DSym, PAnd, PCmp, dim_bin
from physical import ops as P
from physical.launch_expr import LConstexpr
from physical.verifier.affine import forms_of, proves
from physical.verifier.index import index_of
from tests import samples
from tests.mutations import only


def _balanced():
    p = physical.lower(samples.segment_sum())
    ix = index_of(p)
    forms = forms_of(ix, p.groups[0])
    return p, forms


def _in_helper_block(p, forms) -> tuple[PAnd, PCmp]:
    """`helper_block * BLOCK <= flat < (helper_block + 1) * BLOCK` for the lane's instance, and `helper_block >= 0`
    (the program is a helper that joined a block)."""
    owned = only(p, P.OwnedInstances)
    flat, hb = forms.form(owned.results[0]), forms.form(owned.helper_block)
    size = forms.launch_dim(LConstexpr(owned.block))
    first = dim_bin("*", hb, size)
    return PAnd((PCmp("<=", first, flat), PCmp("<", flat, dim_bin("+", first, size)))), PCmp(">=", hb, DConst(0))


def test_a_helpers_lanes_are_the_instances_of_its_block() -> None:
    p, forms = _balanced()
    inside, joined = _in_helper_block(p, forms)
    assert proves(forms.base_facts() + [joined], inside)
    assert not proves(forms.base_facts(), inside)  # a negative helper_block leaves the program its own block


def test_members_with_one_helper_index_share_what_their_program_computes_once() -> None:
    p, forms = _balanced()
    owner = next(r for op in p.groups[0].body.ops if isinstance(op, P.If) for r in op.results if r.name == "owner")
    u = forms.form(owner)
    assert isinstance(u, DSym) and u.name in forms.program_uniform
    same = PCmp("==", forms.rename(u, "A"), forms.rename(u, "B"))
    hyps = forms.base_facts("A") + forms.base_facts("B")
    assert proves(hyps + forms.same_program() + [PCmp("==", forms.rename(forms.program_atom, "A"),
                                                       forms.rename(forms.program_atom, "B"))], same)
    assert not proves(hyps + forms.same_program(), same)  # other programs find other owners


def test_a_flag_constexpr_is_not_taken_to_be_positive() -> None:
    _, forms = _balanced()
    facts = forms.base_facts()
    flag, block = forms.launch_dim(LConstexpr("SPLIT_0")), forms.launch_dim(LConstexpr("BLOCK_I0"))
    assert proves(facts, PCmp(">=", flag, DConst(0))) and not proves(facts, PCmp(">=", flag, DConst(1)))
    assert proves(facts, PCmp(">=", block, DConst(1)))


def test_a_helpers_block_follows_the_select_that_computes_it() -> None:
    """helper_block = select(helper >= 0 and owner >= 0, owner // BLOCK, -1) in the cooperating form: with an
    owner, the owner is an instance of the block."""
    p, forms = _balanced()
    owned = only(p, P.OwnedInstances)
    owner = next(r for op in p.groups[0].body.ops if isinstance(op, P.If) for r in op.results if r.name == "owner")
    hb, u = forms.form(owned.helper_block), forms.form(owner)
    size = forms.launch_dim(LConstexpr(owned.block))
    first = dim_bin("*", hb, size)
    hyps = forms.base_facts() + [PCmp(">=", forms.program_atom, DConst(0)), PCmp(">=", u, DConst(0))]
    assert proves(hyps, PAnd((PCmp("<=", first, u), PCmp("<", u, dim_bin("+", first, size)))))
    # a helper without an owner joins no block
    assert not proves(forms.base_facts() + [PCmp(">=", forms.program_atom, DConst(0))], PCmp(">=", hb, DConst(0)))


def _jagged_scan():
    from tests.test_balance_jagged_scans import running

    p = physical.lower(running.kir)
    return p, forms_of(index_of(p), p.groups[0])


def test_an_op_computed_again_from_the_same_operands_has_one_form() -> None:
    """A jagged scan computes its helper's part twice (in the search for its block and in its chunk): one atom,
    so the block the helper decodes and the part its join test compares are of one part."""
    p, forms = _jagged_scan()
    parts = [v for op in p.walk() for v in op.results if v.name == "helper_part"]
    assert len(parts) == 2 and parts[0].id != parts[1].id
    assert forms.form(parts[0]) == forms.form(parts[1])


def test_instance_facts_speak_of_any_instance_not_only_the_helpers_lanes() -> None:
    p, forms = _jagged_scan()
    inside, joined = _in_helper_block(p, forms)
    assert proves(forms.base_facts() + [joined], inside)
    assert not proves(forms.instance_facts() + [joined], inside)


def test_a_launchs_values_make_a_query_about_an_instance_linear() -> None:
    """On a sample launch with helpers the atoms of launch values are its numbers: with the row-major decode of the
    (segments, columns) domain, the first lane of segment 2 is the instance 2 * JD."""
    p, forms = _jagged_scan()
    owned = only(p, P.OwnedInstances)
    q, c = (DSym(a) for a in forms.sources[forms.source_of_flat[owned.results[0].id]].atoms)
    ix = index_of(p)
    env = next(e for e in ix.envs if e["HELPERS_0"])
    values = forms.on_launch(env)
    block = forms.launch_dim(LConstexpr("BLOCK_I0"))
    assert values["JD"] == DConst(env["JD"]) and block.substitute(values) == DConst(env["BLOCK_I0"])
    facts = [f.substitute(values) for f in forms.function_facts()]
    flat = forms.form(owned.results[0]).substitute(values)
    first = [PCmp("==", c, DConst(0)), PCmp("==", q, DConst(2)), PCmp(">=", flat, DConst(0))]
    assert proves(facts + first, PCmp("==", flat, DConst(2 * env["JD"])))
    assert not proves(facts + first[:2], PCmp("==", flat, DConst(2 * env["JD"])))  # the decode holds for flat >= 0
