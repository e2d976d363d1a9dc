"""RMSNorm on bf16 data, computed in f32: `out = x * rsqrt(mean(x^2) + eps) * w`, rounded to bf16 once."""

import intent
from intent import Out, bf16, dims, f32, parallel

M, N = dims("M N")


@intent.kernel
def rmsnorm_bf16(x: bf16[M, N], w: bf16[N], eps: f32, out: Out[bf16[M, N]]):
    for i in parallel(M):
        row = x[i, :].to(f32)
        r = intent.rsqrt(intent.sum(row * row) / N + eps)
        out[i, :] = (row * r * w.to(f32)).to(bf16)
