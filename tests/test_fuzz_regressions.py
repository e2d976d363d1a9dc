"""Regression tests for what the fuzzers found.

Every case saved under tests/fuzz_cases (a `.kir` kernel plus a `.json` with shapes, input specs and
seed) is replayed through the oracle, the launcher and the StableHLO exit. A case whose JSON has an
`xfail` reason is a bug that is not fixed yet, in a package that is still being written: it must
still fail (strict), so that whoever fixes it removes the mark. The tests after that pin bugs that were
fixed at their root.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import emit_triton
import oracle
from kir import (
    Builder,
    DType,
    Histogram,
    Load,
    Param,
    RefType,
    Role,
    Slice,
    VerifyError,
    Yield,
    build_kernel,
    verify,
)
from kir.dims import DConst, DSym
from kir.errors import LaunchError
from kir.solver import ShapeSolver
from tests import samples
from tests.differential import run_case
from tests.diffinputs import load_case

CASES = sorted((Path(__file__).resolve().parent / "fuzz_cases").glob("*.json"))


def _param(path: Path):
    record = json.loads(path.read_text(encoding="utf-8"))
    marks = [pytest.mark.xfail(reason=record["xfail"], strict=True)] if record.get("xfail") else []
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("path", [_param(p) for p in CASES])
def test_saved_case_agrees_with_the_oracle(path: Path) -> None:
    case, record = load_case(path)
    outcome = run_case(case, stablehlo=record.get("stablehlo", True))
    assert not outcome.failed, f"{case.describe()}\n{outcome.text()}"


def test_every_saved_case_is_complete() -> None:
    assert CASES, "tests/fuzz_cases holds no case"
    for path in CASES:
        record = json.loads(path.read_text(encoding="utf-8"))
        assert (path.parent / record["kernel"]).is_file(), path
        assert set(record) >= {"kernel", "shapes", "seed", "inputs", "failure"}, path
        if record.get("xfail"):
            assert record.get("signature"), f"{path}: an expected failure records what failed"


# ---------------------------------------------------------------------------------------------- fixed bugs


def test_verifier_rejects_an_undeclared_shape_symbol() -> None:
    """Found by the differential generator: a histogram over `B` in a kernel that does not declare B
    verified, then failed in the oracle with a KeyError."""
    n, bins = DSym("N"), DSym("B")
    b = Builder(ShapeSolver(("N", "B")))
    (keys,) = b.begin_region((RefType(DType.i32, (n,), Role.IN),), ("keys",))
    values = b.add(Load, src=keys, index=(Slice(DConst(0), n),))
    b.add(Histogram, values=values, bins=bins)
    b.make(Yield, values=())
    kernel = build_kernel("h", (Param("keys", keys),), ("N",), b.end_region())
    with pytest.raises(VerifyError) as err:
        verify(kernel)
    assert err.value.message == "histogram uses the undeclared shape symbol B (declared symbols: N)"


def test_verifier_rejects_an_undeclared_symbol_in_a_parameter() -> None:
    b = Builder(ShapeSolver(("N", "M")))
    (x,) = b.begin_region((RefType(DType.f32, (DSym("M"),), Role.IN),), ("x",))
    b.make(Yield, values=())
    with pytest.raises(VerifyError) as err:
        verify(build_kernel("k", (Param("x", x),), ("N",), b.end_region()))
    assert err.value.message == "parameter x uses the undeclared shape symbol M (declared symbols: N)"


def test_a_sparse_tensor_is_a_launch_error_not_a_crash() -> None:
    """Found by launch-argument fuzzing: a sparse tensor reached `data_ptr()` and raised RuntimeError."""
    x = torch.randn(2, 3).to_sparse()
    with pytest.raises(LaunchError) as err:
        emit_triton.launch(samples.softmax(), {"x": x, "out": torch.empty(2, 3)})
    assert str(err.value) == ("parameter x: expected a dense (strided) tensor (in f32[M, N]), got a tensor with "
                              "layout torch.sparse_coo")
    with pytest.raises(LaunchError) as err:
        oracle.run(samples.softmax(), {"x": x, "out": torch.empty(2, 3)})
    assert str(err.value) == "x: expected an f32[M, N] tensor, got a tensor with layout torch.sparse_coo"


def test_a_meta_tensor_is_a_launch_error_in_the_oracle() -> None:
    """Found by launch-argument fuzzing: the oracle raised NotImplementedError copying a meta tensor."""
    with pytest.raises(LaunchError) as err:
        oracle.run(samples.softmax(), {"x": torch.empty(2, 3, device="meta"), "out": np.zeros((2, 3), np.float32)})
    assert str(err.value) == "x: expected an f32[M, N] tensor, got a tensor on the meta device (it has no data)"


def test_bitcast_of_bf16_to_bf16_is_the_identity_in_the_oracle() -> None:
    """Found by the differential campaign: the oracle viewed bf16's 16-bit pattern as its f32 storage."""
    from kir.text import parse_kernel

    k = parse_kernel("""kernel same_bits(x: in bf16[N], out: out bf16[N]) symbols(N) {
  %a: bf16[N] = load %x[0:N]
  %b: bf16[N] = bitcast %a to bf16
  store %out[0:N] = %b
  yield
}""")
    x = np.array([1.5, -2.0, 0.0078125, np.inf, -0.0], np.float32)
    got = oracle.run(k, {"x": x, "out": np.zeros(5, np.float32)})["out"]
    assert got.tobytes() == x.tobytes()


