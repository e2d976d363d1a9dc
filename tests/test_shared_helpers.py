"""The small shared pieces that several stages use: registries, the symbol-binding fixpoint, op families,
spelled enums and the verifier's rule registration."""

from __future__ import annotations

import importlib

import pytest

from intent.runtime.checks import contiguous_strides, settle
from kir.core import OP_FAMILIES, ParamKind, register, registrar
from kir.dims import DBin, DConst, DSym, PCmp, bind_extents
from kir.dtypes import DType, SpelledEnum
from physical.verifier.base import RULES, rule


def test_register_refuses_a_second_entry():
    table: dict[str, int] = {}
    register(table, "a", 1, "thing a")
    with pytest.raises(ValueError, match=r"^duplicate thing a$"):
        register(table, "a", 2, "thing a")
    assert table == {"a": 1}


def test_registrar_names_the_key_in_its_error():
    table: dict[object, object] = {}
    registers = registrar(table, "emitter for {key}")

    @registers(int, "name")
    def f() -> None: ...

    assert table == {int: f, "name": f}
    with pytest.raises(ValueError, match=r"^duplicate emitter for int$"):
        registers(int)(f)


def test_settle_resolves_in_any_order_and_leaves_the_rest():
    env: dict[str, int] = {"a": 1}
    rules = [("c", "b"), ("b", "a"), ("z", "y")]  # c needs b, which needs a; z needs an unbound y

    def resolve(item: tuple[str, str]) -> bool:
        target, source = item
        if source not in env:
            return False
        env[target] = env[source] + 1
        return True

    pending = list(rules)
    settle(pending, resolve)
    assert env == {"a": 1, "b": 2, "c": 3}
    assert pending == [("z", "y")]


def test_bind_extents_solves_affine_extents():
    env: dict[str, int] = {}
    n, m = DSym("N"), DSym("M")
    bind_extents([(DBin("+", n, m), 10), (DBin("*", DConst(2), n), 8)], env)  # N from 2N = 8, then M
    assert env == {"N": 4, "M": 6}
    assert PCmp("<", m, n).evaluate(env) is False


def test_contiguous_strides():
    assert contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert contiguous_strides((0, 5)) == (5, 1)
    assert contiguous_strides(()) == ()


def test_spelled_enums_print_their_values():
    assert str(DType.bf16) == "bf16" and f"{ParamKind.TENSOR}" == "tensor"
    assert issubclass(ParamKind, SpelledEnum)


@pytest.mark.parametrize("package", ["oracle", "oracle.stablehlo", "physical.lower"])
def test_every_backend_has_a_module_per_op_family(package):
    for family in OP_FAMILIES:
        importlib.import_module(f"{package}.{family}")


def test_a_verifier_rule_states_its_obligation():
    with pytest.raises(TypeError, match=r"^verifier rule nameless: state the obligation it checks in the docstring$"):
        @rule("nameless")
        def check(program, kernel, report) -> None:
            pass

    assert "nameless" not in RULES
