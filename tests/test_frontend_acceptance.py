"""Every acceptance kernel (tests/acceptance) builds KIR that passes the verifier, with the structure SPEC §4
implies."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch

import intent
import kir
from kir import (
    Atomic,
    AtomicKind,
    Broadcast,
    Cast,
    Constant,
    DimValue,
    Dot,
    DType,
    DynSlice,
    For,
    Load,
    Parallel,
    Random,
    Reduce,
    ReduceKind,
    RegionFold,
    Role,
    Scan,
    ScanKind,
    Store,
)
from tests.acceptance import FILES, path_of
from tests.frontend_support import op_names, ops


@functools.cache
def _kernels(name: str) -> dict[str, intent.KernelObject]:
    return intent.kernels_in_file(str(path_of(name)))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_acceptance_kernel_builds_and_verifies(path: Path) -> None:
    found = intent.kernels_in_file(str(path))
    assert found
    for k in found.values():
        built = k.kir
        assert isinstance(built, kir.Kernel)
        assert built.name == k.__name__
        kir.verify(built)
        assert all(o.loc is not None and o.loc.file == str(path) for o in built.walk())


def test_acceptance_files_are_all_covered() -> None:
    assert {p.stem for p in FILES} >= {"vector_add", "softmax", "layernorm", "segment_sum", "recurrence", "matmul",
                                       "histogram", "cumsum", "dropout", "welford", "two_groups", "generic_dtype"}


def test_softmax_structure() -> None:
    k = _kernels("softmax")["softmax"].kir
    assert [str(p) for p in k.requires] == ["N <= 65536"]
    assert k.symbols == ("M", "N")
    (par,) = [o for o in k.body.ops if isinstance(o, Parallel)]
    assert [str(d) for d in par.domain] == ["M"]
    assert [r.kind for r in ops(k, Reduce)] == [ReduceKind.max, ReduceKind.sum]
    assert len(ops(k, Broadcast)) == 2  # the two scalars broadcast against the row, explicitly


def test_vector_add_top_level_is_tensor_ops_without_parallel() -> None:
    found = _kernels("vector_add")
    add = found["add"].kir
    assert op_names(add) == {"Load", "Binary", "Store", "Yield"}
    (store,) = ops(add, Store)
    assert str(store.index[0].stop) == "N"
    axpy = found["axpy"].kir
    assert axpy.param("a").type == kir.scalar(DType.f32)
    assert "Broadcast" not in op_names(axpy)  # scalars all the way


def test_layernorm_weakly_typed_dims_become_dim_and_cast() -> None:
    k = _kernels("layernorm")["layernorm"].kir
    dims = ops(k, DimValue)
    assert [str(d.dim) for d in dims] == ["N", "N"]
    assert all(d.dtype == DType.i64 for d in dims)
    casts = ops(k, Cast)
    assert [c.dtype for c in casts] == [DType.f32, DType.f32]
    assert k.param("eps").type == kir.scalar(DType.f32)
    assert [p.role for p in k.outputs] == [Role.OUT, Role.OUT, Role.OUT]


def test_segment_sum_is_a_region_fold_over_a_data_dependent_subregion() -> None:
    found = _kernels("segment_sum")
    for name, kind in (("segment_sum", ReduceKind.sum), ("segment_max", ReduceKind.max)):
        k = found[name].kir
        (fold,) = ops(k, RegionFold)
        assert fold.kind is kind and fold.map is None
        (dyn,) = fold.index
        assert isinstance(dyn, DynSlice)
        assert str(k.param("offsets").type) == "in i64[S + 1]"


def test_recurrence_carries_the_accumulator_through_an_ordered_for() -> None:
    k = _kernels("recurrence")["linear_recurrence"].kir
    (loop,) = ops(k, For)
    assert len(loop.inits) == 1 and loop.results[0].type == kir.scalar(DType.f32)
    init_op = next(o for o in k.walk() if o.results and o.results[0] == loop.inits[0])
    assert isinstance(init_op, Constant) and init_op.value == 0.0 and init_op.dtype == DType.f32
    assert [type(x).__name__ for x in ops(k, Load)[0].index] == ["Value", "Value"]


def test_matmul_dot_accumulates_in_f32_and_bmm_has_a_batch_dim() -> None:
    found = _kernels("matmul")
    (dot,) = ops(found["matmul"].kir, Dot)
    assert (dot.lhs_contract, dot.rhs_contract, dot.acc_dtype) == ((1,), (0,), DType.f32)
    assert "Parallel" not in op_names(found["matmul"].kir)
    (bdot,) = ops(found["bmm"].kir, Dot)
    assert (bdot.lhs_batch, bdot.rhs_batch, bdot.lhs_contract, bdot.rhs_contract) == ((0,), (0,), (2,), (1,))


def test_histogram_atomic_add_with_weak_one() -> None:
    k = _kernels("histogram")["histogram"].kir
    (at,) = ops(k, Atomic)
    assert at.kind is AtomicKind.add
    one = next(o for o in k.walk() if o.results and o.results[0] == at.value)
    assert isinstance(one, Constant) and one.value == 1 and one.dtype == DType.i32
    assert k.param("counts").role is Role.INOUT


def test_cumsum_flags() -> None:
    found = _kernels("cumsum")
    (plain,) = ops(found["cumsum_rows"].kir, Scan)
    assert (plain.kind, plain.axis, plain.reverse, plain.exclusive) == (ScanKind.sum, 0, False, False)
    (rev,) = ops(found["reverse_exclusive_cumsum"].kir, Scan)
    assert (rev.reverse, rev.exclusive) == (True, True)


def test_dropout_random_and_weak_literals() -> None:
    k = _kernels("dropout")["dropout"].kir
    (rnd,) = ops(k, Random)
    assert str(rnd.kind) == "rand"
    assert {c.dtype for c in ops(k, Constant)} == {DType.f32}
    assert k.param("seed").type == kir.scalar(DType.i64)


def test_welford_custom_combine_over_three_components() -> None:
    k = _kernels("welford")["welford"].kir
    (red,) = ops(k, Reduce)
    assert red.kind is ReduceKind.custom and len(red.inputs) == 3 and red.identity == (0.0, 0.0, 0.0)
    assert red.combine is not None and len(red.combine.args) == 6 and len(red.combine.yielded) == 3
    combine_lines = {o.loc.line for o in red.combine.ops if o.loc is not None}
    assert combine_lines & {14, 15, 16, 17}  # ops of the combine body point at the combine function


def test_two_groups_are_two_parallels() -> None:
    k = _kernels("two_groups")["row_sums_and_scale"].kir
    pars = [o for o in k.body.ops if isinstance(o, Parallel)]
    assert [str(p.domain[0]) for p in pars] == ["M", "P"]


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16, torch.float32])
def test_generic_kernel_specialises_per_dtype(dt: torch.dtype) -> None:
    k = _kernels("generic_dtype")["scaled_row_max"]
    generic = k.kir
    assert [v.name for v in generic.dtype_vars] == ["T"]
    x = torch.zeros(3, 5, dtype=dt)
    spec = k.specialize({"x": x, "out": torch.zeros(3, dtype=dt)})
    want = DType.from_torch(dt)
    assert spec.dtype_vars == ()
    assert spec.param("x").type.dtype == want and spec.param("out").type.dtype == want
    assert {c.dtype for c in ops(spec, Constant)} == {want}
    kir.verify(spec)
    assert k.specialize({"x": x}) is spec  # cached per dtype assignment


def test_generic_kernel_specialises_from_numpy_arrays() -> None:
    k = _kernels("generic_dtype")["scaled_row_max"]
    spec = k.specialize({"x": np.zeros((2, 2), np.float16)})
    assert spec.param("x").type.dtype == DType.f16
