"""Sparsemax (Martins & Astudillo, 2016) of each row: the Euclidean projection onto the probability simplex,
out = max(z - tau, 0) with tau chosen so that the row sums to 1. tau comes from the row sorted in descending
order: the support is the k largest values with 1 + k * z_(k) > z_(1) + ... + z_(k), and
tau = (z_(1) + ... + z_(k) - 1) / k. Many entries are exactly 0, unlike softmax."""

import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel
def sparsemax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        z = x[i, :]
        desc = intent.sort(z, descending=True)
        running = intent.cumsum(desc)
        rank = intent.arange(1, N + 1, dtype=f32)
        support = 1.0 + rank * desc > running                       # a prefix of the sorted row
        k = intent.sum(support.to(f32))
        tau = (intent.sum(intent.where(support, desc, 0.0)) - 1.0) / k
        out[i, :] = intent.maximum(z - tau, 0.0)
