"""Concrete inputs for differential cases, and the saved form of a case (`.kir` text plus JSON).

A case's parameters each have an `InputSpec` saying how its argument is drawn: plain values, indices
with a share out of range, a permutation (unique indices, some out of range), monotone offsets
(segments, empty ones included) a runtime scalar, or
zeros (a counter). Inputs are a pure function of
(kernel, shapes, specs, seed), so a saved case replays exactly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kir.core import Kernel, RefType, TensorType
from kir.dims import Dim
from kir.dtypes import DType
from kir.text import parse_kernel, print_kernel

Arg = np.ndarray | int | float | bool

INPUT_KINDS = ("values", "index", "perm", "offsets", "scalar", "zeros")
# Share of index values drawn out of range: reads there give the fill value, writes are dropped.
OUT_OF_RANGE_SHARE = 0.2
# Share of float inputs replaced by a special value when the spec asks for specials.
SPECIAL_SHARE = 0.1
SPECIAL_FLOATS = (0.0, -0.0, math.inf, -math.inf, math.nan, 1e-30, 65504.0, 3.0e38)


@dataclass(frozen=True)
class InputSpec:
    """How one parameter's argument is drawn.

    `extent` names the shape symbol that bounds indices (`index`, `perm`) or offsets (`offsets`).
    `wide` draws integers over the dtype's whole range (wrapping, saturation) instead of small ones;
    `specials` sprinkles NaN, infinities, signed zeros and huge values into floats.
    """

    kind: str
    extent: str | None = None
    wide: bool = False
    specials: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "extent": self.extent, "wide": self.wide, "specials": self.specials}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> InputSpec:
        return InputSpec(str(data["kind"]), data.get("extent"), bool(data.get("wide")), bool(data.get("specials")))


@dataclass(frozen=True)
class Case:
    """One differential test: a kernel, the shapes to run it at, how to draw its inputs, a seed."""

    kernel: Kernel
    shapes: tuple[tuple[str, int], ...]
    specs: tuple[tuple[str, InputSpec], ...]
    seed: int
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def env(self) -> dict[str, int]:
        return dict(self.shapes)

    @property
    def spec_of(self) -> dict[str, InputSpec]:
        return dict(self.specs)

    def inputs(self) -> dict[str, Arg]:
        """The arguments as a caller passes them: i4 tensors as their packed bytes (`kir.dtypes.I4_PACKING`)."""
        return packed_i4(self.kernel, make_inputs(self.kernel, self.env, self.spec_of, self.seed))

    def describe(self) -> str:
        shapes = ", ".join(f"{k}={v}" for k, v in self.shapes)
        return f"kernel {self.kernel.name} at {shapes or 'no symbols'}, input seed {self.seed}"


# ---------------------------------------------------------------------------------------------- drawing


def make_inputs(kernel: Kernel, env: Mapping[str, int], specs: Mapping[str, InputSpec], seed: int
                ) -> dict[str, Arg]:
    """One argument per parameter, drawn from one generator in parameter order."""
    rng = np.random.default_rng(seed)
    out: dict[str, Arg] = {}
    for p in kernel.params:
        spec = specs.get(p.name, InputSpec("values"))
        t = p.type
        dtype = t.dtype
        assert isinstance(dtype, DType), f"parameter {p.name} is not specialised"
        if isinstance(t, TensorType):
            out[p.name] = _scalar(dtype, spec, rng)
            continue
        assert isinstance(t, RefType)
        shape = tuple(_extent(d, env) for d in t.shape)
        bound = env.get(spec.extent, 0) if spec.extent else 0
        if spec.kind == "index":
            out[p.name] = _indices(shape, bound, dtype, rng)
        elif spec.kind == "perm":
            out[p.name] = _permutation(shape, bound, dtype, rng)
        elif spec.kind == "offsets":
            out[p.name] = _offsets(shape, bound, dtype, rng)
        elif spec.kind == "zeros":  # a counter that starts at zero (stream compaction)
            out[p.name] = np.zeros(shape, dtype=dtype.np)
        else:
            out[p.name] = _values(shape, dtype, spec, rng)
    return out


def packed_i4(kernel: Kernel, args: Mapping[str, Arg]) -> dict[str, Arg]:
    """`args` with each i4 tensor's values (int8, one a byte) packed two a byte as the kernel takes them."""
    from kir.dtypes import i4_packed

    return {p.name: (i4_packed(args[p.name]) if isinstance(p.type, RefType) and p.type.dtype is DType.i4
                     else args[p.name]) for p in kernel.params}


def _extent(d: Dim, env: Mapping[str, int]) -> int:
    n = d.evaluate(env)
    assert n >= 0, f"extent {d} is {n}"
    return n


def _scalar(dtype: DType, spec: InputSpec, rng: np.random.Generator) -> int | float | bool:
    value = _values((), dtype, spec, rng)
    if dtype.is_pred:
        return bool(value)
    return int(value) if dtype.is_int else float(value)


