"""Matrix transpose: `out[j, i] = x[i, j]`, as a whole-tensor statement."""

import intent
from intent import Out, dims, f32

M, N = dims("M N")


@intent.kernel
def transpose(x: f32[M, N], out: Out[f32[N, M]]):
    out[:, :] = x.T
