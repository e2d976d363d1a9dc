"""Independence of `parallel` instances by proof (physical/analysis.py, physical/worksets.py):
nested loops become one multi-axis workset, injective affine writes (also through `//` and `%` by
constants) run in parallel, and where instances may conflict the note names the two accesses and
the instances Z3 found."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intent
import physical
from emit_triton.targets import simulated_multiprocessors
from intent import InOut, Out, dims, f32, parallel

M, N, K = dims("M N K")


@intent.kernel
def transpose_nested(x: f32[M, N], out: Out[f32[N, M]]):
    for r in parallel(M):
        for c in parallel(N):
            out[c, r] = x[r, c]


@intent.kernel
def three_deep(x: f32[M, N, K], out: Out[f32[K, M, N]]):
    for a in parallel(M):
        s = a * 1
        for b in parallel(N):
            for c in parallel(K):
                out[c, s, b] = x[a, b, c] * 2.0


@intent.kernel
def odd_slots(x: f32[M], out: Out[f32[2 * M + 1]]):
    for r in parallel(M):
        out[2 * r + 1] = x[r]


@intent.kernel
def reversed_copy(x: f32[M], out: Out[f32[M]]):
    for r in parallel(M):
        out[M - 1 - r] = x[r]


@intent.kernel(requires=[M % 4 == 0])
def by_div_mod(x: f32[M], out: Out[f32[4, M // 4]]):
    for f in parallel(M):
        out[f % 4, f // 4] = x[f]


@intent.kernel
def halves(x: f32[M], out: Out[f32[M]]):
    for r in parallel(M):
        out[r // 2] = x[r]


@intent.kernel
def shift_left(buf: InOut[f32[M + 1]]):
    for r in parallel(M):
        buf[r] = buf[r + 1]


@intent.kernel
def columns_only(x: f32[M, N], out: Out[f32[N]]):
    for r in parallel(M):
        for c in parallel(N):
            out[c] = x[r, c]


def _group(kernel, verify=True, **args):
    program = physical.lower(kernel.specialize(args), verify=verify)
    (g,) = program.groups
    return program, g


def test_nested_parallel_is_one_multi_axis_workset():
    x = torch.randn(5, 7)
    program, g = _group(transpose_nested, x=x, out=torch.empty(7, 5))
    assert [str(d) for d in g.domain] == ["M", "N"] and not g.serial
    assert not program.notes


def test_three_nested_loops_with_index_arithmetic_between_them():
    x = torch.randn(2, 3, 4)
    _, g = _group(three_deep, x=x, out=torch.empty(4, 2, 3))
    assert [str(d) for d in g.domain] == ["M", "N", "K"] and not g.serial


@pytest.mark.parametrize("kernel,args", [
    (odd_slots, {"x": torch.randn(6), "out": torch.zeros(13)}),
    (reversed_copy, {"x": torch.randn(6), "out": torch.zeros(6)}),
    (by_div_mod, {"x": torch.randn(8), "out": torch.zeros(4, 2)}),
], ids=["2r+1", "M-1-r", "div-mod"])
def test_injective_affine_writes_are_worksets(kernel, args):
    _, g = _group(kernel, **args)
    assert len(g.domain) == 1 and not g.serial


def test_colliding_writes_name_both_accesses_and_the_instances():
    program, g = _group(halves, x=torch.randn(4), out=torch.zeros(4))
    assert g.serial and g.domain == ()
    (note,) = [n.message for n in program.notes]
    assert note.startswith("instances of this parallel loop may conflict: store at ")
    assert " in instance (r=0) and store at " in note and " in instance (r=1) write the same element (with M=2)" in note


def test_reading_what_another_instance_writes_is_named():
    program, g = _group(shift_left, buf=torch.zeros(5))
    assert g.serial
    (note,) = [n.message for n in program.notes]
    assert "load at " in note and " reads the element that store at " in note and " writes (with M=" in note


def test_the_ordered_fallback_orders_each_read_behind_the_previous_instances_write():
    """Instance r + 1 of the one-by-one fallback reads what instance r wrote; the scalar write and read need not
    be one thread's, so a barrier precedes the read (the physical verifier's buffer-visibility rule refused the
    program, and explain with it, while the launch under the interpreter happened to be right)."""
    from physical.ops.program import Barrier

    program, g = _group(shift_left, buf=torch.zeros(5))
    assert any(isinstance(op, Barrier) for op in g.body.walk())
    buf = torch.arange(9, dtype=torch.float32)
    want = shift_left.oracle(buf=buf.clone())["buf"]
    shift_left(buf=buf)
    np.testing.assert_array_equal(buf.numpy(), want)
    assert "construction verifier: all" in shift_left.explain()


def test_nest_whose_inner_writes_collide_across_the_outer_axis_runs_in_order():
    program, g = _group(columns_only, x=torch.randn(3, 4), out=torch.zeros(4))
    assert g.serial
    (note,) = [n.message for n in program.notes]
    assert "in instance (r=0, c=0)" in note or "(r=1, c=0)" in note


@pytest.mark.parametrize("sms", [None, 132])
def test_nested_transpose_matches_the_oracle_over_many_programs(sms):
    x = torch.randn(70, 33)
    out = torch.empty(33, 70)
    with simulated_multiprocessors(sms) if sms else _nothing():
        transpose_nested(x=x, out=out)
    assert torch.equal(out, x.t())
    want = transpose_nested.oracle(x=x.numpy(), out=np.empty((33, 70), np.float32))
    np.testing.assert_array_equal(out.numpy(), want["out"])


def test_three_deep_and_div_mod_match_torch():
    x = torch.randn(2, 3, 4)
    out = torch.empty(4, 2, 3)
    three_deep(x=x, out=out)
    assert torch.equal(out, x.permute(2, 0, 1) * 2.0)
    v = torch.randn(12)
    o = torch.empty(4, 3)
    by_div_mod(x=v, out=o)
    assert torch.equal(o, v.reshape(3, 4).t())


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
