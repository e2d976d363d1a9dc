"""Softmax along rows: each row is one instance holding a max and a sum reduction."""
import torch

import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel(requires=[N <= 65536])
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for r in parallel(M):
        v = x[r, :]
        z = intent.exp(v - intent.max(v))
        out[r, :] = z / intent.sum(z)


def cases():
    gen = torch.Generator().manual_seed(102)
    for m, n in ((1, 1), (2, 19), (5, 700), (2, 5000)):
        x = 3 * torch.randn(m, n, generator=gen)
        yield softmax, {"x": x, "out": torch.empty(m, n)}, {"out": torch.softmax(x, 1)}
    special = torch.tensor([[float("-inf"), 2.0, 0.5], [1.0, float("nan"), -1.0]])
    yield softmax, {"x": special, "out": torch.empty(2, 3)}, {"out": torch.softmax(special, 1)}