LOG_EXP = """kernel log_exp(x: in f32[N], out: out f32[N]) symbols(N) {
  %a: f32[N] = load %x[0:N]
  %e: f32[N] = unary exp %a
  %l: f32[N] = unary log %e
  store %out[0:N] = %l
  yield
}"""


def test_stablehlo_results_may_flush_subnormals_inside_the_computation(monkeypatch) -> None:
    """XLA's CPU runtime flushes f32 subnormals inside the computation, not only at its outputs: exp(-95) is 0
    there and log(exp(-95)) is -inf, where the oracle gives -95. The oracle run that flushes every intermediate
    value (`flush_subnormals=True`) is the StableHLO exit's second accepted answer; any other result still
    mismatches."""
    import oracle.stablehlo as shlo
    from kir.text import parse_kernel
    from tests.differential import _stablehlo
    from tests.diffinputs import Case

    k = parse_kernel(LOG_EXP)
    case = Case(k, (("N", 3),), (), 0)
    inputs = {"x": np.array([-95.0, -87.0, 1.0], np.float32), "out": np.zeros(3, np.float32)}
    want = oracle.run(k, dict(inputs))
    assert abs(want["out"][0] + 95.0) < 1e-3
    assert shlo.run(k, dict(inputs))["out"][0] == -np.inf  # what XLA does
    assert _stablehlo(case, inputs, want) == ("ok", [])
    monkeypatch.setattr(shlo, "run", lambda kernel, args: {"out": np.array([-94.0, -87.0, 1.0], np.float32)})
    outcome, problems = _stablehlo(case, inputs, want)
    assert outcome == "mismatch" and problems[0].startswith("stablehlo: out")


def test_every_binder_solves_a_symbol_that_only_appears_in_a_compound_extent() -> None:
    """Found by the differential campaign: `out: i32[B + B]` bound B in the launcher only."""
    from kir.dims import DConst, DSym, dim_bin, solve_for
    from kir.text import parse_kernel
    from oracle.stablehlo import run as stablehlo_run

    k = parse_kernel("""kernel twice(x: in i32[N], out: out i32[B + B], tail: out i32[2 * B + 1]) symbols(N, B) {
  %a: i32[N] = load %x[0:N]
  %c: i32 = constant 7 : i32
  %b: i32[B + B] = broadcast %c shape=(B + B) dims=()
  store %out[0:B + B] = %b
  %d: i32[2 * B + 1] = broadcast %c shape=(2 * B + 1) dims=()
  store %tail[0:2 * B + 1] = %d
  yield
}""")
    x = np.zeros(3, np.int32)
    args = {"x": x, "out": np.zeros(6, np.int32), "tail": np.zeros(7, np.int32)}
    assert oracle.run(k, dict(args))["out"].tolist() == [7] * 6
    assert stablehlo_run(k, dict(args))["tail"].tolist() == [7] * 7
    out, tail = torch.zeros(6, dtype=torch.int32), torch.zeros(7, dtype=torch.int32)
    emit_triton.launch(k, {"x": torch.from_numpy(x), "out": out, "tail": tail})
    assert out.tolist() == [7] * 6 and tail.tolist() == [7] * 7
    square = dim_bin("*", DSym("B"), DSym("B"))
    assert solve_for(square, "B", 9, {}) is None  # not affine: left to the other tensors
    assert solve_for(dim_bin("+", DSym("B"), DConst(2)), "B", 1, {}) == -1  # the lower bounds reject it later


@pytest.mark.parametrize("target", ["%out[0:B, 0:1, 0:1]", "%out[0:B, %z, 0:1]"])
def test_a_keepdims_reduction_stored_into_unit_slices_constructs(target: str) -> None:
    """Found by the differential campaign: construction refused `out[0:B, 0:1, 0:1] = reduce(..., keepdims)`
    with 'rank mismatch (stored value and target slice): [1, 1] vs []'."""
    from kir.text import parse_kernel

    value = "%r" if target.count("0:1") == 2 else "%s"
    k = parse_kernel(f"""kernel keep(u: in f32[B, M, K], out: out f32[B, 1, 1]) symbols(M, K, B) {{
  %x: f32[B, M, K] = load %u[0:B, 0:M, 0:K]
  %r: f32[B, 1, 1] = reduce sum(%x) axes=(1, 2) keepdims=true
  %s: f32[B, 1] = reshape %r shape=(B, 1)
  %z: i64 = constant 0 : i64
  store {target} = {value}
  yield
}}""")
    u = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    want = oracle.run(k, {"u": u, "out": np.zeros((2, 1, 1), np.float32)})["out"]
    got = torch.zeros(2, 1, 1)
    emit_triton.launch(k, {"u": torch.from_numpy(u), "out": got})
    assert np.allclose(got.numpy(), want) and np.allclose(want[:, 0, 0], u.sum(axis=(1, 2)))
