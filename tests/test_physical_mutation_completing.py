"""Mutation tests of the construction verifier: the stores of region folds balanced beside region scans (split-effects).

Where the data balances a segment's running sum and its total (physical/passes/balance_scan_folds.py), the total is
stored by the one program that completes it: a block for a subregion it keeps, the subregion's last helper for one
handed over. The store's mask holds `select(helper >= 0, L, K)`: K holds `not D`, L holds D and `k == c` (D the
lane's delegation test, c its last chunk: values of the lane alone; k the helper's chunk). Each mutation breaks one
part of that and expects split-effects' exact message (the store would be made by several programs); both forms,
forward and reverse, must still verify.
"""

from __future__ import annotations

import dataclasses

import pytest

from kir import BinaryFn
from kir.dtypes import DType
from physical import ops as P
from physical.model import Fragment, Program, PValue
from physical.verifier import check
from tests import test_balance_scan_folds as kernels
from tests.mutations import Mutations, assert_reported, balanced, fresh_id, named, only, swap
from tests.test_balance_scan_folds import back_stats, stats

FAMILY = Mutations()
more = FAMILY.also


def total_line(kernel) -> int:
    """The source line of the kernel's `total[s] = ...` store (the verifier names ops by their source line)."""
    lines = open(kernels.__file__).read().splitlines()
    start = next(n for n, line in enumerate(lines) if f"def {kernel.kir.name}(" in line)
    return next(n for n, line in enumerate(lines[start:], start + 1) if "total[s] = intent.sum" in line)


def every_program(kernel) -> str:
    return (f"[split-effects] store (from store at test_balance_scan_folds.py:{total_line(kernel)}) writes "
            f"total in every program that shares its block: a group split over programs writes outside its "
            f"workspace only as the holder of the last ticket")


def with_final(p: Program, **fields: PValue) -> Program:
    """The stores' `final` select with `fields` (cond, on_true, on_false) replaced."""
    final = named(p, "final")
    return swap(p, final, dataclasses.replace(final, **fields))


@more("every_helper_stores", "split-effects")
def every_helper_of_a_subregion_stores():
    """L = helper >= 0: every helper stores its lane's total, complete or not."""
    k, p = balanced(stats)
    final = named(p, "final")
    assert isinstance(final, P.Select)
    return k, with_final(p, on_true=final.cond), every_program(stats)


@more("blocks_store_what_they_hand_over", "split-effects")
def blocks_store_handed_subregions():
    """K = the lane-validity test alone: a block also stores the subregions its helpers complete."""
    k, p = balanced(stats)
    final = named(p, "final")
    assert isinstance(final, P.Select)
    lane_ok = only(p, P.Binary, lambda op: op.results[0].id == final.on_false.id)
    assert isinstance(lane_ok, P.Binary)
    return k, with_final(p, on_false=lane_ok.lhs), every_program(stats)


@more("last_chunk_of_the_helper", "split-effects")
def the_last_chunk_is_the_helpers_own():
    """`k == k + 0 * c` instead of `k == c`: every helper that joins the lane stores its incomplete total."""
    k, p = balanced(stats)
    test = only(p, P.Compare, lambda op: op.results[0].id in _last_test(p))
    assert isinstance(test, P.Compare)
    zero, none, mine = (PValue(fresh_id(p) + n, t, f"own{n}") for n, t in enumerate(
        (Fragment(DType.i64), test.rhs.type, test.rhs.type)))
    ops = [P.Const(results=(zero,), value=0, dtype=DType.i64),
           P.Binary(results=(none,), fn=BinaryFn.mul, lhs=test.rhs, rhs=zero),
           P.Binary(results=(mine,), fn=BinaryFn.add, lhs=test.lhs, rhs=none),
           dataclasses.replace(test, rhs=mine)]
    return k, swap(p, test, ops), every_program(stats)


@more("reverse_chunks_overlap", "split-effects")
def reverse_chunks_from_one_before_the_last():
    """A scan from the end numbers the chunks from H - 2 down (clamped at 0): the last two helpers both take chunk
    0, and both would store the total of the subregion that ends there."""
    k, p = balanced(back_stats)
    broken = p
    for n, last in enumerate(_helpers_less_one(p)):  # wherever the chunk is computed
        two = PValue(fresh_id(broken), Fragment(DType.i64), f"two{n}")
        broken = swap(broken, last, [P.Const(results=(two,), value=2, dtype=DType.i64),
                                     dataclasses.replace(last, rhs=two)])
    return k, broken, every_program(back_stats)


def _last_test(p: Program) -> set[int]:
    """The id of `k == c` among the conjuncts of the `last_helper` value (the chunk test of the last helper)."""
    ids = set()
    for op in p.walk():
        if isinstance(op, P.Binary) and op.results[0].name == "last_helper" and op.fn.value == "and":
            for x in (op.lhs, op.rhs):
                made = next((o for o in p.walk() if o.results and o.results[0].id == x.id), None)
                if isinstance(made, P.Compare) and made.fn.value == "eq":
                    ids.add(x.id)
    return ids


def _helpers_less_one(p: Program) -> list[P.Binary]:
    """Each `HELPERS_0 - 1`: the first chunk a scan from the end hands its helpers."""
    made = {v.id: o for o in p.walk() for v in o.results}

    def launch(v: PValue) -> bool:
        op = made.get(v.id)
        while isinstance(op, P.Cast):
            op = made.get(op.x.id)
        return isinstance(op, P.ShapeValue) and str(op.expr) == "HELPERS_0"

    found = [o for o in p.walk() if isinstance(o, P.Binary) and o.fn.value == "sub" and launch(o.lhs)
             and isinstance(made.get(o.rhs.id), P.Const) and made[o.rhs.id].value == 1]  # type: ignore[union-attr]
    assert found
    return found


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("kernel", [stats, back_stats], ids=["forward", "reverse"])
def test_the_balanced_folds_beside_scans_verify(kernel):
    k, p = balanced(kernel)
    assert check(p, k) == []


@pytest.mark.parametrize("name", sorted(FAMILY.more))
def test_more_mutations_are_reported_by_their_rule(name):
    rule, make = FAMILY.more[name]
    assert_reported(rule, *make())
