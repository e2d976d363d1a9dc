"""A Z3 query of the verifier that runs out of its resource budget is reported as undecided, never as a proven
violation: `Prover.decide` tells a counterexample (refuted) from an exhausted budget (undecided), and the rules
add a distinct suffix to a violation that only undecided queries found. The budget is Z3's deterministic resource
count (kir.solver.RESOURCE_LIMIT), so a test can exhaust it on purpose."""

from __future__ import annotations

import dataclasses
import re

import pytest

import kir.solver
import physical
from kir.dims import DConst, DSym, PCmp
from physical import ops as P
from physical.verifier import check
from physical.verifier.affine import PROVEN, REFUTED, UNDECIDED, Prover
from tests import samples
from tests.mutations import buffer_named, only, swap

SUFFIX = "; no counterexample was found)"

x = DSym("x")


def test_decide_tells_proven_refuted_and_undecided(monkeypatch: pytest.MonkeyPatch) -> None:
    prover = Prover()
    positive = [PCmp(">=", x, DConst(1))]
    assert prover.decide(positive, PCmp(">=", x, DConst(0))) == PROVEN
    assert prover.decide(positive, PCmp(">=", x, DConst(2))) == REFUTED  # x == 1 is a counterexample
    assert prover.undecided == []
    monkeypatch.setattr(kir.solver, "RESOURCE_LIMIT", 1)
    starved = Prover()
    mark = starved.mark()
    assert starved.decide(positive, PCmp(">=", x, DConst(0))) == UNDECIDED
    assert starved.note(mark) == " (undecided: Z3 ran out of its resource budget on `x >= 0`" + SUFFIX
    assert starved.decide(positive, PCmp(">=", x, DConst(0))) == UNDECIDED  # remembered, and noted again
    assert starved.note(mark).startswith(" (undecided: Z3 ran out of its resource budget on `x >= 0` and 1 more;")
    assert starved.note(starved.mark()) == ""


def test_a_starved_proof_is_reported_as_undecided(monkeypatch: pytest.MonkeyPatch) -> None:
    """A valid program whose proofs cannot finish: each violation, of the bounds and of the conflicts between
    instances, says that its query was undecided."""
    k = samples.recurrence()
    program = physical.lower(k)
    assert check(program, k) == []
    monkeypatch.setattr(kir.solver, "RESOURCE_LIMIT", 1)
    found = check(dataclasses.replace(program), k)  # the same program, a new index: nothing remembered
    assert {v.rule for v in found} == {"bounds-justified", "unordered-conflict"}
    assert all(v.message.endswith(SUFFIX) for v in found)
    load = next(v for v in found if v.message.startswith("load (from load) on a:"))
    pred = only(program, P.Load, lambda op: op.access.buffer == buffer_named(program, "a").id).access.bounds.predicate
    assert re.fullmatch(re.escape(f"load (from load) on a: the bounds proof '{pred}' does not hold for coordinate 0, 1 "
                                  "(re-proving from the mask failed) (undecided: Z3 ran out of its resource budget "
                                  "on `") + r"_\w+ >= 0 and _\w+ < C` and 1 more" + re.escape(SUFFIX), load.message)
    store = next(v for v in found if v.rule == "unordered-conflict")
    assert store.message.startswith("store (from store) may write the element of h that it writes in another "
                                    "instance, with neither unique, reduction nor atomic semantics (undecided: ")


def test_a_refuted_proof_keeps_its_exact_message() -> None:
    """The same rule with a real counterexample (the mask that kept lanes past C off `a` removed) says nothing of
    a budget."""
    k = samples.recurrence()
    p = physical.lower(k)
    ld = only(p, P.Load, lambda op: op.access.buffer == buffer_named(p, "a").id)
    broken = swap(p, ld, dataclasses.replace(ld, access=dataclasses.replace(ld.access, mask=None)))
    [v] = [v for v in check(broken, k) if v.rule == "bounds-justified"]
    assert v.message == (f"load (from load) on a: the bounds proof '{ld.access.bounds.predicate}' does not hold for "
                         f"coordinate 0 (re-proving from the mask failed)")


def test_a_starved_helper_slot_proof_is_reported_as_undecided(monkeypatch: pytest.MonkeyPatch) -> None:
    """lookback-protocol's proofs of a balanced scan's helper slots (in range, apart) under a budget they cannot
    finish within: both reports say their queries were undecided."""
    from tests.test_balance_region_scans import cumsum

    k = cumsum.kir
    program = physical.lower(k)
    assert check(program, k) == []
    monkeypatch.setattr(kir.solver, "RESOURCE_LIMIT", 1)
    found = [v for v in check(dataclasses.replace(program), k) if v.rule == "lookback-protocol"]
    slot = r"blocks \* BLOCK_I0 \+ %\d+"
    assert [v.message for v in found] == [v.message for v in found if re.match(  # the two proofs, in this order
        rf"group 0: publish_slot (writes a helper's slot {slot}, which may lie outside|may write one helper's slot "
        rf"{slot} for two helpers)", v.message)]
    assert len(found) == 2 and "outside" in found[0].message and "for two helpers" in found[1].message
    assert all(v.message.endswith(SUFFIX) and " (undecided: Z3 ran out of its resource budget on `" in v.message
               for v in found)
