"""A differentiable row softmax: forward and backward kernels paired with `intent.autograd`.

    y = softmax(x) per row;   dx = y * (dy - sum(dy * y))   per row

The backward reads the forward's output `y`, not its input, so `y` is what is saved.
"""

import intent
from intent import Out, dims, parallel

M, N = dims("M N")
T = intent.dtype_var("T", intent.f32, intent.f64)


@intent.kernel(requires=[N <= 65536])
def softmax_fwd(x: T[M, N], y: Out[T[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        y[i, :] = e / intent.sum(e)


@intent.kernel(requires=[N <= 65536])
def softmax_bwd(grad_y: T[M, N], y: T[M, N], grad_x: Out[T[M, N]]):
    for i in parallel(M):
        yr = y[i, :]
        g = grad_y[i, :]
        grad_x[i, :] = yr * (g - intent.sum(g * yr))


softmax = intent.autograd(forward=softmax_fwd, backward=softmax_bwd, save=["y"])
