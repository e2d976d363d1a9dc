"""The affine engine of the physical verifier (physical/verifier/affine.py) on `minimum`/`maximum`, on `//` and `%`
by a launch value, and on the facts of pred values that an `if` yields or a `not` (`p == false`) gives.

`maximum(a, b)` is one of its operands (not merely bounded by both), so `maximum(h, 0)` is `h` wherever `h >= 0`;
integer division by a positive launch value (a run-time column count) has the quotient and remainder facts that
division by a constant has, truncating toward zero as the generated code does."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import physical
from kir.dims import DConst, DSym, PAnd, PCmp, PNot
from physical import ops as P
from physical.verifier.affine import Forms, forms_of, proves
from physical.verifier.index import index_of
from tests.mutations import only
from tests.test_balance_region_scans import cumsum

X, Y, D = DSym("x"), DSym("y"), DSym("D")


def bare(symbols: tuple[str, ...] = (), requires: tuple = ()) -> Forms:
    program = SimpleNamespace(symbols=symbols, requires=requires)
    return Forms(SimpleNamespace(program=program), SimpleNamespace(id=0))  # type: ignore[arg-type]


@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_an_extremum_is_one_of_its_operands(fn: str) -> None:
    forms = bare()
    m = forms._extremum(fn, X, DConst(0), forms.atom("m"))
    bigger = PCmp(">=" if fn == "maximum" else "<=", X, DConst(0))
    assert proves(forms.facts + [bigger], PCmp("==", m, X))
    assert proves(forms.facts + [PNot(bigger)], PCmp("==", m, DConst(0)))
    assert not proves(forms.facts, PCmp("==", m, X))  # which one depends on the operands
    for value in (-5, 0, 7):
        want = max(value, 0) if fn == "maximum" else min(value, 0)
        assert proves(forms.facts + [PCmp("==", X, DConst(value))], PCmp("==", m, DConst(want)))


def test_an_extremum_of_two_values_picks_a_slot_apart() -> None:
    """Two helpers' positions maximum(h, 0) differ where both h are not negative and differ."""
    forms = bare()
    a, b = (forms._extremum("maximum", h, DConst(0), forms.atom("m")) for h in (X, Y))
    hyps = forms.facts + [PCmp(">=", X, DConst(0)), PCmp(">=", Y, DConst(0)), PCmp("!=", X, Y)]
    assert proves(hyps, PCmp("!=", a, b))


@pytest.mark.parametrize("fn", ["floordiv", "mod"])
def test_division_by_a_launch_value_truncates_toward_zero(fn: str) -> None:
    forms = bare(("D",))
    out = forms._truncated(fn, X, D, forms.atom("q"))
    for x, d in [(7, 3), (-7, 3), (6, 3), (0, 5), (-1, 4), (9, 1)]:
        q = abs(x) // d * (1 if x >= 0 else -1)
        want = q if fn == "floordiv" else x - d * q
        hyps = forms.facts + [PCmp("==", X, DConst(x)), PCmp("==", D, DConst(d))]
        assert proves(hyps, PCmp("==", out, DConst(want))), (x, d)
        assert not proves(hyps, PCmp("!=", out, DConst(want)))


def test_a_remainder_by_a_launch_value_lies_below_it() -> None:
    forms = bare(("D",))
    r = forms._truncated("mod", X, D, forms.atom("q"))
    hyps = forms.facts + [PCmp(">=", X, DConst(0)), PCmp(">=", D, DConst(1))]
    assert proves(hyps, PAnd((PCmp(">=", r, DConst(0)), PCmp("<", r, D))))
    # two values of one quotient with different remainders differ: what makes columns of one segment apart
    forms2 = bare(("D",))
    qa, qb = forms2.atom("q"), forms2.atom("q")
    ra, rb = forms2._truncated("mod", X, D, qa), forms2._truncated("mod", Y, D, qb)
    apart = forms2.facts + [PCmp(">=", X, DConst(0)), PCmp(">=", Y, DConst(0)), PCmp(">=", D, DConst(1)),
                            PCmp("==", qa, qb), PCmp("!=", X, Y)]
    assert proves(apart, PCmp("!=", ra, rb))


def test_a_kernel_symbol_is_a_positive_divisor_unless_the_kernel_allows_zero() -> None:
    assert bare(("D",))._positive(D)
    assert not bare(("D",), (PCmp(">=", D, DConst(0)),))._positive(D)
    assert not bare(())._positive(D)  # an atom with no fact


def _forms(kernel):
    k = kernel.kir
    p = physical.lower(k)
    return p, forms_of(index_of(p), p.groups[0])


def named(p, name: str) -> P.Binary:
    return only(p, P.Binary, lambda op: op.results[0].name == name)  # type: ignore[return-value]


def test_a_helpers_position_is_its_helper_index() -> None:
    """helper_position = maximum(helper_index, 0): the helper index itself in a helper."""
    p, forms = _forms(cumsum)
    position = forms.form(named(p, "helper_position").results[0])
    hp = forms.program_atom
    assert hp is not None and position is not None
    assert proves(forms.base_facts() + [PCmp(">=", hp, DConst(0))], PCmp("==", position, hp))
    assert not proves(forms.base_facts(), PCmp("==", position, hp))  # a block program's is 0


def test_the_lanes_a_helper_joins_are_its_owners() -> None:
    """The `if` that yields `joins` (the delegation test, in the cooperating form) has facts: a lane a helper joins
    (and publishes in) is the owner its search found."""
    p, forms = _forms(cumsum)
    pub = only(p, P.PublishSlot)
    fact = forms.fact(pub.active)
    assert fact is not None and forms.program_atom is not None
    flat = forms.form(only(p, P.OwnedInstances).results[0])
    owner = next(r for op in p.groups[0].body.ops if isinstance(op, P.If) for r in op.results if r.name == "owner")
    helper = PCmp(">=", forms.program_atom, DConst(0))
    assert proves(forms.base_facts() + [fact, helper], PCmp("==", flat, forms.form(owner)))
    assert not proves(forms.base_facts() + [helper], PCmp("==", flat, forms.form(owner)))  # a lane it does not join
