"""One place decides whether a reduction or scan is native (physical/ops/reduce.py, scan.py): the register
budgets of the looped-rows pass and the emitter read `Reduce.native` / `Scan.native`.

Regression: an exclusive integer product scan has no exact inverse (inclusive / x fails at x == 0), so it
runs the element-order tree; the looped-rows budget once counted it native while the emitter built the tree.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import emit_triton
import oracle
import physical
from emit_triton.compile import clear_emitted
from kir.dtypes import DType
from kir.reduce import ReduceKind
from kir.scan import Scan, ScanKind
from physical import ops as P
from physical.passes.looped import BUDGET_VARIABLE, REGISTER_VALUES, TREE_VALUES, budget, row_axis
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.stablehlo_kernels import KB, M, N, full, out, ref


@pytest.fixture(autouse=True)
def private_cache(isolated_cache):  # noqa: F811
    clear_emitted()
    yield isolated_cache
    clear_emitted()


def test_the_native_decision_per_kind() -> None:
    assert P.native_scan(ScanKind.sum, 1, False, DType.f32) and P.native_scan(ScanKind.prod, 1, False, DType.i32)
    assert P.native_scan(ScanKind.sum, 1, True, DType.i32)  # inclusive minus own wraps exactly
    assert not P.native_scan(ScanKind.sum, 1, True, DType.f32)  # would round
    assert not P.native_scan(ScanKind.prod, 1, True, DType.i32)  # no inverse at zero
    assert not P.native_scan(ScanKind.prod, 1, True, DType.f32)
    assert not P.native_scan(ScanKind.max, 1, False, DType.f32) and not P.native_scan(ScanKind.sum, 2, False, DType.f32)
    assert P.native_reduce(ReduceKind.sum) and P.native_reduce(ReduceKind.argmax, 1)
    assert not P.native_reduce(ReduceKind.prod) and not P.native_reduce(ReduceKind.argmax, 2)
    assert not P.native_reduce(ReduceKind.custom)


def _scan_kernel(kind: ScanKind, exclusive: bool, dtype: DType = DType.i32):
    k = KB(f"scan_{kind}_{exclusive}", "M N", [("x", ref(dtype, M, N)), ("out", out(dtype, M, N))])
    s = k.add(Scan, inputs=(k.load("x", full(M), full(N)),), axis=1, kind=kind, exclusive=exclusive)
    k.store("out", (full(M), full(N)), s)
    return k.done()


def _plan(kernel) -> tuple[P.Scan, int, str]:
    program = physical.lower(kernel)
    group = program.groups[0]
    (scan,) = [op for op in P.whole_form(group.body).walk() if isinstance(op, P.Scan)]
    source = emit_triton.emit(program).source
    return scan, budget(group, row_axis(group), None), source


@pytest.mark.parametrize("exclusive", [False, True])
def test_budget_and_emitter_agree_for_integer_product_scans(exclusive: bool) -> None:
    scan, rows, source = _plan(_scan_kernel(ScanKind.prod, exclusive))
    assert scan.native is not exclusive
    assert ("tl.cumprod" in source) is scan.native
    # one load and one component; the budget is a power of two
    assert rows == (REGISTER_VALUES // 2 if scan.native else 1 << (TREE_VALUES.bit_length() - 1))
    scan, rows, source = _plan(_scan_kernel(ScanKind.sum, exclusive))
    assert scan.native and "tl.cumsum" in source and rows == REGISTER_VALUES // 2


@pytest.mark.parametrize("n,looped", [(37, False), (40, True)])
def test_exclusive_integer_product_scan_matches_the_oracle(monkeypatch, n: int, looped: bool) -> None:
    if looped:
        monkeypatch.setenv(BUDGET_VARIABLE, "16")
    kernel = _scan_kernel(ScanKind.prod, True)
    rng = np.random.default_rng(7)
    x = rng.integers(-2, 3, (3, n)).astype(np.int32)
    x[0, 5] = 0  # the zero an inverse would divide by
    want = oracle.run(kernel, {"x": x, "out": np.zeros((3, n), np.int32)})["out"]
    got = torch.zeros(3, n, dtype=torch.int32)
    emit_triton.launch(kernel, {"x": torch.from_numpy(x), "out": got})
    np.testing.assert_array_equal(got.numpy(), want)
    assert want[0, 6:].tolist() == [0] * (n - 6)
