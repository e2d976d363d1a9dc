"""Tiles follow memory layout (physical/passes/looped.py `strided_lanes`): a reduction along a strided
axis walks it in chunks while a sector's worth of contiguous columns forms the lanes, so every
32-byte sector a load moves is used."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intent
import physical
from bench.traffic import TrafficCounter
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, f64, parallel
from physical.passes.looped import plan_group, strided_lanes

M, N = dims("M N")


@intent.kernel
def column_sums(x: f32[M, N], out: Out[f32[N]]):
    for k in parallel(N):
        out[k] = intent.sum(x[:, k])


@intent.kernel
def column_max64(x: f64[M, N], out: Out[f64[N]]):
    for k in parallel(N):
        out[k] = intent.max(x[:, k])


@intent.kernel
def row_sums(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.sum(x[i, :])


def _env(program, **sizes):
    env = dict(sizes)
    for name, e in program.constexprs:
        env[name] = e.evaluate(env)
    return env


def test_a_strided_row_takes_a_sector_of_lanes_and_walks_the_row():
    args = {"x": torch.randn(600, 20), "out": torch.empty(20)}
    program = physical.lower(column_sums.specialize(args), verify=True)
    (g,) = program.groups
    assert g.looped is not None
    env = _env(program, M=600, N=20)
    assert env[g.looped.flag] == 1 and env[g.block] == 8 and env[g.looped.chunk.block] == 512


def test_lanes_follow_the_element_size_and_rows_keep_their_budget():
    k64 = column_max64.specialize({"x": torch.randn(600, 20, dtype=torch.float64),
                                   "out": torch.empty(20, dtype=torch.float64)})
    program = physical.PIPELINE[0].run(physical.construct(k64))  # ownership enlarged, not yet looped
    (g,) = program.groups
    plan = plan_group(program, g)
    assert not isinstance(plan, str) and strided_lanes(program, g, plan.axis) == 4  # 4 f64 fill a sector
    rows = physical.PIPELINE[0].run(physical.construct(row_sums.specialize({"x": torch.randn(4, 600),
                                                                             "out": torch.empty(4)})))
    (rg,) = rows.groups
    row_plan = plan_group(rows, rg)
    assert not isinstance(row_plan, str) and strided_lanes(rows, rg, row_plan.axis) == 1  # contiguous rows
    assert row_plan.budget == 32768


@pytest.mark.parametrize("m,n", [(600, 20), (1500, 13), (7, 30)])
def test_column_sums_match_the_oracle_and_use_every_sector(m, n):
    x = torch.randn(m, n)
    results = []
    for sms in (None, 132):
        out = torch.empty(n)
        with (simulated_multiprocessors(sms) if sms else _nothing()), TrafficCounter({"x": x}) as counter:
            column_sums(x=x, out=out)
        results.append(out)
    assert torch.equal(results[0], results[1])  # bitwise the same on every grid
    want = column_sums.oracle(x=x.numpy(), out=np.empty(n, np.float32))["out"]
    np.testing.assert_allclose(results[0].numpy(), want, rtol=1e-5, atol=1e-4)
    if n % 8 == 0 or n > 8:
        # each load instruction moves 32-byte sectors of 8 contiguous columns: at most one partly used
        # sector per row and program beyond the ideal
        programs = -(-n // 8)
        assert counter.traffic.sector_bytes <= (m * n * 4 + n * 4) + programs * m * 32 + 64 * programs


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
