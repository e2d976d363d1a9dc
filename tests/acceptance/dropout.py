"""Dropout from counter-based random numbers: bit-exact with Triton's tl.rand for a seed and offsets."""
import numpy as np
import torch

import intent
from intent import Out, dims, f32, i64, parallel
from oracle.philox import philox_rand

N = dims("N")


@intent.kernel
def dropout(x: f32[N], p: f32, seed: i64, out: Out[f32[N]]):
    for k in parallel(N):
        keep = intent.rand(seed, k) >= p
        out[k] = intent.where(keep, x[k] / (1.0 - p), 0.0)


def _uniforms(n, seed):
    """The uniforms tl.rand(seed, 0..n-1) gives: oracle.philox, which tests/test_philox.py checks bit for bit
    against Triton's own tl.rand in a process of its own."""
    return torch.from_numpy(philox_rand(seed, np.arange(n, dtype=np.int64)))


def cases():
    gen = torch.Generator().manual_seed(109)
    for n, p, seed in ((1, 0.5, 7), (333, 0.25, 12345), (1030, 0.75, 2**41 + 9)):
        x = torch.randn(n, generator=gen)
        keep = _uniforms(n, seed) >= torch.tensor(p, dtype=torch.float32)
        want = torch.where(keep, x / (1.0 - torch.tensor(p, dtype=torch.float32)), torch.zeros(()))
        yield dropout, {"x": x, "p": p, "seed": seed, "out": torch.empty(n)}, {"out": want}
