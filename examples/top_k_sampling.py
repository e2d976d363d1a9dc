"""Top-k sampling of one token per row of logits: keep the 8 largest logits, softmax over them, and pick the first
candidate whose cumulative probability exceeds the row's uniform draw `u` (inverse-CDF sampling). The draws are
an input, so a run is reproducible; `intent.rand(seed, offset)` can make them in the kernel instead."""

import intent
from intent import Out, dims, f32, i64, parallel

B, V = dims("B V")
K = 8


@intent.kernel(requires=[V >= K])
def top_k_sample(logits: f32[B, V], u: f32[B], token: Out[i64[B]], prob: Out[f32[B]]):
    for b in parallel(B):
        top, idx = intent.topk(logits[b, :], K)                   # largest first, with their vocabulary ids
        p = intent.exp(top - top[0])
        cdf = intent.cumsum(p) / intent.sum(p)
        pick = intent.minimum(intent.sum((cdf <= u[b]).to(i64)), K - 1)
        chosen = intent.arange(K) == pick
        token[b] = intent.sum(intent.where(chosen, idx, 0))
        prob[b] = intent.sum(intent.where(chosen, p, 0.0)) / intent.sum(p)
