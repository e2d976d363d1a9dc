"""Small helpers to build KIR kernels through the builder for the oracle tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from kir import (
    INDEX_DTYPE,
    Builder,
    Constant,
    For,
    Kernel,
    Load,
    Parallel,
    Param,
    RefType,
    Role,
    Slice,
    Store,
    TensorType,
    Value,
    Yield,
    build_kernel,
    scalar,
)
from kir.dims import DConst, Dim, Pred, as_dim
from kir.dtypes import DType
from kir.errors import Loc
from kir.solver import ShapeSolver

Params = dict[str, Value]
LOC = Loc("kernel.py", 12, 5)


def dims(*shape: int | str | Dim) -> tuple[Dim, ...]:
    return tuple(as_dim(d) for d in shape)


def tensor(dtype: DType, *shape: int | str | Dim, role: Role = Role.IN) -> RefType:
    return RefType(dtype, dims(*shape), role)


def out(dtype: DType, *shape: int | str | Dim) -> RefType:
    return tensor(dtype, *shape, role=Role.OUT)


def inout(dtype: DType, *shape: int | str | Dim) -> RefType:
    return tensor(dtype, *shape, role=Role.INOUT)


def kernel(params: dict[str, RefType | TensorType], body: Callable[[Builder, Params], None],
           symbols: Sequence[str] = (), requires: Sequence[Pred] = (), checks: bool = False,
           name: str = "k") -> Kernel:
    """A kernel whose top-level body is built by `body(b, params)` (the final yield is added here)."""
    solver = ShapeSolver(tuple(symbols), tuple(requires))
    b = Builder(solver)
    args = b.begin_region(tuple(params.values()), tuple(params))
    vals = dict(zip(params, args))
    body(b, vals)
    b.make(Yield, values=())
    region = b.end_region()
    ps = tuple(Param(n, a) for n, a in zip(params, args))
    return build_kernel(name, ps, tuple(symbols), region, requires=tuple(requires), checks=checks)


def parallel(b: Builder, domain: Sequence[int | str | Dim], body: Callable[..., None]) -> None:
    """`parallel(domain)`: `body(b, *indices)` builds the instance body."""
    idx = b.begin_region((scalar(INDEX_DTYPE),) * len(domain), tuple(f"i{k}" for k in range(len(domain))))
    body(b, *idx)
    b.make(Yield, values=())
    b.make(Parallel, domain=dims(*domain), body=b.end_region())


def for_loop(b: Builder, start: Value, stop: Value, step: Value, inits: Sequence[Value],
             body: Callable[..., Sequence[Value]]) -> tuple[Value, ...]:
    """`for iv in range(start, stop, step)` with carries; `body(b, iv, *carried)` returns the next carries."""
    args = b.begin_region((start.type, *(v.type for v in inits)))
    nxt = body(b, *args)
    b.make(Yield, values=tuple(nxt))
    return b.make(For, start=start, stop=stop, step=step, inits=tuple(inits), body=b.end_region()).results


def const(b: Builder, value: int | float | bool, dtype: DType) -> Value:
    return b.add(Constant, value=value, dtype=dtype)


def full_index(ref: Value) -> tuple[Slice, ...]:
    return tuple(Slice(DConst(0), d) for d in ref.type.shape)  # type: ignore[union-attr]


def load_all(b: Builder, ref: Value) -> Value:
    return b.add(Load, src=ref, index=full_index(ref))


def store_all(b: Builder, ref: Value, value: Value) -> None:
    b.make(Store, dst=ref, index=full_index(ref), value=value)


def row(b: Builder, ref: Value, i: Value) -> Value:
    """`ref[i, :, ...]`."""
    return b.add(Load, src=ref, index=(i, *full_index(ref)[1:]))


def store_row(b: Builder, ref: Value, i: Value, value: Value) -> None:
    b.make(Store, dst=ref, index=(i, *full_index(ref)[1:]), value=value)


def elementwise(op: Callable[[Builder, list[Value]], Value], ins: Sequence[RefType], result: RefType,
                per_row: bool = False, symbols: Sequence[str] = ()) -> Kernel:
    """`out = op(x0, x1, ...)` on whole tensors at top level, or row by row inside `parallel`."""
    names = [f"x{k}" for k in range(len(ins))]
    params: dict[str, RefType | TensorType] = dict(zip(names, ins))
    params["out"] = result

    def body(b: Builder, p: Params) -> None:
        if not per_row:
            store_all(b, p["out"], op(b, [load_all(b, p[n]) for n in names]))
            return

        def instance(b: Builder, i: Value) -> None:
            store_row(b, p["out"], i, op(b, [row(b, p[n], i) for n in names]))

        parallel(b, ins[0].shape[:1], instance)

    return kernel(params, body, symbols=symbols)


def run_both(op: Callable[[Builder, list[Value]], Value], ins: Sequence[RefType], result: RefType,
             arrays: Sequence[Any], symbols: Sequence[str] = ()) -> np.ndarray:
    """Run an elementwise kernel at top level and per row; both must agree bit for bit."""
    import oracle

    args = {f"x{k}": a for k, a in enumerate(arrays)}
    whole = oracle.run(elementwise(op, ins, result, symbols=symbols), args)["out"]
    rows = oracle.run(elementwise(op, ins, result, per_row=True, symbols=symbols), args)["out"]
    np.testing.assert_array_equal(whole, rows)
    return whole


def as_torch(x: np.ndarray, dtype: DType) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(x))
    return t.to(torch.bfloat16) if dtype is DType.bf16 else t
