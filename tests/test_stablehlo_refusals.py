"""The StableHLO exit fails closed, covers every KIR op, and reports bad arguments by parameter name."""

from __future__ import annotations

import numpy as np
import pytest

import kir
import oracle.stablehlo as shlo
from kir import AtomicKind, RngKind
from kir.atomic import AtomicCAS
from kir.core import Kernel
from kir.dims import DSym
from kir.dtypes import DType, DTypeVar
from kir.errors import IntentError, LaunchError, Loc, NotExpressible
from kir.rng import Random
from tests import samples
from tests import stablehlo_kernels as K
from tests.stablehlo_kernels import KB, E, N, full, inout, out, ref

# Ops whose emitter refuses only some uses (tested below); every other op class is always expressible.
CONDITIONAL_REFUSALS = {
    "atomic": "the old value is used, or the kind is xchg",
    "scatter": "unique=True",
    "random": "randn",
}


def test_every_op_class_has_an_emitter_or_a_refusal() -> None:
    missing = [name for name, cls in kir.OP_CLASSES.items()
               if cls not in shlo.EMITTERS and cls not in shlo.REFUSALS]
    assert missing == []
    assert not set(shlo.EMITTERS) & set(shlo.REFUSALS)
    assert set(CONDITIONAL_REFUSALS) <= set(kir.OP_CLASSES)


def _refusal(kernel: Kernel, args: dict) -> str:
    with pytest.raises(NotExpressible) as info:
        shlo.emit(kernel, args)
    return str(info.value)


def test_atomic_old_value_used_is_refused_with_its_location() -> None:
    k = KB("claim", "E B", [("idx", ref(K.i32, E)), ("acc", inout(K.i32, K.B)), ("old", out(K.i32, E))])
    with k.parallel(E) as (e,):
        old = k.b.add(kir.Atomic, kind=AtomicKind.add, dst=k.p["acc"], indices=(k.load("idx", e),),
                      value=k.const(1, K.i32), loc=Loc("claim.py", 7, 15))
        k.store("old", (e,), old)
    kernel = k.done()
    msg = _refusal(kernel, {"idx": np.zeros(3, np.int32), "acc": np.zeros(2, np.int32)})
    assert msg.startswith("claim.py:7:15: error: atomic is not expressible at the StableHLO exit: the old value "
                          "returned by atomic_add is used; it depends on the order in which instances run")


def test_atomic_xchg_and_cas_are_refused() -> None:
    args = {"idx": np.zeros(3, np.int32), "v": np.zeros(3, np.int32), "acc": np.zeros(2, np.int32)}
    assert "atomic_xchg leaves an unspecified value" in _refusal(K.atomic_kernel(AtomicKind.xchg), args)
    k = KB("cas", "E B", [("idx", ref(K.i32, E)), ("acc", inout(K.i32, K.B))])
    with k.parallel(E) as (e,):
        k.add(AtomicCAS, dst=k.p["acc"], indices=(k.load("idx", e),), expected=k.const(0, K.i32),
              value=k.const(1, K.i32))
    msg = _refusal(k.done(), {"idx": np.zeros(3, np.int32), "acc": np.zeros(2, np.int32)})
    assert "atomic_cas is not expressible at the StableHLO exit: atomic_cas writes or not depending on the order" \
           in msg


def test_unique_scatter_is_refused() -> None:
    msg = _refusal(K.scatter_rows(unique=True), {"idx": np.zeros(2, np.int32), "v": np.zeros(2, np.float32),
                                                 "out": np.zeros(3, np.float32)})
    assert "scatter is not expressible at the StableHLO exit: a `unique` data-dependent store lets instances race" \
           in msg


def test_randn_is_refused_but_rand_and_randint_are_exact() -> None:
    k = KB("noise", "N", [("seed", K.i64), ("out", out(K.f32, N))])
    with k.parallel(N) as (n,):
        k.store("out", (n,), k.add(Random, kind=RngKind.randn, seed=k.p["seed"], offset=n))
    assert "randn uses log, cos and sin" in _refusal(k.done(), {"seed": 1, "out": np.zeros(4, np.float32)})
    from oracle.philox import philox_randint
    k = KB("bits", "N", [("seed", K.i64), ("off", ref(K.i32, N)), ("out", out(K.u32, N))])
    k.store("out", (full(N),), k.add(Random, kind=RngKind.randint, seed=k.p["seed"], offset=k.load("off", full(N))))
    off = np.array([0, -1, 7, 2**31 - 1], np.int32)
    kernel = k.done()
    text = shlo.emit(kernel, {"seed": -5, "off": off})
    assert "stablehlo.multiply" in text and "tensor<4xui64>" in text and "stablehlo.xor" in text  # Philox rounds
    pytest.importorskip("jax")
    got = shlo.run(kernel, {"seed": -5, "off": off})["out"]
    np.testing.assert_array_equal(got, philox_randint(-5, off))


