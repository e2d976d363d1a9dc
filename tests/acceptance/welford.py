"""Mean and variance in one reduction: a custom combine over (mean, M2, count) with an identity."""
import torch

import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.combine
def merge_moments(left, right):
    mean_l, m2_l, n_l = left
    mean_r, m2_r, n_r = right
    n = n_l + n_r
    share = intent.where(n == 0.0, 0.0, n_r / intent.maximum(n, 1.0))
    step = mean_r - mean_l
    return mean_l + step * share, m2_l + m2_r + step * step * n_l * share, n


@intent.kernel
def welford(x: f32[M, N], mean: Out[f32[M]], var: Out[f32[M]]):
    for r in parallel(M):
        v = x[r, :]
        mu, m2, n = intent.reduce((v, intent.zeros_like(v), intent.ones_like(v)),
                                  merge_moments, identity=(0.0, 0.0, 0.0))
        mean[r] = mu
        var[r] = m2 / n


def cases():
    gen = torch.Generator().manual_seed(110)
    for m, n in ((1, 1), (3, 77), (4, 2500)):
        x = torch.randn(m, n, generator=gen) + 50.0
        yield (welford, {"x": x, "mean": torch.empty(m), "var": torch.empty(m)},
               {"mean": x.mean(1), "var": x.var(1, unbiased=False)})


TOL = dict(atol=1e-3, rtol=1e-3)
