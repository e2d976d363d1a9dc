"""Cross-program reductions (`physical.passes.split_reduce`): few instances split their reduced axis.

Sizes stay small: a low loop budget (`INTENT_LOOP_BUDGET`) makes the chunks short, and a simulated
device of a few multiprocessors (`simulated_multiprocessors`) makes the launch split each row over
several programs, which Triton's interpreter then runs one at a time, in order. Every kernel is compared
with the oracle (exactly where the combine is exact), run twice more to check that the results are
bitwise the same and that the self-resetting ticket counter was left at zero, and its physical program
is verified after every pass.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import intent
from emit_triton.compile import clear_emitted
from emit_triton.launcher import launch, plan_launch
from emit_triton.targets import simulated_multiprocessors
from intent import Out, bf16, dims, f16, f32, f64, i32, i64, parallel, pred
from physical import ops as P
from physical.model import BufferInit, BufferScope
from physical.passes.looped import BUDGET_VARIABLE
from tests import perf_reduce_kernels as RK
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.test_perf_reduce_looped import lowered

M, N = dims("M N")
BUDGET = 64  # row elements per chunk at most: rows of a few hundred elements already split
DEVICE = 4  # simulated multiprocessors


@pytest.fixture(autouse=True)
def small_chunks(isolated_cache, monkeypatch):  # noqa: F811
    monkeypatch.setenv(BUDGET_VARIABLE, str(BUDGET))
    clear_emitted()
    with simulated_multiprocessors(DEVICE):
        yield
    clear_emitted()


@intent.kernel
def total_sum(x: f32[N], out: Out[f32[1]]):
    out[0] = intent.sum(x)


@intent.kernel
def total_sum_f64(x: f64[N], out: Out[f64[1]]):
    out[0] = intent.sum(x)


@intent.kernel
def total_sum_i32(x: i32[N], out: Out[i32[1]]):
    out[0] = intent.sum(x)


@intent.kernel
def total_max(x: f32[N], out: Out[f32[1]]):
    out[0] = intent.max(x)


@intent.kernel
def total_min(x: i32[N], out: Out[i32[1]]):
    out[0] = intent.min(x)


@intent.kernel
def total_prod(x: f32[N], out: Out[f32[1]]):
    out[0] = intent.prod(x)


@intent.kernel
def total_argmax(x: f32[N], out: Out[i64[1]]):
    out[0] = intent.argmax(x)


@intent.kernel
def total_argmin(x: i32[N], out: Out[i64[1]]):
    out[0] = intent.argmin(x)


@intent.kernel
def total_sum_f16(x: f16[N], out: Out[f16[1]]):
    out[0] = intent.sum(x)


@intent.kernel
def total_max_bf16(x: bf16[N], out: Out[bf16[1]]):
    out[0] = intent.max(x)


@intent.kernel
def any_positive(x: f32[N], out: Out[pred[1]]):
    out[0] = intent.any(x > 3.0)


@intent.kernel
def mean_rows(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.mean(x[i, :])


@intent.kernel
def mean_of_all(x: f32[N], out: Out[f32[1]]):
    out[0] = intent.sum(x) / 7.0


@intent.kernel
def row_sums(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.sum(x[i, :])


@intent.kernel
def column_sums(x: f32[M, N], out: Out[f32[N]]):
    for k in parallel(N):
        out[k] = intent.sum(x[:, k])


@intent.kernel
def matvec(x: f32[M, N], w: f32[N], out: Out[f32[M]]):
    """Every row reads the same vector: persistent programs where rows are many, split where they are few."""
    for i in parallel(M):
        out[i] = intent.sum(x[i, :] * w)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _f32(shape, seed: int = 0) -> torch.Tensor:
    return torch.tensor(_rng(seed).standard_normal(shape), dtype=torch.float32)


def _ties(n: int, seed: int = 0) -> torch.Tensor:
    """Small integers: the extreme occurs many times, so the first-index rule decides argmax/argmin."""
    return torch.tensor(_rng(seed).integers(-5, 6, n), dtype=torch.int32)


N_LONG = 600  # 10 chunks of 64 (a power of two: 16): split over up to 16 programs, some with no chunk
CASES = {
    "sum": (total_sum, lambda: {"x": _f32(N_LONG), "out": torch.empty(1)}, 1e-4),
    "sum_f64": (total_sum_f64, lambda: {"x": _f32(N_LONG).double(), "out": torch.empty(1, dtype=torch.float64)},
                1e-10),
    "sum_i32": (total_sum_i32, lambda: {"x": _ties(N_LONG), "out": torch.empty(1, dtype=torch.int32)}, None),
    "sum_f16": (total_sum_f16, lambda: {"x": _f32(N_LONG).half(), "out": torch.empty(1, dtype=torch.float16)}, 2e-2),
    "max_bf16": (total_max_bf16, lambda: {"x": _f32(N_LONG).bfloat16(), "out": torch.empty(1, dtype=torch.bfloat16)},
                 None),
    "any": (any_positive, lambda: {"x": _f32(N_LONG), "out": torch.empty(1, dtype=torch.bool)}, None),
    "mean_rows": (mean_rows, lambda: {"x": _f32((3, N_LONG)), "out": torch.empty(3)}, 1e-5),
    "max": (total_max, lambda: {"x": _f32(N_LONG), "out": torch.empty(1)}, None),
    "min_i32": (total_min, lambda: {"x": _ties(N_LONG), "out": torch.empty(1, dtype=torch.int32)}, None),
    "prod": (total_prod, lambda: {"x": 1.0 + 0.01 * _f32(N_LONG), "out": torch.empty(1)}, 1e-4),
    "argmax": (total_argmax, lambda: {"x": _f32(N_LONG).round(), "out": torch.empty(1, dtype=torch.int64)}, None),
    "argmin_ties": (total_argmin, lambda: {"x": _ties(N_LONG), "out": torch.empty(1, dtype=torch.int64)}, None),
    "sum_then_divide": (mean_of_all, lambda: {"x": _f32(N_LONG), "out": torch.empty(1)}, 1e-4),
    "row_sums": (row_sums, lambda: {"x": _f32((3, N_LONG)), "out": torch.empty(3)}, 1e-4),
    "column_sums": (column_sums, lambda: {"x": _f32((N_LONG, 5)), "out": torch.empty(5)}, 1e-4),
    "matvec": (matvec, lambda: {"x": _f32((3, N_LONG)), "w": _f32(N_LONG, 1), "out": torch.empty(3)}, 1e-4),
    "welford": (RK.welford, lambda: {"x": _f32((2, N_LONG), 3) * 3.0 + 10.0, "mean": torch.empty(2),
                                     "var": torch.empty(2)}, 1e-4),
    "first_nonzero": (RK.first_nz, lambda: {"x": _ties(2 * N_LONG).reshape(2, N_LONG) * (
        torch.arange(N_LONG) > 300).int(), "out": torch.empty(2, dtype=torch.int32)}, None),
}


def _splits(kernel, args: dict) -> int:
    plan = plan_launch(kernel.specialize(args), args, materialise=False)
    return max(v for k, v in plan.keywords.items() if k.startswith("SPLITS_"))


def _numpy(t: torch.Tensor) -> np.ndarray:
    """As NumPy (bf16 widened to f32, exactly: the bits of every bf16 value survive)."""
    return (t.float() if t.dtype is torch.bfloat16 else t).numpy().copy()


def _oracle(kernel, args: dict) -> dict[str, np.ndarray]:
    want = kernel.oracle(**{n: v.clone() for n, v in args.items()})
    return {n: np.asarray(w).astype(np.float32) if args[n].dtype is torch.bfloat16 else w for n, w in want.items()}


def _outputs(kernel, args: dict) -> dict[str, np.ndarray]:
    return {n: _numpy(args[n]) for n in _oracle(kernel, args)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_split_reduction_matches_the_oracle_and_repeats_bitwise(case):
    kernel, make, tol = CASES[case]
    args = make()
    assert _splits(kernel, args) > 1, "the launch does not split the reduction"
    want = _oracle(kernel, args)
    kernel(**args)
    first = _outputs(kernel, args)
    for name, w in want.items():
        if tol is None:
            np.testing.assert_array_equal(first[name], w, err_msg=f"{case}: {name}")
        else:
            np.testing.assert_allclose(first[name], w, rtol=tol, atol=tol, err_msg=f"{case}: {name}")
    # Later launches reuse the cached (self-resetting) counter: had a launch left it changed, no program
    # would draw the last ticket and the outputs (poisoned here) would keep the poison.
    for _ in range(2):
        for name in want:
            args[name].fill_(-7)
        kernel(**args)
        again = _outputs(kernel, args)
        for name in want:
            assert first[name].tobytes() == again[name].tobytes(), f"{case}: {name} differs bitwise between launches"


@pytest.mark.parametrize("case", ["sum", "argmax", "row_sums", "column_sums", "welford", "matvec"])
def test_split_program_verifies_after_every_pass(case):
    kernel, make, _ = CASES[case]
    program = lowered(kernel, make())  # the verifier runs after construction and after each pass
    (g,) = program.groups
    choice = P.looped_rows(g.body)
    assert choice is not None
    split = [op for op in choice.looped.ops if isinstance(op, P.SplitIndex)]
    assert len(split) == 1
    tickets = [op for op in choice.looped.walk() if isinstance(op, P.Ticket)]
    assert len(tickets) == 1
    scopes = {b.name: (b.scope, b.init) for b in program.buffers if b.scope is BufferScope.INVOCATION_WORKSPACE}
    assert scopes["arrivals"] == (BufferScope.INVOCATION_WORKSPACE, BufferInit.SELF_RESETTING)
    assert all(init is BufferInit.UNINITIALISED for name, (_, init) in scopes.items() if name != "arrivals")
    counters = [w for w in program.workspaces if w.resets]
    assert len(counters) == 1 and counters[0].fill == 0


def test_split_reduction_passes_the_memory_sanitizer():
    """Slots and counters stay inside their workspaces; each slot is written before it is read."""
    args = CASES["row_sums"][1]()
    launch(row_sums.specialize(args), args, sanitize=True)
    np.testing.assert_allclose(args["out"].numpy(), args["x"].double().sum(1).numpy(), rtol=1e-4, atol=1e-4)


def test_column_sums_fold_blocks_of_contiguous_columns():
    args = CASES["column_sums"][1]()
    program = lowered(column_sums, args)
    loads = [op for op in P.looped_rows(program.groups[0].body).looped.walk() if isinstance(op, P.Load)
             and program.buffer(op.access.buffer).name == "x"]
    (load,) = loads
    rows_coord, cols_coord = load.access.coords
    assert cols_coord.type.lanes and not cols_coord.type.tile  # columns: the program's lanes (unit stride)
    assert rows_coord.type.tile and not rows_coord.type.lanes  # rows: the chunk walked in the loop


def test_many_rows_keep_one_program_per_block():
    """Blocks of rows enough to fill the device: no split (S = 1); on Triton's interpreter (no device) never."""
    many = {"x": torch.empty(4096, N_LONG), "out": torch.empty(4096)}
    assert _splits(row_sums, many) == 1
    few = {"x": torch.empty(3, N_LONG), "out": torch.empty(3)}
    assert _splits(row_sums, few) == 16  # 16 = next_pow2(10) chunks: one per program, some programs none
    with simulated_multiprocessors(0):
        assert _splits(row_sums, few) == 1


