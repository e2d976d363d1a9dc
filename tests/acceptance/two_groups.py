"""Two parallel loops over different domains: one launch, two program-space segments."""
import torch

import intent
from intent import Out, dims, f32, parallel

M, N, P = dims("M N P")


@intent.kernel
def row_sums_and_scale(x: f32[M, N], v: f32[P], s: f32,
                       sums: Out[f32[M]], scaled: Out[f32[P]]):
    for r in parallel(M):
        sums[r] = intent.sum(x[r, :])
    for q in parallel(P):
        scaled[q] = v[q] * s


def cases():
    gen = torch.Generator().manual_seed(111)
    for m, n, p in ((1, 1, 1), (6, 200, 900), (40, 3, 2)):
        x, v = torch.randn(m, n, generator=gen), torch.randn(p, generator=gen)
        args = {"x": x, "v": v, "s": -2.0, "sums": torch.empty(m), "scaled": torch.empty(p)}
        yield row_sums_and_scale, args, {"sums": x.sum(1), "scaled": v * -2.0}


TOL = dict(atol=1e-4, rtol=1e-4)
