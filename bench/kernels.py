"""The bench kernels, written the way authors write them, and their inputs at each scale.

Scales: `tiny` (tests: interpreter work in milliseconds), `quick` (`--quick`: seconds under the
interpreter), `full` (the sizes SPEC §10 reports under the interpreter), `gpu` (large sizes for
`bench/gpu.py`). A case builds its arguments on any device; `eager` is the same computation in
torch (the eager baseline, and the reference where `eager_is_reference`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

import intent
from intent import InOut, KernelObject, Out, dims, f16, f32, i32, i64, parallel
from kir.core import Role
from kir.frontend import TensorSpec

M, N, K = dims("M N K")
S, E, B = dims("S E B")


@intent.kernel
def vector_add(x: f32[N], y: f32[N], out: Out[f32[N]]):
    out[:] = x + y


@intent.kernel(requires=[N <= 65536])
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
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
def cumsum(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.cumsum(x[i, :])


@intent.combine
def welford_combine(a, b):
    mean_a, m2_a, n_a = a
    mean_b, m2_b, n_b = b
    n = n_a + n_b
    frac = intent.where(n == 0.0, 0.0, n_b / intent.maximum(n, 1.0))
    delta = mean_b - mean_a
    return mean_a + delta * frac, m2_a + m2_b + delta * delta * n_a * frac, n


@intent.kernel
def welford(x: f32[M, N], mean: Out[f32[M]], var: Out[f32[M]]):
    for i in parallel(M):
        row = x[i, :]
        mu, m2, n = intent.reduce((row, intent.zeros_like(row), intent.ones_like(row)),
                                  welford_combine, identity=(0.0, 0.0, 0.0))
        mean[i] = mu
        var[i] = m2 / n


@intent.kernel
def segment_sum(values: f32[E], offsets: i64[S + 1], out: Out[f32[S]]):
    for s in parallel(S):
        out[s] = intent.sum(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def segment_cumsum(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]]):
    for s in parallel(S):
        out[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def segment_stats(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]], total: Out[f32[S]]):
    for s in parallel(S):
        out[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])
        total[s] = intent.sum(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def segment_cumsums(values: f32[E], offsets: i64[S + 1], fwd: Out[f32[E]], rev: Out[f32[E]]):
    for s in parallel(S):
        fwd[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])
        rev[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]], reverse=True)


@intent.kernel
def jagged_cumsum(values: f32[E, N], offsets: i64[S + 1], out: Out[f32[E, N]]):
    for s in parallel(S):
        out[offsets[s]:offsets[s + 1], :] = intent.cumsum(values[offsets[s]:offsets[s + 1], :], axis=0)


@intent.kernel
def span_cumsum(values: f32[E, N], b: i64, e: i64, out: Out[f32[E, N]]):
    out[b:e, :] = intent.cumsum(values[b:e, :], axis=0)


@intent.kernel
def jagged_mean(values: f32[E, N], offsets: i64[S + 1], out: Out[f32[S, N]]):
    for s in parallel(S):
        out[s, :] = intent.mean(values[offsets[s]:offsets[s + 1], :], axis=0)


@intent.kernel
def histogram(x: i32[E], counts: InOut[i32[B]]):
    for e in parallel(E):
        intent.atomic_add(counts, x[e], 1)


@intent.kernel
def matmul(a: f16[M, K], b: f16[K, N], c: Out[f32[M, N]]):
    c[:, :] = intent.dot(a, b)


@intent.kernel
def dropout(x: f32[N], p: f32, seed: i64, out: Out[f32[N]]):
    for n in parallel(N):
        keep = intent.rand(seed, n) >= p
        out[n] = intent.where(keep, x[n] / (1.0 - p), 0.0)


@intent.kernel
def total_sum(x: f32[N], out: Out[f32[1]]):
    out[0] = intent.sum(x)


@intent.kernel
def total_max(x: f32[N], out: Out[f32[1]]):
    out[0] = intent.max(x)


@intent.kernel
def total_argmax(x: f32[N], out: Out[i64[1]]):
    out[0] = intent.argmax(x)


@intent.kernel
def cumsum_1d(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cumsum(x)


@intent.kernel
def cumsum_1d_exclusive(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cumsum(x, exclusive=True)


@intent.kernel
def cummax_1d(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cummax(x)


@intent.kernel
def column_sums(x: f32[M, N], out: Out[f32[N]]):
    for k in parallel(N):
        out[k] = intent.sum(x[:, k])


@intent.kernel
def row_sums(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.sum(x[i, :])


# few long rows (the refinement proves the rows few: each row's scan is then split over programs)
@intent.kernel(requires=[M <= 64])
def row_cumsums(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = intent.cumsum(x[i, :])


@intent.kernel
def transpose_nested(x: f32[M, N], out: Out[f32[N, M]]):
    for r in parallel(M):
        for c in parallel(N):
            out[c, r] = x[r, c]


@intent.kernel(requires=[N % 4 == 0])
def head_split(x: f32[B, M, N], out: Out[f32[B, 4, M, N // 4]]):
    out[:, :, :, :] = intent.permute(intent.reshape(x, (B, M, 4, N // 4)), (0, 2, 1, 3))


@intent.kernel
def flatten(x: f32[B, M, N], out: Out[f32[B * M, N]]):
    out[:, :] = intent.reshape(x, (B * M, N))


@intent.kernel
def permute_3d(x: f32[M, N, K], out: Out[f32[K, N, M]]):
    out[:, :, :] = intent.permute(x, (2, 1, 0))


@intent.kernel
def nhwc_to_nchw(x: f32[B, M, N, K], out: Out[f32[B, K, M, N]]):
    out[:, :, :, :] = intent.permute(x, (0, 3, 1, 2))


@intent.kernel
def subtract_row_max(x: f32[M, N], out: Out[f32[M, N]]):
    out[:, :] = x - intent.max(x, axis=1, keepdims=True)


@intent.kernel
def segment_argmax(values: f32[E], offsets: i64[S + 1], out: Out[i64[S]]):
    for s in parallel(S):
        out[s] = intent.argmax(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def jagged_argmax(values: f32[E, N], offsets: i64[S + 1], out: Out[i64[S, N]]):
    for s in parallel(S):
        out[s, :] = intent.argmax(values[offsets[s]:offsets[s + 1], :], axis=0)


# ---------------------------------------------------------------------------------------------- cases

Args = dict[str, Any]


@dataclass(frozen=True)
class BenchCase:
    """One kernel at one size."""

    family: str
    label: str
    kernel: KernelObject
    build: Callable[[torch.device, torch.Generator], Args]  # inputs and pre-allocated outputs
    eager: Callable[[Mapping[str, Any]], dict[str, torch.Tensor]]  # the torch formulation, from the inputs
    eager_is_reference: bool = True  # False where torch computes something equivalent, not identical (RNG)
    tol: Mapping[str, float] = field(default_factory=lambda: {"atol": 1e-4, "rtol": 1e-4})
    contiguous_f32: bool = True  # every tensor contiguous f32: SPEC's 128-bit vector access target applies
    traffic_target: float | None = None  # the bytes-moved / ideal bound of the issue, where it states one
    flops: Callable[[Mapping[str, Any]], float] | None = None  # useful FLOPs (contractions)

    @property
    def name(self) -> str:
        return f"{self.family} {self.label}"


def ideal_bytes(kernel: KernelObject, args: Mapping[str, Any]) -> int:
    """Every input element read once, every output element written once (an in-out one both)."""
    total = 0
    for p in kernel.signature.params:
        spec = p.spec
        value = args.get(p.name)
        if not isinstance(spec, TensorSpec) or not isinstance(value, torch.Tensor):
            continue
        size = value.numel() * value.element_size()
        total += 2 * size if spec.role is Role.INOUT else size
    return total


def output_names(kernel: KernelObject) -> list[str]:
    """The parameters a launch writes (Out and InOut), in parameter order."""
    return [p.name for p in kernel.signature.params
            if isinstance(p.spec, TensorSpec) and p.spec.role in (Role.OUT, Role.INOUT)]


def clone_args(args: Mapping[str, Any]) -> Args:
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}


def _randn(shape: tuple[int, ...], device: torch.device, g: torch.Generator, scale: float = 1.0,
           shift: float = 0.0) -> torch.Tensor:
    return (torch.randn(shape, generator=g) * scale + shift).to(device)


def vector_add_case(n: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((n,), dev, g), "y": _randn((n,), dev, g), "out": torch.empty(n, device=dev)}

    return BenchCase("vector_add", _count(n), vector_add, build, lambda a: {"out": a["x"] + a["y"]},
                     traffic_target=1.02)


def softmax_case(m: int, n: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n), dev, g, 4.0), "out": torch.empty(m, n, device=dev)}

    return BenchCase("softmax", f"{m}x{n}", softmax, build, lambda a: {"out": torch.softmax(a["x"], dim=1)},
                     tol={"atol": 1e-5, "rtol": 1e-4}, traffic_target=1.02)


def layernorm_case(m: int, n: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n), dev, g, 3.0, 1.0), "w": _randn((n,), dev, g), "b": _randn((n,), dev, g),
                "eps": 1e-5, "out": torch.empty(m, n, device=dev), "mean": torch.empty(m, device=dev),
                "rstd": torch.empty(m, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        out, mean, rstd = torch.native_layer_norm(a["x"], (a["x"].shape[1],), a["w"], a["b"], a["eps"])
        return {"out": out, "mean": mean.reshape(-1), "rstd": rstd.reshape(-1)}

    return BenchCase("layernorm", f"{m}x{n}", layernorm, build, eager, traffic_target=1.02)


def cumsum_case(m: int, n: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n), dev, g), "out": torch.empty(m, n, device=dev)}

    return BenchCase("cumsum", f"{m}x{n}", cumsum, build, lambda a: {"out": torch.cumsum(a["x"], 1)},
                     tol={"atol": 2e-3, "rtol": 1e-4}, traffic_target=1.02)


def welford_case(m: int, n: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n), dev, g, 1.0, 100.0), "mean": torch.empty(m, device=dev),
                "var": torch.empty(m, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        var, mean = torch.var_mean(a["x"], dim=1, correction=0)
        return {"mean": mean, "var": var}

    return BenchCase("welford", f"{m}x{n}", welford, build, eager, tol={"atol": 1e-3, "rtol": 1e-3},
                     traffic_target=1.02)


def segment_sum_case(segments: int, mean_length: int) -> BenchCase:
    """`segments` segments of random lengths in [0, 2 * mean_length], some empty."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        lengths = torch.randint(0, 2 * mean_length + 1, (segments,), generator=g)
        lengths[:: max(1, segments // 8)] = 0
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
        e = max(int(offsets[-1]), 1)
        return {"values": _randn((e,), dev, g), "offsets": offsets.to(dev), "out": torch.empty(segments, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {"out": torch.segment_reduce(a["values"], "sum", offsets=a["offsets"], unsafe=True)}

    return BenchCase("segment_sum", f"{segments}seg/{_count(segments * mean_length)}", segment_sum, build, eager,
                     tol={"atol": 1e-3, "rtol": 1e-4}, contiguous_f32=False, traffic_target=1.05)


def histogram_case(e: int, bins: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        # a few values fall outside [0, bins): those are dropped
        x = torch.randint(-2, bins + 2, (e,), generator=g, dtype=torch.int32)
        return {"x": x.to(dev), "counts": torch.zeros(bins, dtype=torch.int32, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        x, counts = a["x"], a["counts"]
        inside = x[(x >= 0) & (x < counts.numel())].long()
        return {"counts": counts + torch.bincount(inside, minlength=counts.numel()).to(torch.int32)}

    return BenchCase("histogram", f"{_count(e)}->{bins}", histogram, build, eager, tol={}, contiguous_f32=False)


def matmul_case(m: int, n: int, k: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"a": _randn((m, k), dev, g).half(), "b": _randn((k, n), dev, g).half(),
                "c": torch.empty(m, n, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {"c": torch.matmul(a["a"], a["b"]).float()}

    def flops(a: Mapping[str, Any]) -> float:
        return 2.0 * a["a"].shape[0] * a["a"].shape[1] * a["b"].shape[1]

    tol = {"atol": 2e-2 * max(1.0, (k / 256) ** 0.5), "rtol": 2e-3}
    return BenchCase("matmul", f"{m}x{n}x{k}", matmul, build, eager, tol=tol, contiguous_f32=False, flops=flops)


def dropout_case(n: int, p: float = 0.1) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((n,), dev, g), "p": p, "seed": 1234, "out": torch.empty(n, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {"out": torch.nn.functional.dropout(a["x"], a["p"], training=True)}

    return BenchCase("dropout", _count(n), dropout, build, eager, eager_is_reference=False)


def _reduction_case(family: str, kernel: KernelObject, n: int, eager: Callable[[torch.Tensor], torch.Tensor],
                    dtype: torch.dtype = torch.float32) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((n,), dev, g), "out": torch.empty(1, dtype=dtype, device=dev)}

    return BenchCase(family, _count(n), kernel, build, lambda a: {"out": eager(a["x"]).reshape(1).to(dtype)},
                     tol={"atol": 1e-2, "rtol": 1e-4}, contiguous_f32=dtype == torch.float32)


def total_sum_case(n: int) -> BenchCase:
    return _reduction_case("sum", total_sum, n, torch.sum)


def total_max_case(n: int) -> BenchCase:
    return _reduction_case("max", total_max, n, torch.max)


def total_argmax_case(n: int) -> BenchCase:
    return _reduction_case("argmax", total_argmax, n, torch.argmax, torch.int64)


def _exclusive_cumsum(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x.new_zeros(1), torch.cumsum(x, 0)[:-1]])


def scan_1d_case(kind: str, n: int) -> BenchCase:
    """A scan over one long vector: `cumsum`, `cumsum_exclusive` or `cummax`."""
    kernel, eager = {"cumsum": (cumsum_1d, lambda x: torch.cumsum(x, 0)),
                     "cumsum_exclusive": (cumsum_1d_exclusive, _exclusive_cumsum),
                     "cummax": (cummax_1d, lambda x: torch.cummax(x, 0).values)}[kind]

    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((n,), dev, g), "out": torch.empty(n, device=dev)}

    return BenchCase(f"{kind}_1d", _count(n), kernel, build, lambda a: {"out": eager(a["x"].double()).float()},
                     tol={"atol": 1e-2 * max(1.0, (n / 4096) ** 0.5), "rtol": 1e-4})


def column_sums_case(m: int, n: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n), dev, g), "out": torch.empty(n, device=dev)}

    return BenchCase("column_sums", f"{m}x{n}", column_sums, build, lambda a: {"out": a["x"].sum(0)},
                     tol={"atol": 1e-2, "rtol": 1e-4})


def row_sums_case(m: int, n: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n), dev, g), "out": torch.empty(m, device=dev)}

    return BenchCase("row_sums", f"{m}x{n}", row_sums, build, lambda a: {"out": a["x"].sum(1)},
                     tol={"atol": 1e-2, "rtol": 1e-4})


def row_cumsums_case(m: int, n: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n), dev, g), "out": torch.empty(m, n, device=dev)}

    return BenchCase("row_cumsums", f"{m}x{n}", row_cumsums, build,
                     lambda a: {"out": torch.cumsum(a["x"].double(), 1).float()},
                     tol={"atol": 1e-2 * max(1.0, (n / 4096) ** 0.5), "rtol": 1e-4})


def symbolic_row_cumsums_case(m: int, n: int) -> BenchCase:
    """Few long rows of the bench's `cumsum`, whose rows are symbolic (nothing proves them few): the launch decides
    to split each row over programs (physical/passes/split_rows.py)."""
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n), dev, g), "out": torch.empty(m, n, device=dev)}

    return BenchCase("row_cumsums_symbolic", f"{m}x{n}", cumsum, build,
                     lambda a: {"out": torch.cumsum(a["x"].double(), 1).float()},
                     tol={"atol": 1e-2 * max(1.0, (n / 4096) ** 0.5), "rtol": 1e-4})