def test_explain_shows_the_cross_program_plan():
    args = {"x": _f32(1024), "out": torch.empty(1)}  # whole chunks: the byte estimate is near exact
    text = total_sum.explain(**args)
    assert "split across programs: SPLITS_0 programs share the reduction" in text
    assert "combines the SPLITS_0 slots in slot order" in text
    assert "partial: f32[1] invocation_workspace, init uninitialised" in text
    assert "arrivals: i32[1] invocation_workspace, init self_resetting" in text
    assert "runs in one program instance" not in text
    found = re.search(r"SPLITS_0 = (\d+),", text)  # the numbers at the call's shapes
    assert found is not None and int(found.group(1)) > 1, text
    assert f"a single instance, split: SPLITS_0 = {found.group(1)} programs per reduction, combined in slot order" \
        in text
    # the slots are read once, by the last program: the estimate stays near the ideal
    moved = re.search(r"memory: ([\d,]+) bytes moved, an estimate, ideal ([\d,]+)", text)
    assert moved is not None
    assert int(moved.group(1).replace(",", "")) < 1.4 * int(moved.group(2).replace(",", "")), text


@intent.kernel
def sum_and_max(x: f32[N], out: Out[f32[2]]):
    out[0] = intent.sum(x)
    out[1] = intent.max(x)


