"""Local buffers: initialisation modes, instance-private buffers, and reads before the first write."""

import numpy as np
import pytest

import oracle
from kir import Alloc, Binary, BinaryFn, Gather, InitMode, Load, ReduceKind, RegionFold, Slice, Store
from kir.core import DynSlice
from kir.dims import DConst, DSym
from kir.dtypes import DType
from kir.errors import IntentError, Loc
from tests.oracle_kit import LOC, const, for_loop, kernel, load_all, out, parallel, row, store_row, tensor

f32, bf16, i64 = DType.f32, DType.bf16, DType.i64
M, N = DSym("M"), DSym("N")
ALLOC_LOC = Loc("kernel.py", 3, 9)


def test_zeros_and_full_buffers_inside_instances() -> None:
    def body(b, p):
        def inst(b, i):
            acc = b.add(Alloc, dtype=f32, shape=(N,), init=InitMode.full, fill=0.5)
            zeros = b.add(Alloc, dtype=bf16, shape=(N,), init=InitMode.full, fill=0.1)
            x = row(b, p["x"], i)
            b.make(Store, dst=acc, index=(Slice(DConst(0), N),), value=b.add(Binary, fn=BinaryFn.add, lhs=x,
                                                                             rhs=load_all(b, acc)))
            store_row(b, p["out"], i, load_all(b, acc))
            store_row(b, p["fill"], i, load_all(b, zeros))
        parallel(b, [M], inst)

    k = kernel({"x": tensor(f32, "M", "N"), "out": out(f32, "M", "N"), "fill": out(bf16, "M", "N")}, body,
               symbols=("M", "N"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = oracle.run(k, {"x": x})
    np.testing.assert_array_equal(r["out"], x + 0.5)
    np.testing.assert_array_equal(r["fill"], np.full((2, 3), oracle.numerics.round_bf16(np.float32(0.1))))


def test_buffers_are_private_to_each_instance_and_each_allocation() -> None:
    # Each instance accumulates into its own buffer over an ordered loop; a buffer allocated in the loop
    # body is fresh every iteration.
    def body(b, p):
        def inst(b, i):
            buf = b.add(Alloc, dtype=i64, shape=(DConst(1),), init=InitMode.full, fill=0)
            zero = const(b, 0, i64)

            def step(b, t, carry):
                tmp = b.add(Alloc, dtype=i64, shape=(DConst(1),), init=InitMode.full, fill=0)
                cur = b.add(Load, src=tmp, index=(zero,))
                b.make(Store, dst=tmp, index=(zero,), value=b.add(Binary, fn=BinaryFn.add, lhs=cur, rhs=t))
                old = b.add(Load, src=buf, index=(zero,))
                b.make(Store, dst=buf, index=(zero,), value=b.add(Binary, fn=BinaryFn.add, lhs=old, rhs=i))
                return (b.add(Binary, fn=BinaryFn.add, lhs=carry, rhs=b.add(Load, src=tmp, index=(zero,))),)

            (tsum,) = for_loop(b, zero, const(b, 4, i64), const(b, 1, i64), [zero], step)
            b.make(Store, dst=p["per"], index=(i,), value=b.add(Load, src=buf, index=(zero,)))
            b.make(Store, dst=p["tsum"], index=(i,), value=tsum)
        parallel(b, [M], inst)

    k = kernel({"x": tensor(f32, "M"), "per": out(i64, "M"), "tsum": out(i64, "M")}, body, symbols=("M",))
    r = oracle.run(k, {"x": np.zeros(3, np.float32)})
    assert r["per"].tolist() == [0, 4, 8]
    assert r["tsum"].tolist() == [6, 6, 6]


def test_a_top_level_buffer_is_shared_by_all_instances() -> None:
    def body(b, p):
        buf = b.add(Alloc, dtype=f32, shape=(DConst(4),), init=InitMode.full, fill=0.0)

        def write(b, n):
            b.make(Store, dst=buf, index=(n,), value=b.add(Load, src=p["x"], index=(n,)))
        parallel(b, [4], write)

        def read(b, n):
            rev = b.add(Binary, fn=BinaryFn.sub, lhs=const(b, 3, i64), rhs=n)
            b.make(Store, dst=p["out"], index=(n,), value=b.add(Load, src=buf, index=(rev,)))
        parallel(b, [4], read)

    k = kernel({"x": tensor(f32, 4), "out": out(f32, 4)}, body)
    assert oracle.run(k, {"x": np.arange(4, dtype=np.float32)})["out"].tolist() == [3.0, 2.0, 1.0, 0.0]


def empty_buffer_kernel(read: str):
    def body(b, p):
        def inst(b, i):
            buf = b.add(Alloc, dtype=f32, shape=(N,), init=InitMode.empty, loc=ALLOC_LOC)
            b.make(Store, dst=buf, index=(const(b, 0, i64),), value=const(b, 1.0, f32))  # only element 0 is written
            if read == "load":
                v = b.add(Load, src=buf, index=(Slice(DConst(0), N),), loc=LOC)
                store_row(b, p["out"], i, v)
            elif read == "gather":
                idx = b.add(Load, src=p["idx"], index=(i,))
                g = b.add(Gather, src=buf, indices=(idx,), loc=LOC)
                b.make(Store, dst=p["out"], index=(i, const(b, 0, i64)), value=g)
            else:
                s = b.add(RegionFold, src=buf, index=(DynSlice(const(b, 0, i64), b.add(Load, src=p["idx"],
                                                                                       index=(i,))),),
                          kind=ReduceKind.sum, loc=LOC)
                b.make(Store, dst=p["out"], index=(i, const(b, 0, i64)), value=s)
        parallel(b, [M], inst)

    return kernel({"idx": tensor(i64, "M"), "out": out(f32, "M", "N")}, body, symbols=("M", "N"))


@pytest.mark.parametrize("read", ["load", "gather", "fold"])
def test_reading_an_empty_buffer_before_writing_it_is_an_error(read: str) -> None:
    k = empty_buffer_kernel(read)
    args = {"idx": np.array([0, 0]), "out": np.zeros((2, 3), np.float32)}
    if read != "load":  # reading only the written element is fine
        oracle.run(k, dict(args, idx=np.array([0, 1]) if read == "fold" else args["idx"]))
    with pytest.raises(IntentError) as e:
        oracle.run(k, dict(args, idx=np.array([0, 2])))
    op = {"load": "load", "gather": "gather", "fold": "region_fold"}[read]
    assert str(e.value) == f"read of uninitialised memory at kernel.py:12:5: {op} reads elements of the buffer " \
                           f"allocated at kernel.py:3:9 (allocated `empty`) before they are written"


def test_an_out_of_range_gather_from_an_empty_buffer_reads_the_fill_without_error() -> None:
    k = empty_buffer_kernel("gather")
    got = oracle.run(k, {"idx": np.array([0, 7]), "out": np.zeros((2, 3), np.float32)})["out"]
    assert got[:, 0].tolist() == [1.0, 0.0]
