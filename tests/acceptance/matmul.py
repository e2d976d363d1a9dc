"""Contractions: the free axes are the workset, the contracted axis stays in an instance; f16 in, f32 out."""
import torch

import intent
from intent import Out, dims, f16, f32

M, N, K, B = dims("M N K B")


@intent.kernel
def matmul(a: f16[M, K], b: f16[K, N], c: Out[f32[M, N]]):
    c[:, :] = intent.dot(a, b)


@intent.kernel
def bmm(a: f32[B, M, K], b: f32[B, K, N], c: Out[f32[B, M, N]]):
    c[:, :, :] = intent.dot(a, b)


def cases():
    gen = torch.Generator().manual_seed(106)
    for m, n, k in ((1, 1, 1), (9, 21, 37), (64, 32, 96)):
        a = torch.randn(m, k, generator=gen).to(torch.float16)
        b = torch.randn(k, n, generator=gen).to(torch.float16)
        yield matmul, {"a": a, "b": b, "c": torch.empty(m, n)}, {"c": a.float() @ b.float()}
    a, b = torch.randn(2, 11, 30, generator=gen), torch.randn(2, 30, 13, generator=gen)
    yield bmm, {"a": a, "b": b, "c": torch.empty(2, 11, 13)}, {"c": torch.bmm(a, b)}


TOL = dict(atol=2e-2, rtol=2e-3)
