"""Whole-tensor statements map per element (physical/worksets.py): a structured op feeding a
broadcast exposes only its free axes (the reduction runs once per row), and reshapes are index maps
(`//` and `%` within groups of axes), so head splits and flattens are parallel copies."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intent
import physical
from bench.traffic import TrafficCounter
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32
from kir.dims import DConst, DSym, dim_bin
from kir.solver import ShapeSolver
from physical.worksets import reshape_groups

B, M, N = dims("B M N")


@intent.kernel
def subtract_row_max(x: f32[M, N], out: Out[f32[M, N]]):
    out[:, :] = x - intent.max(x, axis=1, keepdims=True)


@intent.kernel(requires=[N % 4 == 0])
def head_split(x: f32[B, M, N], out: Out[f32[B, 4, M, N // 4]]):
    out[:, :, :, :] = intent.permute(intent.reshape(x, (B, M, 4, N // 4)), (0, 2, 1, 3))


@intent.kernel
def flatten(x: f32[B, M, N], out: Out[f32[B * M, N]]):
    out[:, :] = intent.reshape(x, (B * M, N))


@intent.kernel
def unflatten_rows(x: f32[B * M, N], out: Out[f32[B, M, N]]):
    out[:, :, :] = intent.reshape(x, (B, M, N)) * 2.0


def _lowered(kernel, **args):
    return physical.lower(kernel.specialize(args), verify=True)


def test_row_reduction_feeding_a_broadcast_runs_once_per_row():
    x = torch.randn(9, 20)
    program = _lowered(subtract_row_max, x=x, out=torch.empty(9, 20))
    (g,) = program.groups
    assert [str(d) for d in g.domain] == ["M"]
    out = torch.empty(9, 20)
    with TrafficCounter({"x": x, "out": out}) as counter:
        subtract_row_max(x=x, out=out)
    assert torch.equal(out, x - x.amax(1, keepdim=True))
    assert counter.traffic.read_by["x"] == x.numel() * 4  # both uses of x: one load


@pytest.mark.parametrize("kernel,shape,out_shape,torch_fn", [
    (head_split, (2, 6, 8), (2, 4, 6, 2), lambda x: x.reshape(2, 6, 4, 2).permute(0, 2, 1, 3)),
    (flatten, (2, 6, 8), (12, 8), lambda x: x.reshape(12, 8)),
    (unflatten_rows, (12, 8), (3, 4, 8), lambda x: x.reshape(3, 4, 8) * 2.0),
], ids=["head_split", "flatten", "unflatten"])
def test_reshapes_are_index_maps_over_every_axis(kernel, shape, out_shape, torch_fn):
    x = torch.randn(*shape)
    args = {"x": x, "out": torch.empty(*out_shape)}
    if kernel is unflatten_rows:
        args["out"] = torch.empty(3, 4, 8)
    program = _lowered(kernel, **args)
    (g,) = program.groups
    assert len(g.domain) == len(out_shape) and not g.serial
    with simulated_multiprocessors(132):
        kernel(**args)
    assert torch.equal(args["out"], torch_fn(x))
    want = kernel.oracle(**{k: v.numpy() for k, v in args.items()})
    np.testing.assert_array_equal(args["out"].numpy(), want["out"])


def test_reshape_groups_pair_equal_element_counts():
    s = ShapeSolver(("B", "S", "D"))
    b, sq, d = DSym("B"), DSym("S"), DSym("D")
    assert reshape_groups(s, (b, sq, d), (dim_bin("*", b, sq), d)) == [((0, 2), (0, 1)), ((2, 3), (1, 2))]
    # a unit axis joins the group after it
    assert reshape_groups(s, (b, sq, d), (b, sq, DConst(1), d)) == [((0, 1), (0, 1)), ((1, 2), (1, 2)),
                                                                    ((2, 3), (2, 4))]
    assert reshape_groups(s, (b, d), (d, b)) == [((0, 2), (0, 2))]  # one group: linearise, delinearise
    assert reshape_groups(s, (b,), (d,)) is None


def test_bitwise_the_same_on_every_run_and_every_grid():
    x = torch.randn(7, 33)
    runs = []
    for sms in (None, 4, 132):
        out = torch.empty(7, 33)
        if sms is None:
            subtract_row_max(x=x, out=out)
        else:
            with simulated_multiprocessors(sms):
                subtract_row_max(x=x, out=out)
        runs.append(out)
    assert all(torch.equal(r, runs[0]) for r in runs)


@intent.kernel
def total(x: f32[N], out: Out[f32[1]]):
    out[0] = intent.sum(x)


@intent.kernel
def small_total(x: f32[16], out: Out[f32[1]]):
    out[0] = intent.max(x)


@intent.kernel
def running(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cumsum(x)


def test_one_program_reductions_and_scans_say_so():
    program = physical.construct(total.specialize({"x": torch.randn(10), "out": torch.empty(1)}))
    (note,) = [n.message for n in program.notes]
    assert note == ("the sum reduction over N elements runs in one program instance: the statement writes no axis "
                    "that could spread it over programs, so one multiprocessor does all of it (a reduction is split "
                    "across programs only where its row is walked in chunks and its result is only stored)")
    # the pipeline splits it across programs (split-reductions), and the note goes
    assert not physical.lower(total.specialize({"x": torch.randn(10), "out": torch.empty(1)})).notes
    assert not physical.construct(small_total.specialize({"x": torch.randn(16), "out": torch.empty(1)})).notes
    (scan,) = [n.message for n in physical.construct(running.specialize({"x": torch.randn(9),
                                                                          "out": torch.empty(9)})).notes]
    assert scan == ("the whole-tensor write runs in one program instance (one multiprocessor does all of it): its "
                    "value cannot be computed per element (a scan along a written axis stays inside one instance)")
