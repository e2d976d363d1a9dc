"""Atomics: instance order, old values, CAS semantics, integer wrap, out-of-range with and without checks."""

import numpy as np
import pytest

import oracle
from kir import Atomic, AtomicCAS, AtomicKind, Binary, BinaryFn, Load, Store
from kir.dims import DSym
from kir.dtypes import DType
from kir.errors import IntentError
from tests import samples
from tests.oracle_kit import LOC, inout, kernel, load_all, out, parallel, store_all, tensor

f32, i8, i32, i64 = DType.f32, DType.i8, DType.i32, DType.i64
N = DSym("N")


def rmw_kernel(kind: AtomicKind, dtype: DType, checks: bool = False):
    """old[n] = atomic_<kind>(dst, idx[n], v[n])."""
    def body(b, p):
        def inst(b, n):
            idx = b.add(Load, src=p["idx"], index=(n,))
            v = b.add(Load, src=p["v"], index=(n,))
            old = b.add(Atomic, kind=kind, dst=p["dst"], indices=(idx,), value=v, loc=LOC)
            b.make(Store, dst=p["old"], index=(n,), value=old)
        parallel(b, [N], inst)

    return kernel({"idx": tensor(i64, "N"), "v": tensor(dtype, "N"), "dst": inout(dtype, "B"),
                   "old": out(dtype, "N")}, body, symbols=("N", "B"), checks=checks)


def sequential(kind: AtomicKind, idx, v, dst):
    dst = dst.copy()
    old = np.zeros_like(v)
    ops = {AtomicKind.add: lambda a, c: a + c, AtomicKind.max: max, AtomicKind.min: min,
           AtomicKind.and_: lambda a, c: a & c, AtomicKind.or_: lambda a, c: a | c, AtomicKind.xor: lambda a, c: a ^ c,
           AtomicKind.xchg: lambda a, c: c}
    for n, (i, x) in enumerate(zip(idx, v)):
        if 0 <= i < dst.shape[0]:
            old[n] = dst[i]
            dst[i] = ops[kind](dst[i], x)
    return old, dst


@pytest.mark.parametrize("kind", list(AtomicKind))
def test_integer_atomics_return_old_values_in_instance_order(kind: AtomicKind) -> None:
    rng = np.random.default_rng(list(AtomicKind).index(kind))
    idx = rng.integers(-1, 5, 200)
    v = rng.integers(-1000, 1000, 200).astype(np.int32)
    dst = rng.integers(-50, 50, 4).astype(np.int32)
    r = oracle.run(rmw_kernel(kind, i32), {"idx": idx, "v": v, "dst": dst})
    want_old, want_dst = sequential(kind, idx, v, dst)
    np.testing.assert_array_equal(r["old"], want_old)
    np.testing.assert_array_equal(r["dst"], want_dst)


def test_atomic_add_wraps_at_the_declared_width() -> None:
    idx = np.zeros(3, np.int64)
    v = np.array([100, 100, 100], np.int8)
    r = oracle.run(rmw_kernel(AtomicKind.add, i8), {"idx": idx, "v": v, "dst": np.zeros(1, np.int8)})
    assert r["old"].tolist() == [0, 100, -56] and r["dst"].tolist() == [44]


