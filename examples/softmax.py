"""Row softmax: the example kernel of the README (`kirc run examples/softmax.py --shape M=64 N=1000`)."""

import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel(requires=[N <= 65536])
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        out[i, :] = e / intent.sum(e)