def transpose_case(m: int, n: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n), dev, g), "out": torch.empty(n, m, device=dev)}

    return BenchCase("transpose", f"{m}x{n}", transpose_nested, build, lambda a: {"out": a["x"].t().contiguous()},
                     tol={})


def head_split_case(b: int, s: int, d: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((b, s, d), dev, g), "out": torch.empty(b, 4, s, d // 4, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {"out": a["x"].reshape(b, s, 4, d // 4).permute(0, 2, 1, 3).contiguous()}

    return BenchCase("head_split", f"{b}x{s}x{d}", head_split, build, eager, tol={})


def flatten_case(b: int, s: int, d: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((b, s, d), dev, g), "out": torch.empty(b * s, d, device=dev)}

    return BenchCase("flatten", f"{b}x{s}x{d}", flatten, build, lambda a: {"out": a["x"].reshape(b * s, d)}, tol={})


def permute_3d_case(m: int, n: int, k: int) -> BenchCase:
    """`permute(x, (2, 1, 0))`: the input's unit-stride axis becomes the output's leading one."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n, k), dev, g), "out": torch.empty(k, n, m, device=dev)}

    return BenchCase("permute_3d", f"{m}x{n}x{k}", permute_3d, build,
                     lambda a: {"out": a["x"].permute(2, 1, 0).contiguous()}, tol={})


def nhwc_to_nchw_case(b: int, h: int, w: int, c: int) -> BenchCase:
    """`permute(x, (0, 3, 1, 2))` of an NHWC activation: channels move from unit stride to the second axis."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((b, h, w, c), dev, g), "out": torch.empty(b, c, h, w, device=dev)}

    return BenchCase("nhwc_to_nchw", f"{b}x{h}x{w}x{c}", nhwc_to_nchw, build,
                     lambda a: {"out": a["x"].permute(0, 3, 1, 2).contiguous()}, tol={})


def subtract_row_max_case(m: int, n: int) -> BenchCase:
    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"x": _randn((m, n), dev, g), "out": torch.empty(m, n, device=dev)}

    return BenchCase("sub_row_max", f"{m}x{n}", subtract_row_max, build,
                     lambda a: {"out": a["x"] - a["x"].amax(1, keepdim=True)}, tol={})


def skewed_segment_sum_case(e: int, segments: int = 64) -> BenchCase:
    """Segment 0 holds half of the `e` values; the other half is spread evenly over the rest."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        lengths = torch.full((segments,), (e // 2) // (segments - 1), dtype=torch.int64)
        lengths[0] = e - int(lengths[1:].sum())
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
        return {"values": _randn((e,), dev, g), "offsets": offsets.to(dev), "out": torch.empty(segments, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {"out": torch.segment_reduce(a["values"], "sum", offsets=a["offsets"], unsafe=True)}

    return BenchCase("segment_sum_skewed", f"{segments}seg/{_count(e)}", segment_sum, build, eager,
                     tol={"atol": 1e-2, "rtol": 1e-4}, contiguous_f32=False)


def skewed_segment_cumsum_case(e: int, segments: int = 64) -> BenchCase:
    """A segmented cumsum; segment 0 holds half of the `e` values, the other half is spread evenly over the rest."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        lengths = torch.full((segments,), (e // 2) // (segments - 1), dtype=torch.int64)
        lengths[0] = e - int(lengths[1:].sum())
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
        return {"values": _randn((e,), dev, g), "offsets": offsets.to(dev), "out": torch.empty(e, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        v, offsets = a["values"].double(), a["offsets"]
        total = torch.cumsum(v, 0)
        starts = offsets[:-1]
        base = torch.where(starts > 0, total[(starts - 1).clamp(min=0)], torch.zeros_like(total[:1]))
        return {"out": (total - torch.repeat_interleave(base, offsets[1:] - starts)).float()}

    return BenchCase("segment_cumsum_skewed", f"{segments}seg/{_count(e)}", segment_cumsum, build, eager,
                     tol={"atol": 1e-1, "rtol": 1e-3}, contiguous_f32=False)


def _skewed_offsets(e: int, segments: int, big: int = 0) -> torch.Tensor:
    """Offsets of `segments` segments over `e` values: segment `big` holds half, the rest share the other half."""
    lengths = torch.full((segments,), (e // 2) // (segments - 1), dtype=torch.int64)
    lengths[big] = 0
    lengths[big] = e - int(lengths.sum())
    return torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])


def _sums_before(run: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
    """The sum of values[:at] for each offset in `at`, from the running sum `run` of the values."""
    return torch.where(at > 0, run[(at - 1).clamp(min=0)], torch.zeros_like(run[:1]))


def skewed_segment_stats_case(e: int, segments: int = 64) -> BenchCase:
    """A segment's running sum and its total in one body; segment 0 holds half of the `e` values."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"values": _randn((e,), dev, g), "offsets": _skewed_offsets(e, segments).to(dev),
                "out": torch.empty(e, device=dev), "total": torch.empty(segments, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        v, offsets = a["values"].double(), a["offsets"]
        run = torch.cumsum(v, 0)
        starts, ends = offsets[:-1], offsets[1:]
        return {"out": (run - torch.repeat_interleave(_sums_before(run, starts), ends - starts)).float(),
                "total": (_sums_before(run, ends) - _sums_before(run, starts)).float()}

    return BenchCase("segment_stats_skewed", f"{segments}seg/{_count(e)}", segment_stats, build, eager,
                     tol={"atol": 1e-1, "rtol": 1e-3}, contiguous_f32=False)


def skewed_segment_cumsums_case(e: int, segments: int = 64) -> BenchCase:
    """A segment's running sum from its begin and from its end in one body (scans in both directions over the same
    segments); segment 0 holds half of the `e` values."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"values": _randn((e,), dev, g), "offsets": _skewed_offsets(e, segments).to(dev),
                "fwd": torch.empty(e, device=dev), "rev": torch.empty(e, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        v, offsets = a["values"].double(), a["offsets"]
        run = torch.cumsum(v, 0)
        starts, ends = offsets[:-1], offsets[1:]
        lengths = ends - starts
        fwd = run - torch.repeat_interleave(_sums_before(run, starts), lengths)
        # from the end: the segment's total less what precedes each value within the segment
        rev = torch.repeat_interleave(_sums_before(run, ends), lengths) - run + v
        return {"fwd": fwd.float(), "rev": rev.float()}

    return BenchCase("segment_cumsums_skewed", f"{segments}seg/{_count(e)}", segment_cumsums, build, eager,
                     tol={"atol": 1e-1, "rtol": 1e-3}, contiguous_f32=False)


def skewed_jagged_cumsum_case(rows: int, width: int, segments: int = 64) -> BenchCase:
    """A jagged cumsum over `rows` x `width` values; segment 0 holds half of the rows."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"values": _randn((rows, width), dev, g), "offsets": _skewed_offsets(rows, segments).to(dev),
                "out": torch.empty(rows, width, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        v, offsets = a["values"].double(), a["offsets"]
        run = torch.cumsum(v, 0)
        starts = offsets[:-1]
        base = torch.where((starts > 0)[:, None], run[(starts - 1).clamp(min=0)], torch.zeros_like(run[:1]))
        return {"out": (run - torch.repeat_interleave(base, offsets[1:] - starts, dim=0)).float()}

    return BenchCase("jagged_cumsum_skewed", f"{segments}seg/{rows}x{width}", jagged_cumsum, build, eager,
                     tol={"atol": 1e-1, "rtol": 1e-3}, contiguous_f32=False)


def span_cumsum_case(rows: int, width: int) -> BenchCase:
    """A cumsum down the columns of the rows [b, e) of `rows` x `width` values, the bounds kernel arguments (no
    `parallel`): here the whole tensor, so that every element is read and written once."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"values": _randn((rows, width), dev, g), "b": 0, "e": rows, "out": torch.empty(rows, width, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        return {"out": torch.cumsum(a["values"].double(), 0).float()}

    return BenchCase("span_cumsum", f"{rows}x{width}", span_cumsum, build, eager,
                     tol={"atol": 1e-2 * max(1.0, (rows / 4096) ** 0.5), "rtol": 1e-4})


def skewed_jagged_mean_case(rows: int, width: int, segments: int = 64, big: int = 0) -> BenchCase:
    """A jagged mean (one row of `width` means per segment) over `rows` x `width` values; segment `big` holds half
    of the rows (with an odd width, segment 2's columns 2 * width .. 3 * width - 1 straddle the edge of a block of
    16 instances: its helpers join two blocks)."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"values": _randn((rows, width), dev, g), "offsets": _skewed_offsets(rows, segments, big).to(dev),
                "out": torch.empty(segments, width, device=dev)}

    def eager(a: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        v, offsets = a["values"].double(), a["offsets"]
        total = torch.segment_reduce(v, "sum", offsets=offsets, axis=0, unsafe=True)
        return {"out": (total / (offsets[1:] - offsets[:-1])[:, None]).float()}

    label = f"{segments}seg/{rows}x{width}" + (f"/big{big}" if big else "")
    return BenchCase("jagged_mean_skewed", label, jagged_mean, build, eager,
                     tol={"atol": 1e-4, "rtol": 1e-4}, contiguous_f32=False)


def _first_max_per_segment(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The first position of each segment's maximum along axis 0 (-1 for an empty segment; values without NaN)."""
    lengths = offsets[1:] - offsets[:-1]
    seg = torch.repeat_interleave(torch.arange(len(lengths), device=values.device), lengths)
    pos = torch.arange(values.shape[0], device=values.device) - offsets[:-1][seg]
    top = torch.segment_reduce(values, "max", offsets=offsets, axis=0, unsafe=True)
    wide = (-1,) + (1,) * (values.dim() - 1)
    hit = torch.where(values == top[seg], pos.view(wide).expand_as(values), torch.iinfo(torch.int64).max)
    out = torch.full((len(lengths),) + tuple(values.shape[1:]), torch.iinfo(torch.int64).max, dtype=torch.int64,
                     device=values.device)
    out.scatter_reduce_(0, seg.view(wide).expand_as(values), hit, "amin")
    return torch.where(out == torch.iinfo(torch.int64).max, -1, out)


def skewed_segment_argmax_case(e: int, segments: int = 64) -> BenchCase:
    """The first position of each segment's maximum; segment 0 holds half of the `e` values."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"values": _randn((e,), dev, g), "offsets": _skewed_offsets(e, segments).to(dev),
                "out": torch.empty(segments, dtype=torch.int64, device=dev)}

    return BenchCase("segment_argmax_skewed", f"{segments}seg/{_count(e)}", segment_argmax, build,
                     lambda a: {"out": _first_max_per_segment(a["values"], a["offsets"])}, tol={},
                     contiguous_f32=False)


def skewed_jagged_argmax_case(rows: int, width: int, segments: int = 64) -> BenchCase:
    """The first row of each segment's maximum per column over `rows` x `width` values; segment 0 holds half of
    the rows."""

    def build(dev: torch.device, g: torch.Generator) -> Args:
        return {"values": _randn((rows, width), dev, g), "offsets": _skewed_offsets(rows, segments).to(dev),
                "out": torch.empty(segments, width, dtype=torch.int64, device=dev)}

    return BenchCase("jagged_argmax_skewed", f"{segments}seg/{rows}x{width}", jagged_argmax, build,
                     lambda a: {"out": _first_max_per_segment(a["values"], a["offsets"])}, tol={},
                     contiguous_f32=False)


def _count(n: int) -> str:
    for unit, size in (("M", 1 << 20), ("k", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


SCALES = ("tiny", "quick", "full", "gpu")


def traffic_cases(scale: str) -> list[BenchCase]:
    """The kernels and sizes of the traffic measurement (the issue's list at `full`)."""
    if scale == "tiny":
        return [vector_add_case(1000), softmax_case(3, 100), layernorm_case(3, 100), cumsum_case(2, 64),
                welford_case(3, 100), segment_sum_case(4, 50), histogram_case(1000, 16), dropout_case(1000),
                matmul_case(16, 16, 16)]
    if scale == "quick":
        return [vector_add_case(1 << 16), softmax_case(16, 1024), softmax_case(2, 8192), layernorm_case(16, 1024),
                cumsum_case(8, 1024), welford_case(16, 1024), segment_sum_case(32, 512),
                histogram_case(1 << 16, 256), dropout_case(1 << 16), matmul_case(64, 64, 64)]
    if scale == "full":
        return [vector_add_case(1 << 20), softmax_case(64, 4096), softmax_case(8, 32768), layernorm_case(64, 4096),
                cumsum_case(64, 4096), welford_case(64, 4096), segment_sum_case(128, 1024),
                histogram_case(1 << 20, 256), dropout_case(1 << 20), matmul_case(256, 256, 256)]
    raise ValueError(f"scale: expected one of {', '.join(SCALES[:3])}, got {scale!r}")


def model_cases(scale: str) -> list[BenchCase]:
    """The kernels of the whole-device model (`bench/model.py`) beyond the traffic set: the natural
    kernels that one-row-per-program plans leave idle. `full` holds the sizes the model reports."""
    if scale == "tiny":
        return [total_sum_case(5000), total_max_case(5000), total_argmax_case(5000), scan_1d_case("cumsum", 5000),
                scan_1d_case("cumsum_exclusive", 5000), scan_1d_case("cummax", 5000), column_sums_case(300, 12),
                row_sums_case(3, 2000), row_cumsums_case(3, 2000), symbolic_row_cumsums_case(2, 3000),
                transpose_case(40, 24), head_split_case(2, 12, 16), flatten_case(2, 12, 16),
                permute_3d_case(3, 5, 70), nhwc_to_nchw_case(2, 3, 5, 70),
                subtract_row_max_case(20, 30), skewed_segment_sum_case(4000, 8), skewed_segment_cumsum_case(4000, 8),
                histogram_case(5000, 16), skewed_segment_stats_case(4000, 8), skewed_jagged_cumsum_case(1000, 4, 8),
                skewed_jagged_mean_case(1000, 4, 8), span_cumsum_case(1000, 4), span_cumsum_case(3000, 1),
                skewed_segment_argmax_case(4000, 8), skewed_jagged_argmax_case(1000, 4, 8),
                skewed_segment_cumsums_case(4000, 8)]
    if scale == "quick":
        return [total_sum_case(1 << 18), total_max_case(1 << 18), total_argmax_case(1 << 18),
                scan_1d_case("cumsum", 1 << 18), scan_1d_case("cumsum_exclusive", 1 << 18),
                scan_1d_case("cummax", 1 << 18), column_sums_case(4096, 64), column_sums_case(512, 1000),
                row_sums_case(4, 1 << 16), row_cumsums_case(4, 1 << 16), symbolic_row_cumsums_case(2, 1 << 17),
                transpose_case(256, 256),
                head_split_case(2, 128, 256), flatten_case(2, 128, 256), permute_3d_case(16, 12, 256),
                nhwc_to_nchw_case(4, 16, 16, 64), subtract_row_max_case(256, 256),
                skewed_segment_sum_case(1 << 17), skewed_segment_cumsum_case(1 << 17), histogram_case(1 << 18, 256),
                skewed_jagged_cumsum_case(1 << 11, 40),
                skewed_segment_stats_case(1 << 17), skewed_jagged_cumsum_case(1 << 13, 16),
                skewed_jagged_mean_case(1 << 13, 16), skewed_jagged_mean_case(1 << 11, 40),
                skewed_jagged_mean_case(1 << 12, 7, big=2), span_cumsum_case(1 << 13, 16),
                span_cumsum_case(1 << 17, 1),
                skewed_segment_argmax_case(1 << 17), skewed_jagged_argmax_case(1 << 13, 16),
                skewed_segment_cumsums_case(1 << 17)]
    if scale == "full":
        return [total_sum_case(1 << 22), total_max_case(1 << 22), total_argmax_case(1 << 22),
                scan_1d_case("cumsum", 1 << 22), scan_1d_case("cumsum_exclusive", 1 << 22),
                scan_1d_case("cummax", 1 << 22), column_sums_case(65536, 64), column_sums_case(8192, 1000),
                row_sums_case(4, 1 << 20), row_cumsums_case(4, 1 << 20), symbolic_row_cumsums_case(2, 1 << 21),
                transpose_case(1024, 1024),
                head_split_case(8, 512, 1024), flatten_case(8, 512, 1024), permute_3d_case(64, 48, 256),
                nhwc_to_nchw_case(8, 32, 32, 64), subtract_row_max_case(4096, 1024),
                skewed_segment_sum_case(1 << 21), skewed_segment_sum_case(1 << 21, 1 << 16),
                skewed_segment_cumsum_case(1 << 21), skewed_segment_cumsum_case(1 << 21, 1 << 16),
                histogram_case(1 << 22, 256), skewed_segment_stats_case(1 << 21),
                skewed_jagged_cumsum_case(1 << 15, 40),
                skewed_jagged_cumsum_case(1 << 17, 16), skewed_jagged_mean_case(1 << 17, 16),
                skewed_jagged_mean_case(1 << 15, 40), skewed_jagged_mean_case(1 << 16, 7, big=2),
                span_cumsum_case(1 << 17, 16), span_cumsum_case(1 << 21, 1),
                skewed_segment_argmax_case(1 << 21), skewed_segment_argmax_case(1 << 21, 1 << 16),
                skewed_jagged_argmax_case(1 << 17, 16), skewed_segment_cumsums_case(1 << 21)]
    raise ValueError(f"scale: expected one of {', '.join(SCALES[:3])}, got {scale!r}")


def gpu_cases() -> list[BenchCase]:
    """Large sizes for `bench/gpu.py` (hundreds of MB per kernel)."""
    return [vector_add_case(1 << 26), softmax_case(8192, 8192), softmax_case(1024, 32768),
            layernorm_case(8192, 8192), cumsum_case(8192, 8192), welford_case(8192, 8192),
            segment_sum_case(8192, 8192), histogram_case(1 << 26, 256), dropout_case(1 << 26),
            matmul_case(8192, 8192, 8192)]


def one_per_kernel(scale: str = "quick") -> list[BenchCase]:
    """Each bench kernel once (PTX and compile measurements: the specialisation of these sizes)."""
    seen: set[str] = set()
    out = []
    for case in traffic_cases(scale):
        if case.family not in seen:
            seen.add(case.family)
            out.append(case)
    return out
