"""RMSNorm forward and backward as Intent kernels, paired for autograd, and a `torch.nn.Module` using them.

    y = x * rstd * w,   rstd = 1 / sqrt(mean(x^2) + eps)   (per row)

The forward kernel also returns `rstd`, which the backward kernel reads instead of recomputing it;
`intent.autograd` returns only `y` to the caller and saves `x`, `w` and `rstd` for the backward.
"""

import torch

import intent
from intent import Out, dims, parallel

M, N = dims("M N")
T = intent.dtype_var("T", intent.f32, intent.f64)


@intent.kernel
def rmsnorm_fwd(x: T[M, N], w: T[N], eps: T, y: Out[T[M, N]], rstd: Out[T[M]]):
    for i in parallel(M):
        row = x[i, :]
        r = intent.rsqrt(intent.sum(row * row) / N + eps)
        y[i, :] = row * r * w
        rstd[i] = r


@intent.kernel
def rmsnorm_bwd(grad_y: T[M, N], x: T[M, N], w: T[N], rstd: T[M],
                grad_x: Out[T[M, N]], grad_w: Out[T[N]]):
    for i in parallel(M):
        row = x[i, :]
        g = grad_y[i, :] * w
        r = rstd[i]
        c = intent.sum(g * row) / N
        grad_x[i, :] = r * g - row * (r * r * r * c)
    for j in parallel(N):
        grad_w[j] = intent.sum(grad_y[:, j] * x[:, j] * rstd[:])


rmsnorm = intent.autograd(forward=rmsnorm_fwd, backward=rmsnorm_bwd, save=["x", "w", "rstd"], outputs=["y"])


class RMSNorm(torch.nn.Module):
    """`torch.nn.RMSNorm(dim, eps)` over the last axis, computed by the kernels above."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        return rmsnorm(rows, self.weight, self.eps).reshape(x.shape)
