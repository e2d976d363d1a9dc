"""Random numbers in kernels: the oracle's Philox, per instance and over whole tensors, with per-instance seeds."""

import numpy as np
import pytest

import oracle
from kir import Iota, Load, Random, RngKind, Store, scalar
from kir.dims import DSym
from kir.dtypes import DType
from oracle.philox import philox_rand, philox_randint, philox_randn
from tests.oracle_kit import kernel, out, parallel, store_all, tensor

N = DSym("N")
REFERENCE = {RngKind.rand: philox_rand, RngKind.randn: philox_randn, RngKind.randint: philox_randint}
RESULT = {RngKind.rand: DType.f32, RngKind.randn: DType.f32, RngKind.randint: DType.u32}


@pytest.mark.parametrize("kind", list(RngKind))
def test_per_instance_and_whole_tensor_draws_agree_with_philox(kind: RngKind) -> None:
    def per_instance(b, p):
        parallel(b, [N], lambda b, n: b.make(Store, dst=p["out"], index=(n,),
                                                value=b.add(Random, kind=kind, seed=p["seed"], offset=n)))

    def whole(b, p):
        store_all(b, p["out"], b.add(Random, kind=kind, seed=p["seed"], offset=b.add(Iota, extent=N, dtype=DType.i32)))

    params = {"x": tensor(DType.f32, "N"), "seed": scalar(DType.i64), "out": out(RESULT[kind], "N")}
    seed = 2**40 + 3
    args = {"x": np.zeros(300, np.float32), "seed": seed}
    a = oracle.run(kernel(params, per_instance, symbols=("N",)), args)["out"]
    c = oracle.run(kernel(params, whole, symbols=("N",)), args)["out"]
    want = REFERENCE[kind](seed, np.arange(300, dtype=np.int64))
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(c, REFERENCE[kind](seed, np.arange(300, dtype=np.int32)))
    assert a.dtype == RESULT[kind].np


def test_instances_with_their_own_seeds() -> None:
    def body(b, p):
        def inst(b, n):
            s = b.add(Load, src=p["seeds"], index=(n,))
            b.make(Store, dst=p["out"], index=(n,), value=b.add(Random, kind=RngKind.randint, seed=s, offset=n))
        parallel(b, [N], inst)

    k = kernel({"seeds": tensor(DType.i64, "N"), "out": out(DType.u32, "N")}, body, symbols=("N",))
    seeds = np.array([7, -1, 7, 2**62, -1])
    got = oracle.run(k, {"seeds": seeds})["out"]
    want = [philox_randint(int(s), np.array([n], np.int64))[0] for n, s in enumerate(seeds)]
    np.testing.assert_array_equal(got, want)
