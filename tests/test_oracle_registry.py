"""Every KIR op class has an oracle meaning."""

import pytest

import kir
import oracle
from oracle.interp import evaluates


def test_every_op_class_has_an_evaluation() -> None:
    missing = sorted(name for name, cls in kir.OP_CLASSES.items() if cls not in oracle.EVAL)
    assert missing == []


def test_registry_holds_only_op_classes() -> None:
    assert set(oracle.EVAL) <= set(kir.OP_CLASSES.values())


def test_a_second_evaluation_for_one_op_is_refused() -> None:
    with pytest.raises(ValueError, match="duplicate oracle evaluation for Unary"):
        evaluates(kir.Unary)(lambda frame, op: ())
