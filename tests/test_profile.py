"""`intent.profile()`: every launch recorded with its specialisation, grid, time, bytes and FLOPs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import intent
from emit_triton import fast_launch, targets
from intent import Out, dims, f32, parallel
from intent.runtime import artifacts, profiling

M, N, C, T = dims("M N C T")


@intent.kernel
def add(x: f32[N], y: f32[N], out: Out[f32[N]]):
    out[:] = x + y


@intent.kernel(requires=[N <= 65536])
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        out[i, :] = e / intent.sum(e)


@intent.kernel
def recurrence(a: f32[C, T], x: f32[C, T], h: Out[f32[C, T]]):
    for c in parallel(C):
        acc = f32(0.0)
        for t in range(T):
            acc = a[c, t] * acc + x[c, t]
            h[c, t] = acc


def test_every_launch_is_recorded_with_counts_from_the_physical_program() -> None:
    x, y = torch.randn(10), torch.randn(10)
    with intent.profile() as p:
        add(x, y)
        add(x, y)  # the cached launch path records too
        softmax(torch.randn(3, 20))
        recurrence(torch.randn(3, 5), torch.randn(3, 5))
    assert [r.kernel for r in p] == ["add", "add", "softmax", "recurrence"]
    a, _, s, r = p.launches
    assert (a.bytes, a.flops, a.exact) == (3 * 10 * 4, 10, True)
    assert s.specialisation == "f32,f32 BLOCK_I0=4 BLOCK_N=32 BLOCK_N_LOOPED=0 BLOCK_N_CHUNK=4096"
    assert (s.bytes, s.flops) == (2 * 3 * 20 * 4, 5 * 3 * 20)  # read x, write out; max, sub, exp, sum, div
    assert (r.bytes, r.flops) == (3 * 3 * 5 * 4, 2 * 3 * 5)  # an ordered loop of T steps per channel
    assert s.grid == 1 and s.path == "interpreter" and s.timing == "wall (interpreter)" and s.seconds > 0
    assert s.gbs == pytest.approx(s.bytes / s.seconds / 1e9)


def test_the_table_shows_each_launch_and_percent_of_given_peaks() -> None:
    with intent.profile(peak_gbs=1e-3, peak_tflops=1e-6) as p:
        add(torch.randn(10), torch.randn(10))
    text = str(p)
    header, rule, row = text.splitlines()
    assert header.split() == ["kernel", "specialisation", "grid", "ran", "as", "ms", "timing", "bytes", "FLOPs",
                              "GB/s", "%", "peak", "BW", "GFLOP/s", "%", "peak", "FLOP/s"]
    assert row.startswith("add") and "wall (interpreter)" in row and " 120 " in row and row.endswith("%")
    assert str(intent.profile()) == "no kernel launches recorded"


def test_the_profiler_adds_nothing_to_launches_outside_it() -> None:
    run, execute = targets.run, artifacts._execute
    with intent.profile():
        assert targets.run is not run and artifacts._execute is not execute
        with intent.profile():
            pass
        assert targets.run is not run  # still one profile active
    assert targets.run is run and artifacts._execute is execute
    x = torch.randn(4)
    add(x, x)
    assert fast_launch.try_launch(add.specialize({"x": x, "y": x}), {"x": x, "y": x}) is not fast_launch.NOT_PLANNED


def test_nested_profiles_both_record() -> None:
    with intent.profile() as outer:
        add(torch.randn(3), torch.randn(3))
        with intent.profile() as inner:
            add(torch.randn(3), torch.randn(3))
    assert len(outer) == 2 and len(inner) == 1


def test_a_loop_bounded_by_data_makes_the_count_an_estimate() -> None:
    info = profiling.LaunchInfo("k", "", {"bytes": ["*", 4, "N"], "flops": "N", "exact": 0}.items(), {"N": 3})
    assert info.values() == (12, 3, False)
    with intent.profile() as p:
        p._record(info, 1, torch.device("cpu"), "interpreter", lambda: None)
    assert "~12" in str(p) and "an estimate" in str(p)


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib is not installed")
def test_roofline_draws_a_picture(tmp_path: Path) -> None:
    with intent.profile(peak_gbs=1.0, peak_tflops=0.001) as p:
        add(torch.randn(10), torch.randn(10))
        softmax(torch.randn(2, 8))
    path = p.roofline(str(tmp_path / "roof.png"))
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("kernel, args", [
    (add, lambda: {"x": torch.randn(37), "y": torch.randn(37), "out": torch.empty(37)}),
    (softmax, lambda: {"x": torch.randn(5, 300), "out": torch.empty(5, 300)}),
    (recurrence, lambda: {"a": torch.randn(3, 7), "x": torch.randn(3, 7), "h": torch.empty(3, 7)}),
])
def test_counted_bytes_are_what_the_interpreter_moves(kernel: object, args: object) -> None:
    """The static count (physical program) against the dynamic one (`bench.traffic` hooks the interpreter's
    memory operations and counts active elements)."""
    from bench.traffic import TrafficCounter

    given = args()  # type: ignore[operator]
    with TrafficCounter(given) as counter, intent.profile() as p:
        kernel(**given)  # type: ignore[operator]
    assert p.launches[0].bytes == counter.traffic.total
