"""Random concrete arguments for a specialised kernel, honouring its refinements and its index inputs.

* Floats come from a normal distribution, integers are small and non-zero, preds are fair coins; i4
  values cover -8..7 and are given packed two per byte (kir.dtypes.I4_PACKING), as every i4 argument.
* Outputs (`out`) are zero-filled; `inout` parameters are random like inputs.
* A 1-D integer parameter whose values bound a data-dependent subregion `b:e` (the offsets of a CSR
  or segment layout) gets monotone offsets from 0 within the extent of the sliced axis.
* An integer parameter whose values index a gather, scatter, atomic or histogram gets values in
  range, plus a few out of range (the semantics define those: fill on read, dropped on write).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from .access import Gather, Load, Scatter
from .atomic import Atomic, AtomicCAS
from .core import DynSlice, Kernel, Op, Param, RefType, Region, TensorType, Value
from .dims import Dim
from .dtypes import DType, i4_packed
from .errors import LaunchError
from .histogram import Histogram
from .region import RegionFold, RegionScan
from .solver import check_concrete, default_lower_bounds

Arg = np.ndarray | int | float | bool

# Share of index values drawn out of range, to exercise fill-on-read and dropped writes.
OUT_OF_RANGE_SHARE = 0.05


@dataclass
class _IndexUse:
    offsets_extent: int | None = None  # smallest extent of an axis sliced by these offsets
    index_extent: int | None = None    # smallest extent of an axis indexed by these values


def concrete_shapes(kernel: Kernel, shapes: Mapping[str, int]) -> dict[str, int]:
    """Check `shapes` binds exactly the kernel's symbols and satisfies its refinements and axioms."""
    unknown = sorted(set(shapes) - set(kernel.symbols))
    if unknown:
        raise LaunchError(f"kernel {kernel.name} has no shape symbol {unknown[0]} "
                          f"(its symbols: {', '.join(kernel.symbols) or 'none'})")
    missing = [s for s in kernel.symbols if s not in shapes]
    if missing:
        raise LaunchError(f"kernel {kernel.name} needs a value for shape symbol {missing[0]} "
                          f"(--shape {missing[0]}=...)")
    env = {s: int(shapes[s]) for s in kernel.symbols}
    preds = default_lower_bounds(kernel.symbols, kernel.requires) + kernel.requires + kernel.axioms
    failure = check_concrete(preds, env)
    if failure is not None:
        raise LaunchError(f"the shapes do not satisfy kernel {kernel.name}'s refinements: {failure}")
    return env


def random_inputs(kernel: Kernel, shapes: Mapping[str, int], seed: int = 0) -> dict[str, Arg]:
    """One argument per parameter: NumPy arrays for tensors, Python scalars for runtime scalars."""
    if kernel.dtype_vars:
        names = ", ".join(v.name for v in kernel.dtype_vars)
        raise LaunchError(f"kernel {kernel.name} is generic in {names}; specialise it first (--dtype {names}=...)")
    env = concrete_shapes(kernel, shapes)
    uses = _index_uses(kernel, env)
    rng = np.random.default_rng(seed)
    return {p.name: _argument(p, env, uses.get(p.name), rng) for p in kernel.params}


def _argument(p: Param, env: dict[str, int], use: _IndexUse | None, rng: np.random.Generator) -> Arg:
    t = p.type
    dtype = t.dtype
    if not isinstance(dtype, DType):
        raise LaunchError(f"parameter {p.name} has the dtype variable {dtype}; specialise the kernel first")
    if isinstance(t, TensorType):  # a runtime scalar
        return _scalar(dtype, rng)
    shape = tuple(_extent(d, env, p.name) for d in t.shape)
    if dtype is DType.i4:  # packed two per byte, as every i4 argument (kir.dtypes.I4_PACKING); the whole range
        if not shape or shape[-1] % 2:
            raise LaunchError(f"parameter {p.name}: an i4 tensor packs two elements per byte along its last axis, "
                              f"which must have an even extent, got shape {list(shape)}")
        values = np.zeros(shape, np.int8) if t.role.value == "out" else rng.integers(-8, 8, size=shape)
        return i4_packed(values)
    if t.role.value == "out":
        return np.zeros(shape, dtype=dtype.np)
    if use is not None and dtype.is_int:
        if use.offsets_extent is not None and len(shape) == 1:
            return _offsets(shape[0], use.offsets_extent, dtype, rng)
        extent = use.index_extent if use.index_extent is not None else use.offsets_extent
        return _indices(shape, extent or 1, dtype, rng)
    return _values(shape, dtype, rng)


def _extent(d: Dim, env: dict[str, int], name: str) -> int:
    n = d.evaluate(env)
    if n < 0:
        raise LaunchError(f"parameter {name}: extent {d} is {n} for these shapes")
    return n


def _scalar(dtype: DType, rng: np.random.Generator) -> int | float | bool:
    if dtype.is_pred:
        return bool(rng.integers(0, 2))
    if dtype.is_int:
        return int(rng.integers(1, 8))
    return float(_values((1,), dtype, rng).reshape(-1)[0])


