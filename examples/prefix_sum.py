"""Exclusive prefix sum of each row: `out[i, j] = x[i, 0] + ... + x[i, j - 1]` (0 for j = 0)."""

import intent
from intent import Out, dims, i32, parallel

M, N = dims("M N")


@intent.kernel
def exclusive_prefix_sum(x: i32[M, N], out: Out[i32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.cumsum(x[i, :], exclusive=True)