def _values(shape: tuple[int, ...], dtype: DType, spec: InputSpec, rng: np.random.Generator) -> np.ndarray:
    if dtype.is_pred:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.is_int:
        lo, hi = dtype.int_range
        if spec.wide:
            big = np.uint64 if dtype is DType.u64 else np.int64
            vals = rng.integers(lo, hi, size=shape, dtype=big, endpoint=True)
            edges = np.array([lo, hi, 0, 1, hi // 2], dtype=big)
            pick = rng.random(size=shape) < 0.2
            return np.where(pick, edges[rng.integers(0, len(edges), size=shape)], vals).astype(dtype.np)
        small = rng.integers(max(lo, -9), min(hi, 9) + 1, size=shape)
        return small.astype(dtype.np)
    scale = 4.0 if spec.wide else 1.0
    x = rng.standard_normal(size=shape) * scale
    if spec.specials:
        hit = rng.random(size=shape) < SPECIAL_SHARE
        x = np.where(hit, np.array(SPECIAL_FLOATS)[rng.integers(0, len(SPECIAL_FLOATS), size=shape)], x)
    if dtype is DType.bf16:
        from oracle.numerics import round_bf16

        return np.asarray(round_bf16(x.astype(np.float32)))
    with np.errstate(over="ignore"):
        return np.asarray(x.astype(dtype.np))


def _indices(shape: tuple[int, ...], extent: int, dtype: DType, rng: np.random.Generator) -> np.ndarray:
    lo, hi = dtype.int_range
    inside = rng.integers(0, max(extent, 1), size=shape)
    stray = rng.random(size=shape) < OUT_OF_RANGE_SHARE
    choices = [extent, extent + 1, extent + 7] + ([-1, -2] if lo < 0 else [])
    outside = np.array(choices)[rng.integers(0, len(choices), size=shape)]
    vals = np.where(stray | (extent == 0), outside, inside)
    return np.clip(vals, lo, hi).astype(dtype.np)


def _permutation(shape: tuple[int, ...], extent: int, dtype: DType, rng: np.random.Generator) -> np.ndarray:
    """Distinct indices: a shuffled prefix of 0..extent-1, some replaced by distinct out-of-range ones."""
    (n,) = shape
    lo, hi = dtype.int_range
    pool = list(range(extent)) + [extent + k for k in range(n)] + ([-1 - k for k in range(n)] if lo < 0 else [])
    pool = [v for v in pool if lo <= v <= hi]
    inside = rng.permutation(extent)[:n].tolist()
    outside = [v for v in pool if not 0 <= v < extent]
    rng.shuffle(outside)
    vals = []
    for k in range(n):
        use_outside = k >= len(inside) or rng.random() < OUT_OF_RANGE_SHARE
        vals.append(outside.pop() if use_outside and outside else inside[k] if k < len(inside) else outside.pop())
    return np.array(vals, dtype=dtype.np)


def _offsets(shape: tuple[int, ...], extent: int, dtype: DType, rng: np.random.Generator) -> np.ndarray:
    """Monotone offsets within [0, extent]; repeated cuts make empty segments, often on purpose."""
    (n,) = shape
    cuts = np.sort(rng.integers(0, extent + 1, size=n))
    if n and rng.random() < 0.7:
        cuts[0] = 0
    if n and rng.random() < 0.7:
        cuts[-1] = extent
    if n > 2 and rng.random() < 0.3:  # a run of empty segments in the middle
        k = int(rng.integers(1, n - 1))
        cuts[k] = cuts[k - 1]
    return np.sort(cuts).astype(dtype.np)


# ---------------------------------------------------------------------------------------------- saving


def save_case(case: Case, folder: Path, stem: str, info: Mapping[str, Any]) -> Path:
    """Write `<stem>.kir` (the kernel) and `<stem>.json` (shapes, input specs, seed, what happened)."""
    folder.mkdir(parents=True, exist_ok=True)
    kir_path = folder / f"{stem}.kir"
    kir_path.write_text(print_kernel(case.kernel) + "\n", encoding="utf-8")
    record = {"kernel": f"{stem}.kir", "shapes": dict(case.shapes), "seed": case.seed,
              "inputs": {name: spec.to_json() for name, spec in case.specs}, **info}
    (folder / f"{stem}.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return kir_path


def load_case(json_path: Path) -> tuple[Case, dict[str, Any]]:
    record = json.loads(json_path.read_text(encoding="utf-8"))
    kir_path = json_path.parent / record["kernel"]
    kernel = parse_kernel(kir_path.read_text(encoding="utf-8"), str(kir_path))
    specs = tuple((name, InputSpec.from_json(s)) for name, s in record["inputs"].items())
    case = Case(kernel, tuple((k, int(v)) for k, v in record["shapes"].items()), specs, int(record["seed"]))
    return case, record
