"""fp8 quantisation: per-tensor and per-row scales, dequantisation, and a scaled fp8 matmul.

`quantize_rows` stores each row of `x` as f8e4m3 with its own scale (amax / 448, the largest f8e4m3), as
fp8 training recipes do; `quantize_tensor` uses one scale for the whole tensor; `scaled_mm` multiplies two
fp8 operands on tensor cores (on a GPU) with f32 accumulation and applies both scales.
"""

import intent
from intent import Out, dims, f8e4m3, f32, parallel

M, N, K = dims("M N K")

F8_MAX = 448.0


@intent.kernel
def quantize_rows(x: f32[M, K], q: Out[f8e4m3[M, K]], scale: Out[f32[M]]):
    for i in parallel(M):
        row = x[i, :]
        s = intent.maximum(intent.max(intent.abs(row)), 1e-12) / F8_MAX
        scale[i] = s
        q[i, :] = (row / s).to(f8e4m3)  # torch's conversion: saturating


@intent.kernel
def quantize_tensor(x: f32[M, K], amax: f32[()], q: Out[f8e4m3[M, K]]):
    for i in parallel(M):
        q[i, :] = (x[i, :] * (F8_MAX / intent.maximum(amax[()], 1e-12))).to(f8e4m3)


@intent.kernel
def dequantize_rows(q: f8e4m3[M, K], scale: f32[M], out: Out[f32[M, K]]):
    for i in parallel(M):
        out[i, :] = q[i, :].to(f32) * scale[i]


@intent.kernel
def scaled_mm(a: f8e4m3[M, K], b: f8e4m3[K, N], sa: f32[M], sb: f32[N], out: Out[f32[M, N]]):
    out[:, :] = intent.dot(a, b, acc=f32) * intent.expand_dims(sa, 1) * intent.expand_dims(sb, 0)
