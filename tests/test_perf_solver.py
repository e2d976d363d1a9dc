"""The solver's memo and linear reasoning: the same answers as Z3 alone, counterexamples unchanged."""

from __future__ import annotations

import random

import pytest
import z3

from kir import solver as solver_mod
from kir.dims import DConst, DSym, PAnd, PCmp, POr, dim_bin
from kir.solver import ShapeSolver, format_counterexample, linear_proves

N, M, I = DSym("N"), DSym("M"), DSym("i")


@pytest.fixture(autouse=True)
def cold_memo():
    solver_mod.clear_memo()
    yield
    solver_mod.clear_memo()


def z3_alone(solver: ShapeSolver, goal) -> dict[str, int] | None:
    """What `prove` answered before the memo and the linear test: a fresh Z3 solver per obligation."""
    original = solver_mod.linear_proves
    solver_mod.linear_proves = lambda hyps, goal: False
    try:
        solver_mod.clear_memo()
        return ShapeSolver(solver.symbols, solver.requires, solver.axioms, list(solver.facts)).prove(goal)
    finally:
        solver_mod.linear_proves = original
        solver_mod.clear_memo()


def test_loop_bounds_are_proven_without_z3(monkeypatch):
    s = ShapeSolver(("N",), facts=[PCmp(">=", I, DConst(0)), PCmp("<", I, N)])
    monkeypatch.setattr(z3, "Solver", lambda: pytest.fail("Z3 was asked"))
    assert s.prove(PCmp("<=", DConst(0), I)) is None
    assert s.prove(PCmp("<", I, N)) is None
    assert s.prove(PCmp("<=", dim_bin("+", I, 1), N)) is None
    assert s.prove(PCmp("<=", I, N)) is None
    assert s.prove(PCmp(">=", dim_bin("-", N, 1), DConst(0))) is None


def test_a_false_goal_still_gets_z3s_counterexample():
    s = ShapeSolver(("N",), facts=[PCmp(">=", I, DConst(0)), PCmp("<", I, N)])
    goal = PCmp("<", dim_bin("+", I, 1), N)
    expected = z3_alone(s, goal)
    assert expected  # a real counterexample
    found = s.prove(goal)
    assert found == expected
    assert format_counterexample(found) == format_counterexample(expected)
    found["N"] = -99  # the caller's copy: the memo keeps its own
    assert s.prove(goal) == expected


def test_memo_answers_are_shared_across_solvers(monkeypatch):
    req = (PCmp("<=", N, DConst(65536)),)
    goal = PCmp("<=", dim_bin("*", N, 2), DConst(200000))
    first = ShapeSolver(("N",), req).prove(goal)
    assert first is None
    monkeypatch.setattr(z3, "Solver", lambda: pytest.fail("Z3 was asked again"))
    assert ShapeSolver(("N",), req).prove(goal) is None


def test_memo_distinguishes_assumptions():
    goal = PCmp("<=", N, DConst(10))
    assert ShapeSolver(("N",), (PCmp("<=", N, DConst(10)),)).prove(goal) is None
    assert ShapeSolver(("N",), (PCmp("<=", N, DConst(11)),)).prove(goal) == {"N": 11}
    s = ShapeSolver(("N",))
    s.facts.append(PCmp("<", N, DConst(5)))
    assert s.prove(goal) is None
    s.facts.pop()
    assert s.prove(goal) == z3_alone(s, goal)


def test_unsat_explanation_is_remembered_and_unchanged():
    req = (PCmp("<=", N, DConst(0)),)
    text = ShapeSolver(("N",), req).unsat_explanation()
    # Z3 chooses the order of an unsat core; both refinements are in it.
    assert text in ("these refinements cannot all hold: N >= 1, N <= 0",
                    "these refinements cannot all hold: N <= 0, N >= 1")
    assert ShapeSolver(("N",), req).unsat_explanation() == text
    assert ShapeSolver(("N",), ()).unsat_explanation() is None


def test_non_linear_terms_are_opaque():
    half = dim_bin("//", N, 2)
    assert linear_proves([PCmp(">=", half, DConst(3))], PCmp(">=", dim_bin("+", half, 1), DConst(4)))
    assert not linear_proves([PCmp(">=", N, DConst(8))], PCmp(">=", half, DConst(4)))  # needs division: Z3
    assert not linear_proves([], POr((PCmp(">=", N, DConst(0)),)))


def _random_dim(rng: random.Random, depth: int = 0):
    pick = rng.random()
    if depth > 2 or pick < 0.3:
        return DConst(rng.randint(-3, 3))
    if pick < 0.65:
        return rng.choice([N, M, I])
    op = rng.choice(["+", "-", "*", "+", "-"])
    if op == "*":
        return dim_bin("*", DConst(rng.randint(-2, 3)), _random_dim(rng, depth + 1))
    return dim_bin(op, _random_dim(rng, depth + 1), _random_dim(rng, depth + 1))


def _random_pred(rng: random.Random):
    cmp = PCmp(rng.choice(["<", "<=", ">", ">=", "=="]), _random_dim(rng), _random_dim(rng))
    if rng.random() < 0.2:
        return PAnd((cmp, PCmp(rng.choice(["<", ">="]), _random_dim(rng), _random_dim(rng))))
    return cmp


def test_linear_reasoning_never_proves_what_z3_refutes():
    rng = random.Random(1234)
    proven = 0
    for _ in range(400):
        facts = [_random_pred(rng) for _ in range(rng.randint(0, 3))]
        s = ShapeSolver(("N", "M"), facts=facts)
        goal = _random_pred(rng)
        if linear_proves(s.assumptions(), goal):
            proven += 1
            assert z3_alone(s, goal) is None, (facts, goal)
    assert proven > 20  # the check above exercised the linear test
