"""Few long rows decided at launch (`physical.passes.split_rows`): a group of row scans whose rows are not proven few
gets a split form that the launch selects (`SPLIT_g`) where the rows are fewer than the resident programs.

Small chunks (`INTENT_LOOP_BUDGET`) make short rows split over several programs, and `simulated_multiprocessors`
sizes the launch for a device (under Triton's interpreter alone the split is off: one program at a time).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

import intent
import physical
from emit_triton.compile import clear_emitted
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, i32
from physical import ops as P
from physical.explain import explain, launch_environment
from physical.launch_expr import LConst
from physical.lowering import run_pipeline
from physical.model import BufferInit, Program
from physical.passes import PIPELINE, LoopRows, SplitRowsAtLaunch
from physical.passes.looped import BUDGET_VARIABLE
from physical.passes.split_rows import plan_rows
from physical.verifier import check
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)

M, N = dims("M N")
CHUNK = 16
ANY = [M >= 0, N >= 0]


@intent.combine
def affine(p, q):
    a1, x1 = p
    a2, x2 = q
    return a1 * a2, a2 * x1 + x2


@intent.kernel(requires=ANY)
def rows_cumsum(x: f32[M, N], out: Out[f32[M, N]]):
    for i in intent.parallel(M):
        out[i, :] = intent.cumsum(x[i, :])


@intent.kernel(requires=ANY)
def rows_cumsum_reverse_exclusive(x: f32[M, N], out: Out[f32[M, N]]):
    for i in intent.parallel(M):
        out[i, :] = intent.cumsum(x[i, :], reverse=True, exclusive=True)


@intent.kernel(requires=ANY)
def rows_cummax_i32(x: i32[M, N], out: Out[i32[M, N]]):
    for i in intent.parallel(M):
        out[i, :] = intent.cummax(x[i, :])


@intent.kernel(requires=ANY)
def rows_recurrence(a: f32[M, N], x: f32[M, N], out: Out[f32[M, N]]):
    for i in intent.parallel(M):
        _, h = intent.scan((a[i, :], x[i, :]), affine, identity=(1.0, 0.0))
        out[i, :] = h * 2.0


def want(kernel, args: dict) -> np.ndarray:
    x = args["x"].numpy().astype(np.float64)
    if kernel is rows_cumsum:
        return np.cumsum(x, 1)
    if kernel is rows_cumsum_reverse_exclusive:
        return np.flip(np.cumsum(np.flip(x, 1), 1), 1) - x
    if kernel is rows_cummax_i32:
        return np.maximum.accumulate(x, 1) if x.shape[1] else x
    a, h, out = args["a"].numpy().astype(np.float64), np.zeros(x.shape[0]), np.zeros_like(x)
    for j in range(x.shape[1]):
        h = a[:, j] * h + x[:, j]
        out[:, j] = 2 * h
    return out


def inputs(kernel, m: int, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed + 7 * m + n)
    if kernel is rows_cummax_i32:
        return {"x": torch.tensor(rng.integers(-50, 50, (m, n)), dtype=torch.int32),
                "out": torch.empty(m, n, dtype=torch.int32)}
    args = {"x": torch.tensor(rng.standard_normal((m, n)), dtype=torch.float32), "out": torch.empty(m, n)}
    if kernel is rows_recurrence:
        args = {"a": torch.tensor(rng.uniform(0.5, 1.0, (m, n)), dtype=torch.float32), **args}
    return args


@pytest.fixture(autouse=True)
def small_chunks(isolated_cache, monkeypatch):  # noqa: F811
    monkeypatch.setenv(BUDGET_VARIABLE, str(CHUNK))
    clear_emitted()
    yield
    clear_emitted()


def lowered(kernel, args: dict) -> Program:
    """The program of the pipeline, verified after construction and after every pass."""
    k = kernel.specialize(args)
    program = physical.verify(physical.construct(k), k)
    return run_pipeline(program, verify_with=k)[0]


def flags(program: Program, m: int, n: int, sms: int) -> dict[str, int]:
    env = launch_environment(program, {"M": m, "N": n}, sms)
    return {k: env[k] for k in ("SPLIT_0", "SPLITS_0", "BLOCK_I0")} | {"grid": program.grid.evaluate(env)}


KERNELS = [rows_cumsum, rows_cumsum_reverse_exclusive, rows_cummax_i32, rows_recurrence]


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("m,n", ((0, 40), (1, 1), (1, 17), (3, 97), (2, 0), (9, 37)))  # 9 rows: unsplit
def test_split_rows_agree_with_the_oracle(kernel, m: int, n: int) -> None:
    args = inputs(kernel, m, n)
    with simulated_multiprocessors(1):  # 8 resident programs of 4 warps: the split runs for up to 7 rows
        kernel(**args)
    got = args["out"].numpy()
    if kernel is rows_cummax_i32:
        np.testing.assert_array_equal(got, want(kernel, args).astype(np.int32))
    else:
        np.testing.assert_allclose(got, want(kernel, args), rtol=1e-4, atol=1e-4)


def test_the_launch_picks_the_split_for_few_rows_and_the_unsplit_forms_for_many() -> None:
    program = lowered(rows_cumsum, inputs(rows_cumsum, 3, 97))
    # 8 resident programs of 4 warps on one multiprocessor: 3 rows split, 8 rows keep a program each
    assert flags(program, 3, 97, 1) == {"SPLIT_0": 1, "SPLITS_0": 7, "BLOCK_I0": 1, "grid": 21}
    assert flags(program, 8, 97, 1) == {"SPLIT_0": 0, "SPLITS_0": 1, "BLOCK_I0": 8, "grid": 1}
    assert flags(program, 3, 97, 0) == {"SPLIT_0": 0, "SPLITS_0": 1, "BLOCK_I0": 4, "grid": 1}  # the interpreter
    assert flags(program, 3, 16, 1)["SPLIT_0"] == 0  # a row that fits one program is held whole
    assert flags(program, 0, 97, 1) == {"SPLIT_0": 1, "SPLITS_0": 7, "BLOCK_I0": 1, "grid": 0}


def test_the_split_form_is_a_third_form_of_the_looped_rows_and_verifies_after_every_pass() -> None:
    program = lowered(rows_recurrence, inputs(rows_recurrence, 3, 97))
    (g,) = program.groups
    choice = P.looped_rows(g.body)
    assert choice is not None and choice.split_flag == "SPLIT_0" and choice.split is not None
    assert [type(op) for op in choice.split.ops if isinstance(op, P.PublishSlot | P.FoldSlots | P.RetireTicket)] == \
        [P.PublishSlot, P.FoldSlots, P.RetireTicket]
    for form in (choice.whole, choice.looped):  # the unsplit forms touch no workspace
        assert not any(op.has(P.Trait.LOOKBACK) for op in form.walk())
    ticket = next(op for op in choice.split.ops if isinstance(op, P.OwnedInstances))
    assert ticket.splits == "SPLITS_0" and program.buffer(ticket.ticket).init is BufferInit.SELF_RESETTING
    assert all(w.fill in (None, 0) for w in program.workspaces)
    assert [w.resets for w in program.workspaces] == [True] + [False] * (len(program.workspaces) - 1)
    assert SplitRowsAtLaunch in [type(p) for p in PIPELINE]
    assert [type(p) for p in PIPELINE].index(SplitRowsAtLaunch) == [type(p) for p in PIPELINE].index(LoopRows) + 1


def test_rows_proven_few_keep_split_scans_form_and_rows_that_fit_have_no_split() -> None:
    @intent.kernel(requires=[M <= 4])
    def proven(x: f32[M, N], out: Out[f32[M, N]]):
        for i in intent.parallel(M):
            out[i, :] = intent.cumsum(x[i, :])

    program = lowered(proven, inputs(rows_cumsum, 3, 97))
    assert P.looped_rows(program.groups[0].body) is None  # split-scans split it: no launch choice left

    @intent.kernel(requires=[N <= 16])
    def short(x: f32[M, N], out: Out[f32[M, N]]):
        for i in intent.parallel(M):
            out[i, :] = intent.cumsum(x[i, :])

    program = physical.construct(short.specialize(inputs(rows_cumsum, 3, 16)))
    assert plan_rows(program, program.groups[0], CHUNK) == "its row fits one program (no looped form)"


def test_results_are_bitwise_identical_run_to_run_and_the_workspace_resets() -> None:
    x = torch.randn(3, 200, generator=torch.Generator().manual_seed(5)) * 1e3
    with simulated_multiprocessors(1):
        first = rows_cumsum(x)
        for m, n in ((3, 200), (2, 37), (1, 200), (3, 200)):  # the workspace grows, shrinks and is reused
            out = rows_cumsum(x[:m, :n].contiguous())
            np.testing.assert_allclose(out.numpy(), np.cumsum(x[:m, :n].numpy(), 1), rtol=1e-4, atol=1e-1)
            if (m, n) == (3, 200):
                assert torch.equal(out.view(torch.int32), first.view(torch.int32))


def test_explain_shows_the_launch_time_choice() -> None:
    k = rows_cumsum.specialize(inputs(rows_cumsum, 3, 97))
    text = explain(k, {"M": 3, "N": 97}, 1)
    assert "  split when SPLIT_0 is 1 (the row is looped and the rows are fewer than the resident programs: decided " \
           "at launch): BLOCK_I0 = 1 row a program, SPLITS_0 programs a row\n" in text
    assert "  across programs: cdiv(M, BLOCK_I0) * SPLITS_0 programs, each one chunk of 16 elements (M rows x " \
           "SPLITS_0 programs a row: ticket t runs chunk t % SPLITS_0 of row t // SPLITS_0), one instance each" in text
    assert "  each program publishes its chunk's aggregate in slot = row * SPLITS_0 + chunk of scan0_slot0_g0" in text
    assert "  SPLIT_0 = min(1, BLOCK_N // 32, resident_programs(4) // (M + 1))\n" in text
    assert "group 0 (parallel): programs [0, 21) (21 programs); split (SPLIT_0 = 1: the rows are fewer than the " \
           "resident programs; SPLITS_0 = 7 programs a row, one chunk each, passing chunk aggregates on by " \
           "look-back in index order)" in text
    many = explain(k, {"M": 300, "N": 97}, 1)
    assert "group 0 (parallel): programs [0, 2) (2 programs); looped (BLOCK_N_LOOPED = 1: the row in chunks of " \
           "BLOCK_N_CHUNK = 16)" in many


def _store_without_its_chunk(program: Program) -> Program:
    """The split form's store at the chunk's own positions (tile index only): every program of a row writes the
    row's first chunk."""
    (g,) = program.groups
    choice = P.looped_rows(g.body)
    assert choice is not None and choice.split is not None
    ops = list(choice.split.ops)
    k = next(n for n, op in enumerate(ops) if isinstance(op, P.Store))
    store = ops[k]
    pos = next(op.results[0] for op in ops if isinstance(op, P.TileIndex))
    coords = (store.access.coords[0], pos)
    ops[k] = dataclasses.replace(store, access=dataclasses.replace(store.access, coords=coords))
    split = dataclasses.replace(choice.split, ops=tuple(ops))
    body = dataclasses.replace(g.body, ops=tuple(dataclasses.replace(choice, split=split) if op is choice else op
                                                 for op in g.body.ops))
    return dataclasses.replace(program, groups=(dataclasses.replace(g, body=body),))


