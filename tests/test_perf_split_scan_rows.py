"""Cross-program scans of a few long rows (`physical.passes.split_scan` on a group with a domain).

`for i in parallel(M): out[i, :] = cumsum(x[i, :])` with M proven few splits every row over P = cdiv(N, T)
programs: rows x P programs in ticket order, ticket t running chunk t % P of row t // P, each program folding
the published aggregates of its own row's lower tickets in index order. Small chunks (`INTENT_LOOP_BUDGET`)
make small rows split over several programs; Triton's interpreter runs the programs in order.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import intent
import physical
from emit_triton.compile import clear_emitted
from intent import Out, dims, f32, i32
from physical import ops as P
from physical.counts import operation_counts
from physical.lowering import run_pipeline
from physical.model import Program
from physical.passes.looped import BUDGET_VARIABLE
from physical.passes.split_scan import FEW_ROWS, plan_split
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)

M, N = dims("M N")
CHUNK = 16
FEW = [M <= 64]


@intent.combine
def affine(p, q):
    a1, x1 = p
    a2, x2 = q
    return a1 * a2, a2 * x1 + x2


@intent.kernel(requires=FEW)
def rows_cumsum(x: f32[M, N], out: Out[f32[M, N]]):
    for i in intent.parallel(M):
        out[i, :] = intent.cumsum(x[i, :])


@intent.kernel(requires=FEW)
def rows_cumsum_exclusive(x: f32[M, N], out: Out[f32[M, N]]):
    for i in intent.parallel(M):
        out[i, :] = intent.cumsum(x[i, :], exclusive=True)


@intent.kernel(requires=FEW)
def rows_cumsum_reverse(x: f32[M, N], out: Out[f32[M, N]]):
    for i in intent.parallel(M):
        out[i, :] = intent.cumsum(x[i, :], reverse=True)


@intent.kernel(requires=FEW)
def rows_cumsum_reverse_exclusive(x: f32[M, N], out: Out[f32[M, N]]):
    for i in intent.parallel(M):
        out[i, :] = intent.cumsum(x[i, :], reverse=True, exclusive=True)


@intent.kernel(requires=FEW)
def rows_cummax_i32(x: i32[M, N], out: Out[i32[M, N]]):
    for i in intent.parallel(M):
        out[i, :] = intent.cummax(x[i, :])


@intent.kernel(requires=FEW)
def rows_recurrence(a: f32[M, N], x: f32[M, N], out: Out[f32[M, N]]):
    for i in intent.parallel(M):
        _, h = intent.scan((a[i, :], x[i, :]), affine, identity=(1.0, 0.0))
        out[i, :] = h


@intent.kernel
def four_rows(x: f32[4, N], out: Out[f32[4, N]]):
    for i in intent.parallel(4):
        out[i, :] = intent.cumsum(x[i, :])


@intent.kernel
def many_rows(x: f32[M, N], out: Out[f32[M, N]]):
    for i in intent.parallel(M):
        out[i, :] = intent.cumsum(x[i, :])


CASES = [(rows_cumsum, torch.float32, 1e-4), (rows_cumsum_exclusive, torch.float32, 1e-4),
         (rows_cumsum_reverse, torch.float32, 1e-4), (rows_cumsum_reverse_exclusive, torch.float32, 1e-4),
         (rows_cummax_i32, torch.int32, None), (rows_recurrence, torch.float32, 1e-4)]


@pytest.fixture(autouse=True)
def small_chunks(isolated_cache, monkeypatch):  # noqa: F811
    monkeypatch.setenv(BUDGET_VARIABLE, str(CHUNK))
    clear_emitted()
    yield
    clear_emitted()


def inputs(kernel, m: int, n: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed + 7 * m + n)
    args: dict = {}
    for p in kernel.kir.params:
        if p.name == "a":
            args["a"] = torch.tensor(rng.uniform(0.5, 1.5, (m, n)), dtype=torch.float32)
        elif p.name == "x":
            args["x"] = torch.tensor(rng.standard_normal((m, n)), dtype=dtype) if dtype.is_floating_point else \
                torch.tensor(rng.integers(-50, 50, (m, n)), dtype=dtype)
    args["out"] = torch.empty(m, n, dtype=dtype)
    return args


def lowered(kernel, args: dict) -> Program:
    """The program of the pipeline, verified after construction and after every pass."""
    k = kernel.specialize(args)
    program = physical.verify(physical.construct(k), k)
    return run_pipeline(program, verify_with=k)[0]


@pytest.mark.parametrize("kernel,dtype,tol", CASES, ids=lambda v: getattr(v, "__name__", None))
@pytest.mark.parametrize("m,n", ((1, 17), (3, 50)))
def test_split_rows_agree_with_the_oracle(kernel, dtype, tol, m: int, n: int) -> None:
    args = inputs(kernel, m, n, dtype)
    want = kernel.oracle(**{k: v.numpy() for k, v in args.items()})["out"]
    kernel(**args)
    got = args["out"].numpy()
    if tol is None:
        np.testing.assert_array_equal(got, np.asarray(want, dtype=got.dtype))
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("kernel", [rows_cumsum, rows_cumsum_reverse, rows_recurrence, four_rows],
                         ids=lambda v: v.__name__)
def test_the_plan_gives_every_row_its_programs_and_verifies_after_every_pass(kernel) -> None:
    args = inputs(kernel, 4, 50)
    program = lowered(kernel, args)
    (g,) = program.groups
    assert len(g.domain) == 2 and str(g.domain[1]) == "(N + 15) // 16"
    assert [type(op) for op in g.body.ops if isinstance(op, P.PublishSlot | P.FoldSlots | P.RetireTicket)] == \
        [P.PublishSlot, P.FoldSlots, P.RetireTicket]
    fold = next(op for op in g.body.ops if isinstance(op, P.FoldSlots))
    assert fold.first.name == "row_first"  # a program folds only its own row's slots
    assert program.grid.evaluate({"M": 4, "N": 50}) == 4 * 4  # type: ignore[union-attr]
    sync = program.buffer(next(op for op in g.body.ops if isinstance(op, P.OwnedInstances)).ticket)
    assert str(sync.shape[0]) == ("4" if kernel is four_rows else "M") + " * ((N + 15) // 16) + 2"
    assert not [n for n in program.notes if "one program instance" in n.message]


def test_many_rows_keep_their_packed_form() -> None:
    program = physical.construct(many_rows.specialize(inputs(many_rows, 3, 50)))
    assert plan_split(program, program.groups[0], CHUNK) == \
        f"the rows (M) are not proven at most {FEW_ROWS} (many rows keep the device busy unsplit)"
    x = torch.randn(3, 50)
    np.testing.assert_allclose(many_rows(x).numpy(), np.cumsum(x.numpy(), 1), rtol=1e-4, atol=1e-4)


def test_results_are_bitwise_identical_run_to_run_and_the_workspace_resets() -> None:
    x = torch.randn(3, 200, generator=torch.Generator().manual_seed(5)) * 1e3
    first = rows_cumsum(x)
    for m, n in ((3, 200), (2, 37), (1, 200), (3, 200)):  # the workspace grows, shrinks and is reused
        out = rows_cumsum(x[:m, :n].contiguous())
        np.testing.assert_allclose(out.numpy(), np.cumsum(x[:m, :n].numpy(), 1), rtol=1e-4, atol=1e-1)
        if (m, n) == (3, 200):
            assert torch.equal(out.view(torch.int32), first.view(torch.int32))
    a, h = torch.rand(2, 100) + 0.5, torch.randn(2, 100)
    assert torch.equal(rows_recurrence(a, h).view(torch.int32), rows_recurrence(a, h).view(torch.int32))


def test_two_launches_in_a_row_see_a_reset_workspace() -> None:
    x = torch.randn(3, 60)
    out = torch.empty(3, 60)
    for _ in range(3):  # a stale ticket or flag would send a program to another row's chunk or skip a wait
        rows_cumsum_reverse(x, out)
        np.testing.assert_allclose(out.numpy(), np.cumsum(x.numpy()[:, ::-1], 1)[:, ::-1], rtol=1e-4, atol=1e-4)


def test_explain_shows_the_rows_and_their_programs() -> None:
    text = rows_cumsum.explain(torch.randn(3, 50), torch.empty(3, 50))
    assert "across programs: M * ((N + 15) // 16) programs, each one chunk of 16 elements (M rows x (N + 15) // 16 " \
           "programs a row: ticket t runs chunk t % ((N + 15) // 16) of row t // ((N + 15) // 16)), one instance " \
           "each" in text
    assert "waits for the flags of every lower ticket of its row (acquire) and folds their slots from its row's " \
           "first ticket up to its own ticket, in index order" in text
    assert "one program instance" not in text


def test_the_operation_counts_fold_only_the_row_s_slots() -> None:
    program = lowered(rows_cumsum, inputs(rows_cumsum, 3, 200))
    counts = operation_counts(program)
    m, p = 3, -(-200 // CHUNK)  # 13 programs a row
    data = 2 * 4 * m * p * CHUNK
    look_back = m * (8 * p + (4 + 8) * p + (4 + 4) * p * (p - 1) // 2 + 8 * p) + 4 * (m * p + 2)
    assert counts.bytes.evaluate({"M": m, "N": 200}) == data + look_back  # type: ignore[union-attr]
    assert counts.exact


@intent.kernel
def planes(x: f32[2, 3, N], out: Out[f32[2, 3, N]]):
    for i, j in intent.parallel(2, 3):
        out[i, j, :] = intent.cummax(x[i, j, :], reverse=True)


def test_rows_over_two_parallel_axes_keep_their_form_and_agree() -> None:
    x = torch.randn(2, 3, 40)
    program = physical.construct(planes.specialize({"x": x, "out": torch.empty(2, 3, 40)}))
    assert plan_split(program, program.groups[0], CHUNK) == "the rows span more than one parallel axis"
    want = np.flip(np.maximum.accumulate(np.flip(x.numpy(), 2), 2), 2)
    np.testing.assert_array_equal(planes(x).numpy(), want)


def test_a_split_program_is_sized_for_its_chunk_not_the_whole_row() -> None:
    text = rows_cumsum.explain(torch.randn(3, 50), torch.empty(3, 50))
    assert "num_warps = 4\n" in text.splitlines()[0] + "\n"  # warps_for(16): the old whole-row warps are gone


def test_the_generated_ptx_of_split_rows_uses_the_look_back_atomics() -> None:
    ptx = rows_cumsum.ptx(torch.randn(4, 1 << 10), torch.empty(4, 1 << 10), arch=90)
    assert re.search(r"atom\.global\.gpu\.acq_rel\.add", ptx)  # the ticket and the finished count
    assert re.search(r"atom\.global\.gpu\.release\.exch", ptx)  # the slot flag
    assert "ld.acquire.gpu.global.b32" in ptx  # waiting for the lower tickets of the row
