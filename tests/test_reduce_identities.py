"""One table of reduction identities and combines (kir/reduce.py): the oracle, the physical lowering and
the StableHLO exit agree on every (kind, dtype), signed zeros included.

The float sum's identity is -0.0 (x + -0.0 is x bit for bit for every x), so a sum of negative zeros
is -0.0 and so is an empty float sum (docs/architecture.md, numeric rules).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import oracle
import physical
from kir.dims import DConst, PCmp
from kir.dtypes import DType
from kir.pointwise import BinaryFn
from kir.reduce import COMBINE, EMPTY_ARG_INDEX, ReduceKind, combine_fn, identical_literal, identity, same_literal
from kir.scan import Scan, ScanKind
from oracle.numerics import to_storage
from physical import ops as P
from tests.stablehlo_kernels import KB, M, N, full, out, ref

try:  # the StableHLO exit needs jax
    import oracle.stablehlo as shlo
except ImportError:  # pragma: no cover - jax is a dependency of the exit only
    shlo = None

KINDS = [ReduceKind.sum, ReduceKind.prod, ReduceKind.max, ReduceKind.min, ReduceKind.any, ReduceKind.all,
         ReduceKind.argmax, ReduceKind.argmin]


def _kernel(kind: ReduceKind, dtype: DType):
    """x[M, N] reduced over N, N may be 0; None where KIR refuses the kind on the dtype."""
    res = DType.i64 if kind in (ReduceKind.argmax, ReduceKind.argmin) else None
    try:
        k = KB(f"r_{kind}_{dtype}", "M N", [("x", ref(dtype, M, N)), ("out", out(res or dtype, M))],
               requires=[PCmp(">=", N, DConst(0))])
        r = k.reduce(k.load("x", full(M), full(N)), kind, axes=(1,))
        k.store("out", (full(M),), r)
        return k.done()
    except Exception:  # noqa: BLE001 - the kinds a dtype does not support
        return None


# i4 memory packs two elements per byte and cannot be written, so no kernel stores an i4 reduction
CASES = [(kind, dt) for kind in KINDS for dt in DType if dt is not DType.i4 and _kernel(kind, dt) is not None]


def _bits(value: object, dtype: DType) -> bytes:
    return np.asarray(value).astype(dtype.np if dtype.np is not None else np.float32).tobytes()


def test_every_built_in_kind_has_a_combine_and_an_identity() -> None:
    assert set(COMBINE) == {k for k in ReduceKind if k not in (ReduceKind.argmax, ReduceKind.argmin,
                                                               ReduceKind.custom)}
    assert combine_fn(ReduceKind.sum) is BinaryFn.add
    with pytest.raises(ValueError, match="reduce argmax is not an elementwise fold"):
        combine_fn(ReduceKind.argmax)
    with pytest.raises(ValueError, match="reduce custom has no built-in identity"):
        identity(ReduceKind.custom, DType.f32)
    assert len(CASES) > 40, CASES


def test_the_float_sum_identity_is_negative_zero() -> None:
    for dt in (DType.f16, DType.bf16, DType.f32, DType.f64, DType.f8e4m3, DType.f8e5m2):
        z = identity(ReduceKind.sum, dt)
        assert z == 0.0 and math.copysign(1.0, z) == -1.0
        lowest = -448.0 if dt is DType.f8e4m3 else -math.inf  # f8e4m3 has no infinities: its lowest value
        assert identity(ReduceKind.prod, dt) == 1.0 and identity(ReduceKind.max, dt) == lowest
        assert identity(ReduceKind.min, dt) == -lowest and identity(ReduceKind.argmax, dt) == lowest
    assert identity(ReduceKind.sum, DType.i32) == 0 and identity(ReduceKind.max, DType.u8) == 0
    assert identity(ReduceKind.min, DType.i8) == 127 and identity(ReduceKind.all, DType.pred) is True
    assert not same_literal(0.0, -0.0) and same_literal(1, 1.0) and not same_literal(math.nan, math.nan)


def test_an_identical_literal_is_of_one_kind_with_its_sign_and_nan_is_nan() -> None:
    assert identical_literal(math.nan, -math.nan) and identical_literal(-0.0, -0.0) and identical_literal(-2, -2)
    assert not identical_literal(0.0, -0.0) and not identical_literal(math.nan, 0.0)
    assert not identical_literal(0.0, math.nan) and not identical_literal(1, 1.0) and not identical_literal(True, 1)


@pytest.mark.parametrize("kind,dtype", CASES, ids=[f"{k}-{d}" for k, d in CASES])
def test_lowering_oracle_and_stablehlo_agree_on_the_identity(kind: ReduceKind, dtype: DType) -> None:
    kernel = _kernel(kind, dtype)
    want = EMPTY_ARG_INDEX if kind in (ReduceKind.argmax, ReduceKind.argmin) else identity(kind, dtype)
    # the lowering seeds, pads and masks with the table's value (argmax/argmin: their value component), in every
    # form a launch may select (the whole row and the row walked in chunks)
    reductions = [o for o in physical.lower(kernel).walk() if isinstance(o, P.Reduce)]
    assert reductions
    for red in reductions:
        assert same_literal(red.identity[0], identity(kind, dtype)), red.identity
    store = dtype.np
    x = np.zeros((3, 0), store)
    res = np.int64 if kind in (ReduceKind.argmax, ReduceKind.argmin) else store
    # stored as the dtype stores it (bf16 and fp8 in f32)
    stored = np.full(3, want, np.int64) if res is np.int64 else to_storage(np.full(3, want), dtype)
    got = oracle.run(kernel, {"x": x, "out": np.zeros(3, res)})["out"]
    assert got.tobytes() == stored.tobytes(), got
    if shlo is not None:
        got = np.asarray(shlo.run(kernel, {"x": x, "out": np.zeros(3, res)})["out"])
        assert got.tobytes() == stored.tobytes(), got


@pytest.mark.parametrize("dtype", [DType.f16, DType.f32, DType.f64])
@pytest.mark.parametrize("n", [0, 1, 3, 8, 100])
def test_a_sum_of_negative_zeros_is_negative_zero(dtype: DType, n: int) -> None:
    kernel = _kernel(ReduceKind.sum, dtype)
    x = np.full((2, n), -0.0, dtype.np)
    x[1, :n // 2] = 0.0  # one +0.0 makes the sum +0.0
    args = {"x": x, "out": np.ones(2, dtype.np)}
    for run in [oracle.run] + ([shlo.run] if shlo is not None else []):
        got = np.asarray(run(kernel, dict(args))["out"])
        assert got.tolist() == [0.0, 0.0]
        assert np.signbit(got).tolist() == [True, n < 2], (run, got)


@pytest.mark.parametrize("exclusive", [False, True])
def test_a_float_cumsum_of_negative_zeros_keeps_the_sign(exclusive: bool) -> None:
    k = KB("cs", "M N", [("x", ref(DType.f32, M, N)), ("out", out(DType.f32, M, N))])
    s = k.add(Scan, inputs=(k.load("x", full(M), full(N)),), axis=1, kind=ScanKind.sum, exclusive=exclusive)
    k.store("out", (full(M), full(N)), s)
    kernel = k.done()
    args = {"x": np.full((2, 5), -0.0, np.float32), "out": np.ones((2, 5), np.float32)}
    for run in [oracle.run] + ([shlo.run] if shlo is not None else []):
        got = np.asarray(run(kernel, dict(args))["out"])
        assert (got == 0).all() and np.signbit(got).all(), (run, got)
