"""Cross entropy over class logits (per row, no reduction), forward and backward paired with `intent.autograd`.

    loss[i] = logsumexp(logits[i, :]) - logits[i, target[i]]
    grad_logits[i, j] = grad_loss[i] * (softmax(logits[i, :])[j] - (j == target[i]))

The forward also computes the log-sum-exp of each row, which the backward reads to rebuild the
softmax without a second max and sum; the call returns only `loss` (`.mean()` it for the usual
reduction). `target` is an integer input, so it has no gradient.
"""

import intent
from intent import Out, dims, i64, parallel

M, C = dims("M C")
T = intent.dtype_var("T", intent.f32, intent.f64)


@intent.kernel(requires=[C <= 65536])
def cross_entropy_fwd(logits: T[M, C], target: i64[M], loss: Out[T[M]], lse: Out[T[M]]):
    for i in parallel(M):
        row = logits[i, :]
        m = intent.max(row)
        s = m + intent.log(intent.sum(intent.exp(row - m)))
        loss[i] = s - logits[i, target[i]]
        lse[i] = s


@intent.kernel(requires=[C <= 65536])
def cross_entropy_bwd(grad_loss: T[M], logits: T[M, C], target: i64[M], lse: T[M], grad_logits: Out[T[M, C]]):
    for i in parallel(M):
        p = intent.exp(logits[i, :] - lse[i])
        hit = intent.arange(C) == target[i]
        grad_logits[i, :] = grad_loss[i] * (p - intent.where(hit, 1, 0))


cross_entropy = intent.autograd(forward=cross_entropy_fwd, backward=cross_entropy_bwd,
                                save=["logits", "target", "lse"], outputs=["loss"])
