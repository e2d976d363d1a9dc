"""The whole-device model of bench/model.py: sector counting on hand-written interpreted kernels,
greedy placement, and the modelled efficiency of a one-program launch."""

from __future__ import annotations

import pytest
import torch
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

from bench import kernels as bk
from bench import model
from bench.traffic import Traffic, TrafficCounter
from emit_triton.targets import simulated_multiprocessors


def column_walk(src, dst, rows, cols, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    r = tl.arange(0, BLOCK)
    v = tl.load(src + r * cols + c, mask=r < rows, other=0.0)
    tl.store(dst + c * BLOCK + r, v, mask=r < rows)  # the column, contiguous


def row_copy(src, dst, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs))


def scattered_atomics(counts, values, BLOCK: tl.constexpr):
    v = tl.load(values + tl.arange(0, BLOCK))
    tl.atomic_add(counts + v, 1)


def test_strided_load_moves_a_sector_per_element():
    rows, cols = 16, 8  # f32: a row of 8 is exactly one 32-byte sector
    src, dst = torch.randn(rows, cols), torch.zeros(cols, rows)
    with TrafficCounter({"src": src}) as counter:
        InterpretedFunction(column_walk)[(cols,)](src, dst, rows, cols, BLOCK=16)
    t = counter.traffic
    assert torch.equal(dst, src.t())
    # each program: 16 loads in 16 distinct sectors, 16 contiguous stores in two sectors
    assert t.sector_bytes == cols * (16 * 32 + 2 * 32)
    assert dict(t.program_sector_bytes) == {p: 16 * 32 + 2 * 32 for p in range(cols)}
    assert t.launch_first_program == [0]


def test_contiguous_access_moves_its_bytes():
    src, dst = torch.randn(64), torch.zeros(64)
    with TrafficCounter() as counter:
        InterpretedFunction(row_copy)[(2,)](src, dst, BLOCK=32)
    assert counter.traffic.sector_bytes == 2 * 64 * 4


def test_atomics_cost_a_sector_per_distinct_address():
    values, counts = torch.tensor([0, 1, 1, 3, 3, 3, 0, 2], dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    with TrafficCounter() as counter:
        InterpretedFunction(scattered_atomics)[(1,)](counts, values, BLOCK=8)
    assert counter.traffic.sector_bytes == 32 + 4 * 32  # the 8 values (one sector), then 4 addresses


def test_greedy_placement_fills_the_least_loaded_multiprocessor():
    assert model.place([5, 3, 2, 2], sms=2) == 7  # 5 | 3, then 2 joins the 3, then 2 joins the 5
    assert model.place([10], sms=132) == 10
    assert model.place([], sms=4) == 0
    assert model.place([1] * 264, sms=132) == 2


def test_one_program_reaches_its_share_of_the_device():
    t = Traffic()
    t.launch_first_program.append(0)
    t.program_sector_bytes[0] = 1 << 20
    t.sector_bytes = 1 << 20
    e = model.estimate(t, 1 << 20)
    assert e.efficiency == pytest.approx(model.SM_SHARE / model.SMS)
    spread = Traffic(sector_bytes=1 << 20)
    spread.launch_first_program.append(0)
    for p in range(264):
        spread.program_sector_bytes[p] = (1 << 20) // 264
    assert model.estimate(spread, (1 << 20) - (1 << 20) % 264).efficiency == pytest.approx(1.0)


def test_launches_are_modelled_one_after_the_other():
    t = Traffic(sector_bytes=200)
    t.launch_first_program += [0, 1]
    t.program_sector_bytes.update({0: 100, 1: 100})
    one = model.estimate(t, 200)
    assert one.model_s == pytest.approx(2 * 100 / (model.SM_SHARE * model.HBM_BYTES_PER_S / model.SMS))


def test_model_rows_on_tiny_cases():
    chosen = [bk.vector_add_case(1000), bk.total_sum_case(5000)]
    with simulated_multiprocessors(132):
        rows = [model.run(c, 60.0) for c in chosen]
    cells = [model.row_cells(r) for r in rows]
    assert [c[0] for c in cells] == ["vector_add", "sum"]
    assert all(r.wrong is None and r.error is None for r in rows)
    assert cells[1][10] == ">= 0.80"


def test_every_named_kernel_of_the_model_has_a_target():
    targets = {c.name: model.model_target(c) for c in model.cases("full")}
    assert targets["vector_add 4M"] == targets["softmax 4096x1024"] == targets["row_sums 65536x64"] == 0.95
    for name in ("sum 4M", "max 4M", "argmax 4M", "cumsum_1d 4M", "cumsum_exclusive_1d 4M", "cummax_1d 4M",
                 "column_sums 65536x64", "column_sums 8192x1000", "transpose 1024x1024", "head_split 8x512x1024",
                 "flatten 8x512x1024", "permute_3d 64x48x256", "nhwc_to_nchw 8x32x32x64", "sub_row_max 4096x1024",
                 "row_sums 4x1048576", "segment_sum_skewed 64seg/2M", "histogram 4M->256"):
        assert targets[name] == 0.80, name
    assert targets["cumsum 64x4096"] is None  # many rows: the traffic set's, not a spreading target
    # reported beyond the list: no target
    assert targets["segment_stats_skewed 64seg/2M"] is targets["jagged_cumsum_skewed 64seg/131072x16"] is None
    assert targets["jagged_mean_skewed 64seg/131072x16"] is None
    assert targets["segment_argmax_skewed 65536seg/2M"] is targets["jagged_argmax_skewed 64seg/131072x16"] is None
