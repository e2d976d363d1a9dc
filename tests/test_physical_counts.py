"""Operation counts: every physical op class says what it moves and computes (physical/counts.py), so a new op
cannot be counted as nothing by omission."""

from __future__ import annotations

import pytest

import physical
import physical.ops as P
from physical.counts import COST, costs_nothing, operation_counts
from tests import samples


def test_every_op_class_has_an_operation_count():
    missing = sorted(n for n, c in P.OP_CLASSES.items() if c not in COST)
    assert missing == []


def test_an_op_class_counts_once():
    with pytest.raises(ValueError, match="duplicate operation count for Load"):
        costs_nothing(P.Load)


def test_an_op_without_an_entry_is_refused_loudly():
    from physical.counts import _op

    class Unknown(P.Barrier):  # a subclass is a class of its own: it needs its own entry
        pass

    with pytest.raises(KeyError):
        _op(None, Unknown(), None)  # type: ignore[arg-type]


def test_vector_add_moves_its_three_vectors():
    program = physical.lower(samples.vector_add())
    counts = operation_counts(program)
    assert counts.exact and counts.bytes.evaluate({"N": 1000}) == 3 * 4 * 1000
    assert counts.flops.evaluate({"N": 1000}) == 1000