def test_mutation_a_split_program_writing_outside_its_chunk() -> None:
    k = rows_cumsum.specialize(inputs(rows_cumsum, 3, 97))
    program = lowered(rows_cumsum, inputs(rows_cumsum, 3, 97))
    assert check(program, k) == []
    line = _store_line()
    assert [v.message for v in check(_store_without_its_chunk(program), k) if v.rule == "split-effects"] == [
        f"store (from store at test_perf_split_rows.py:{line}) writes out in every program that shares its block: a "
        "group split over programs writes outside its workspace only as the holder of the last ticket"]


def _store_line() -> int:
    """The line of `rows_cumsum`'s store in this file."""
    lines = open(__file__, encoding="utf-8").read().splitlines()
    start = lines.index("def rows_cumsum(x: f32[M, N], out: Out[f32[M, N]]):")
    return start + 3  # the store, two lines below the def (1-based)


def test_the_generated_ptx_of_the_split_form_uses_the_look_back_atomics() -> None:
    with simulated_multiprocessors(132):  # a device launch of two long rows selects the split form
        ptx = rows_cumsum.ptx(torch.randn(2, 1 << 10), torch.empty(2, 1 << 10), arch=90)
    assert re.search(r"atom\.global\.gpu\.acq_rel\.add", ptx)  # the ticket and the finished count
    assert re.search(r"atom\.global\.gpu\.release\.exch", ptx)  # the slot flag
    assert "ld.acquire.gpu.global.b32" in ptx  # waiting for the lower tickets of the row
    unsplit = rows_cumsum.ptx(torch.randn(2, 1 << 10), torch.empty(2, 1 << 10), arch=90)  # no device: looped form
    assert not re.search(r"atom\.global", unsplit)


