"""PTX quality for sm_90 (ahead of time, no GPU): 128-bit vector accesses on contiguous f32 rows, tensor-core
dots without spills for tiled contractions, and aggregated histograms that compile."""

from __future__ import annotations

import re

import torch

import intent
from bench.ptx import global_accesses, gpu_name_of, ptxas_info
from intent import InOut, Out, dims, f16, f32, i32, parallel

M, N, K, E, B = dims("M N K E B")


@intent.kernel(requires=[N <= 65536])
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        out[i, :] = e / intent.sum(e)


@intent.kernel
def add(x: f32[N], y: f32[N], out: Out[f32[N]]):
    out[:] = x + y


@intent.kernel
def matmul(a: f16[M, K], b: f16[K, N], c: Out[f32[M, N]]):
    c[:, :] = intent.dot(a, b)


@intent.kernel
def histogram(x: i32[E], counts: InOut[i32[B]]):
    for e in parallel(E):
        intent.atomic_add(counts, x[e], 1)


def test_vector_add_and_softmax_use_128_bit_global_accesses() -> None:
    x = torch.randn(1 << 16)
    ptx = add.ptx(arch=90, x=x, y=x.clone(), out=torch.empty_like(x))
    acc = global_accesses(ptx)
    assert acc.count("ld", 128) >= 2 and acc.count("st", 128) >= 1 and acc.count("ld", 32) == 0
    rows = torch.randn(16, 1024)
    ptx = softmax.ptx(arch=90, x=rows, out=torch.empty_like(rows))
    acc = global_accesses(ptx)
    assert acc.count("ld", 128) >= 1 and acc.count("st", 128) >= 1
    assert ptxas_info(ptx, gpu_name_of(ptx)).spill_stores == 0


def test_tiled_f16_matmul_uses_tensor_cores_without_spills() -> None:
    a, b = torch.randn(512, 256).half(), torch.randn(256, 384).half()
    ptx = matmul.ptx(arch=90, a=a, b=b, c=torch.empty(512, 384))
    assert re.search(r"\b(wgmma|mma)\.", ptx)
    info = ptxas_info(ptx, gpu_name_of(ptx))
    assert (info.spill_stores, info.spill_loads) == (0, 0)


def test_aggregated_histogram_compiles_with_atomics() -> None:
    x = torch.randint(0, 256, (1 << 16,), dtype=torch.int32)
    ptx = histogram.ptx(arch=90, x=x, counts=torch.zeros(256, dtype=torch.int32))
    assert global_accesses(ptx).atomics >= 2  # the per-bin path and the per-member fallback
