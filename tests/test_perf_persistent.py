"""Persistent programs (`physical.passes.persistent`): data every instance reads is read once per program.

The pass is checked three ways: the program it builds (which groups walk their blocks, what runs
before the loop, the segment length), the results (bit for bit the same for every number of
programs, and equal to the oracle), and the traffic the interpreter sees (the shared vector read once
per program).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

import intent
import physical
from bench.traffic import TrafficCounter
from emit_triton.targets import simulated_multiprocessors
from intent import InOut, Out, dims, f32, i32, parallel
from physical import ops as P
from physical.launch_expr import DEVICE_SMS, LConst, LResidentPrograms, walk
from physical.lowering import run_pipeline
from physical.model import Ownership
from physical.passes import PIPELINE, PersistentPrograms
from physical.passes.persistent import eligible, hoisted_positions
from physical.verifier import check
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)

M, N = dims("M N")


@intent.kernel
def scale_rows(x: f32[M, N], w: f32[N], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = x[i, :] * w


@intent.kernel
def shifted_rows(x: i32[M, N], w: i32[N], out: Out[i32[M, N]]):
    for i in parallel(M):
        out[i, :] = x[i, :] * w + intent.sum(w)


@intent.kernel
def layernorm(x: f32[M, N], w: f32[N], b: f32[N], eps: f32, out: Out[f32[M, N]], rstd: Out[f32[M]]):
    for i in parallel(M):
        row = x[i, :]
        d = row - intent.sum(row) / N
        r = intent.rsqrt(intent.sum(d * d) / N + eps)
        out[i, :] = d * r * w + b
        rstd[i] = r


@intent.kernel
def scale_then_count(x: f32[M, N], w: f32[N], out: Out[f32[M, N]], total: Out[f32[N]]):
    for i in parallel(M):
        out[i, :] = x[i, :] * w
    for j in parallel(N):
        total[j] = w[j] * 2.0


@intent.kernel
def rows_into_w(x: f32[M, N], w: InOut[f32[N]], out: Out[f32[M, N]]):
    for i in parallel(M):
        out[i, :] = x[i, :] * w
    w[0] = 1.0


@intent.kernel
def matvec(a: f32[M, N], v: f32[N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.sum(a[i, :] * v)


def _rand(shape: tuple[int, ...], seed: int, dtype=torch.float32) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    if dtype == torch.int32:
        return torch.tensor(rng.integers(-50, 50, shape), dtype=torch.int32)
    return torch.tensor(rng.standard_normal(shape), dtype=dtype)


def lowered(kernel, args: dict) -> physical.Program:
    """`physical.lower`'s program, verified after every pass."""
    k = kernel.specialize(args)
    return run_pipeline(physical.construct(k), verify_with=k)[0]


def scale_args(m: int, n: int) -> dict:
    return {"x": _rand((m, n), 1), "w": _rand((n,), 2), "out": torch.empty(m, n)}


# ---------------------------------------------------------------------------------------------- the program


def test_a_shared_vector_is_loaded_before_the_loop_over_blocks():
    program = lowered(scale_rows, scale_args(3, 5))
    (g,) = program.groups
    loop = P.block_loop(P.whole_form(g.body).ops)
    assert loop is not None and P.whole_form(g.body).ops[-2] is loop
    before, inside = P.once_ops(P.whole_form(g.body)), loop.body.ops
    loads = [op for op in before if isinstance(op, P.Load)]
    assert [program.buffer(op.access.buffer).name for op in loads] == ["w"]
    assert not any(isinstance(op, P.OwnedInstances) for op in before)
    assert any(isinstance(op, P.OwnedInstances) for op in inside)
    (seg,) = program.segments
    assert any(isinstance(e, LResidentPrograms) for e in walk(seg.length))
    assert program.grid == seg.length
    assert loop.flag == "BLOCK_I0_PERSISTENT" and loop.flag in dict(program.constexprs)


