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
from emit_triton import sanitizing
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, f64, parallel
from physical.launch_expr import LConst
from physical.passes.looped import plan_group, strided_lanes
from physical.passes.tile_contract import NotTileable
from physical.passes.tile_layout import TILE, TileLayout, layout_axes, match_layout, tiled_domain

B, M, N = dims("B M N")
H, W, C = dims("H W C")


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
    choice = physical.ops.looped_rows(g.body)
    assert choice is not None
    env = _env(program, M=600, N=20)
    assert env[choice.flag] == 1 and env[g.block] == 8 and env[choice.chunk.block] == 512


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
    want = column_sums.oracle(x=x.numpy(), out=np.empty(n, np.float32))["out"]
    for sms in (None, 132):
        results = []
        for _ in range(2):
            out = torch.empty(n)
            with (simulated_multiprocessors(sms) if sms else _nothing()), TrafficCounter({"x": x}) as counter:
                column_sums(x=x, out=out)
            results.append(out)
        # bitwise the same run to run on one device; a device with more multiprocessors may split the rows
        # over more programs (split-reductions), which folds them in another (fixed) order
        assert torch.equal(results[0], results[1])
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
    assert layout_axes(match_layout(g)) is None
    assert not TileLayout().profitable(program)
    rows = physical.PIPELINE[0].run(physical.construct(column_sums.specialize({"x": torch.randn(6, 5),
                                                                                "out": torch.empty(5)})))
    with pytest.raises(NotTileable, match=r"^the group does not map two or more free axes to blocks of instances$"):
        match_layout(rows.groups[0])


# ---------------------------------------------------------------------------------------------- permutes


@intent.kernel
def reverse_axes(x: f32[M, N, C], out: Out[f32[C, N, M]]):
    out[:, :, :] = intent.permute(x, (2, 1, 0))


@intent.kernel
def nhwc_to_nchw(x: f32[B, H, W, C], out: Out[f32[B, C, H, W]]):
    out[:, :, :, :] = intent.permute(x, (0, 3, 1, 2))


@intent.kernel
def nchw_to_nhwc(x: f32[B, C, H, W], out: Out[f32[B, H, W, C]]):
    out[:, :, :, :] = intent.permute(x, (0, 2, 3, 1))


def _permute_args(kernel, shape, perm):
    x = torch.randn(*shape)
    return x, {"x": x, "out": torch.empty(*(shape[p] for p in perm))}


@pytest.mark.parametrize("kernel,shape,perm,domain,tiled", [
    (reverse_axes, (16, 3, 72), (2, 1, 0), ["N", "C", "M"], (0, 2)),
    (nhwc_to_nchw, (2, 3, 8, 72), (0, 3, 1, 2), ["B", "H", "C", "W"], (1, 3)),
    (nchw_to_nhwc, (2, 8, 3, 72), (0, 2, 3, 1), ["B", "H", "W", "C"], (2, 3)),
], ids=["reverse_axes", "nhwc_to_nchw", "nchw_to_nhwc"])
def test_a_permute_tiles_the_unit_stride_axes_of_both_sides(kernel, shape, perm, domain, tiled):
    """The load's unit-stride axis (the output's first or second) and the output's last form the tile, so
    every sector either side moves is used, where the per-lane plan used 4 of each 32 bytes of the input."""
    x, args = _permute_args(kernel, shape, perm)
    program = physical.PIPELINE[0].run(physical.construct(kernel.specialize(args)))
    assert layout_axes(match_layout(program.groups[0])) == tiled
    assert tiled_domain(len(shape), tiled) == tuple(i for i in range(len(shape)) if i not in tiled) + tiled
    program = physical.lower(kernel.specialize(args), verify=True)
    (g,) = program.groups
    assert [str(d) for d in g.domain] == domain and g.tiles == ("BLOCK_LM0", "BLOCK_LN0")
    results = []
    for sms in (None, 132):
        args["out"] = torch.full_like(args["out"], float("nan"))
        with (simulated_multiprocessors(sms) if sms else _nothing()), TrafficCounter() as counter:
            kernel(**args)
        results.append(args["out"])
        assert counter.traffic.sector_bytes == 2 * x.numel() * 4  # rows of 72 and 16 (or 8) floats: whole sectors
    with sanitizing():  # every address inside its access relation, every output element written
        kernel(**args)
    assert torch.equal(results[0], results[1]) and torch.equal(results[0], x.permute(*perm))
    want = kernel.oracle(x=x.numpy(), out=np.empty(args["out"].shape, np.float32))["out"]
    np.testing.assert_array_equal(results[0].numpy(), want)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (3, 2, 65, 1), (1, 66, 1, 130)])
def test_nhwc_to_nchw_at_boundary_shapes_matches_the_oracle(shape):
    x, args = _permute_args(nhwc_to_nchw, shape, (0, 3, 1, 2))
    nhwc_to_nchw(**args)
    want = nhwc_to_nchw.oracle(x=x.numpy(), out=np.empty(args["out"].shape, np.float32))["out"]
    np.testing.assert_array_equal(args["out"].numpy(), want)


def test_explain_names_the_tiled_axes_and_what_each_access_walks():
    _, args = _permute_args(nhwc_to_nchw, (2, 3, 8, 72), (0, 3, 1, 2))
    text = physical.explain(nhwc_to_nchw.specialize(args), {"B": 2, "H": 3, "W": 8, "C": 72})
    lines = text.splitlines()
    assert lines[1].startswith("group 0 (store at test_perf_layout_tiles.py:")
    assert lines[1].endswith("): workset over (B, H, C, W)")
    assert lines[2:4] == [
        "  each program owns one tile BLOCK_LM0 x BLOCK_LN0 of (C, W) and one coordinate of each of (B, H)",
        "  contiguous along a tile axis: load x along C, store out along W"]
    assert "  grid = 12 programs, num_warps = 8" in lines  # 2 * 3 leading coordinates, cdiv(72, 64) * cdiv(8, 64)
