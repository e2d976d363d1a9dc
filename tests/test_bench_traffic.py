"""The traffic counter of bench/traffic.py: exact byte counts on hand-written interpreted kernels and on a
generated kernel, so that the measurement itself is verified."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction, interpreter_builder

from bench import kernels as bk
from bench.fast_reduce import vectorised_custom_reductions
from bench.traffic import OTHER, TrafficCounter, measure, table


def masked_copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask, other=0.0), mask=mask)


def scalar_then_block(src, dst, BLOCK: tl.constexpr):
    first = tl.load(src)  # a scalar pointer, no mask: one element
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs) + first)


def atomics(counts, values, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(values + offs, mask=mask, other=0)
    tl.atomic_add(counts + v, 1, mask=mask)
    tl.atomic_cas(counts + 3, 0, 7)


def masked_off_atomic(counts, values, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(counts + tl.load(values + offs), 1, mask=offs < 0)


def interpreted(fn):
    return InterpretedFunction(fn)


def test_masked_copy_counts_active_elements_only():
    n, block = 10, 4
    src, dst = torch.arange(n, dtype=torch.float32), torch.zeros(n)
    with TrafficCounter({"src": src, "dst": dst}) as counter:
        interpreted(masked_copy)[(3,)](src, dst, n, BLOCK=block)
    t = counter.traffic
    assert torch.equal(dst, src)
    assert (t.launches, t.programs) == (1, 3)
    assert (t.loaded, t.stored, t.atomic, t.atomic_ops) == (n * 4, n * 4, 0, 0)
    assert t.total == 2 * n * 4
    assert dict(t.read_by) == {"src": n * 4}
    assert dict(t.written_by) == {"dst": n * 4}


def test_element_size_and_scalar_pointers():
    src, dst = torch.arange(8, dtype=torch.float16), torch.zeros(8, dtype=torch.float16)
    with TrafficCounter({"src": src}) as counter:
        interpreted(scalar_then_block)[(1,)](src, dst, BLOCK=8)
    t = counter.traffic
    assert t.loaded == (1 + 8) * 2
    assert t.stored == 8 * 2
    assert dict(t.read_by) == {"src": 9 * 2}
    assert dict(t.written_by) == {OTHER: 8 * 2}  # dst was not named


def test_launches_and_programs_accumulate():
    src, dst = torch.zeros(16), torch.zeros(16)
    with TrafficCounter() as counter:
        interpreted(masked_copy)[(4,)](src, dst, 16, BLOCK=4)
        interpreted(masked_copy)[(2,)](src, dst, 5, BLOCK=4)
    t = counter.traffic
    assert (t.launches, t.programs) == (2, 6)
    assert t.loaded == (16 + 5) * 4


def test_atomics_count_read_and_write_and_multiplicity_per_program():
    values = torch.tensor([0, 1, 1, 1, 2, 2, 0, 1, 2, 2], dtype=torch.int32)
    counts = torch.zeros(4, dtype=torch.int32)
    with TrafficCounter({"counts": counts, "values": values}) as counter:
        interpreted(atomics)[(2,)](counts, values, 10, BLOCK=8)
    t = counter.traffic
    assert counts.tolist() == [2, 4, 4, 7]
    # 10 masked-in adds and one CAS per program, each reading and writing 4 bytes
    assert t.atomic_ops == 10 + 2
    assert t.atomic == 2 * 4 * 12
    assert t.loaded == 10 * 4
    assert t.read_by["counts"] == t.written_by["counts"] == 4 * 12
    # program 0 (elements 0-7) adds to bin 1 four times; program 1 (elements 8, 9) twice to bin 2
    assert t.max_atomics_per_address_per_program == 4


def test_an_atomic_with_every_lane_masked_off_counts_nothing():
    """A ticket drawn by no lane (balanced segments: a subregion with one participant) moves no bytes and
    leaves the per-address multiplicity at zero instead of failing on an empty tally."""
    values = torch.zeros(8, dtype=torch.int32)
    counts = torch.zeros(4, dtype=torch.int32)
    with TrafficCounter({"counts": counts, "values": values}) as counter:
        interpreted(masked_off_atomic)[(2,)](counts, values, BLOCK=8)
    t = counter.traffic
    assert counts.tolist() == [0, 0, 0, 0]
    assert t.atomic_ops == 0 and t.atomic == 0 and t.max_atomics_per_address_per_program == 0


def test_hooks_are_removed_on_exit():
    before = dict(interpreter_builder.__dict__)
    with TrafficCounter():
        assert "create_masked_load" in interpreter_builder.__dict__
    assert interpreter_builder.__dict__.keys() == before.keys()


def test_nested_counters_both_count():
    src, dst = torch.zeros(8), torch.zeros(8)
    with TrafficCounter() as outer:
        with TrafficCounter() as inner:
            interpreted(masked_copy)[(2,)](src, dst, 8, BLOCK=4)
    assert inner.traffic.total == outer.traffic.total == 2 * 8 * 4


def test_generated_vector_add_moves_exactly_three_arrays():
    n = 1000  # not a multiple of any block: the last program is masked
    g = torch.Generator().manual_seed(0)
    x, y, out = torch.randn(n, generator=g), torch.randn(n, generator=g), torch.empty(n)
    args = {"x": x, "y": y, "out": out}
    with TrafficCounter(args) as counter:
        bk.vector_add(**args)
    t = counter.traffic
    assert torch.equal(out, x + y)
    assert t.total == 3 * n * 4
    assert (t.loaded, t.stored) == (2 * n * 4, n * 4)
    assert dict(t.read_by) == {"x": n * 4, "y": n * 4}
    assert dict(t.written_by) == {"out": n * 4}
    assert t.launches == 1 and t.programs >= 1


def test_measure_reports_the_ratio_against_the_ideal():
    row = measure(bk.vector_add_case(1000))
    assert row.error is None and row.wrong is None
    assert row.ideal == 3 * 1000 * 4
    assert row.ratio == 1.0
    assert row.met is True
    text = table([row])
    assert "| vector_add " in text and "1.000" in text and "<= 1.02" in text


def test_measure_records_a_failing_kernel():
    case = bk.vector_add_case(8)
    broken = bk.BenchCase("vector_add", "broken", case.kernel,
                          lambda dev, g: {"x": torch.zeros(8), "y": torch.zeros(9), "out": torch.zeros(8)},
                          case.eager, traffic_target=1.02)
    row = measure(broken)
    assert row.traffic is None and row.error is not None
    assert row.error.startswith("LaunchError: ")
    assert row.met is False
    assert "FAILED: LaunchError" in table([row])


@triton.jit
def _affine_then(a_scale, a_shift, b_scale, b_shift):
    """Compose affine maps: associative, not commutative, exact on small integers."""
    return a_scale * b_scale, a_shift * b_scale + b_shift


def affine_fold(scale, shift, out, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.arange(0, BLOCK_R)[:, None] * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    s, c = tl.reduce((tl.load(scale + rows), tl.load(shift + rows)), 1, _affine_then)
    tl.store(out + tl.arange(0, BLOCK_R), c * 1000.0 + s)
    flat = tl.arange(0, BLOCK_R * BLOCK_C)
    s_all, c_all = tl.reduce((tl.load(scale + flat), tl.load(shift + flat)), 0, _affine_then)
    tl.store(out + BLOCK_R, c_all)


@pytest.mark.parametrize("cols", [1, 2, 8])
def test_vectorised_reductions_keep_order_and_traffic(cols):
    rows = 4
    g = torch.Generator().manual_seed(1)
    scale = torch.randint(-1, 2, (rows * cols,), generator=g).float()
    shift = torch.randint(-3, 4, (rows * cols,), generator=g).float()
    results, totals = [], []
    for fast in (False, True):
        out = torch.zeros(rows + 1)
        with TrafficCounter() as counter:
            if fast:
                with vectorised_custom_reductions():
                    interpreted(affine_fold)[(1,)](scale, shift, out, BLOCK_R=rows, BLOCK_C=cols)
            else:
                interpreted(affine_fold)[(1,)](scale, shift, out, BLOCK_R=rows, BLOCK_C=cols)
        results.append(out)
        totals.append(counter.traffic.total)
    assert torch.equal(results[0], results[1])
    assert totals[0] == totals[1] == (2 * 2 * rows * cols + rows + 1) * 4

    def compose(lo: int, hi: int) -> tuple[float, float]:  # left to right, as the reduction must
        s_acc, c_acc = 1.0, 0.0
        for k in range(lo, hi):
            s_acc, c_acc = s_acc * scale[k].item(), c_acc * scale[k].item() + shift[k].item()
        return s_acc, c_acc

    expected = [c * 1000.0 + s for s, c in (compose(r * cols, (r + 1) * cols) for r in range(rows))]
    expected.append(compose(0, rows * cols)[1])
    np.testing.assert_array_equal(results[1].numpy(), np.array(expected, dtype=np.float32))


def test_vectorised_reductions_restore_the_interpreter():
    from triton.runtime.interpreter import ReduceOps

    original = ReduceOps.generic_reduce
    with vectorised_custom_reductions():
        assert ReduceOps.generic_reduce is not original
    assert ReduceOps.generic_reduce is original


def test_generated_welford_agrees_with_and_without_vectorised_reductions():
    case = bk.welford_case(3, 100)
    fast, exact = measure(case, fast_reduce=True), measure(case, fast_reduce=False)
    assert fast.wrong is None and exact.wrong is None
    assert fast.traffic is not None and exact.traffic is not None
    assert fast.traffic.total == exact.traffic.total == fast.ideal
