"""Z3 over shape symbols: counterexamples for unprovable obligations, unsatisfiable refinements, launch checks."""

from __future__ import annotations

import re

import pytest

import kir
from kir import Binary, BinaryFn, Builder, DType, Reshape, TensorType
from kir.dims import DBin, DConst, DSym, PCmp
from kir.errors import DiagnosticError, VerifyError
from kir.solver import ShapeSolver, check_concrete
from kir.text import parse_kernel

K, K2, M, N, E = DSym("K"), DSym("K2"), DSym("M"), DSym("N"), DSym("E")
f32 = DType.f32


def counterexample(message: str, prefix: str) -> dict[str, int]:
    assert message.startswith(prefix + ": counterexample "), message
    pairs = message[len(prefix + ": counterexample "):].split(", ")
    model = {}
    for pair in pairs:
        m = re.fullmatch(r"(\w+) = (-?\d+)", pair)
        assert m, message
        model[m.group(1)] = int(m.group(2))
    return model


def test_unprovable_shape_equality_shows_a_counterexample() -> None:
    b = Builder(ShapeSolver(("K", "K2")))
    x, y = b.begin_region((TensorType(f32, (K,)), TensorType(f32, (K2,))))
    with pytest.raises(DiagnosticError) as info:
        b.add(Binary, fn=BinaryFn.add, lhs=x, rhs=y)
    model = counterexample(info.value.message, "cannot prove K == K2 (add operands)")
    assert set(model) == {"K", "K2"}
    assert model["K"] != model["K2"] and min(model.values()) >= 1  # a real counterexample within `>= 1`


def test_counterexamples_respect_the_refinements() -> None:
    requires = (PCmp("<=", K, DConst(4)), PCmp("==", DBin("%", K2, DConst(8)), DConst(0)))
    b = Builder(ShapeSolver(("K", "K2"), requires))
    x, y = b.begin_region((TensorType(f32, (K,)), TensorType(f32, (K2,))))
    with pytest.raises(DiagnosticError) as info:
        b.add(Binary, fn=BinaryFn.sub, lhs=x, rhs=y)
    model = counterexample(info.value.message, "cannot prove K == K2 (sub operands)")
    assert all(p.evaluate(model) for p in requires)
    assert model["K"] != model["K2"]


def test_refinements_make_the_obligation_provable() -> None:
    b = Builder(ShapeSolver(("K", "K2"), (PCmp("==", DBin("+", K, DConst(1)), DBin("+", K2, DConst(1))),)))
    x, y = b.begin_region((TensorType(f32, (K,)), TensorType(f32, (K2,))))
    assert b.add(Binary, fn=BinaryFn.add, lhs=x, rhs=y).type == TensorType(f32, (K,))


def test_products_need_the_axiom_escape_hatch() -> None:
    b = Builder(ShapeSolver(("M", "N", "E")))
    (x,) = b.begin_region((TensorType(f32, (M, N)),))
    with pytest.raises(DiagnosticError) as info:
        b.add(Reshape, x=x, shape=(E,))
    model = counterexample(info.value.message, "cannot prove M * N == E (reshape [M, N] to [E] element count)")
    assert model["M"] * model["N"] != model["E"]
    b = Builder(ShapeSolver(("M", "N", "E"), axioms=(PCmp("==", E, DBin("*", M, N)),)))
    (x,) = b.begin_region((TensorType(f32, (M, N)),))
    assert b.add(Reshape, x=x, shape=(E,)).type == TensorType(f32, (E,))


def test_unsatisfiable_requires_is_explained() -> None:
    k = parse_kernel("kernel f() symbols(N, M) requires(N > 10, M >= 1, N < 5) {\n  yield\n}\n", "unsat.kir")
    with pytest.raises(VerifyError) as info:
        kir.verify(k)
    message = info.value.message
    head = "kernel f: requires is unsatisfiable; these refinements cannot all hold: "
    assert message.startswith(head)
    assert sorted(message[len(head):].split(", ")) == ["N < 5", "N > 10"]
    assert (info.value.file, info.value.line, info.value.col) == ("unsat.kir", 1, 1)


