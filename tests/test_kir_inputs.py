"""Random inputs for `kirc run`/`lower`: refinements, offsets, indices, dtypes and outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kir.errors import LaunchError
from kir.inputs import random_inputs
from kir.text import parse_file, parse_kernel
from tests import samples

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "kir"


def example(file: str, name: str):
    return next(k for k in parse_file(str(EXAMPLES / file)) if k.name == name)


def launch_error(fn) -> str:
    with pytest.raises(LaunchError) as info:
        fn()
    return str(info.value)


def test_shapes_dtypes_and_outputs() -> None:
    args = random_inputs(samples.softmax(), {"M": 3, "N": 5}, seed=1)
    assert args["x"].shape == (3, 5) and args["x"].dtype == np.float32
    assert np.array_equal(args["out"], np.zeros((3, 5), np.float32))
    assert args["x"].std() > 0.1  # normal draws, not a constant
    again = random_inputs(samples.softmax(), {"M": 3, "N": 5}, seed=1)
    assert np.array_equal(args["x"], again["x"])
    other = random_inputs(samples.softmax(), {"M": 3, "N": 5}, seed=2)
    assert not np.array_equal(args["x"], other["x"])


def test_segment_offsets_are_monotone_from_zero() -> None:
    k = samples.segment_sum()
    for seed in range(20):
        offs = random_inputs(k, {"S": 6, "E": 40}, seed)["offsets"]
        assert offs.dtype == np.int64 and offs.shape == (7,)
        assert offs[0] == 0 and offs[-1] == 40
        assert np.all(np.diff(offs) >= 0)
    for k in parse_file(str(EXAMPLES / "segment_sum.kir")):
        offs = random_inputs(k, {"S": 3, "E": 9}, 0)["offsets"]
        assert offs[0] == 0 and offs[-1] == 9 and np.all(np.diff(offs) >= 0)


def test_index_inputs_are_mostly_in_range() -> None:
    args = random_inputs(samples.histogram(), {"E": 4000, "B": 16}, seed=0)
    x = args["x"]
    inside = (x >= 0) & (x < 16)
    assert 0.9 < inside.mean() < 1.0  # a few out of range, on both sides
    assert (x < 0).any() and (x >= 16).any()
    ids = random_inputs(example("gather_scatter.kir", "embedding"), {"V": 7, "D": 2, "N": 3000}, 0)["ids"]
    assert ((ids >= 0) & (ids < 7)).mean() > 0.9 and not ((ids >= 0) & (ids < 7)).all()


def test_unsigned_and_narrow_index_inputs_fit_their_dtype() -> None:
    text = """kernel f(src: in f32[V], ids: in u8[N], out: out f32[N]) symbols(V, N) {
  %i: u8[N] = load %ids[0:N]
  %v: f32[N] = gather %src[%i]
  store %out[0:N] = %v
  yield
}"""
    ids = random_inputs(parse_kernel(text), {"V": 1000, "N": 2000}, 0)["ids"]
    assert ids.dtype == np.uint8
    assert (ids == 255).any() and ids.min() >= 0  # 1000 bins do not fit u8: the stray values clip to 255


def test_other_dtypes() -> None:
    text = """kernel f(a: in f16[N], b: in bf16[N], c: in i8[N], d: in u32[N], e: in pred[N], s: i32, t: f64, p: pred,
              o: inout i16[N], h: bf16, z: in bf16[]) symbols(N) {
  yield
}"""
    args = random_inputs(parse_kernel(text), {"N": 64}, 0)
    assert args["a"].dtype == np.float16
    b = args["b"]
    assert b.dtype == np.float32 and np.all((b.view(np.uint32) & 0xFFFF) == 0)  # bf16 values stored as f32
    assert args["c"].dtype == np.int8 and np.all(args["c"] != 0) and (args["c"] < 0).any()
    assert args["d"].dtype == np.uint32 and args["d"].min() >= 1
    assert args["e"].dtype == np.bool_
    assert isinstance(args["s"], int) and isinstance(args["t"], float) and isinstance(args["p"], bool)
    assert args["o"].dtype == np.int16 and np.all(args["o"] != 0)  # inout is an input too
    assert isinstance(args["h"], float) and np.float32(args["h"]).view(np.uint32) & 0xFFFF == 0
    assert args["z"].shape == () and args["z"].dtype == np.float32


def test_refinement_and_symbol_errors() -> None:
    k = samples.softmax()
    assert launch_error(lambda: random_inputs(k, {"M": 2, "N": 70000})) == \
        "the shapes do not satisfy kernel softmax's refinements: N <= 65536 failed: N = 70000"
    assert launch_error(lambda: random_inputs(k, {"M": 0, "N": 4})) == \
        "the shapes do not satisfy kernel softmax's refinements: M >= 1 failed: M = 0"
    assert launch_error(lambda: random_inputs(k, {"M": 2})) == \
        "kernel softmax needs a value for shape symbol N (--shape N=...)"
    assert launch_error(lambda: random_inputs(k, {"M": 2, "N": 2, "Q": 1})) == \
        "kernel softmax has no shape symbol Q (its symbols: M, N)"
    generic = parse_file(str(EXAMPLES / "generic.kir"))[0]
    assert launch_error(lambda: random_inputs(generic, {"M": 2, "N": 2})) == \
        "kernel scaled_row_max is generic in T; specialise it first (--dtype T=...)"


def test_symbols_may_be_zero_when_stated() -> None:
    k = parse_kernel("kernel f(x: in f32[N]) symbols(N) requires(N >= 0) {\n  yield\n}")
    assert random_inputs(k, {"N": 0}, 0)["x"].shape == (0,)
