"""W4A16: f16 activations times i4 weights with per-group scales, dequantised inside the matmul.

The weights `w: i4[K, N]` come packed two per byte in an int8/uint8 tensor of shape [K, N // 2] (element
2j of a row in the low nibble of byte j, 2j + 1 in the high nibble: `kir.dtypes.I4_PACKING`), with one f16
scale per group of K // KG rows and column (`scales: f16[KG, N]`, symmetric quantisation). Each weight is
dequantised to f16 (`w * scale`, exact in f32 and rounded once to f16) and the product accumulates in f32.
"""

import intent
from intent import Out, dims, f16, f32, i4, parallel

M, N, K, KG = dims("M N K KG")


@intent.kernel(requires=[K % KG == 0, N % 2 == 0])
def w4a16_matmul(x: f16[M, K], w: i4[K, N], scales: f16[KG, N], out: Out[f16[M, N]]):
    for i in parallel(M):
        acc = intent.zeros((N,), f32)
        for k in range(K):
            wk = w[k, :].to(f16) * scales[k // (K // KG), :]
            acc[:] = acc[:] + x[i, k].to(f32) * wk.to(f32)
        out[i, :] = acc[:].to(f16)
