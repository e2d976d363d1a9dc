"""Bias + GELU (the exact, erf form): `out = gelu(x + bias)`, the bias broadcast over rows."""

import intent
from intent import Out, dims, f32

M, N = dims("M N")


@intent.func
def gelu(v):
    return 0.5 * v * (1.0 + intent.erf(v * 0.7071067811865476))


@intent.kernel
def bias_gelu(x: f32[M, N], bias: f32[N], out: Out[f32[M, N]]):
    out[:, :] = gelu(x + bias)
