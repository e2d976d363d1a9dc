"""The seven small kernels a newcomer writes from docs/ alone (examples/), each checked against torch on
shapes that include the edges: one element, lengths that are not powers of two, rows longer than a tile,
empty CSR rows."""

from __future__ import annotations

import math
import os

import pytest
import torch

import intent

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def example(name: str, kernel: str) -> intent.KernelObject:
    return intent.kernels_in_file(os.path.join(ROOT, "examples", f"{name}.py"))[kernel]


SHAPES = [(1, 1), (3, 17), (4, 300), (2, 5000)]


@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_bias_gelu(m: int, n: int) -> None:
    g = torch.Generator().manual_seed(m * n)
    x, bias = torch.randn(m, n, generator=g) * 3, torch.randn(n, generator=g)
    got = example("bias_gelu", "bias_gelu")(x, bias)
    torch.testing.assert_close(got, torch.nn.functional.gelu(x + bias), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_rmsnorm_bf16(m: int, n: int) -> None:
    g = torch.Generator().manual_seed(m + n)
    x = (torch.randn(m, n, generator=g) * 2).to(torch.bfloat16)
    w = torch.randn(n, generator=g).to(torch.bfloat16)
    got = example("rmsnorm_bf16", "rmsnorm_bf16")(x, w, 1e-6)
    assert got.dtype == torch.bfloat16
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6) * w.float()
    # one bf16 rounding of an f32 result whose sum order may differ: at most one bf16 ulp apart
    torch.testing.assert_close(got.float(), ref, rtol=2 ** -7, atol=1e-6)


@pytest.mark.parametrize(("rows", "cols", "density"), [(1, 1, 1.0), (7, 9, 0.3), (40, 130, 0.1), (5, 3, 0.0)])
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")
def test_csr_spmv(rows: int, cols: int, density: float) -> None:
    g = torch.Generator().manual_seed(rows * cols)
    dense = torch.randn(rows, cols, generator=g) * (torch.rand(rows, cols, generator=g) < density)
    if rows > 2:
        dense[rows // 2] = 0.0  # an empty row
    csr = dense.to_sparse_csr()
    x = torch.randn(cols, generator=g)
    y = example("csr_spmv", "csr_spmv")(csr.values(), csr.col_indices().to(torch.int32), csr.crow_indices(), x)
    torch.testing.assert_close(y, dense @ x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("m", "n"), [(1, 1), (3, 17), (64, 33), (130, 70)])
def test_transpose(m: int, n: int) -> None:
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(m))
    assert torch.equal(example("transpose", "transpose")(x), x.T)


@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_row_argmax(m: int, n: int) -> None:
    g = torch.Generator().manual_seed(n)
    x = torch.randint(-3, 3, (m, n), generator=g).float()  # ties: the first maximum wins
    if m > 1:
        x[1, n // 2] = math.nan  # NaN counts as the maximum
    assert torch.equal(example("row_argmax", "row_argmax")(x), x.argmax(1))


@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_logsumexp(m: int, n: int) -> None:
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(n)) * 30
    torch.testing.assert_close(example("logsumexp", "logsumexp")(x), torch.logsumexp(x, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_exclusive_prefix_sum(m: int, n: int) -> None:
    x = torch.randint(-100, 100, (m, n), generator=torch.Generator().manual_seed(m), dtype=torch.int32)
    want = (torch.cumsum(x, 1) - x).to(torch.int32)
    assert torch.equal(example("prefix_sum", "exclusive_prefix_sum")(x), want)
