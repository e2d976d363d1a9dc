"""Index of the first maximum of each row (i64; NaN counts as the maximum, as in torch)."""

import intent
from intent import Out, dims, f32, i64, parallel

M, N = dims("M N")


@intent.kernel
def row_argmax(x: f32[M, N], out: Out[i64[M]]):
    for i in parallel(M):
        out[i] = intent.argmax(x[i, :])