def test_a_group_of_two_reductions_keeps_its_plan_and_its_note():
    args = {"x": _f32(N_LONG), "out": torch.empty(2)}
    program = lowered(sum_and_max, args)
    assert not any(isinstance(op, P.SplitIndex) for g in program.groups
                   for op in (P.looped_rows(g.body).looped.ops if P.looped_rows(g.body) is not None else ()))
    assert any("a reduction is split across programs only where" in n.message for n in program.notes)
    sum_and_max(**args)
    np.testing.assert_allclose(args["out"].numpy(), [args["x"].double().sum(), args["x"].max()], rtol=1e-4)


def test_sm90_ptx_draws_tickets_with_an_acq_rel_device_scope_atomic(monkeypatch):
    monkeypatch.delenv(BUDGET_VARIABLE)
    clear_emitted()
    with simulated_multiprocessors(132):
        ptx = total_sum.ptx(x=torch.empty(1 << 20), out=torch.empty(1))
    assert set(re.findall(r"atom\.[\w.]+", ptx)) == {"atom.global.gpu.acq_rel.add.u32"}
    assert "bar.sync" in ptx


def test_a_persistent_loop_over_split_blocks_is_refused():
    """Persistent programs walk whole blocks: where programs share a block, the persistent flag must be off."""
    import dataclasses

    from physical.launch_expr import LConst
    from physical.verifier import PhysicalVerifyError, verify

    args = CASES["matvec"][1]()
    program = lowered(matvec, args)
    (g,) = program.groups
    loop = P.block_loop(P.whole_form(g.body).ops)
    assert loop is not None
    forced = tuple((n, LConst(1) if n == loop.flag else e) for n, e in program.constexprs)
    broken = dataclasses.replace(program, constexprs=forced)
    with pytest.raises(PhysicalVerifyError) as info:
        verify(broken, matvec.specialize(args))
    assert info.value.rule == "ownership"
    assert info.value.message == ("[ownership] group 0 (parallel) walks its blocks persistently while SPLITS_0 = 4 "
                                  "programs share each block (M=4099, N=4116 on 132 multiprocessors)")


