"""Prefix sums along rows: the scanned axis stays inside an instance, rows are the workset."""
import torch

import intent
from intent import Out, dims, f32, i32, parallel

M, N = dims("M N")


@intent.kernel
def cumsum_rows(x: f32[M, N], out: Out[f32[M, N]]):
    for r in parallel(M):
        out[r, :] = intent.cumsum(x[r, :])


@intent.kernel
def reverse_exclusive_cumsum(x: i32[M, N], out: Out[i32[M, N]]):
    for r in parallel(M):
        out[r, :] = intent.cumsum(x[r, :], reverse=True, exclusive=True)


def cases():
    gen = torch.Generator().manual_seed(108)
    for m, n in ((1, 1), (2, 90), (4, 1100)):
        x = torch.randn(m, n, generator=gen)
        yield cumsum_rows, {"x": x, "out": torch.empty(m, n)}, {"out": x.cumsum(1)}
        xi = torch.randint(-20, 20, (m, n), generator=gen, dtype=torch.int32)
        suffix = xi.flip(1).cumsum(1).flip(1) - xi  # the sum of the elements after each one
        yield (reverse_exclusive_cumsum, {"x": xi, "out": torch.empty(m, n, dtype=torch.int32)},
               {"out": suffix.to(torch.int32)})


TOL = dict(atol=1e-3, rtol=1e-4)
