"""Elementwise sums: a whole-tensor store at the top level, and the same with an explicit parallel loop."""
import torch

import intent
from intent import Out, dims, f32, parallel

N = dims("N")


@intent.kernel
def add(x: f32[N], y: f32[N], out: Out[f32[N]]):
    out[:] = x + y


@intent.kernel
def axpy(a: f32, x: f32[N], y: f32[N], out: Out[f32[N]]):
    for k in parallel(N):
        out[k] = a * x[k] + y[k]


def cases():
    gen = torch.Generator().manual_seed(101)
    for n in (1, 5, 300, 2049):
        x, y = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
        yield add, {"x": x, "y": y, "out": torch.empty(n)}, {"out": x + y}
        yield axpy, {"a": -1.5, "x": x, "y": y, "out": torch.empty(n)}, {"out": -1.5 * x + y}
    strided = torch.randn(3 * 41, generator=gen)[::3]  # an input that is a non-contiguous view
    other = torch.randn(41, generator=gen)
    yield add, {"x": strided, "y": other, "out": torch.empty(41)}, {"out": strided + other}