def test_generic_kernel_must_be_specialised() -> None:
    T = DTypeVar("T", (DType.f16, DType.f32))
    b = kir.Builder(kir.ShapeSolver(("N",)))
    (x,) = b.begin_region((kir.RefType(T, (DSym("N"),), kir.Role.IN),), ("x",))
    b.make(kir.Yield, values=())
    kernel = kir.build_kernel("g", (kir.Param("x", x),), ("N",), b.end_region(), dtype_vars=(T,))
    with pytest.raises(NotExpressible, match="parameter x has dtype variable T; emit a specialised kernel"):
        shlo.emit(kernel, {"x": np.zeros(3, np.float32)})


# ---------------------------------------------------------------------------------------------- arguments


def test_rank_mismatch_names_the_parameter() -> None:
    with pytest.raises(LaunchError, match=r"^parameter x: expected rank 2 \(f32\[M, N\]\), got shape \(3,\)$"):
        shlo.emit(samples.softmax(), {"x": np.zeros(3, np.float32)})


def test_inconsistent_extent_names_the_parameter_and_expression() -> None:
    with pytest.raises(LaunchError, match=r"^parameter offsets: axis 0 has extent 3 but S \+ 1 = 4 with S = 3$"):
        shlo.emit(samples.segment_sum(), {"values": np.zeros(5, np.float32), "offsets": np.zeros(3, np.int64),
                                          "out": np.zeros(3, np.float32)})


def test_symbol_solved_from_a_compound_extent() -> None:
    text = shlo.emit(samples.segment_sum(), {"values": np.zeros(5, np.float32), "offsets": np.zeros(4, np.int64)})
    assert "specialised for S=3, E=5" in text


def test_refinement_failure_shows_the_predicate_and_values() -> None:
    with pytest.raises(LaunchError, match=r"^N <= 65536 failed: N = 70000$"):
        shlo.emit(samples.softmax(), {"x": np.zeros((1, 70000), np.float32)})


def test_unknown_missing_and_mistyped_arguments() -> None:
    with pytest.raises(LaunchError, match=r"^unknown argument z; the kernel takes x, y, out$"):
        shlo.emit(samples.vector_add(), {"x": np.zeros(2, np.float32), "y": np.zeros(2, np.float32), "z": 1})
    with pytest.raises(LaunchError, match=r"^missing argument y \(in f32\[N\]\)$"):
        shlo.emit(samples.vector_add(), {"x": np.zeros(2, np.float32)})
    pytest.importorskip("jax")
    with pytest.raises(LaunchError, match=r"^parameter y: expected dtype f32, got f64$"):
        shlo.run(samples.vector_add(), {"x": np.zeros(2, np.float32), "y": np.zeros(2)})
    with pytest.raises(LaunchError, match=r"^parameter seed: 1e\+20 does not fit|^parameter seed: expected an integer"):
        shlo.run(K.dropout(), {"x": np.zeros(2, np.float32), "p": 0.5, "seed": 1e20})
    with pytest.raises(LaunchError, match=r"^parameter seed: 18446744073709551616 does not fit i64 "):
        shlo.run(K.dropout(), {"x": np.zeros(2, np.float32), "p": 0.5, "seed": 2**64})


def test_symbols_from_products() -> None:
    mn = kir.dim_bin("*", DSym("M"), DSym("N"))
    k = KB("prod", "M N", [("x", ref(K.f32, mn)), ("out", out(K.f32, DSym("M")))])
    k.store("out", (full(DSym("M")),), k.bcast(k.const(0.0, K.f32), (DSym("M"),)))
    text = shlo.emit(k.done(), {"x": np.zeros(6, np.float32), "out": np.zeros(2, np.float32)})
    assert "specialised for M=2, N=3" in text  # N solved from M * N once M is known
    k = KB("prod", "M N", [("x", ref(K.f32, mn)), ("out", out(K.f32, 2))])
    k.store("out", (full(kir.DConst(2)),), k.bcast(k.const(0.0, K.f32), (kir.DConst(2),)))
    with pytest.raises(LaunchError, match=r"^cannot determine shape symbols M, N from the arguments' shapes$"):
        shlo.emit(k.done(), {"x": np.zeros(6, np.float32), "out": np.zeros(2, np.float32)})


def test_checks_flag_on_the_kernel_is_honoured() -> None:
    import dataclasses
    pytest.importorskip("jax")
    kernel = dataclasses.replace(K.gather_fill(), checks=True)
    with pytest.raises(IntentError, match=r"^gather out of range: index -3 on axis 0 of x with extent 2$"):
        shlo.run(kernel, {"x": np.zeros(2, np.float32), "idx": np.array([1, -3], np.int32)})


def test_region_fold_checks_report_the_subregion() -> None:
    import dataclasses
    pytest.importorskip("jax")
    kernel = dataclasses.replace(samples.segment_sum(), checks=True)
    args = {"values": np.zeros(4, np.float32), "offsets": np.array([0, 2, 9], np.int64)}
    with pytest.raises(IntentError, match=r"^region_fold out of range: subregion \[2, 9\) on axis 0 of values with "
                                          r"extent 4$"):
        shlo.run(kernel, args)