@intent.kernel
def planes(x: f32[2, 3, N], out: Out[f32[2, 3, N]]):
    for i, j in intent.parallel(2, 3):
        out[i, j, :] = intent.cummax(x[i, j, :], reverse=True)


def test_rows_over_two_parallel_axes_split_at_launch_over_their_flattened_instances() -> None:
    x = torch.randn(2, 3, 40)
    program = lowered(planes, {"x": x, "out": torch.empty(2, 3, 40)})
    env = launch_environment(program, {"N": 40}, 1)
    assert (env["SPLIT_0"], env["SPLITS_0"], program.grid.evaluate(env)) == (1, 3, 18)  # 6 rows x 3 chunks
    want = np.flip(np.maximum.accumulate(np.flip(x.numpy(), 2), 2), 2)
    with simulated_multiprocessors(1):
        np.testing.assert_array_equal(planes(x).numpy(), want)
    np.testing.assert_array_equal(planes(x).numpy(), want)  # the interpreter alone: the looped form


@intent.kernel(requires=ANY)
def weighted_rows(x: f32[M, N], w: f32[N], out: Out[f32[M, N]]):
    for i in intent.parallel(M):
        out[i, :] = intent.cumsum(x[i, :] * w)


def test_a_persistent_whole_form_and_the_split_form_never_run_together() -> None:
    args = {"x": torch.randn(3, 50), "w": torch.randn(50), "out": torch.empty(3, 50)}
    k = weighted_rows.specialize(args)
    program = lowered(weighted_rows, args)
    assert "BLOCK_I0_PERSISTENT" in dict(program.constexprs) and check(program, k) == []
    with simulated_multiprocessors(1):
        weighted_rows(**args)
    np.testing.assert_allclose(args["out"].numpy(), np.cumsum((args["x"] * args["w"]).numpy(), 1), rtol=1e-4,
                               atol=1e-4)
    # the split form and the persistent loop selected together: the split form's programs would skip blocks
    consts = tuple((n, LConst(1) if n in ("BLOCK_I0_PERSISTENT", "SPLIT_0") else e) for n, e in program.constexprs)
    found = [v.message for v in check(dataclasses.replace(program, constexprs=consts), k) if v.rule == "ownership"]
    assert "group 0 (parallel) runs its split form, which holds no loop over blocks of instances, while SPLIT_0 = 1 " \
           "and BLOCK_I0_PERSISTENT = 1 (M=1, N=1 on 0 multiprocessors): its programs would skip the blocks the loop " \
           "gives them" in found
