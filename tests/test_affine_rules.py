"""The one rule set for affine index forms (kir/affine.py), and that every stage applies it alike."""

from __future__ import annotations

import torch

import intent
import physical
from intent import Out, dims, f32, parallel
from kir.affine import Products, binary_form, cast_form, constant_form, launch_known, neg_form
from kir.dims import DConst, DSym, dim_bin
from kir.pointwise import BinaryFn

N, i, j = DSym("N"), DSym("_i1"), DSym("_i2")


def _never(_d) -> bool:
    return False


def _always(_d) -> bool:
    return True


def test_sums_and_products_by_a_constant():
    assert binary_form(BinaryFn.add, i, N) == dim_bin("+", i, N)
    assert binary_form("sub", i, DConst(1)) == dim_bin("-", i, DConst(1))
    assert binary_form(BinaryFn.mul, i, DConst(4)) == dim_bin("*", i, DConst(4))
    assert binary_form(BinaryFn.mul, i, j) is None
    assert binary_form(BinaryFn.add, i, None) is None


def test_products_follow_the_provers_reach():
    assert binary_form(BinaryFn.mul, i, N) is None
    assert binary_form(BinaryFn.mul, i, N, products=Products.LAUNCH) == dim_bin("*", i, N)
    assert binary_form(BinaryFn.mul, i, j, products=Products.LAUNCH) is None
    assert binary_form(BinaryFn.mul, i, j, products=Products.ANY) == dim_bin("*", i, j)
    assert launch_known(dim_bin("//", N, DConst(2))) and not launch_known(dim_bin("+", N, i))


def test_quotients_need_a_proven_nonnegative_dividend_and_a_positive_constant_divisor():
    assert binary_form(BinaryFn.floordiv, i, DConst(4)) is None  # no prover: no form
    assert binary_form(BinaryFn.floordiv, i, DConst(4), _never) is None
    assert binary_form(BinaryFn.floordiv, i, DConst(4), _always) == dim_bin("//", i, DConst(4))
    assert binary_form(BinaryFn.mod, i, DConst(4), _always) == dim_bin("%", i, DConst(4))
    assert binary_form(BinaryFn.mod, i, DConst(0), _always) is None
    assert binary_form(BinaryFn.floordiv, i, DConst(-2), _always) is None
    assert binary_form(BinaryFn.floordiv, i, N, _always) is None
    assert binary_form(BinaryFn.maximum, i, N, _always) is None


def test_leaves_conversions_and_negation():
    assert constant_form(3) == DConst(3) and constant_form(True) is None and constant_form(2.0) is None
    assert cast_form(i, True) == i and cast_form(i, False) is None and cast_form(None, True) is None
    assert neg_form(i) == dim_bin("-", DConst(0), i) and neg_form(None) is None


M = dims("M")


@intent.kernel
def flip(x: f32[M], out: Out[f32[M]]):
    for r in parallel(M):
        out[-r + (M - 1)] = x[r] + x[-r + (M - 1)]


def test_a_negated_index_is_a_proven_point_at_every_stage():
    """The frontend called `-r + (M - 1)` affine (a point load) but the KIR verifier refused it as not
    affine; now the frontend, the KIR verifier, lowering's bounds proof and the disjointness analysis
    all read it with the same rules."""
    x = torch.arange(6, dtype=torch.float32)
    out = torch.zeros(6)
    program = physical.lower(flip.specialize({"x": x, "out": out}), verify=True)
    (g,) = program.groups
    assert len(g.domain) == 1 and not g.serial  # the negated writes are disjoint across instances
    text = physical.print_program(program)
    assert "{proven 0 <= 0 - _c" in text and "guard" not in text
    flip(x, out)
    assert torch.equal(out, x + x.flip(0))
