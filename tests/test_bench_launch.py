"""Host overhead measurement of bench/launch.py."""

from __future__ import annotations

import torch

from bench import kernels as bk
from bench.launch import measure, per_call, profile, table, triton_stubbed
from emit_triton import targets


def test_stub_receives_the_launch_and_is_removed():
    original = targets.run
    case = bk.vector_add_case(100)
    args = case.build(torch.device("cpu"), torch.Generator().manual_seed(0))
    before = args["out"].clone()
    with triton_stubbed() as grids:
        case.kernel(**args)
    assert targets.run is original
    assert len(grids) == 1 and grids[0] >= 1
    # nothing ran: the output's bits are as they were (torch.empty may hold NaNs, which torch.equal calls unequal)
    assert torch.equal(args["out"].view(torch.int32), before.view(torch.int32))


def test_per_call_counts_batches():
    calls = []
    timing = per_call(lambda: calls.append(1), calls=100, batch=10)
    assert len(calls) == 100
    assert timing.cpu_us >= 0 and timing.wall_us > 0


def test_measure_times_the_kernel_object_and_the_launcher():
    row = measure(bk.vector_add_case(100), calls=20)
    assert row.error is None
    assert row.call is not None and row.launcher is not None
    assert row.call.wall_us > 0 and row.launcher.wall_us > 0
    text = table([row])
    assert "| vector_add " in text


def test_a_failing_launch_is_a_table_row():
    case = bk.vector_add_case(8)
    broken = bk.BenchCase("vector_add", "broken", case.kernel,
                          lambda dev, g: {"x": torch.zeros(8), "y": torch.zeros(9), "out": torch.zeros(8)}, case.eager)
    row = measure(broken, calls=10)
    assert row.error is not None and row.error.startswith("LaunchError: ")
    assert "FAILED: LaunchError" in table([row])


def test_profile_names_the_launcher():
    text = profile(bk.vector_add_case(100), calls=5)
    assert "launcher.py" in text and "(launch)" in text
