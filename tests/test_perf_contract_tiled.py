"""Tiled contractions: BLOCK_M x BLOCK_N tiles of the free axes, a K loop of tl.dot, f32 accumulation.

Results are compared with torch (f16 inputs: exact f32 products, so only the summation order
differs); the source and the physical program are checked for the tiled form.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import intent
import physical
from intent import Out, bf16, dims, f16, f32, i8, i32, parallel
from physical import ops as P
from physical.passes import TileContraction
from physical.passes.tile_contract import NotTileable, match
from physical.verifier import check

M, N, K, B = dims("M N K B")


@intent.kernel
def matmul16(a: f16[M, K], b: f16[K, N], c: Out[f32[M, N]]):
    c[:, :] = intent.dot(a, b)


@intent.kernel
def matmul32(a: f32[M, K], b: f32[K, N], c: Out[f32[M, N]]):
    c[:, :] = intent.dot(a, b)


@intent.kernel
def matmul_tf32(a: f32[M, K], b: f32[K, N], c: Out[f32[M, N]]):
    c[:, :] = intent.dot(a, b, precision="tf32")


@intent.kernel
def bmm(a: f32[B, M, K], b: f32[B, K, N], c: Out[f32[B, M, N]]):
    c[:, :, :] = intent.dot(a, b)


@intent.kernel
def scaled_bias(a: f16[M, K], b: f16[K, N], bias: f32[N], c: Out[f32[M, N]]):
    c[:, :] = intent.dot(intent.exp(a.to(f32)), b.to(f32)) * 0.5 + bias


@intent.kernel
def rowwise(a: f32[B, M, K], b: f32[B, K, N], c: Out[f32[B, M, N]]):
    for i in parallel(B):
        c[i, :, :] = intent.dot(a[i, :, :], b[i, :, :])


def _close(got: torch.Tensor, want: torch.Tensor, tol: float) -> None:
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)


@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (17, 33, 65), (128, 64, 256)])
def test_f16_matmul_matches_torch(m: int, n: int, k: int) -> None:
    g = torch.Generator().manual_seed(m + n + k)
    a, b = torch.randn(m, k, generator=g).half(), torch.randn(k, n, generator=g).half()
    c = torch.full((m, n), float("nan"))
    matmul16(a, b, c)
    _close(c, a.float() @ b.float(), 2e-3)


@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (17, 33, 65), (128, 64, 256)])
def test_f32_matmul_matches_torch(m: int, n: int, k: int) -> None:
    g = torch.Generator().manual_seed(m * n + k)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    c = torch.full((m, n), float("nan"))
    matmul32(a, b, c)
    _close(c, (a.double() @ b.double()).float(), 1e-4)


def test_batched_matmul_matches_torch() -> None:
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(3, 20, 40, generator=g), torch.randn(3, 40, 70, generator=g)
    c = torch.full((3, 20, 70), float("nan"))
    bmm(a, b, c)
    _close(c, a @ b, 1e-4)


def test_tf32_request_runs_and_is_recorded_in_the_source() -> None:
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(33, 40, generator=g), torch.randn(40, 17, generator=g)
    c = torch.empty(33, 17)
    matmul_tf32(a, b, c)
    _close(c, a @ b, 1e-2)  # tf32 keeps 10 mantissa bits on a GPU
    src = matmul_tf32.triton_source(a=a, b=b, c=c)
    assert 'input_precision="tf32"' in src and 'input_precision="ieee"' not in src


def test_source_is_a_k_loop_of_tl_dot_with_ieee_f32() -> None:
    a, b, c = torch.empty(64, 32), torch.empty(32, 16), torch.empty(64, 16)
    src = matmul32.triton_source(a=a, b=b, c=c)
    assert src.count("tl.dot(") == 1 and 'input_precision="ieee"' in src
    assert "for k0 in range(" in src and "BLOCK_TK0" in src
    assert "band_rows = tl.minimum(" in src  # grouped ordering of the program ids


def test_f16_source_uses_tensor_core_dot_without_a_precision() -> None:
    a, b, c = torch.empty(64, 32).half(), torch.empty(32, 16).half(), torch.empty(64, 16)
    src = matmul16.triton_source(a=a, b=b, c=c)
    assert src.count("tl.dot(") == 1 and "input_precision" not in src


def test_epilogue_and_non_zero_preserving_operands() -> None:
    # exp(0) = 1 at padded K positions: the operand must be zeroed past K, not just the loads
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(9, 45, generator=g).half(), torch.randn(45, 70, generator=g).half()
    bias = torch.randn(70, generator=g)
    c = torch.empty(9, 70)
    scaled_bias(a, b, bias, c)
    _close(c, (a.float().exp() @ b.float()) * 0.5 + bias, 1e-3)
    assert "tl.dot(" in scaled_bias.triton_source(a=a, b=b, bias=bias, c=c)


def test_program_owns_tiles_and_verifies() -> None:
    kernel = bmm.kir
    program = physical.lower(kernel, verify=True)
    assert check(program, kernel) == []
    (g,) = program.groups
    assert g.tiles == ("BLOCK_TM0", "BLOCK_TN0")
    assert [op.NAME for op in g.body.ops if isinstance(op, P.OwnedTile | P.For)] == ["owned_tile", "for"]
    (loop,) = [op for op in g.body.ops if isinstance(op, P.For)]
    assert [op.NAME for op in loop.body.ops if isinstance(op, P.MatMul)] == ["matmul"]
    consts = dict(program.constexprs)
    env = {"B": 3, "M": 100, "K": 7, "N": 65}
    for name, e in program.constexprs:
        env[name] = e.evaluate(env)
    assert (env["BLOCK_TM0"], env["BLOCK_TN0"], env["BLOCK_TK0"]) == (64, 64, 32)
    assert program.grid.evaluate(env) == 3 * 2 * 2
    assert program.num_warps.evaluate(env) == 4 and consts["BLOCK_I0"].evaluate(env) == 1


def test_f16_tiles_are_larger_and_use_eight_warps() -> None:
    program = physical.lower(matmul16.kir, verify=True)
    env = {"M": 1000, "K": 64, "N": 300}
    for name, e in program.constexprs:
        env[name] = e.evaluate(env)
    assert (env["BLOCK_TM0"], env["BLOCK_TN0"], env["BLOCK_TK0"]) == (128, 128, 32)
    assert program.grid.evaluate(env) == 8 * 3 and program.num_warps.evaluate(env) == 8


def test_contraction_inside_a_parallel_keeps_the_per_instance_form() -> None:
    program = physical.lower(rowwise.kir, verify=True)
    assert not program.groups[0].tiles
    assert TileContraction().legal(physical.construct(rowwise.kir)).startswith("group 0: ")
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(2, 5, 6, generator=g), torch.randn(2, 6, 3, generator=g)
    c = torch.empty(2, 5, 3)
    rowwise(a, b, c)
    _close(c, a @ b, 1e-5)


def test_match_reasons() -> None:
    program = physical.construct(matmul32.kir)
    g = program.groups[0]
    match(g)  # tileable
    with pytest.raises(NotTileable, match="^the group holds control flow$"):
        loop = P.For(start=g.body.ops[0].results[0], stop=g.body.ops[0].results[0], step=g.body.ops[0].results[0],
                     inits=(), body=physical.model.PRegion((), ()))
        match(dataclasses.replace(g, body=physical.model.PRegion((), (*g.body.ops, loop))))
    with pytest.raises(NotTileable, match="^the group does not map two or more free axes to instances$"):
        match(dataclasses.replace(g, domain=g.domain[:1]))


@intent.kernel
def matmul8(a: i8[M, K], b: i8[K, N], c: Out[i32[M, N]]):
    c[:, :] = intent.dot(a, b)


@intent.kernel
def matmul_bf16(a: bf16[M, K], b: bf16[K, N], c: Out[f32[M, N]]):
    c[:, :] = intent.dot(a, b)


@intent.kernel
def transposed(a: f32[K, M], b: f32[N, K], c: Out[f16[M, N]]):
    c[:, :] = intent.dot(a.T, b.T).to(f16)


def test_i8_matmul_accumulates_exactly_in_i32() -> None:
    g = torch.Generator().manual_seed(7)
    a = torch.randint(-128, 128, (37, 70), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (70, 19), generator=g, dtype=torch.int8)
    c = torch.empty(37, 19, dtype=torch.int32)
    matmul8(a, b, c)
    assert torch.equal(c, a.int() @ b.int())
    assert "tl.dot(" in matmul8.triton_source(a=a, b=b, c=c)


def test_bf16_matmul_multiplies_exactly() -> None:
    g = torch.Generator().manual_seed(8)
    a, b = torch.randn(37, 70, generator=g).bfloat16(), torch.randn(70, 19, generator=g).bfloat16()
    c = torch.empty(37, 19)
    matmul_bf16(a, b, c)
    _close(c, a.float() @ b.float(), 1e-4)


def test_transposed_operands_and_a_narrowing_epilogue() -> None:
    g = torch.Generator().manual_seed(9)
    a, b = torch.randn(70, 37, generator=g), torch.randn(19, 70, generator=g)
    c = torch.empty(37, 19, dtype=torch.float16)
    transposed(a, b, c)
    _close(c.float(), (a.T @ b.T).half().float(), 1e-3)
    assert "tl.dot(" in transposed.triton_source(a=a, b=b, c=c)


def test_grouped_ordering_covers_every_tile() -> None:
    # 10 x 3 tiles of 64 x 64: two bands of GROUP_M = 8 tile rows, the second one short
    g = torch.Generator().manual_seed(10)
    a, b = torch.randn(600, 3, generator=g), torch.randn(3, 130, generator=g)
    c = torch.full((600, 130), float("nan"))
    matmul32(a, b, c)
    _close(c, a @ b, 1e-5)


@intent.kernel
def two_products(a: f16[M, K], b: f16[K, N], x: i8[M, K], y: i8[K, N], c: Out[f32[M, N]], d: Out[i32[M, N]]):
    c[:, :] = intent.dot(a, b)
    d[:, :] = intent.dot(x, y)


def test_two_contractions_are_tiled_each_in_its_own_group():
    g = torch.Generator().manual_seed(4)
    m, n, k = 33, 17, 40
    a, b = torch.randn(m, k, generator=g).half(), torch.randn(k, n, generator=g).half()
    x = torch.randint(-8, 8, (m, k), generator=g, dtype=torch.int8)
    y = torch.randint(-8, 8, (k, n), generator=g, dtype=torch.int8)
    c, d = torch.empty(m, n), torch.empty(m, n, dtype=torch.int32)
    program = physical.lower(two_products.specialize({"a": a, "b": b, "x": x, "y": y, "c": c, "d": d}), verify=True)
    assert [bool(grp.tiles) for grp in program.groups] == [True, True]
    two_products(a=a, b=b, x=x, y=y, c=c, d=d)
    _close(c, a.float() @ b.float(), 1e-3)
    assert torch.equal(d, (x.int() @ y.int()))