def _values(shape: tuple[int, ...], dtype: DType, rng: np.random.Generator) -> np.ndarray:
    if dtype.is_pred:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.is_int:
        if dtype.is_signed:
            mag = rng.integers(1, 9, size=shape)
            vals = np.where(rng.integers(0, 2, size=shape) == 1, mag, -mag)
        else:
            vals = rng.integers(1, 17, size=shape)
        return vals.astype(dtype.np)
    x = rng.standard_normal(size=shape).astype(np.float32)
    if dtype is DType.bf16:
        x = _round_to_bf16(x)
    if dtype.is_fp8:
        from .dtypes import fp8_rounded

        x = fp8_rounded(x, dtype).reshape(np.shape(x))
    return np.asarray(x.astype(dtype.np))


def _round_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round to the nearest bf16 (ties to even), kept in f32 storage; the shape is kept (0-d too)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return rounded.view(np.float32).reshape(np.shape(x))


def _offsets(length: int, extent: int, dtype: DType, rng: np.random.Generator) -> np.ndarray:
    """Monotone offsets from 0 whose last entry is the sliced extent: segments tile the axis."""
    extent = min(extent, dtype.int_range[1])
    if length == 0:
        return np.zeros(0, dtype=dtype.np)
    cuts = np.sort(rng.integers(0, extent + 1, size=max(length - 2, 0)))
    offs = np.concatenate([[0], cuts, [extent]])[:length] if length > 1 else np.zeros(1, dtype=np.int64)
    return offs.astype(dtype.np)


def _indices(shape: tuple[int, ...], extent: int, dtype: DType, rng: np.random.Generator) -> np.ndarray:
    lo, hi = dtype.int_range
    top = max(min(extent, hi + 1), 1)
    vals = rng.integers(0, top, size=shape)
    stray = rng.random(size=shape) < OUT_OF_RANGE_SHARE
    outside = np.where(rng.integers(0, 2, size=shape) == 1, top, -1) if lo < 0 else np.full(shape, top)
    vals = np.where(stray, np.clip(outside, lo, hi), vals)
    return vals.astype(dtype.np)


# ---------------------------------------------------------------------------------------------- analysis


def _index_uses(kernel: Kernel, env: dict[str, int]) -> dict[str, _IndexUse]:
    """Which integer parameters feed subregion bounds or data-dependent indices, and the extents."""
    sources: dict[int, set[str]] = {p.value.id: set() for p in kernel.params}
    params = {p.value.id: p.name for p in kernel.params}
    uses: dict[str, _IndexUse] = {}

    def note(v: Value, extent_dim: Dim, offsets: bool) -> None:
        extent = extent_dim.evaluate(env)
        for name in sources.get(v.id, ()):
            u = uses.setdefault(name, _IndexUse())
            if offsets:
                u.offsets_extent = extent if u.offsets_extent is None else min(u.offsets_extent, extent)
            else:
                u.index_extent = extent if u.index_extent is None else min(u.index_extent, extent)

    def visit(region: Region) -> None:
        for o in region.ops:
            for r in o.regions():
                visit(r)
            _flow(o, sources, params)
            _note_uses(o, note)

    visit(kernel.body)
    return uses


def _flow(o: Op, sources: dict[int, set[str]], params: dict[int, str]) -> None:
    """Results carry the parameters their values were read from (through any arithmetic)."""
    came: set[str] = set()
    if isinstance(o, Load | Gather) and o.src.id in params:
        came.add(params[o.src.id])
    for v in o.operands():
        if not isinstance(v.type, RefType):
            came |= sources.get(v.id, set())
    for v in o.results:
        sources[v.id] = came


def _note_uses(o: Op, note: Callable[[Value, Dim, bool], None]) -> None:
    if isinstance(o, RegionFold | RegionScan):
        pairs = [(o.src, o.index)] if isinstance(o, RegionFold) else [(o.src, o.src_index), (o.dst, o.dst_index)]
        for ref, index in pairs:
            for ax, it in enumerate(index):
                if isinstance(it, DynSlice):
                    extent = ref.type.shape[ax]  # type: ignore[union-attr]
                    note(it.begin, extent, True)
                    note(it.end, extent, True)
    elif isinstance(o, Gather | Scatter | Atomic | AtomicCAS):
        ref = o.src if isinstance(o, Gather) else o.dst
        for ax, v in enumerate(o.indices):
            note(v, ref.type.shape[ax], False)  # type: ignore[union-attr]
    elif isinstance(o, Histogram):
        note(o.values, o.bins, False)


def torch_argument(dtype: DType, value: Arg):  # -> torch.Tensor | scalar
    """An argument of `random_inputs` as the launcher takes it: bf16 and fp8 arrays (f32 holding values of the
    dtype) as tensors of that dtype; i4 arrays are already the packed bytes."""
    if not isinstance(value, np.ndarray):
        return value
    import torch

    t = torch.from_numpy(np.ascontiguousarray(value))
    return t.to(dtype.torch) if dtype.in_f32 else t
