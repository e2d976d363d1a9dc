"""Persistent vs looped rows (`physical.passes.looped`): both forms match the oracle; the looped body is verified.

The looped form is forced on small rows with a small budget (`INTENT_LOOP_BUDGET`, read when the pass
runs; the emitted-kernel cache is cleared around each test so that the budget takes effect).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import emit_triton
import physical
from bench.traffic import TrafficCounter
from emit_triton.compile import clear_emitted
from physical.launch_expr import LConst
from physical.lowering import run_pipeline
from physical.model import Ownership
from physical.passes import PIPELINE
from physical.passes.looped import BUDGET_VARIABLE, LoopRows, budget, plan_group, row_axis
from tests import perf_reduce_kernels as K
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.test_perf_reduce_combine import assert_matches, sparse_ints

SMALL = 16  # rows longer than this are looped in the tests that force it


@pytest.fixture(autouse=True)
def private_cache(isolated_cache):  # noqa: F811
    clear_emitted()
    yield isolated_cache
    clear_emitted()


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setenv(BUDGET_VARIABLE, str(SMALL))
    clear_emitted()


def lowered(kernel, args: dict, budget: int | None = None) -> physical.Program:
    """The program `physical.lower` gives, with the looped pass at `budget`; verified after every pass."""
    k = kernel.specialize(args)
    program = physical.verify(physical.construct(k), k)
    passes = [LoopRows(budget) if isinstance(p, LoopRows) else p for p in PIPELINE]
    return run_pipeline(program, verify_with=k, passes=passes)[0]


def rows(m: int, n: int, seed: int = 0, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    return torch.tensor(np.random.default_rng(seed).standard_normal((m, n)) * scale + shift, dtype=torch.float32)


def softmax_args(m: int, n: int) -> dict:
    return {"x": rows(m, n, n, 4.0), "out": torch.empty(m, n)}


def layernorm_args(m: int, n: int) -> dict:
    return {"x": rows(m, n, n, 3.0, 1.0), "w": rows(1, n, n + 1)[0], "b": rows(1, n, n + 2)[0], "eps": 1e-5,
            "out": torch.empty(m, n), "mean": torch.empty(m), "rstd": torch.empty(m)}


# ---------------------------------------------------------------------------------------------- the plan


@pytest.mark.parametrize("kernel,args,passes", [
    (K.softmax, softmax_args(2, 5), 3),            # max; sum of exponentials; the normalised store
    (K.layernorm, layernorm_args(2, 5), 3),        # mean; variance; the store
    (K.welford, {"x": rows(2, 5), "mean": torch.empty(2), "var": torch.empty(2)}, 1),
    (K.cumsum_rows, {"x": rows(2, 5), "out": torch.empty(2, 5)}, 1),
    (K.normalised_cumsum, {"x": rows(2, 5), "out": torch.empty(2, 5)}, 2),
], ids=lambda v: getattr(v, "__name__", None))
def test_looped_bodies_verify_and_walk_the_row_once_per_dependent_stage(kernel, args, passes) -> None:
    program = lowered(kernel, args, budget=SMALL)
    (group,) = program.groups
    choice = physical.ops.looped_rows(group.body)
    assert choice is not None and choice.loops == passes
    consts = dict(program.constexprs)
    flag, chunk = choice.flag, choice.chunk.block
    assert consts[chunk] == LConst(SMALL)
    assert consts[flag].evaluate({"M": 2, "N": SMALL}) == 0 and consts[flag].evaluate({"M": 2, "N": SMALL + 1}) == 1
    assert sum(isinstance(op, physical.model.For) for op in choice.looped.ops) == passes
    assert physical.print_program(program).count(f"looped_rows flag={flag} ") == 1


def test_the_budget_follows_the_values_a_program_keeps_per_row_element() -> None:
    def model(kernel, args) -> int:
        program = physical.lower(kernel.specialize(args))
        group = program.groups[0]
        return budget(group, row_axis(group), None)

    assert model(K.softmax, softmax_args(2, 5)) == 32768  # one row, one component: the rows
    assert model(K.layernorm, layernorm_args(2, 5)) == 16384  # x, w and b
    assert model(K.cumsum_rows, {"x": rows(2, 5), "out": torch.empty(2, 5)}) == 32768
    assert model(K.welford, {"x": rows(2, 5), "mean": torch.empty(2), "var": torch.empty(2)}) == 4096
    program = physical.lower(K.softmax.specialize(softmax_args(2, 5)))
    warps = program.num_warps
    assert warps.evaluate({"M": 8, "N": 32768}) == 16  # persistent up to 32768 f32 with 16 warps
    assert dict(program.constexprs)["BLOCK_N_LOOPED"].evaluate({"M": 8, "N": 32768}) == 0
    assert dict(program.constexprs)["BLOCK_N_LOOPED"].evaluate({"M": 8, "N": 32769}) == 1


def test_rows_proven_short_stay_persistent_only() -> None:
    program = physical.lower(K.short_softmax.specialize(softmax_args(2, 5)))
    assert physical.ops.looped_rows(program.groups[0].body) is None
    reason = plan_group(program, program.groups[0])
    assert reason == "the row N always fits the persistent budget of 32768"


def test_tiles_of_two_axes_are_not_looped() -> None:
    args = {"x": torch.zeros(2, 3, 5), "out": torch.empty(2, dtype=torch.int64)}
    program = physical.lower(K.argmax_planes.specialize(args))
    assert physical.ops.looped_rows(program.groups[0].body) is None
    assert plan_group(program, program.groups[0]) == "no single row axis"


def test_rows_beyond_the_largest_tile_launch_in_the_looped_form() -> None:
    # a persistent tile over 2**20 elements is refused at launch; the looped form takes any row
    program = physical.lower(K.cumsum_rows.specialize({"x": rows(2, 5), "out": torch.empty(2, 5)}))
    env = {"M": 2, "N": (1 << 22) + 3}
    values = {}
    for name, e in program.constexprs:
        values[name] = e.evaluate({**env, **values})
    assert values["BLOCK_N_LOOPED"] == 1 and values["BLOCK_N_CHUNK"] == 4096 and values["BLOCK_I0"] == 1
    assert program.num_warps.evaluate(env) == 8  # the warps follow the chunk a program holds


def test_looped_rows_share_a_program_by_their_chunk() -> None:
    # welford's rows are walked 1024 elements at a time: four rows per program, as a 4096-element tile
    program = physical.lower(K.welford.specialize({"x": rows(2, 5), "mean": torch.empty(2), "var": torch.empty(2)}))
    consts = dict(program.constexprs)
    for n, lanes, programs in ((4096, 1, 64), (4097, 4, 16), (100, 32, 2)):
        env = {"M": 64, "N": n}
        assert consts["BLOCK_I0"].evaluate(env) == lanes
        assert program.grid.evaluate(env) == programs
    physical.verify(program)


# ---------------------------------------------------------------------------------------------- results


@pytest.mark.parametrize("n", (1, 16, 17, 33, 65))
def test_softmax_and_layernorm_both_forms_match_the_oracle(small_budget, n: int) -> None:
    assert_matches(K.softmax, softmax_args(3, n), tol=1e-5)
    assert_matches(K.layernorm, layernorm_args(3, n), tol=1e-4)


def test_looped_softmax_keeps_infinities_and_nan() -> None:
    x = torch.tensor([[0.0, float("-inf"), 1.0] * 7, [float("nan")] + [0.0] * 20])
    for n_budget in (None, "4"):
        clear_emitted()
        with pytest.MonkeyPatch.context() as mp:
            if n_budget:
                mp.setenv(BUDGET_VARIABLE, n_budget)
            assert_matches(K.softmax, {"x": x, "out": torch.empty(2, 21)}, tol=1e-6)


@pytest.mark.parametrize("n", (16, 17, 50))
def test_looped_tuple_and_order_keeping_reductions(small_budget, n: int) -> None:
    x = rows(3, n, n, 1.0, 100.0)
    x[1, n - 1] = float("inf")
    assert_matches(K.welford, {"x": x, "mean": torch.empty(3), "var": torch.empty(3)}, tol=1e-3)
    assert_matches(K.first_nz, {"x": sparse_ints(np.random.default_rng(n), (3, n), 0.05),
                                "out": torch.empty(3, dtype=torch.int32)})
    y = rows(3, n, n + 1)
    y[0, n // 2] = float("nan")
    assert_matches(K.argmax_rows, {"x": y, "out": torch.empty(3, dtype=torch.int64)})


@pytest.mark.parametrize("kernel", [K.cumsum_rows, K.exclusive_cumsum, K.reverse_exclusive_cumsum, K.cummax_rows,
                                    K.cummin_reverse, K.normalised_cumsum], ids=lambda k: k.__name__)
def test_looped_float_scans_carry_the_running_prefix(small_budget, kernel) -> None:
    x = rows(2, 41, 3)
    assert_matches(kernel, {"x": x, "out": torch.empty(2, 41)}, tol=1e-4)


@pytest.mark.parametrize("kernel", [K.last_nz_scan, K.last_nz_scan_reverse, K.last_nz_scan_exclusive,
                                    K.reverse_exclusive_int_cumsum], ids=lambda k: k.__name__)
def test_looped_integer_scans_are_exact_in_both_directions(small_budget, kernel) -> None:
    x = sparse_ints(np.random.default_rng(7), (2, 50), 0.1)
    assert_matches(kernel, {"x": x, "out": torch.empty(2, 50, dtype=torch.int32)})


def test_looped_tuple_scans_keep_the_element_order(small_budget) -> None:
    rng = np.random.default_rng(5)
    a = torch.tensor(rng.integers(-3, 4, (2, 45)), dtype=torch.int32)
    b = torch.tensor(rng.integers(-50, 50, (2, 45)), dtype=torch.int32)
    for kernel in (K.affine_scan, K.affine_scan_reverse_exclusive):
        assert_matches(kernel, {"a": a, "b": b, "oa": torch.empty(2, 45, dtype=torch.int32),
                                "ob": torch.empty(2, 45, dtype=torch.int32)})


# ---------------------------------------------------------------------------------------------- traffic


def loaded_bytes(kernel, args: dict) -> int:
    with TrafficCounter({k: v for k, v in args.items() if isinstance(v, torch.Tensor)}) as counter:
        kernel(**args)
    return counter.traffic.read_by["x"]


def test_persistent_softmax_reads_its_input_once_the_looped_one_per_pass(monkeypatch) -> None:
    args = softmax_args(3, 40)
    assert loaded_bytes(K.softmax, dict(args, out=torch.empty(3, 40))) == 3 * 40 * 4
    monkeypatch.setenv(BUDGET_VARIABLE, str(SMALL))
    clear_emitted()
    assert loaded_bytes(K.softmax, dict(args, out=torch.empty(3, 40))) == 3 * 3 * 40 * 4  # max, sum, store


def test_the_looped_source_selects_its_form_at_compile_time(small_budget) -> None:
    src = K.softmax.triton_source(**softmax_args(2, 5))
    assert "BLOCK_N_LOOPED: tl.constexpr" in src and "if BLOCK_N_LOOPED:" in src
    assert src.count("for chunk_index") == 3
    assert "tl.reduce(" not in src and "tl.associative_scan(" not in src


def test_the_looped_form_compiles_for_sm_90_without_spills(small_budget) -> None:
    ptx = emit_triton.ptx(K.welford.specialize({"x": rows(2, 40), "mean": torch.empty(2), "var": torch.empty(2)}),
                          {"x": rows(2, 40), "mean": torch.empty(2), "var": torch.empty(2)}, 90)
    assert ".entry" in ptx and "ld.local" not in ptx


def test_a_group_already_tiled_is_left_alone() -> None:
    program = physical.lower(K.softmax.specialize(softmax_args(2, 5)))
    group = dataclasses.replace(program.groups[0], ownership=Ownership("BLOCK_I0", ("BLOCK_N",)))
    assert plan_group(program.replace(groups=(group,)), group) == "the group already has its own tiling"


@pytest.mark.parametrize("kernel,reason", [
    (K.both_ways, "forward and reverse scans in one pass over the row"),
    (K.written_twice, "a buffer is written twice"),
], ids=lambda v: getattr(v, "__name__", None))
def test_rows_whose_passes_would_reorder_work_stay_persistent(kernel, reason: str) -> None:
    program = physical.lower(kernel.specialize({"x": rows(2, 5), "out": torch.empty(2, 5)}))
    assert physical.ops.looped_rows(program.groups[0].body) is None
    assert plan_group(program, program.groups[0]) == reason


def test_an_ordered_loop_reading_a_reduction_runs_after_its_pass(small_budget) -> None:
    args = {"x": rows(3, 40), "out": torch.empty(3)}
    program = lowered(K.repeated_sum, args, budget=SMALL)
    body = physical.ops.looped_rows(program.groups[0].body).looped.ops
    loops = [k for k, op in enumerate(body) if isinstance(op, physical.model.For)]
    assert len(loops) == 2 and loops[0] < loops[1]  # the row's pass, then the author's loop
    assert_matches(K.repeated_sum, args, tol=1e-5)