def test_a_reduction_of_the_shared_vector_runs_once_too():
    program = lowered(shifted_rows, {"x": _rand((3, 5), 1, torch.int32), "w": _rand((5,), 2, torch.int32),
                                     "out": torch.empty(3, 5, dtype=torch.int32)})
    (g,) = program.groups
    assert any(isinstance(op, P.Reduce) for op in P.once_ops(P.whole_form(g.body)))


def test_groups_without_shared_data_keep_one_block_per_program():
    @intent.kernel
    def add_rows(x: f32[M, N], y: f32[M, N], out: Out[f32[M, N]]):
        for i in parallel(M):
            out[i, :] = x[i, :] + y[i, :]

    program = lowered(add_rows, {"x": _rand((3, 5), 1), "y": _rand((3, 5), 2), "out": torch.empty(3, 5)})
    assert P.block_loop(P.whole_form(program.groups[0].body).ops) is None
    assert not PersistentPrograms().profitable(program)


def test_a_vector_the_kernel_writes_is_not_hoisted():
    program = lowered(rows_into_w, {"x": _rand((3, 5), 1), "w": _rand((5,), 2), "out": torch.empty(3, 5)})
    assert all(P.block_loop(P.whole_form(g.body).ops) is None for g in program.groups)


def test_only_the_group_with_shared_data_walks_its_blocks():
    program = lowered(scale_then_count, {"x": _rand((3, 5), 1), "w": _rand((5,), 2), "out": torch.empty(3, 5),
                                         "total": torch.empty(5)})
    first, second = program.groups
    assert P.block_loop(P.whole_form(first.body).ops) is not None
    assert P.block_loop(P.whole_form(second.body).ops) is None
    assert any(isinstance(e, LResidentPrograms) for e in walk(program.segments[0].length))
    assert not any(isinstance(e, LResidentPrograms) for e in walk(program.segments[1].length))
    assert program.segments[1].offset == program.segments[0].length


def test_tile_groups_and_single_instances_are_not_eligible():
    program = lowered(scale_rows, scale_args(3, 5))
    g = program.groups[0]
    assert eligible(dataclasses.replace(g, ownership=Ownership(g.block, ("BLOCK_M",)))) is not None
    assert eligible(dataclasses.replace(g, domain=())) is not None
    assert eligible(g) is not None  # already persistent


def test_the_plan_is_computed_once_per_program(monkeypatch):
    import physical.passes.persistent as persistent
    from physical.passes import PassContext

    calls = []
    real = persistent.plan
    monkeypatch.setattr(persistent, "plan", lambda p: calls.append(p) or real(p))
    k = scale_rows.specialize(scale_args(3, 5))
    others = [p for p in PIPELINE if not isinstance(p, PersistentPrograms)]
    before, _ = run_pipeline(physical.construct(k), passes=others)
    step, ctx = PersistentPrograms(), PassContext()
    assert step.legal(before, ctx) is True and step.profitable(before, ctx)
    after = step.run(before, ctx)
    assert len(calls) == 1 and P.block_loop(P.whole_form(after.groups[0].body).ops) is not None


def test_hoisting_keeps_definitions_before_uses():
    program = lowered(layernorm, {"x": _rand((3, 5), 1), "w": _rand((5,), 2), "b": _rand((5,), 3), "eps": 1e-5,
                                  "out": torch.empty(3, 5), "rstd": torch.empty(3)})
    g = program.groups[0]
    plain = tuple(op for op in P.instance_ops(P.whole_form(g.body)) if not op.TERMINATOR)
    once, each = P.once_ops(P.whole_form(g.body)), P.block_loop(P.whole_form(g.body).ops).body.ops
    assert sorted(map(id, once + each[:-1])) == sorted(map(id, plain))
    hoisted = {id(op) for op in once}
    assert [id(op) for op in once] == [id(op) for op in plain if id(op) in hoisted]  # hoisted in their order
    assert [plain[k] for k in hoisted_positions(program, plain)] == list(once)
    defined: set[int] = set()
    for op in once + each:  # the order the loop form runs them in
        assert all(v.id in defined for v in op.operands()), op.NAME
        defined.update(r.id for r in op.results)
        for r in op.regions():
            for inner in r.walk():
                defined.update(x.id for x in inner.results)
                defined.update(a.id for a in r.args)


