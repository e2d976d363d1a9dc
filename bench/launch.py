"""Host overhead of a cached launch: the Python path from `kernel(**args)` to Triton's own launch.

    python bench/launch.py [--quick] [--calls N] [--only FAMILY ...] [--profile FAMILY]

Each bench kernel is called on tiny CPU tensors after a first (compiling) call, with
`emit_triton.targets.run` (the single call into Triton) replaced by a stub that returns at once,
so what is timed is argument binding and checking, specialisation and emission cache lookups,
launch-expression evaluation, the index-width choice and the loaded-module lookup. The same path
serves CUDA tensors (only the target differs). Columns: the whole call through the kernel object,
`emit_triton.launch` on the specialised kernel alone (the launcher), and the difference (the kernel
object's binding and specialisation lookup); microseconds per call, median over batches. CPU time of
this process and wall time are both shown, and the fastest batch (like `timeit`'s minimum, the
least disturbed by the machine: on a shared virtual machine the medians can vary twofold from run to
run). Target: <= 15 us per cached launch (median CPU time). `--profile FAMILY` prints where the time
of one kernel's cached launches goes (cProfile, by cumulative time) instead of the table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository's packages, not bench/'s siblings
    _ROOT = Path(__file__).resolve().parent.parent
    sys.path[:] = [str(_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _ROOT / "bench"]

import torch  # noqa: E402

import emit_triton  # noqa: E402
from bench.kernels import BenchCase, one_per_kernel  # noqa: E402
from bench.report import failure_text, markdown_table, median, verdict  # noqa: E402
from emit_triton import targets  # noqa: E402

TARGET_US = 15.0


@contextmanager
def triton_stubbed() -> Iterator[list[int]]:
    """Replace the call into Triton by a stub; yields the list of grids it was asked to launch."""
    grids: list[int] = []
    original = targets.run

    def stub(fn: Any, target: Any, grid: int, positional: Any, keywords: Any, info: Any = None) -> None:
        grids.append(grid)

    targets.run = stub
    try:
        yield grids
    finally:
        targets.run = original


@dataclass(frozen=True)
class Timing:
    cpu_us: float   # median over batches
    wall_us: float
    best_us: float = 0.0  # the fastest batch (CPU time): the code's own cost, least disturbed by the machine


def per_call(fn: Callable[[], Any], calls: int, batch: int = 50) -> Timing:
    """Median over batches of the mean time of one call, in CPU and in wall microseconds."""
    return interleaved([fn], calls, batch)[0]


def interleaved(fns: list[Callable[[], Any]], calls: int, batch: int = 50) -> list[Timing]:
    """`per_call` of several functions, their batches alternating so that all see the same machine load."""
    cpu: list[list[float]] = [[] for _ in fns]
    wall: list[list[float]] = [[] for _ in fns]
    for _ in range(max(1, calls // batch)):
        for n, fn in enumerate(fns):
            c0, w0 = time.process_time_ns(), time.perf_counter_ns()
            for _ in range(batch):
                fn()
            cpu[n].append((time.process_time_ns() - c0) / batch / 1e3)
            wall[n].append((time.perf_counter_ns() - w0) / batch / 1e3)
    return [Timing(median(c), median(w), min(c)) for c, w in zip(cpu, wall)]


@dataclass
class Row:
    case: BenchCase
    call: Timing | None = None
    launcher: Timing | None = None
    error: str | None = None

    @property
    def met(self) -> bool:
        return self.call is not None and self.call.cpu_us <= TARGET_US


def measure(case: BenchCase, calls: int) -> Row:
    """Time cached launches of `case` with Triton stubbed out (the first call compiles, untimed)."""
    args = case.build(torch.device("cpu"), torch.Generator().manual_seed(0))
    row = Row(case)
    try:
        kernel = case.kernel.specialize(args)
        with triton_stubbed() as grids:
            case.kernel(**args)  # emission and module loading happen here, once
            if not grids:
                raise RuntimeError("the launch never reached Triton (empty grid?)")
            row.call, row.launcher = interleaved([lambda: case.kernel(**args),
                                                  lambda: emit_triton.launch(kernel, args)], calls)
    except Exception as exc:  # the table records a failing kernel instead of hiding it
        row.error = failure_text(exc)
    return row


HEADERS = ("kernel", "call us (cpu)", "launcher us (cpu)", "kernel object us (cpu)", "call us (wall)",
           "call us (best batch)", "<= 15 us", "notes")


def table(rows: list[Row]) -> str:
    out = []
    for r in rows:
        if r.call is None or r.launcher is None:
            out.append((r.case.family, "-", "-", "-", "-", "-", verdict(False), f"FAILED: {r.error}"))
            continue
        out.append((r.case.family, f"{r.call.cpu_us:.1f}", f"{r.launcher.cpu_us:.1f}",
                    f"{max(0.0, r.call.cpu_us - r.launcher.cpu_us):.1f}", f"{r.call.wall_us:.1f}",
                    f"{r.call.best_us:.1f}", verdict(r.met), ""))
    return markdown_table(HEADERS, out)


def profile(case: BenchCase, calls: int, top: int = 30) -> str:
    """cProfile of `calls` cached launches of `case` (Triton stubbed), sorted by cumulative time."""
    import cProfile
    import io
    import pstats

    args = case.build(torch.device("cpu"), torch.Generator().manual_seed(0))
    with triton_stubbed():
        case.kernel(**args)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(calls):
            case.kernel(**args)
        profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls")
    ap.add_argument("--calls", type=int, default=None, help="timed calls per kernel and column (default 2000)")
    ap.add_argument("--only", nargs="*", metavar="FAMILY")
    ap.add_argument("--profile", metavar="FAMILY", help="profile one kernel's cached launches instead")
    opts = ap.parse_args(argv)
    calls = opts.calls or (300 if opts.quick else 2000)
    if opts.profile:
        found = [c for c in one_per_kernel("tiny") if c.family == opts.profile]
        if not found:
            ap.error(f"--profile: no bench kernel {opts.profile!r}")
        print(profile(found[0], calls))
        return 0
    rows = [measure(c, calls) for c in one_per_kernel("tiny") if not opts.only or c.family in opts.only]
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
