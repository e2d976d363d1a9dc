"""One Dim -> Z3 translation (kir/dims.py `dim_to_z3`), used by the KIR solver and the physical verifier:
a dim's `//` and `%` are Python's floor division and remainder (as `DBin.evaluate`) for operands of either
sign. Physical integer division truncates toward zero (C); the verifier's forms say so with facts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import z3

from kir.dims import DBin, DConst, DSym, PCmp, dim_to_z3
from kir.solver import ShapeSolver
from physical.verifier.affine import Forms, proves

OPERANDS = [(a, b) for a in range(-7, 8) for b in (-3, -2, -1, 1, 2, 3)]


@pytest.mark.parametrize("op", ["//", "%"])
def test_constant_operands_of_either_sign_floor_as_python(op: str) -> None:
    for a, b in OPERANDS:
        d = DBin(op, DConst(a), DConst(b))
        want = a // b if op == "//" else a % b
        assert d.evaluate({}) == want
        assert z3.simplify(dim_to_z3(d, {})).as_long() == want, (a, op, b)


@pytest.mark.parametrize("op", ["//", "%"])
def test_symbolic_operands_of_either_sign_floor_as_python(op: str) -> None:
    x, y = z3.Int("x"), z3.Int("y")
    term = dim_to_z3(DBin(op, DSym("x"), DSym("y")), {"x": x, "y": y})
    for a, b in OPERANDS:
        got = z3.simplify(z3.substitute(term, (x, z3.IntVal(a)), (y, z3.IntVal(b))))
        assert got.as_long() == (a // b if op == "//" else a % b), (a, op, b)


def test_the_kir_solver_and_the_physical_verifier_read_division_alike() -> None:
    n = DSym("N")
    solver = ShapeSolver(("N",), (PCmp("==", n, DConst(2)),))
    neg = DBin("-", n, DConst(9))  # -7
    assert solver.proves(PCmp("==", DBin("//", neg, DConst(2)), DConst(-4)))  # floor, not -3
    assert solver.proves(PCmp("==", DBin("%", neg, DConst(2)), DConst(1)))
    assert solver.proves(PCmp("==", DBin("//", neg, DConst(-2)), DConst(3)))
    assert solver.proves(PCmp("==", DBin("%", neg, DConst(-2)), DConst(-1)))
    x = DSym("x")
    hyp = [PCmp("==", x, DConst(-7))]
    assert proves(hyp, PCmp("==", DBin("//", x, DConst(2)), DConst(-4)))
    assert proves(hyp, PCmp("==", DBin("%", x, DConst(2)), DConst(1)))
    assert proves(hyp, PCmp("==", DBin("//", x, DConst(-2)), DConst(3)))
    assert not proves(hyp, PCmp("==", DBin("//", x, DConst(2)), DConst(-3)))


def test_physical_truncating_division_of_a_possibly_negative_value() -> None:
    forms = Forms(SimpleNamespace(program=SimpleNamespace(symbols=("N",))), SimpleNamespace(id=0))  # type: ignore[arg-type]
    x = DSym("x")
    q, r = forms._truncated("floordiv", x, DConst(2)), forms._truncated("mod", x, DConst(2))
    assert not isinstance(q, DBin)  # a fresh quotient: a floor `//` would be wrong for x < 0
    for value, quotient, rem in [(-7, -3, -1), (7, 3, 1), (-6, -3, 0), (0, 0, 0)]:
        hyps = forms.facts + [PCmp("==", x, DConst(value))]
        assert proves(hyps, PCmp("==", q, DConst(quotient))) and proves(hyps, PCmp("==", r, DConst(rem)))
    n = DSym("N")  # a kernel symbol is non-negative: truncation and floor agree, the form stays a dim
    assert forms._truncated("floordiv", n, DConst(4)) == DBin("//", n, DConst(4))
    assert forms._truncated("mod", n, DConst(4)) == DBin("%", n, DConst(4))