def test_float_atomics() -> None:
    idx = np.array([0, 0, 1, 0, 1])
    v = np.array([1.5, np.nan, 2.0, 3.0, -1.0], np.float32)
    r = oracle.run(rmw_kernel(AtomicKind.max, f32), {"idx": idx, "v": v, "dst": np.zeros(2, np.float32)})
    assert np.isnan(r["dst"][0]) and r["dst"][1] == 2.0  # max propagates NaN
    assert r["old"][1] == 1.5 and np.isnan(r["old"][3])
    vals = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    r = oracle.run(rmw_kernel(AtomicKind.add, f32), {"idx": np.zeros(1000, np.int64), "v": vals,
                                                     "dst": np.zeros(1, np.float32)})
    np.testing.assert_allclose(r["dst"][0], vals.astype(np.float64).sum(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(r["old"][1:], np.cumsum(vals.astype(np.float64))[:-1], rtol=1e-4, atol=1e-4)


def test_out_of_range_atomics_are_dropped_or_raise_with_checks() -> None:
    x = np.array([0, 7, -1, 2, 2], np.int32)
    r = oracle.run(samples.histogram(), {"x": x, "counts": np.zeros(3, np.int32)})
    assert r["counts"].tolist() == [1, 0, 2]
    idx = np.array([0, 9, 1])
    r = oracle.run(rmw_kernel(AtomicKind.add, i32), {"idx": idx, "v": np.ones(3, np.int32),
                                                     "dst": np.full(2, 5, np.int32)})
    assert r["old"].tolist() == [5, 0, 5] and r["dst"].tolist() == [6, 6]
    with pytest.raises(IntentError) as e:
        oracle.run(rmw_kernel(AtomicKind.add, i32, checks=True), {"idx": idx, "v": np.ones(3, np.int32),
                                                                  "dst": np.zeros(2, np.int32)})
    assert str(e.value) == "atomic_add out of range at kernel.py:12:5: index 9 on axis 0 of dst with extent 2"


def cas_kernel(dtype: DType):
    """old[n] = atomic_cas(dst, idx[n], expected[n], v[n])."""
    def body(b, p):
        def inst(b, n):
            idx, e, v = (b.add(Load, src=p[k], index=(n,)) for k in ("idx", "expected", "v"))
            b.make(Store, dst=p["old"], index=(n,), value=b.add(AtomicCAS, dst=p["dst"], indices=(idx,), expected=e,
                                                                value=v))
        parallel(b, [N], inst)

    return kernel({"idx": tensor(i64, "N"), "expected": tensor(dtype, "N"), "v": tensor(dtype, "N"),
                   "dst": inout(dtype, "B"), "old": out(dtype, "N")}, body, symbols=("N", "B"))


def test_cas_swaps_only_when_the_old_value_matches() -> None:
    # Every instance tries to claim slot idx (0 -> its id); the first per slot wins, in instance order.
    idx = np.array([0, 1, 0, 0, 1, 2])
    ids = np.arange(1, 7, dtype=np.int32)
    r = oracle.run(cas_kernel(i32), {"idx": idx, "expected": np.zeros(6, np.int32), "v": ids,
                                     "dst": np.zeros(3, np.int32)})
    assert r["dst"].tolist() == [1, 2, 6]
    assert r["old"].tolist() == [0, 0, 1, 1, 2, 0]
    # a chain: each instance expects what the previous one wrote
    chain = oracle.run(cas_kernel(i32), {"idx": np.zeros(4, np.int64), "expected": np.array([0, 1, 5, 2], np.int32),
                                         "v": np.array([1, 2, 3, 4], np.int32), "dst": np.zeros(1, np.int32)})
    assert chain["old"].tolist() == [0, 1, 2, 2] and chain["dst"].tolist() == [4]


def test_float_cas_compares_bits() -> None:
    r = oracle.run(cas_kernel(f32), {"idx": np.array([0, 1]), "expected": np.array([0.0, np.nan], np.float32),
                                     "v": np.array([1.0, 2.0], np.float32),
                                     "dst": np.array([-0.0, np.nan], np.float32)})
    assert r["dst"][0] == 0.0 and np.signbit(r["dst"][0])  # -0.0 is not the bits of 0.0: no swap
    assert r["dst"][1] == 2.0  # the same NaN bits: swapped


def test_atomic_with_tensor_indices_at_top_level() -> None:
    def body(b, p):
        x = load_all(b, p["x"])
        old = b.add(Atomic, kind=AtomicKind.add, dst=p["counts"], indices=(x,),
                    value=b.add(Binary, fn=BinaryFn.add, lhs=x, rhs=x))
        store_all(b, p["old"], old)

    k = kernel({"x": tensor(i32, "N"), "counts": inout(i32, 4), "old": out(i32, "N")}, body, symbols=("N",))
    r = oracle.run(k, {"x": np.array([1, 3, 1, 1], np.int32), "counts": np.zeros(4, np.int32)})
    assert r["counts"].tolist() == [0, 6, 0, 6]
    assert r["old"].tolist() == [0, 0, 2, 4]
