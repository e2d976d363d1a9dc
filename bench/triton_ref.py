"""Straightforward hand-written Triton kernels for the bench families: the baseline an engineer
writes in an afternoon from the Triton tutorials (fixed block sizes, no autotuning).

Each `run_<family>(args)` takes the same argument dict as the Intent kernel (bench/kernels.py),
writes the outputs in place and launches exactly one kernel. They run on CUDA tensors, or on CPU
tensors when `TRITON_INTERPRET=1` was set before `triton` was imported (how the tests check them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import triton
import triton.language as tl

from intent.runtime import triton_adapter as adapter

# ---------------------------------------------------------------------------------------------- kernels


@triton.jit
def _vector_add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


@triton.jit
def _softmax(x, out, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(x + row * stride_x + cols, mask=mask, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out + row * stride_out + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def _layernorm(x, w, b, out, mean, rstd, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x += row * stride
    out += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x + cols, mask=cols < n_cols, other=0.0)
    mu = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        d = tl.where(cols < n_cols, tl.load(x + cols, mask=cols < n_cols, other=0.0) - mu, 0.0)
        acc += d * d
    r = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    tl.store(mean + row, mu)
    tl.store(rstd + row, r)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(x + cols, mask=mask, other=0.0)
        tl.store(out + cols, (v - mu) * r * tl.load(w + cols, mask=mask) + tl.load(b + cols, mask=mask), mask=mask)


@triton.jit
def _cumsum(x, out, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = tl.zeros([1], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(x + row * stride + cols, mask=mask, other=0.0)
        tl.store(out + row * stride + cols, tl.cumsum(v, axis=0) + carry, mask=mask)
        carry += tl.sum(v, axis=0)


@triton.jit
def _welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    n = n_a + n_b
    frac = tl.where(n == 0.0, 0.0, n_b / tl.maximum(n, 1.0))
    delta = mean_b - mean_a
    return mean_a + delta * frac, m2_a + m2_b + delta * delta * n_a * frac, n


@triton.jit
def _welford(x, mean, var, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    lane_mean = tl.zeros([BLOCK], dtype=tl.float32)
    lane_m2 = tl.zeros([BLOCK], dtype=tl.float32)
    lane_n = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(x + row * stride + cols, mask=mask, other=0.0)
        n_new = lane_n + tl.where(mask, 1.0, 0.0)
        delta = v - lane_mean
        lane_mean = tl.where(mask, lane_mean + delta / tl.maximum(n_new, 1.0), lane_mean)
        lane_m2 = tl.where(mask, lane_m2 + delta * (v - lane_mean), lane_m2)
        lane_n = n_new
    mu, m2, n = tl.reduce((lane_mean, lane_m2, lane_n), 0, _welford_combine)
    tl.store(mean + row, mu)
    tl.store(var + row, m2 / n)


@triton.jit
def _segment_sum(values, offsets, out, BLOCK: tl.constexpr):
    seg = tl.program_id(0)
    start = tl.load(offsets + seg)
    end = tl.load(offsets + seg + 1)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(start, end, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        acc += tl.load(values + idx, mask=idx < end, other=0.0)
    tl.store(out + seg, tl.sum(acc, axis=0))


@triton.jit
def _histogram(x, counts, n, BINS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=-1)
    inside = (offs < n) & (v >= 0) & (v < BINS)
    hist = tl.histogram(tl.where(inside, v, 0), BINS, mask=inside)
    tl.atomic_add(counts + tl.arange(0, BINS), hist.to(tl.int32), sem="relaxed")


@triton.jit
def _matmul(a, b, c, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    group = pid // width
    first_m = group * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        acc = tl.dot(tl.load(a_ptrs, mask=rk[None, :] < left, other=0.0),
                     tl.load(b_ptrs, mask=rk[:, None] < left, other=0.0), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c + cm[:, None] * stride_cm + cn[None, :] * stride_cn, acc, mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def _dropout(x, out, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    keep = tl.rand(seed, offs.to(tl.int64)) >= p
    v = tl.load(x + offs, mask=mask)
    tl.store(out + offs, tl.where(keep, tl.div_rn(v, 1.0 - p), 0.0), mask=mask)


# ---------------------------------------------------------------------------------------------- launchers

Args = Mapping[str, Any]


def _warps(block: int) -> int:
    return 4 if block <= 2048 else (8 if block <= 8192 else 16)


def run_vector_add(a: Args) -> None:
    n = a["out"].numel()
    _vector_add[(triton.cdiv(n, 1024),)](a["x"], a["y"], a["out"], n, BLOCK=1024)


def run_softmax(a: Args) -> None:
    x, out = a["x"], a["out"]
    block = triton.next_power_of_2(x.shape[1])
    _softmax[(x.shape[0],)](x, out, x.shape[1], x.stride(0), out.stride(0), BLOCK=block, num_warps=_warps(block))


def run_layernorm(a: Args) -> None:
    x = a["x"]
    block = min(4096, triton.next_power_of_2(x.shape[1]))
    _layernorm[(x.shape[0],)](x, a["w"], a["b"], a["out"], a["mean"], a["rstd"], x.shape[1], x.stride(0),
                              a["eps"], BLOCK=block, num_warps=_warps(block))


def run_cumsum(a: Args) -> None:
    x = a["x"]
    block = min(4096, triton.next_power_of_2(x.shape[1]))
    _cumsum[(x.shape[0],)](x, a["out"], x.shape[1], x.stride(0), BLOCK=block, num_warps=_warps(block))


def run_welford(a: Args) -> None:
    x = a["x"]
    block = min(2048, triton.next_power_of_2(x.shape[1]))
    _welford[(x.shape[0],)](x, a["mean"], a["var"], x.shape[1], x.stride(0), BLOCK=block, num_warps=_warps(block))


def run_segment_sum(a: Args) -> None:
    out = a["out"]
    _segment_sum[(out.numel(),)](a["values"], a["offsets"], out, BLOCK=1024)


def run_histogram(a: Args) -> None:
    x, counts = a["x"], a["counts"]
    block = 4096
    _histogram[(triton.cdiv(x.numel(), block),)](x, counts, x.numel(), BINS=counts.numel(), BLOCK=block)


def run_matmul(a: Args) -> None:
    x, y, c = a["a"], a["b"], a["c"]
    m, k = x.shape
    n = y.shape[1]
    bm, bn, bk = (128, 256, 64) if x.is_cuda else (16, 16, 16)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _matmul[grid](x, y, c, m, n, k, x.stride(0), x.stride(1), y.stride(0), y.stride(1), c.stride(0), c.stride(1),
                  BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=8, num_stages=3)


def run_dropout(a: Args) -> None:
    n = a["out"].numel()
    _dropout[(triton.cdiv(n, 1024),)](a["x"], a["out"], n, a["p"], a["seed"], BLOCK=1024)


RUNNERS: dict[str, Callable[[Args], None]] = {
    "vector_add": run_vector_add, "softmax": run_softmax, "layernorm": run_layernorm, "cumsum": run_cumsum,
    "welford": run_welford, "segment_sum": run_segment_sum, "histogram": run_histogram, "matmul": run_matmul,
    "dropout": run_dropout,
}


def run(family: str, args: Args) -> None:
    """Launch the hand-written kernel of `family` on `args` (outputs written in place)."""
    RUNNERS[family](args)


def is_interpreting() -> bool:
    """Whether this module's kernels were built for Triton's interpreter (CPU tensors)."""
    return adapter.is_interpreted(_vector_add)
