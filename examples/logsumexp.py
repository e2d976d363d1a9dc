"""Row log-sum-exp, shifted by the row maximum so that exp never overflows."""

import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel
def logsumexp(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        row = x[i, :]
        m = intent.max(row)
        out[i] = m + intent.log(intent.sum(intent.exp(row - m)))
