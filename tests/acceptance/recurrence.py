"""A first-order linear recurrence: channels run in parallel, time is an ordered loop carrying one value."""
import torch

import intent
from intent import Out, dims, f32, parallel

C, T = dims("C T")


@intent.kernel
def linear_recurrence(a: f32[C, T], x: f32[C, T], h: Out[f32[C, T]]):
    for c in parallel(C):
        state = f32(0.0)
        for t in range(T):
            state = a[c, t] * state + x[c, t]
            h[c, t] = state


def _expected(a, x):
    h = torch.empty_like(x)
    state = torch.zeros(x.shape[0])
    for t in range(x.shape[1]):
        state = a[:, t] * state + x[:, t]
        h[:, t] = state
    return h


def cases():
    gen = torch.Generator().manual_seed(105)
    for c, t in ((1, 1), (3, 20), (33, 64)):
        a, x = torch.rand(c, t, generator=gen), torch.randn(c, t, generator=gen)
        yield linear_recurrence, {"a": a, "x": x, "h": torch.empty(c, t)}, {"h": _expected(a, x)}


TOL = dict(atol=1e-4, rtol=1e-4)
