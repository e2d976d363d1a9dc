"""The facts only some rules ask the affine engine for (`Forms.function_facts`,
physical/verifier/function_facts.py), on the balanced jagged cumsum (a (segments, columns) workset whose helpers
search the offsets for their chunk's owner):

* the row-major decode of the flat instance: `flat = segment * D + column`;
* a constexpr defined as a product is that product (`HELPERS_0 = CHUNKS_0 * HELPER_SPAN_0`);
* a quotient by a count that may be 0 (`maximum(helper, 0) // CHUNKS_0`) has its facts only where the count is at
  least 1;
* a function of its inputs gives one result for equal inputs: within a member (two ops computing one quotient), and
  between two members (the owner search of two helpers of one chunk finds one segment).

None of them is among the base facts every rule's queries take."""

from __future__ import annotations

import physical
from kir.dims import DConst, DSym, PAnd, PCmp, dim_bin
from physical import ops as P
from physical.launch_expr import LConstexpr
from physical.model import PValue
from physical.verifier.affine import Forms, forms_of, proves
from physical.verifier.index import index_of
from tests.test_balance_jagged_scans import running

ZERO, ONE = DConst(0), DConst(1)


def jagged() -> tuple[Forms, dict[str, list[PValue]]]:
    p = physical.lower(running.kir)
    ix = index_of(p)
    named: dict[str, list[PValue]] = {}
    for d in sorted(ix.defs.values(), key=lambda d: d.order):
        named.setdefault(d.value.name or "", []).append(d.value)
    return forms_of(ix, p.groups[0]), named


def test_the_flat_instance_is_its_decode() -> None:
    forms, named = jagged()
    flat = forms.form(next(op for op in forms.ix.program.walk() if isinstance(op, P.OwnedInstances)).results[0])
    segment, column = forms.form(named["segment"][0]), forms.form(named["column"][0])
    decode = PCmp("==", flat, dim_bin("+", dim_bin("*", segment, DSym("JD")), column))
    assert proves(forms.base_facts() + forms.function_facts(), decode)
    assert not proves(forms.base_facts(), decode)


def test_a_constexpr_defined_as_a_product_is_that_product() -> None:
    forms, _ = jagged()
    helpers, chunks, span = (forms.launch_dim(LConstexpr(n)) for n in ("HELPERS_0", "CHUNKS_0", "HELPER_SPAN_0"))
    assert PCmp("==", helpers, dim_bin("*", chunks, span)) in forms.function_facts()
    assert not proves(forms.base_facts(), PCmp("==", helpers, dim_bin("*", chunks, span)))


def test_a_quotient_by_a_count_that_may_be_zero_has_its_facts_where_the_count_is_not() -> None:
    forms, named = jagged()
    part = forms.form(named["helper_part"][0])
    chunks = forms.launch_dim(LConstexpr("CHUNKS_0"))
    h = forms.program_atom
    assert h is not None and isinstance(part, DSym)
    helper = PCmp(">=", h, ZERO)
    within = PAnd((PCmp("<=", dim_bin("*", chunks, part), h), PCmp("<", h, dim_bin("*", chunks, dim_bin("+", part,
                                                                                                          ONE)))))
    facts = forms.base_facts() + forms.function_facts()
    assert proves(facts + [helper, PCmp(">=", chunks, ONE)], within)
    # with HELPERS_0 = CHUNKS_0 * HELPER_SPAN_0 a helper's launch has CHUNKS_0 >= 1; without it CHUNKS_0 may be 0,
    # where nothing is known of the quotient
    assert proves(facts + [helper], within)
    assert not proves(forms.base_facts() + forms._guarded_facts() + [helper], within)
    assert not proves(forms.base_facts() + [helper, PCmp(">=", chunks, ONE)], within)


def test_two_ops_computing_one_quotient_are_one_value() -> None:
    """The helper's part is computed twice (in the search's branch and after it): one value (one form where the
    forms number alike ops alike, else equal by the facts of the calls)."""
    forms, named = jagged()
    first, second = (forms.form(v) for v in named["helper_part"][:2])
    assert first == second or proves(forms.function_facts(), PCmp("==", first, second))
    quotients = [c for c in forms.calls if c.kind == ("div",) and c.args[1] == forms.launch_dim(LConstexpr(
        "CHUNKS_0"))]
    assert quotients and all(proves(forms.function_facts(), PCmp("==", q.result, quotients[0].result))
                             for q in quotients)


def test_the_owner_search_of_one_chunk_finds_one_segment() -> None:
    """Two helpers with one chunk (the search's only input that differs between helpers) find one owner; a search
    is a function of its inputs, not of the member."""
    forms, named = jagged()
    found = forms.form(named["found"][0])
    chunk = forms.form(named["helper_chunk"][0])
    h = forms.program_atom
    assert found is not None and chunk is not None and h is not None
    a, b = (lambda x: forms.rename(x, "A")), (lambda x: forms.rename(x, "B"))
    hyps = forms.base_facts("A") + forms.base_facts("B") + [PCmp(">=", a(h), ZERO), PCmp(">=", b(h), ZERO),
                                                            PCmp("==", a(chunk), b(chunk))]
    assert forms.prover.proves_solving(hyps + forms.function_facts(("A", "B")), PCmp("==", a(found), b(found)))
    assert not forms.prover.proves_solving(hyps, PCmp("==", a(found), b(found)))


def test_the_facts_are_not_every_rules() -> None:
    forms, _ = jagged()
    base = set(forms.base_facts())
    assert not base & set(forms.function_facts())