@intent.kernel
def column_min_and_row_max(x: f16[M, N], y: f32[M, N], cols: Out[f16[N]], rows: Out[f32[M]]):
    cols[:] = intent.min(x, axis=0)
    rows[:] = intent.max(y, axis=1)


def test_a_later_split_restates_the_workspaces_of_an_earlier_one():
    """Each split rewrites the constexprs' terms (its looped flag, inside num_warps); an earlier split's slot
    array, sized in those terms, follows, so its copy count stays its split count (campaign 9400029: the
    stale count named resident programs of the old num_warps, which the sanitizer's copy bound could not)."""
    args = {"x": torch.randn(300, 5).half(), "y": torch.randn(300, 5), "cols": torch.empty(5).half(),
            "rows": torch.empty(300)}
    program = lowered(column_min_and_row_max, args, BUDGET)
    consts = dict(program.constexprs)
    slots = [b for b in program.buffers if b.name == "partial"]
    assert len(slots) == 2
    for b in slots:
        assert b.copies == consts[f"SPLITS_{b.owner_group}"]
        assert next(w.count for w in program.workspaces if w.name == b.storage).children()[0] == b.copies
    launch(column_min_and_row_max.specialize(args), args, sanitize=True)
    assert torch.equal(args["cols"], args["x"].amin(0)) and torch.equal(args["rows"], args["y"].amax(1))
