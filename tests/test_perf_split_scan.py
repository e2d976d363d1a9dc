"""Cross-program scans (`physical.passes.split_scan`): a long scan split over programs in one launch.

Small sizes still split over many programs: the chunk per program follows the persistent budget, which
`INTENT_LOOP_BUDGET` lowers (read when the pass runs; the emitted-kernel cache is cleared around each
test). Triton's interpreter runs the programs one at a time in program order, so the tickets follow it.
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
from intent import Out, bf16, dims, f16, f32, i32, i64
from physical import ops as P
from physical.launch_expr import LConst
from physical.lowering import run_pipeline
from physical.model import BufferInit, Program
from physical.passes import PIPELINE, SplitScans
from physical.passes.looped import BUDGET_VARIABLE
from physical.passes.split_scan import plan_split
from physical.verifier import check
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)

N = dims("N")
CHUNK = 16  # elements per program in these tests


@intent.combine
def affine(p, q):
    a1, x1 = p
    a2, x2 = q
    return a1 * a2, a2 * x1 + x2


@intent.kernel
def cumsum(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cumsum(x)


@intent.kernel
def cumsum_exclusive(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cumsum(x, exclusive=True)


@intent.kernel
def cumsum_reverse(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cumsum(x, reverse=True)


@intent.kernel
def cumsum_reverse_exclusive(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cumsum(x, reverse=True, exclusive=True)


@intent.kernel
def cummax(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cummax(x)


@intent.kernel
def cummin_reverse_i32(x: i32[N], out: Out[i32[N]]):
    out[:] = intent.cummin(x, reverse=True)


@intent.kernel
def cumprod(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cumprod(x)


@intent.kernel
def cumsum_exclusive_i64(x: i64[N], out: Out[i64[N]]):
    out[:] = intent.cumsum(x, exclusive=True)


@intent.kernel
def cumsum_f16(x: f16[N], out: Out[f16[N]]):
    out[:] = intent.cumsum(x)


@intent.kernel
def cummax_bf16(x: bf16[N], out: Out[bf16[N]]):
    out[:] = intent.cummax(x)


@intent.kernel
def recurrence(a: f32[N], x: f32[N], h: Out[f32[N]]):
    _, hh = intent.scan((a, x), affine, identity=(1.0, 0.0))
    h[:] = hh


@intent.kernel
def scaled_and_max(x: f32[N], out: Out[f32[N]], top: Out[f32[N]]):
    out[:] = intent.cumsum(x) * 2.0
    top[:] = intent.cummax(x)


# (kernel, dtype of x, tolerance: None for exact)
CASES = [(cumsum, torch.float32, 1e-4), (cumsum_exclusive, torch.float32, 1e-4),
         (cumsum_reverse, torch.float32, 1e-4), (cumsum_reverse_exclusive, torch.float32, 1e-4),
         (cummax, torch.float32, None), (cummin_reverse_i32, torch.int32, None), (cumprod, torch.float32, 1e-5),
         (cumsum_exclusive_i64, torch.int64, None), (cumsum_f16, torch.float16, 2e-2),
         (cummax_bf16, torch.bfloat16, None), (recurrence, torch.float32, 1e-4), (scaled_and_max, torch.float32, 1e-4)]


@pytest.fixture(autouse=True)
def small_chunks(isolated_cache, monkeypatch):  # noqa: F811
    monkeypatch.setenv(BUDGET_VARIABLE, str(CHUNK))
    clear_emitted()
    yield
    clear_emitted()


def inputs(kernel, n: int, dtype: torch.dtype, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed + n)
    args: dict = {}
    for p in kernel.kir.params:
        if p.name in ("a", "x"):
            if dtype.is_floating_point:
                v = rng.uniform(0.5, 1.5, n) if kernel is cumprod or p.name == "a" else rng.standard_normal(n)
                args[p.name] = torch.tensor(v, dtype=torch.float32).to(dtype)
            else:
                args[p.name] = torch.tensor(rng.integers(-50, 50, n), dtype=dtype)
        else:
            args[p.name] = torch.empty(n, dtype=args["x"].dtype if "x" in args else dtype)
    return args


def lowered(kernel, args: dict) -> Program:
    """The program of the pipeline, verified after construction and after every pass."""
    k = kernel.specialize(args)
    program = physical.verify(physical.construct(k), k)
    return run_pipeline(program, verify_with=k)[0]


def run(kernel, args: dict) -> dict[str, torch.Tensor]:
    kernel(**args)
    return {p.name: args[p.name].clone() for p in kernel.kir.params if p.name in ("out", "top", "h")}


@pytest.mark.parametrize("kernel,dtype,tol", CASES, ids=lambda v: getattr(v, "__name__", None))
@pytest.mark.parametrize("n", (1, 17, 200))
def test_split_scans_agree_with_the_oracle(kernel, dtype, tol, n: int) -> None:
    args = inputs(kernel, n, dtype)
    want = kernel.oracle(**{k: v.float().numpy() if v.dtype == torch.bfloat16 else v.numpy()
                            for k, v in args.items()})
    got = run(kernel, args)
    for name, w in want.items():
        g = got[name].float().numpy() if got[name].dtype == torch.bfloat16 else got[name].numpy()
        w = np.asarray(w, dtype=g.dtype)
        if tol is None:
            np.testing.assert_array_equal(g, w, err_msg=f"{kernel.__name__}: {name}")
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol * max(1.0, np.abs(w).max(initial=0.0)),
                                       err_msg=f"{kernel.__name__}: {name}")


@pytest.mark.parametrize("kernel,dtype,tol", CASES[:5] + CASES[10:11], ids=lambda v: getattr(v, "__name__", None))
def test_the_plan_splits_the_row_over_programs_and_verifies_after_every_pass(kernel, dtype, tol) -> None:
    args = inputs(kernel, 200, dtype)
    program = lowered(kernel, args)
    (g,) = program.groups
    ticket = [op for op in g.body.ops if isinstance(op, P.OwnedInstances)]
    assert len(ticket) == 1 and ticket[0].ticket is not None
    assert [type(op) for op in g.body.ops if isinstance(op, P.PublishSlot | P.FoldSlots | P.RetireTicket)] == \
        [P.PublishSlot, P.FoldSlots, P.RetireTicket]
    sync = program.buffer(ticket[0].ticket)
    assert sync.init is BufferInit.SELF_RESETTING
    assert [w.resets for w in program.workspaces] == [True] + [False] * (len(program.workspaces) - 1)
    assert all(w.fill in (None, 0) for w in program.workspaces)
    assert program.grid.evaluate({"N": 200}) == -(-200 // CHUNK)  # type: ignore[union-attr]
    assert not [n for n in program.notes if "one program instance" in n.message]


def test_results_are_bitwise_identical_run_to_run_and_the_workspace_resets() -> None:
    x = torch.randn(1000, generator=torch.Generator().manual_seed(3)) * 1e3
    first = cumsum(x)
    for n in (1000, 999, 37, 1000):  # other sizes between: the workspace grows, shrinks and is reused
        out = cumsum(x[:n])
        if n == 1000:
            assert torch.equal(out.view(torch.int32), first.view(torch.int32))
    a, h = torch.rand(300) + 0.5, torch.randn(300)
    assert torch.equal(recurrence(a, h).view(torch.int32), recurrence(a, h).view(torch.int32))


def test_two_launches_in_a_row_see_a_reset_workspace() -> None:
    x = torch.randn(100)
    a = torch.empty(100)
    for _ in range(3):  # a stale ticket counter or flag would send programs to the wrong chunk or skip a wait
        cumsum_reverse(x, a)
        np.testing.assert_allclose(a.numpy(), np.cumsum(x.numpy()[::-1])[::-1], rtol=1e-4, atol=1e-4)
        scaled_and_max(x)


def test_explain_shows_the_cross_program_plan() -> None:
    text = cumsum.explain(torch.randn(200), torch.empty(200))
    assert "across programs: (N + 15) // 16 programs, each one chunk of 16 elements, one instance each, in the " \
           "order of an acq_rel ticket" in text
    assert "folds their slots from 0 up to its own ticket, in index order, 1024 slots a step" in text
    assert "restores the ticket, the counter and the flags to zero" in text
    assert "one program instance" not in text


def test_a_short_row_is_not_split() -> None:
    @intent.kernel(requires=[N <= 16])
    def short(x: f32[N], out: Out[f32[N]]):
        out[:] = intent.cumsum(x)

    program = physical.construct(short.specialize({"x": torch.randn(8), "out": torch.empty(8)}))
    assert plan_split(program, program.groups[0]) == "the row N always fits one program's chunk of 16"


def test_the_generated_ptx_uses_acquire_release_atomics() -> None:
    ptx = cumsum.ptx(torch.randn(1 << 12), torch.empty(1 << 12), arch=90)
    assert re.search(r"atom\.global\.gpu\.acq_rel\.add", ptx)       # the ticket and the finished count
    assert re.search(r"atom\.global\.gpu\.release\.exch", ptx)      # the slot flag
    assert "ld.acquire.gpu.global.b32" in ptx                       # waiting for lower tickets' flags
    assert "ld.volatile.global" in ptx                              # slot values, after the flags


# ---------------------------------------------------------------------------------------------- mutations


def _program() -> Program:
    return lowered(cumsum, {"x": torch.randn(200), "out": torch.empty(200)})


def _body(program: Program, ops) -> Program:
    g = program.groups[0]
    return program.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),))


def _messages(program: Program) -> list[str]:
    return [v.message for v in check(program) if v.rule == "lookback-protocol"]


def _find(program: Program, cls):
    return next(op for op in program.groups[0].body.ops if isinstance(op, cls))


def test_the_unmutated_program_keeps_the_protocol() -> None:
    assert _messages(_program()) == []


def test_mutation_publishing_another_slot() -> None:
    p = _program()
    pub = _find(p, P.PublishSlot)
    start = next(op.result for op in p.groups[0].body.ops if op.results and op.results[0].name == "chunk_start")
    ops = [dataclasses.replace(op, slot=start) if op is pub else op for op in p.groups[0].body.ops]
    assert _messages(_body(p, ops)) == [
        "group 0: publish_slot writes a slot other than the program's own instance (its ownership slice)"]


def test_mutation_waiting_for_a_higher_ticket() -> None:
    p = _program()
    fold = _find(p, P.FoldSlots)
    ops = [dataclasses.replace(op, upto=fold.first, first=fold.upto) if op is fold else op
           for op in p.groups[0].body.ops]
    assert _messages(_body(p, ops)) == [
        "group 0: fold_slots must stop at the program's own ticket (it may wait only for lower tickets, which "
        "have started)"]


def test_mutation_without_retiring() -> None:
    p = _program()
    ops = [op for op in p.groups[0].body.ops if not isinstance(op, P.RetireTicket)]
    assert _messages(_body(p, ops)) == [
        "group 0: every program retires its ticket exactly once, found 0 retire_ticket (the last one restores "
        "scan_sync_g0)"]


def test_mutation_retiring_before_the_fold() -> None:
    p = _program()
    ops = list(p.groups[0].body.ops)
    retire = _find(p, P.RetireTicket)
    ops.remove(retire)
    ops.insert(ops.index(_find(p, P.FoldSlots)), retire)
    assert _messages(_body(p, ops)) == [
        "group 0: retire_ticket runs before fold_slots: the last program would restore the flags while others "
        "still use them"]


def test_mutation_counting_the_wrong_programs() -> None:
    p = _program()
    retire = _find(p, P.RetireTicket)
    ops = [dataclasses.replace(op, programs=LConst(3)) if op is retire else op for op in p.groups[0].body.ops]
    assert _messages(_body(p, ops)) == [
        "group 0: retire_ticket counts 3 programs, but the segment launches (N + 15) // 16"]


def test_mutation_a_sync_buffer_that_is_not_self_resetting() -> None:
    p = _program()
    sync = p.buffer(_find(p, P.OwnedInstances).ticket)
    bufs = tuple(dataclasses.replace(b, init=BufferInit.UNINITIALISED, fill=None) if b.id == sync.id else b
                 for b in p.buffers)
    assert _messages(p.replace(buffers=bufs)) == [
        "group 0: the ticket's sync buffer must be a self-resetting i32 invocation workspace of the group, got "
        "scan_sync_g0 (invocation_workspace, uninitialised, i32)"]


def test_mutation_folding_a_slot_buffer_nobody_publishes() -> None:
    p = _program()
    pub, fold = _find(p, P.PublishSlot), _find(p, P.FoldSlots)
    sync = _find(p, P.OwnedInstances).ticket
    ops = [dataclasses.replace(op, slots=(sync,)) if op is fold else op for op in p.groups[0].body.ops]
    assert pub.slots != (sync,)
    assert _messages(_body(p, ops)) == [
        "group 0: fold_slots reads scan_sync_g0, which no publish_slot of the group writes before its flag"]


def test_mutation_more_than_one_instance_per_program() -> None:
    p = _program()
    block = _find(p, P.OwnedInstances).block
    consts = tuple((n, LConst(2) if n == block else e) for n, e in p.constexprs)
    assert "group 0: a ticket program owns one instance, but BLOCK_I0 = 2" in _messages(p.replace(constexprs=consts))


def test_mutation_a_workspace_too_small_for_the_flags() -> None:
    p = _program()
    sync = p.buffer(_find(p, P.OwnedInstances).ticket)
    ws = tuple(dataclasses.replace(w, count=LConst(4)) if w.name == sync.storage else w for w in p.workspaces)
    assert _messages(p.replace(workspaces=ws)) == [  # at the verifier's first sample binding
        "group 0: workspace ws_g0_scan_sync holds 4 elements, fewer than scan_sync_g0 needs (9)"]


def test_mutation_another_op_touching_a_slot_buffer() -> None:
    p = _program()
    slot = p.buffer(_find(p, P.PublishSlot).slots[0])
    load = _find(p, P.Load)
    ops = [dataclasses.replace(op, access=dataclasses.replace(op.access, buffer=slot.id)) if op is load else op
           for op in p.groups[0].body.ops]
    assert _messages(_body(p, ops)) == ["load touches scan0_slot0_g0, which only the look-back ops may use"]


def test_pass_is_in_the_pipeline_before_the_looped_rows() -> None:
    names = [p.name for p in PIPELINE]
    assert names.index(SplitScans.name) < names.index("looped-rows")


def test_the_generated_module_check_admits_exactly_the_emitted_assembly() -> None:
    from intent.runtime.safety import UnsafeModule, check_generated

    def module(asm: str) -> str:
        return (f"import triton\nimport triton.language as tl\n@triton.jit\ndef k(p):\n"
                f"    f = tl.inline_asm_elementwise(\"{asm}\", \"=r,l\", [p], dtype=tl.int32, is_pure=False, pack=1)\n")

    check_generated(module("ld.acquire.gpu.global.b32 $0, [$1];"), "k")
    with pytest.raises(UnsafeModule, match=r"the string constant 'st.global.b32 \[\$1\], \$0;'"):
        check_generated(module("st.global.b32 [$1], $0;"), "k")


def test_the_operation_counts_include_the_look_back() -> None:
    from physical.counts import operation_counts

    program = lowered(cumsum, {"x": torch.randn(200), "out": torch.empty(200)})
    counts = operation_counts(program)
    p = -(-200 // CHUNK)  # 13 programs
    data = 2 * 4 * p * CHUNK  # each program's chunk read and written (the last one masked: counted whole)
    look_back = 8 * p + (4 + 8) * p + (4 + 4) * p * (p - 1) // 2 + 8 * p + 4 * (p + 2)
    assert counts.bytes.evaluate({"N": 200}) == data + look_back  # type: ignore[union-attr]
    assert counts.exact
