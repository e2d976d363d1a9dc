"""One dtype-generic definition, specialised once per dtype it is called with."""
import torch

import intent
from intent import Out, dims, parallel

M, N = dims("M N")
T = intent.dtype_var("T", intent.f16, intent.bf16, intent.f32)


@intent.kernel
def scaled_row_max(x: T[M, N], out: Out[T[M]]):
    for r in parallel(M):
        out[r] = intent.max(x[r, :]) * 2


def cases():
    gen = torch.Generator().manual_seed(112)
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        x = torch.randn(6, 45, generator=gen).to(dt)
        yield scaled_row_max, {"x": x, "out": torch.empty(6, dtype=dt)}, {"out": x.amax(1) * 2}
