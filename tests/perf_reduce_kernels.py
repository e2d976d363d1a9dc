"""Kernels for the reduction/scan performance tests: combines that do not commute, tuple combines, scans in
both directions, region folds and scans, and the acceptance row kernels, written as authors write them."""

from __future__ import annotations

import intent
from intent import Out, dims, f32, i32, i64, parallel

M, N, K, S, E = dims("M N K S E")


@intent.combine
def first_nonzero(a, b):
    return intent.where(a != 0, a, b)


@intent.combine
def last_nonzero(a, b):
    return intent.where(b != 0, b, a)


@intent.combine
def affine(a, b):
    """x -> a0 * x + a1 then b: associative, not commutative (exact on wrapping integers)."""
    a0, a1 = a
    b0, b1 = b
    return a0 * b0, a1 * b0 + b1


@intent.combine
def welford_combine(a, b):
    mean_a, m2_a, n_a = a
    mean_b, m2_b, n_b = b
    n = n_a + n_b
    frac = intent.where(n == 0.0, 0.0, n_b / intent.maximum(n, 1.0))
    delta = mean_b - mean_a
    return mean_a + delta * frac, m2_a + m2_b + delta * delta * n_a * frac, n


@intent.kernel
def first_nz(x: i32[M, N], out: Out[i32[M]]):
    for i in parallel(M):
        out[i] = intent.reduce(x[i, :], first_nonzero, identity=0)


@intent.kernel
def welford(x: f32[M, N], mean: Out[f32[M]], var: Out[f32[M]]):
    for i in parallel(M):
        row = x[i, :]
        mu, m2, n = intent.reduce((row, intent.zeros_like(row), intent.ones_like(row)), welford_combine,
                                  identity=(0.0, 0.0, 0.0))
        mean[i] = mu
        var[i] = m2 / n


@intent.kernel
def affine_scan(a: i32[M, N], b: i32[M, N], oa: Out[i32[M, N]], ob: Out[i32[M, N]]):
    for i in parallel(M):
        x, y = intent.scan((a[i, :], b[i, :]), affine, identity=(1, 0))
        oa[i, :] = x
        ob[i, :] = y


@intent.kernel
def affine_scan_reverse_exclusive(a: i32[M, N], b: i32[M, N], oa: Out[i32[M, N]], ob: Out[i32[M, N]]):
    for i in parallel(M):
        x, y = intent.scan((a[i, :], b[i, :]), affine, reverse=True, exclusive=True, identity=(1, 0))
        oa[i, :] = x
        ob[i, :] = y


@intent.kernel
def last_nz_scan(x: i32[M, N], out: Out[i32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.scan(x[i, :], last_nonzero, identity=0)


@intent.kernel
def last_nz_scan_reverse(x: i32[M, N], out: Out[i32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.scan(x[i, :], last_nonzero, reverse=True, identity=0)


@intent.kernel
def last_nz_scan_exclusive(x: i32[M, N], out: Out[i32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.scan(x[i, :], last_nonzero, exclusive=True, identity=0)


@intent.kernel
def cummax_rows(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.cummax(x[i, :])


@intent.kernel
def cummin_reverse(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.cummin(x[i, :], reverse=True)


@intent.kernel
def exclusive_cumsum(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.cumsum(x[i, :], exclusive=True)


@intent.kernel
def reverse_exclusive_cumsum(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.cumsum(x[i, :], reverse=True, exclusive=True)


@intent.kernel
def cumsum_rows(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.cumsum(x[i, :])


@intent.kernel
def reverse_exclusive_int_cumsum(x: i32[M, N], out: Out[i32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.cumsum(x[i, :], reverse=True, exclusive=True)


@intent.kernel
def prod_rows(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.prod(x[i, :])


@intent.kernel
def argmax_rows(x: f32[M, N], out: Out[i64[M]]):
    for i in parallel(M):
        out[i] = intent.argmax(x[i, :])


@intent.kernel
def argmax_planes(x: f32[M, N, K], out: Out[i64[M]]):
    for i in parallel(M):
        out[i] = intent.argmax(x[i, :, :])


@intent.kernel(requires=[N <= 65536])
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        out[i, :] = e / intent.sum(e)


@intent.kernel(requires=[N <= 1024])
def short_softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        out[i, :] = e / intent.sum(e)


@intent.kernel
def layernorm(x: f32[M, N], w: f32[N], b: f32[N], eps: f32,
              out: Out[f32[M, N]], mean: Out[f32[M]], rstd: Out[f32[M]]):
    for i in parallel(M):
        row = x[i, :]
        mu = intent.sum(row) / N
        d = row - mu
        r = intent.rsqrt(intent.sum(d * d) / N + eps)
        out[i, :] = d * r * w + b
        mean[i] = mu
        rstd[i] = r


@intent.kernel
def normalised_cumsum(x: f32[M, N], out: Out[f32[M, N]]):
    """A scan whose result feeds a reduction and a later pass: the scan runs again in that pass."""
    for i in parallel(M):
        c = intent.cumsum(x[i, :])
        out[i, :] = c / intent.sum(c)


@intent.kernel
def seg_first_nz(values: i32[E], offsets: i64[S + 1], out: Out[i32[S]]):
    for s in parallel(S):
        out[s] = intent.reduce(values[offsets[s]:offsets[s + 1]], first_nonzero, identity=0)


@intent.kernel
def seg_max(values: f32[E], offsets: i64[S + 1], out: Out[f32[S]]):
    for s in parallel(S):
        out[s] = intent.max(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def seg_last_nz_scan(values: i32[E], offsets: i64[S + 1], out: Out[i32[E]]):
    for s in parallel(S):
        out[offsets[s]:offsets[s + 1]] = intent.scan(values[offsets[s]:offsets[s + 1]], last_nonzero, identity=0)


@intent.kernel
def seg_last_nz_scan_reverse_exclusive(values: i32[E], offsets: i64[S + 1], out: Out[i32[E]]):
    for s in parallel(S):
        out[offsets[s]:offsets[s + 1]] = intent.scan(values[offsets[s]:offsets[s + 1]], last_nonzero, identity=0,
                                                     reverse=True, exclusive=True)


@intent.kernel
def both_ways(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.cumsum(x[i, :]) + intent.cumsum(x[i, :], reverse=True)


@intent.kernel
def written_twice(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = x[i, :] / intent.sum(x[i, :])
        out[i, :] = x[i, :]


@intent.kernel
def repeated_sum(x: f32[M, N], out: Out[f32[M]]):
    """An ordered loop after the reduction reads its result: it runs after the row's pass."""
    for i in parallel(M):
        s = intent.sum(x[i, :])
        acc = f32(0.0)
        for t in range(3):  # noqa: B007 (an ordered loop whose index the body does not read)
            acc = acc + s
        out[i] = acc