def test_resident_programs_follow_the_device():
    e = LResidentPrograms(LConst(8))
    assert e.evaluate({DEVICE_SMS: 0}) == 1  # the interpreter: one program at a time
    assert e.evaluate({DEVICE_SMS: 132}) == 132 * 4
    assert LResidentPrograms(LConst(64)).evaluate({DEVICE_SMS: 132}) == 132
    assert str(e) == "resident_programs(8)"


def test_the_emitted_loop_follows_the_hoisted_loads():
    source = scale_rows.triton_source(**scale_args(3, 5))
    start = source.index("if BLOCK_I0_PERSISTENT:")  # the looped body before it streams w with each chunk
    plain = source[source.rindex("else:", 0, start):start]  # w is loaded once, before either form
    source, fallback = source[start:source.index("else:", start)], source[source.index("else:", start):]
    assert "for block" not in fallback and "p_w + " not in fallback  # rows too wide: one block per program
    assert "t12 = tl.load(p_w" in plain and "t12[None, :]" in fallback
    loop = source.index("for block")
    assert loop < source.index("p_x + ")
    assert re.search(r"for (block\w*) in range\(pid, blocks\w*, "
                     r"tl.cast\(tl.num_programs\(0\), pid.dtype\)\):"
                     r"\n\s+v_flat\w* = tl.cast\(\1, pid.dtype\) \* BLOCK_I0 ", source)


# ---------------------------------------------------------------------------------------------- results


def _run(kernel, args: dict, sms: int | None) -> dict[str, np.ndarray]:
    args = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}
    if sms is None:
        kernel(**args)
    else:
        with simulated_multiprocessors(sms):
            kernel(**args)
    return {k: v.numpy() for k, v in args.items() if isinstance(v, torch.Tensor)}