def test_the_default_lower_bound_takes_part_in_the_explanation() -> None:
    k = parse_kernel("kernel f() symbols(N) requires(N < 1) {\n  yield\n}\n")
    with pytest.raises(VerifyError) as info:
        kir.verify(k)
    assert sorted(info.value.message.split(": ")[-1].split(", ")) == ["N < 1", "N >= 1"]
    kir.verify(parse_kernel("kernel f() symbols(N) requires(N >= 0, N < 1) {\n  yield\n}\n"))  # N = 0 is allowed


def test_launch_time_evaluation_names_the_predicate_and_the_values() -> None:
    preds = (PCmp("<=", N, DConst(65536)), PCmp("==", DBin("%", N, DConst(4)), DConst(0)))
    assert check_concrete(preds, {"N": 1000}) is None
    assert check_concrete(preds, {"N": 1001}) == "N % 4 == 0 failed: N = 1001"
    assert check_concrete(preds, {"N": 70000}) == "N <= 65536 failed: N = 70000"
    assert check_concrete((PCmp("<", M, N),), {"M": 5, "N": 3}) == "M < N failed: M = 5, N = 3"
    assert check_concrete((PCmp("==", DBin("//", N, M), DConst(1)),), {"N": 4, "M": 0}) == \
        "N // M == 1 cannot be evaluated: N // M divides by zero"
    assert check_concrete((PCmp("==", K, DConst(1)),), {}) == \
        "K == 1 cannot be evaluated: 'shape symbol K is not bound'"


def test_typing_errors_in_text_point_at_the_op() -> None:
    text = """kernel f(x: in f32[N], out: out f32[N]) symbols(N) {
  %a: f32[N + 1] = load %x[0:N + 1]
  store %out[0:N] = %a
  yield
}
"""
    with pytest.raises(VerifyError) as info:
        kir.verify(parse_kernel(text, "oob.kir"))
    err = info.value
    model = counterexample(err.message, "cannot prove N + 1 <= N (load slice stop within N on axis 0)")
    assert set(model) == {"N"}
    assert (err.file, err.line, err.col) == ("oob.kir", 2, 3)
    assert str(err).splitlines()[1:] == ["      %a: f32[N + 1] = load %x[0:N + 1]", "      ^"]


def test_the_solver_budget_is_a_resource_count_not_a_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proof's verdict depends on the query only: the budget is Z3's own resource count, so a loaded
    machine proves what an idle one proves (a wall-clock timeout made bench kernels fail to compile under
    load with "the solver could not decide"), and a budget too small to decide answers "undecided" on every
    run, never a wrong verdict."""
    import time

    import z3

    import kir.solver as solver_module
    from physical.verifier.affine import proves

    B, Mv = DSym("B"), DSym("M")
    goal = PCmp("<=", DConst(0), DBin("*", B, Mv))  # nonlinear: past the linear reasoning, decided by Z3
    hyps = (PCmp(">=", B, DConst(1)), PCmp(">=", Mv, DConst(1)))
    slow = z3.Solver.check

    def check_on_a_loaded_machine(self: z3.Solver, *args: object) -> object:
        time.sleep(0.01)  # the wall clock moves; the resource count does not
        return slow(self, *args)

    monkeypatch.setattr(z3.Solver, "check", check_on_a_loaded_machine)
    solver_module.clear_memo()
    assert ShapeSolver(("B", "M")).prove(goal) is None
    assert proves(hyps, goal)
    monkeypatch.setattr(solver_module, "RESOURCE_LIMIT", 1)
    for _ in range(3):
        solver_module.clear_memo()
        assert ShapeSolver(("B", "M")).prove(goal) == {}  # undecided: no counterexample to show
        assert not proves(hyps, goal)
    solver_module.clear_memo()
