"""Folds over data-dependent ranges: segment s spans offsets[s]:offsets[s + 1]; empty ones give the identity."""
import torch

import intent
from intent import Out, dims, f32, i64, parallel

S, E = dims("S E")


@intent.kernel
def segment_sum(values: f32[E], offsets: i64[S + 1], out: Out[f32[S]]):
    for s in parallel(S):
        out[s] = intent.sum(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def segment_max(values: f32[E], offsets: i64[S + 1], out: Out[f32[S]]):
    for s in parallel(S):
        out[s] = intent.max(values[offsets[s]:offsets[s + 1]])


def cases():
    gen = torch.Generator().manual_seed(104)
    for lengths in ([1], [0, 4, 2], [2, 0, 0], [600, 1, 0, 1100, 33], [3 * k for k in range(25)]):
        bounds = torch.tensor([0] + lengths, dtype=torch.int64).cumsum(0)
        total = max(int(bounds[-1]), 1)
        values = torch.randn(total, generator=gen)
        pieces = [values[bounds[k]:bounds[k + 1]] for k in range(len(lengths))]
        sums = torch.stack([p.sum() for p in pieces])
        maxes = torch.stack([p.max() if len(p) else torch.tensor(float("-inf")) for p in pieces])
        s = len(lengths)
        yield segment_sum, {"values": values, "offsets": bounds, "out": torch.empty(s)}, {"out": sums}
        yield segment_max, {"values": values, "offsets": bounds, "out": torch.empty(s)}, {"out": maxes}


TOL = dict(atol=1e-3, rtol=1e-4)