@pytest.mark.parametrize("m,n", [(1, 1), (3, 5), (17, 33), (37, 1024), (65, 7)])
def test_every_program_count_gives_the_same_bits(isolated_cache, m, n):  # noqa: F811
    args = {"x": _rand((m, n), m), "w": _rand((n,), n), "b": _rand((n,), n + 1), "eps": 1e-5,
            "out": torch.empty(m, n), "rstd": torch.empty(m)}
    one = _run(layernorm, args, None)  # the interpreter: one program walks every block
    for sms in (1, 3, 10_000):  # several programs, each walking some blocks; one block per program
        got = _run(layernorm, args, sms)
        for name in ("out", "rstd"):
            np.testing.assert_array_equal(got[name], one[name], err_msg=f"{name} with {sms} multiprocessors")
    want = layernorm.oracle(**{k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in args.items()})
    for name in ("out", "rstd"):
        np.testing.assert_allclose(one[name], want[name], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("m,n", [(1, 3), (37, 1024), (130, 9)])
def test_integer_rows_match_the_oracle_exactly(isolated_cache, m, n):  # noqa: F811
    args = {"x": _rand((m, n), 5, torch.int32), "w": _rand((n,), 6, torch.int32),
            "out": torch.empty(m, n, dtype=torch.int32)}
    want = shifted_rows.oracle(x=args["x"].numpy(), w=args["w"].numpy())
    for sms in (None, 1, 7):
        got = _run(shifted_rows, args, sms)
        np.testing.assert_array_equal(got["out"], want["out"])


def test_two_segments_stride_by_their_own_length(isolated_cache):  # noqa: F811
    m, n = 37, 1024
    args = {"x": _rand((m, n), 1), "w": _rand((n,), 2), "out": torch.empty(m, n), "total": torch.empty(n)}
    want = scale_then_count.oracle(x=args["x"].numpy(), w=args["w"].numpy())
    for sms in (None, 1, 3):
        got = _run(scale_then_count, args, sms)
        np.testing.assert_array_equal(got["out"], want["out"])
        np.testing.assert_array_equal(got["total"], want["total"])


# ---------------------------------------------------------------------------------------------- traffic


@pytest.mark.parametrize("n,persistent", [(4096, True), (8192, False)])
def test_rows_whose_shared_data_outgrows_the_registers_keep_one_block_per_program(isolated_cache, n,  # noqa: F811
                                                                                   persistent):
    m = 3
    args = {"x": _rand((m, n), 1), "w": _rand((n,), 2), "b": _rand((n,), 3), "eps": 1e-5,
            "out": torch.empty(m, n), "rstd": torch.empty(m)}
    counter = TrafficCounter({k: v for k, v in args.items() if isinstance(v, torch.Tensor)})
    with counter:
        layernorm(**args)  # weight and bias: 2n values held across the loop, at most 8192
    assert counter.traffic.programs == (1 if persistent else m)
    assert counter.traffic.read_by["w"] == (1 if persistent else m) * n * 4
    want = layernorm.oracle(**{k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in args.items()})
    np.testing.assert_allclose(args["out"].numpy(), want["out"], rtol=2e-5, atol=2e-5)


def test_the_shared_vector_is_read_once_per_program(isolated_cache):  # noqa: F811
    m, n = 37, 1024
    a, v, out = _rand((m, n), 1), _rand((n,), 2), torch.empty(m)
    for sms, programs in ((None, 1), (1, 4)):  # 1024-wide rows: 4 rows per block, 8 warps, 4 programs per SM
        counter = TrafficCounter({"a": a, "v": v, "out": out})
        with counter:
            if sms is None:
                matvec(a=a, v=v, out=out)
            else:
                with simulated_multiprocessors(sms):
                    matvec(a=a, v=v, out=out)
        t = counter.traffic
        assert t.programs == programs
        assert t.read_by["v"] == programs * n * 4
        assert t.read_by["a"] == m * n * 4
    np.testing.assert_allclose(out.numpy(), a.numpy() @ v.numpy(), rtol=1e-4, atol=1e-4)


def test_no_rows_launch_nothing(isolated_cache):  # noqa: F811
    @intent.kernel(requires=[M >= 0])
    def maybe_no_rows(x: f32[M, N], w: f32[N], out: Out[f32[M, N]]):
        for i in parallel(M):
            out[i, :] = x[i, :] * w

    for m in (0, 2):
        args = scale_args(m, 5)
        for sms in (None, 1):
            got = _run(maybe_no_rows, args, sms)
            np.testing.assert_array_equal(got["out"], args["x"].numpy() * args["w"].numpy())


def test_the_printer_shows_the_loop_as_an_op_with_its_region():
    from physical.printer import print_program

    text = print_program(lowered(scale_rows, scale_args(3, 5)))
    head = next(line for line in text.splitlines() if "block_loop" in line)
    # in the form that holds the row whole (the first region of the body's looped_rows op)
    assert head.startswith("    block_loop group=0 flag=BLOCK_I0_PERSISTENT blocks=cdiv(M, BLOCK_I0) resident=")
    assert head.endswith("{")
    loop = text.index(head)
    assert text.index("load w[") < loop < text.index("owned_instances")  # w once per program, then each block


def test_a_loop_over_blocks_that_is_not_last_is_refused():
    k = scale_rows.specialize(scale_args(3, 5))
    program = physical.lower(k)
    g = program.groups[0]
    form = P.whole_form(g.body)
    loop = P.block_loop(form.ops)
    moved = dataclasses.replace(form, ops=(loop,) + tuple(op for op in form.ops if op is not loop))
    broken = program.replace(groups=(dataclasses.replace(g, body=P.with_form(g.body, form, moved)),))
    found = [v for v in check(broken, k) if v.rule == "loop-invariant"]
    assert [v.message for v in found] == [
        "group 0 (parallel) has 1 loops over blocks of instances; a persistent group has one, the last op at the top "
        "of its body"]
