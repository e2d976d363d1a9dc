"""Contractions: matmul and batched matmul against torch, f16 accumulation, tf32 rounding, integer wrap,
and a dot inside each instance."""

import numpy as np
import torch

import oracle
from kir import Dot, Precision
from kir.dims import DSym
from kir.dtypes import DType
from oracle.contract import round_tf32
from tests.oracle_kit import kernel, load_all, out, parallel, row, store_all, store_row, tensor

f16, bf16, f32, i8, i32 = DType.f16, DType.bf16, DType.f32, DType.i8, DType.i32


def dot_kernel(dtype: DType, acc: DType, a_shape, b_shape, c_shape, batch=((), ()), contract=((1,), (0,)),
               precision=Precision.ieee):
    def body(b, p):
        c = b.add(Dot, lhs=load_all(b, p["a"]), rhs=load_all(b, p["b"]), lhs_batch=batch[0], rhs_batch=batch[1],
                  lhs_contract=contract[0], rhs_contract=contract[1], acc_dtype=acc, precision=precision)
        store_all(b, p["c"], c)

    return kernel({"a": tensor(dtype, *a_shape), "b": tensor(dtype, *b_shape), "c": out(acc, *c_shape)}, body,
                  symbols=sorted({d for d in (*a_shape, *b_shape) if isinstance(d, str)}))


def test_f16_matmul_accumulates_in_f32() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((17, 65)).astype(np.float16)
    b = rng.standard_normal((65, 33)).astype(np.float16)
    got = oracle.run(dot_kernel(f16, f32, ("M", "K"), ("K", "N"), ("M", "N")), {"a": a, "b": b})["c"]
    want = torch.from_numpy(a).float() @ torch.from_numpy(b).float()
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_batched_matmul_and_transposed_contraction() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 5, 7)).astype(np.float32)
    b = rng.standard_normal((3, 4, 7)).astype(np.float32)
    k = dot_kernel(f32, f32, ("B", "M", "K"), ("B", "N", "K"), ("B", "M", "N"), batch=((0,), (0,)),
                   contract=((2,), (2,)))
    got = oracle.run(k, {"a": a, "b": b})["c"]
    np.testing.assert_allclose(got, np.einsum("bmk,bnk->bmn", a, b), rtol=1e-5, atol=1e-6)


def test_tf32_precision_rounds_the_operands() -> None:
    a = np.array([[1.0 + 2.0**-12, 1.0]], np.float32)
    b = np.array([[1.0], [2.0**-12]], np.float32)
    ieee = oracle.run(dot_kernel(f32, f32, (1, 2), (2, 1), (1, 1)), {"a": a, "b": b})["c"]
    tf32 = oracle.run(dot_kernel(f32, f32, (1, 2), (2, 1), (1, 1), precision=Precision.tf32), {"a": a, "b": b})["c"]
    assert ieee[0, 0] == np.float32(1.0 + 2.0**-12 + 2.0**-12)
    assert tf32[0, 0] == np.float32(1.0 + 2.0**-12)  # 1 + 2**-12 has no tf32 form: it rounds to 1
    ties = round_tf32(np.array([1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11], np.float32))
    assert ties.tolist() == [1.0, 1.0 + 2.0**-9]  # ties to even


def test_int8_dot_wraps_in_the_i32_accumulator() -> None:
    a = np.full((1, 70000), 127, np.int8)
    b = np.full((70000, 1), 127, np.int8)
    got = oracle.run(dot_kernel(i8, i32, (1, "K"), ("K", 1), (1, 1)), {"a": a, "b": b})["c"]
    assert got[0, 0] == np.array(127 * 127 * 70000 % 2**32, np.uint32).view(np.int32)


def test_vector_matrix_dot_in_each_instance() -> None:
    def body(b, p):
        def inst(b, i):
            c = b.add(Dot, lhs=row(b, p["a"], i), rhs=load_all(b, p["w"]), lhs_batch=(), rhs_batch=(),
                      lhs_contract=(0,), rhs_contract=(0,), acc_dtype=f32)
            store_row(b, p["c"], i, c)
        parallel(b, [DSym("M")], inst)

    k = kernel({"a": tensor(bf16, "M", "K"), "w": tensor(bf16, "K", "N"), "c": out(f32, "M", "N")}, body,
               symbols=("M", "K", "N"))
    rng = np.random.default_rng(2)
    a = oracle.numerics.round_bf16(rng.standard_normal((4, 9)).astype(np.float32))
    w = oracle.numerics.round_bf16(rng.standard_normal((9, 5)).astype(np.float32))
    got = oracle.run(k, {"a": torch.from_numpy(a).bfloat16(), "w": torch.from_numpy(w).bfloat16()})["c"]
    np.testing.assert_allclose(got, a @ w, rtol=1e-5, atol=1e-5)
