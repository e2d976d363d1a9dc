"""The oracle's speed against a direct NumPy implementation of the same computation.

    python bench/oracle.py [--repeat N]

Prints one row per kernel: the oracle's time, the direct NumPy time and their ratio (the oracle is
meant to stay within 3x of NumPy). Kernels are built with the KIR builder.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import oracle  # noqa: E402
from kir import (  # noqa: E402
    INDEX_DTYPE,
    Binary,
    BinaryFn,
    Broadcast,
    Builder,
    Cast,
    Constant,
    DimValue,
    DSym,
    DType,
    DynSlice,
    Load,
    Parallel,
    Param,
    Reduce,
    ReduceKind,
    RefType,
    RegionFold,
    Role,
    Slice,
    Store,
    Unary,
    UnaryFn,
    Yield,
    build_kernel,
    dim_bin,
    scalar,
)
from kir.core import Kernel  # noqa: E402
from kir.dims import DConst  # noqa: E402
from kir.solver import ShapeSolver  # noqa: E402

M, N, S, E = DSym("M"), DSym("N"), DSym("S"), DSym("E")
f32, i64 = DType.f32, DType.i64


def _params(b: Builder, spec: list[tuple[str, object]]) -> tuple[Param, ...]:
    args = b.begin_region(tuple(t for _, t in spec), tuple(n for n, _ in spec))  # type: ignore[arg-type]
    return tuple(Param(n, a) for (n, _), a in zip(spec, args))


def softmax_kernel() -> Kernel:
    b = Builder(ShapeSolver(("M", "N")))
    x, out = _params(b, [("x", RefType(f32, (M, N), Role.IN)), ("out", RefType(f32, (M, N), Role.OUT))])
    (i,) = b.begin_region((scalar(INDEX_DTYPE),), ("i",))
    row = b.add(Load, src=x.value, index=(i, Slice(DConst(0), N)))
    mx = b.add(Broadcast, x=b.add(Reduce, inputs=(row,), axes=(0,), kind=ReduceKind.max), shape=(N,), dims=())
    e = b.add(Unary, fn=UnaryFn.exp, x=b.add(Binary, fn=BinaryFn.sub, lhs=row, rhs=mx))
    s = b.add(Broadcast, x=b.add(Reduce, inputs=(e,), axes=(0,), kind=ReduceKind.sum), shape=(N,), dims=())
    b.make(Store, dst=out.value, index=(i, Slice(DConst(0), N)), value=b.add(Binary, fn=BinaryFn.div, lhs=e, rhs=s))
    b.make(Yield, values=())
    body = b.end_region()
    b.make(Parallel, domain=(M,), body=body)
    b.make(Yield, values=())
    return build_kernel("softmax", (x, out), ("M", "N"), b.end_region())


def layernorm_kernel() -> Kernel:
    b = Builder(ShapeSolver(("M", "N")))
    x, w, bias, eps, out, mean, rstd = _params(b, [
        ("x", RefType(f32, (M, N), Role.IN)), ("w", RefType(f32, (N,), Role.IN)),
        ("b", RefType(f32, (N,), Role.IN)), ("eps", scalar(f32)), ("out", RefType(f32, (M, N), Role.OUT)),
        ("mean", RefType(f32, (M,), Role.OUT)), ("rstd", RefType(f32, (M,), Role.OUT))])
    (i,) = b.begin_region((scalar(INDEX_DTYPE),), ("i",))
    full = Slice(DConst(0), N)

    def bcast(v):
        return b.add(Broadcast, x=v, shape=(N,), dims=())

    def binary(fn, lhs, rhs):
        return b.add(Binary, fn=fn, lhs=lhs, rhs=rhs)

    row = b.add(Load, src=x.value, index=(i, full))
    n = b.add(Cast, x=b.add(DimValue, dim=N), dtype=f32)
    mu = binary(BinaryFn.div, b.add(Reduce, inputs=(row,), axes=(0,), kind=ReduceKind.sum), n)
    d = binary(BinaryFn.sub, row, bcast(mu))
    var = binary(BinaryFn.div, b.add(Reduce, inputs=(binary(BinaryFn.mul, d, d),), axes=(0,), kind=ReduceKind.sum), n)
    r = b.add(Unary, fn=UnaryFn.rsqrt, x=binary(BinaryFn.add, var, eps.value))
    y = binary(BinaryFn.add, binary(BinaryFn.mul, binary(BinaryFn.mul, d, bcast(r)), b.add(Load, src=w.value,
                                                                                            index=(full,))),
               b.add(Load, src=bias.value, index=(full,)))
    b.make(Store, dst=out.value, index=(i, full), value=y)
    b.make(Store, dst=mean.value, index=(i,), value=mu)
    b.make(Store, dst=rstd.value, index=(i,), value=r)
    b.make(Yield, values=())
    body = b.end_region()
    b.make(Parallel, domain=(M,), body=body)
    b.make(Yield, values=())
    return build_kernel("layernorm", (x, w, bias, eps, out, mean, rstd), ("M", "N"), b.end_region())


def segment_sum_kernel() -> Kernel:
    b = Builder(ShapeSolver(("S", "E")))
    vals, offs, out = _params(b, [("values", RefType(f32, (E,), Role.IN)),
                                  ("offsets", RefType(i64, (dim_bin("+", S, 1),), Role.IN)),
                                  ("out", RefType(f32, (S,), Role.OUT))])
    (s,) = b.begin_region((scalar(INDEX_DTYPE),), ("s",))
    beg = b.add(Load, src=offs.value, index=(s,))
    end = b.add(Load, src=offs.value, index=(b.add(Binary, fn=BinaryFn.add, lhs=s,
                                                   rhs=b.add(Constant, value=1, dtype=i64)),))
    tot = b.add(RegionFold, src=vals.value, index=(DynSlice(beg, end),), kind=ReduceKind.sum)
    b.make(Store, dst=out.value, index=(s,), value=tot)
    b.make(Yield, values=())
    body = b.end_region()
    b.make(Parallel, domain=(S,), body=body)
    b.make(Yield, values=())
    return build_kernel("segment_sum", (vals, offs, out), ("S", "E"), b.end_region())


# ---------------------------------------------------------------------------------------------- direct NumPy


def softmax_numpy(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm_numpy(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> tuple[np.ndarray, ...]:
    n = np.float32(x.shape[1])
    mu = x.sum(axis=1) / n
    d = x - mu[:, None]
    r = np.float32(1) / np.sqrt((d * d).sum(axis=1) / n + np.float32(eps))
    return d * r[:, None] * w + b, mu, r


def segment_sum_numpy(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    lengths = np.diff(offsets)
    out = np.zeros(lengths.shape[0], values.dtype)
    filled = lengths > 0
    out[filled] = np.add.reduceat(values, offsets[:-1][filled])
    return out


def best_of(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    opts = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 4096), dtype=np.float32) * 4
    w, bias = rng.standard_normal(4096, dtype=np.float32), rng.standard_normal(4096, dtype=np.float32)
    lengths = rng.integers(0, 2000, 1000)
    lengths[::97] = 0  # some empty segments
    lengths = (lengths * (10**6 / lengths.sum())).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = rng.standard_normal(int(offsets[-1]), dtype=np.float32)

    sm, ln, seg = softmax_kernel(), layernorm_kernel(), segment_sum_kernel()
    rows = [
        ("softmax 1024x4096", lambda: oracle.run(sm, {"x": x}), lambda: softmax_numpy(x),
         lambda r: np.abs(r["out"] - softmax_numpy(x)).max()),
        ("layernorm 1024x4096", lambda: oracle.run(ln, {"x": x, "w": w, "b": bias, "eps": 1e-5}),
         lambda: layernorm_numpy(x, w, bias, 1e-5),
         lambda r: np.abs(r["out"] - layernorm_numpy(x, w, bias, 1e-5)[0]).max()),
        (f"segment sum {values.shape[0]} values / {lengths.shape[0]} segments",
         lambda: oracle.run(seg, {"values": values, "offsets": offsets}), lambda: segment_sum_numpy(values, offsets),
         lambda r: np.abs(r["out"] - segment_sum_numpy(values, offsets)).max()),
    ]
    print(f"{'kernel':<45} {'oracle ms':>10} {'numpy ms':>10} {'ratio':>7} {'max |diff|':>11}")
    for name, run_oracle, run_numpy, diff in rows:
        t_oracle = best_of(run_oracle, opts.repeat)
        t_numpy = best_of(run_numpy, opts.repeat)
        print(f"{name:<45} {t_oracle:>10.1f} {t_numpy:>10.1f} {t_oracle / t_numpy:>7.2f} "
              f"{diff(run_oracle()):>11.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
