"""The StableHLO exit on whole kernels: the acceptance kernels' KIR, the `.kir` examples, and the oracle.

Each kernel runs through XLA (`oracle.stablehlo.run`) and is compared with a NumPy reference written
here and with the NumPy oracle (`oracle.run`): integers exactly, floats within a tolerance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oracle
import oracle.stablehlo as shlo
from kir.cli import specialize_dtypes
from kir.errors import NotExpressible
from kir.inputs import random_inputs
from kir.reduce import ReduceKind
from kir.text import parse_file
from oracle.philox import philox_rand
from tests import samples
from tests import stablehlo_kernels as K

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parent.parent


def close(got: np.ndarray, want: np.ndarray, tol: float = 1e-5) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def against_oracle(kernel, args: dict, tol: float = 1e-5) -> dict[str, np.ndarray]:
    got = shlo.run(kernel, args)
    want = oracle.run(kernel, args)
    assert set(got) == set(want)
    for name in want:
        close(got[name], want[name], tol)
    return got


rng = np.random.default_rng(1234)


def randn(*shape: int, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------------------------- acceptance


def test_vector_add_is_one_add_and_out_is_not_an_input() -> None:
    x, y = randn(7), randn(7)
    text = shlo.emit(samples.vector_add(), {"x": x, "y": y})
    assert "func.func @main(%x: tensor<7xf32>, %y: tensor<7xf32>) -> (tensor<7xf32>)" in text
    assert text.count("stablehlo.add") == 1
    close(against_oracle(samples.vector_add(), {"x": x, "y": y})["out"], x + y)


def test_axpy_scalar_parameter_is_a_rank0_input() -> None:
    x, y = randn(9), randn(9)
    text = shlo.emit(K.axpy(), {"a": 0.5, "x": x, "y": y})
    assert "%a: tensor<f32>" in text
    close(against_oracle(K.axpy(), {"a": 0.5, "x": x, "y": y})["out"], np.float32(0.5) * x + y)


@pytest.mark.parametrize("m,n", [(1, 1), (3, 17)])
def test_softmax(m: int, n: int) -> None:
    x = randn(m, n) * 4
    e = np.exp(x - x.max(1, keepdims=True))
    close(against_oracle(samples.softmax(), {"x": x})["out"], e / e.sum(1, keepdims=True))


def test_softmax_nan_and_inf_rows() -> None:
    x = np.array([[0.0, -np.inf, 1.0], [np.nan, 0.0, 0.0]], np.float32)
    got = against_oracle(samples.softmax(), {"x": x})["out"]
    assert np.isnan(got[1]).all()
    close(got[0], np.array([1 / (1 + np.e), 0.0, np.e / (1 + np.e)], np.float32))


def test_layernorm_three_outputs() -> None:
    x, w, b = randn(5, 33) * 3 + 1, randn(33), randn(33)
    got = against_oracle(K.layernorm(), {"x": x, "w": w, "b": b, "eps": 1e-5}, 1e-4)
    mu = x.mean(1)
    r = 1 / np.sqrt(x.var(1) + 1e-5)
    close(got["out"], (x - mu[:, None]) * r[:, None] * w + b, 1e-4)
    close(got["mean"], mu, 1e-5)
    close(got["rstd"], r, 1e-4)


def test_cumsum_rows() -> None:
    x = randn(3, 100)
    close(against_oracle(K.cumsum_rows(), {"x": x}, 1e-4)["out"], np.cumsum(x, 1), 1e-4)


def test_reverse_exclusive_cumsum_is_exact_on_integers() -> None:
    x = rng.integers(-50, 50, (4, 37)).astype(np.int32)
    want = np.flip(np.cumsum(np.flip(x, 1), 1), 1) - x
    close(against_oracle(K.cumsum_rows(K.i32, reverse=True, exclusive=True), {"x": x})["out"], want)


def _offsets(lengths: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


@pytest.mark.parametrize("lengths", [[1], [3, 0, 5], [0, 0, 1], [40, 1, 97, 0, 6]])
def test_segment_sum_and_max(lengths: list[int]) -> None:
    offs = _offsets(lengths)
    v = randn(max(int(offs[-1]), 1))
    segs = [v[offs[i]:offs[i + 1]] for i in range(len(lengths))]
    close(against_oracle(samples.segment_sum(), {"values": v, "offsets": offs}, 1e-5)["out"],
          np.array([s.sum() for s in segs], np.float32), 1e-5)
    close(against_oracle(K.segment_fold(ReduceKind.max), {"values": v, "offsets": offs})["out"],
          np.array([s.max() if s.size else -np.inf for s in segs], np.float32))


def test_matmul_f16_accumulates_in_f32() -> None:
    a, b = randn(17, 65, dtype=np.float16), randn(65, 33, dtype=np.float16)
    text = shlo.emit(K.matmul(), {"a": a, "b": b})
    assert "stablehlo.convert %a : (tensor<17x65xf16>) -> tensor<17x65xf32>" in text
    close(against_oracle(K.matmul(), {"a": a, "b": b}, 1e-4)["c"], a.astype(np.float32) @ b.astype(np.float32),
          1e-4)


def test_bmm() -> None:
    a, b = randn(3, 4, 6), randn(3, 6, 5)
    close(against_oracle(K.bmm(), {"a": a, "b": b}, 1e-5)["c"], a @ b, 1e-5)


def test_welford_custom_tuple_reduce() -> None:
    x = randn(4, 129) + 100
    got = against_oracle(K.welford(), {"x": x}, 1e-4)
    close(got["mean"], x.mean(1), 1e-4)
    close(got["var"], x.var(1), 1e-3)


def test_two_groups() -> None:
    x, v = randn(7, 30), randn(11)
    got = against_oracle(K.two_groups(), {"x": x, "v": v, "s": 3.0})
    close(got["sums"], x.sum(1), 1e-5)
    close(got["scaled"], v * np.float32(3.0))


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_generic_dtype_specialisations(dtype: str) -> None:
    torch = pytest.importorskip("torch")
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    x = torch.randn(9, 77, generator=torch.Generator().manual_seed(3)).to(tdt)
    kernel = K.scaled_row_max(getattr(K, dtype))
    got = shlo.run(kernel, {"x": x})["out"]
    assert got.dtype == (np.float16 if dtype == "f16" else np.float32)
    close(got, (x.amax(1) * 2).float().numpy())
    close(got, oracle.run(kernel, {"x": x})["out"])


def test_histogram_inout_drops_out_of_range() -> None:
    x = np.array([0, 1, 1, 5, -1, 2, 3, 2], np.int32)
    counts = np.array([1, 0, 0, 7], np.int32)
    got = against_oracle(samples.histogram(), {"x": x, "counts": counts})["counts"]
    close(got, np.array([2, 2, 2, 8], np.int32))
    assert counts.tolist() == [1, 0, 0, 7]


def test_recurrence_is_a_while_loop() -> None:
    a, x = rng.random((3, 5)).astype(np.float32), randn(3, 5)
    text = shlo.emit(samples.recurrence(), {"a": a, "x": x})
    assert '"stablehlo.while"' in text and '"stablehlo.dynamic_update_slice"' in text
    want = np.zeros_like(x)
    acc = np.zeros(3, np.float32)
    for t in range(5):
        acc = a[:, t] * acc + x[:, t]
        want[:, t] = acc
    close(against_oracle(samples.recurrence(), {"a": a, "x": x}, 1e-5)["h"], want, 1e-5)


@pytest.mark.parametrize("seed", [0, 42, 2**40 + 3])
def test_dropout_is_bit_exact(seed: int) -> None:
    x = randn(300)
    r = philox_rand(seed, np.arange(300, dtype=np.int64))
    p = np.float32(0.25)
    want = np.where(r >= p, x / (np.float32(1.0) - p), np.float32(0.0)).astype(np.float32)
    got = shlo.run(K.dropout(), {"x": x, "p": 0.25, "seed": seed})["out"]
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------- examples


def _examples() -> list[tuple[str, object]]:
    """Every kernel of examples/kir, generic ones once per dtype choice."""
    out = []
    for path in sorted((ROOT / "examples" / "kir").glob("*.kir")):
        for k in parse_file(str(path)):
            if not k.dtype_vars:
                out.append((f"{path.stem}:{k.name}", k))
                continue
            var = k.dtype_vars[0]
            for choice in var.choices:
                out.append((f"{path.stem}:{k.name}[{choice}]", specialize_dtypes(k, {var.name: choice})))
    return out


@pytest.mark.parametrize("name,kernel", _examples(), ids=[n for n, _ in _examples()])
def test_kir_examples_match_the_oracle_or_refuse(name: str, kernel) -> None:
    args = random_inputs(kernel, {s: 5 for s in kernel.symbols}, seed=7)
    try:
        text = shlo.emit(kernel, args)
    except NotExpressible as exc:
        assert "is not expressible at the StableHLO exit" in str(exc)
        assert ".kir:" in str(exc)  # located at the op's line
        return
    assert shlo.runtime.serialize(text)
    against_oracle(kernel, args, 1e-4)
