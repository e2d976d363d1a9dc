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
from physical.launch_expr import LConst
from physical.passes.looped import plan_group, strided_lanes
from physical.passes.tile_contract import NotTileable
from physical.passes.tile_layout import TILE, TileLayout, match_layout, transposed_access

B, M, N = dims("B M N")


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


# ---------------------------------------------------------------------------------------------- transposes


@intent.kernel
def transpose_nested(x: f32[M, N], out: Out[f32[N, M]]):
    for r in parallel(M):
        for c in parallel(N):
            out[c, r] = x[r, c] * 2.0


@intent.kernel
def batched_transpose(x: f32[B, M, N], out: Out[f32[B, N, M]]):
    out[:, :, :] = intent.permute(x, (0, 2, 1)) + 1.0


@intent.kernel
def add_2d(x: f32[M, N], y: f32[M, N], out: Out[f32[M, N]]):
    out[:, :] = x + y


def test_a_transpose_owns_square_tiles_and_both_sides_move_whole_sectors():
    args = {"x": torch.randn(70, 45), "out": torch.empty(45, 70)}
    program = physical.lower(transpose_nested.specialize(args), verify=True)
    (g,) = program.groups
    assert g.tiles == ("BLOCK_LM0", "BLOCK_LN0") and dict(program.constexprs)["BLOCK_LM0"] == LConst(TILE)
    x = torch.randn(128, 192)
    out = torch.empty(192, 128)
    with simulated_multiprocessors(132), TrafficCounter() as counter:
        transpose_nested(x=x, out=out)
    assert torch.equal(out, x.t() * 2.0)
    assert counter.traffic.sector_bytes == 2 * x.numel() * 4  # every sector read or written is used


@pytest.mark.parametrize("shape", [(2, 70, 45), (1, 3, 130)])
def test_batched_transposes_match_the_oracle_bit_for_bit(shape):
    x = torch.randn(*shape)
    out = torch.empty(shape[0], shape[2], shape[1])
    program = physical.lower(batched_transpose.specialize({"x": x, "out": out}), verify=True)
    assert program.groups[0].tiles
    batched_transpose(x=x, out=out)
    want = batched_transpose.oracle(x=x.numpy(), out=np.empty(out.shape, np.float32))["out"]
    np.testing.assert_array_equal(out.numpy(), want)


def test_only_groups_with_a_transposed_access_are_tiled():
    args = {"x": torch.randn(5, 6), "y": torch.randn(5, 6), "out": torch.empty(5, 6)}
    program = physical.PIPELINE[0].run(physical.construct(add_2d.specialize(args)))
    (g,) = program.groups
    assert transposed_access(match_layout(g)) is None
    assert not TileLayout().profitable(program)
    rows = physical.PIPELINE[0].run(physical.construct(column_sums.specialize({"x": torch.randn(6, 5),
                                                                                "out": torch.empty(5)})))
    with pytest.raises(NotTileable, match=r"^the group does not map two or more free axes to blocks of instances$"):
        match_layout(rows.groups[0])
