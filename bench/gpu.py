"""Device timings: every bench kernel at large sizes against torch eager, torch.compile and a
straightforward hand-written Triton kernel (bench/triton_ref.py).

    python bench/gpu.py [--quick] [--only FAMILY ...] [--no-compile] [--budget-s S] [--peak-gbs G] [--autotune]
                        [--tests | --no-tests]

Needs a CUDA device; without one it prints "no CUDA device; nothing to time" and exits 0.
First every Intent kernel's result is checked against torch (the hand-written Triton kernel for
dropout, whose random stream torch does not share). Then each implementation is timed with CUDA
events around single launches (after warm-up, L2 flushed before each run, the device kept busy
while the host prepares the launch so host overhead is not counted, median of N). Bandwidth
is the ideal traffic (each input read once, each output written once) over the median time, also
as a fraction of the device's peak memory bandwidth; matmul also reports TFLOP/s against the dense
f16 tensor-core peak. A second table shows end-to-end launch latency of a tiny kernel (host
overhead included). Then the tests that need a device run (`tests/gpu`: CUDA graph capture and
replay, torch.compile on CUDA; `--tests` runs only them, `--no-tests` skips them). Exit status 1 when an
Intent kernel fails or computes a wrong result, or a test fails.

`--dry-run` runs the same flow on CPU tensors at tiny sizes (Triton's interpreter, wall-clock
timing, no torch.compile) to check the script itself; the hand-written kernels join only when
`TRITON_INTERPRET=1` is set before the run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository's packages, not bench/'s siblings
    _ROOT = Path(__file__).resolve().parent.parent
    sys.path[:] = [str(_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _ROOT / "bench"]

import torch  # noqa: E402

from bench.kernels import (  # noqa: E402
    BenchCase,
    clone_args,
    gpu_cases,
    ideal_bytes,
    model_cases,
    output_names,
    traffic_cases,
)
from bench.report import failure_text, markdown_table  # noqa: E402
from intent.runtime.peaks import DEVICE_PEAKS, Peaks, device_peaks  # noqa: E402,F401  (bench's table is the runtime's)

IMPLEMENTATIONS = ("intent", "torch eager", "torch.compile", "triton (hand-written)")


# ---------------------------------------------------------------------------------------------- timing


# About a millisecond of device spinning queued before each timed launch, so that the host's work for
# the launch overlaps it and the events measure the device's time for the kernel, not host overhead
# (which the launch-latency table reports separately).
SLEEP_CYCLES = 2_000_000


class Timer:
    """Median seconds of single calls: CUDA events (L2 flushed before each) or, on CPU, wall clock."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.flush = torch.empty(256 << 20, dtype=torch.uint8, device=device) if device.type == "cuda" else None

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def once(self, fn: Callable[[], Any]) -> float:
        if self.device.type != "cuda":
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start
        assert self.flush is not None
        self.flush.zero_()
        if hasattr(torch.cuda, "_sleep"):  # keep the device busy while the host prepares the launch
            torch.cuda._sleep(SLEEP_CYCLES)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / 1e3

    def median(self, fn: Callable[[], Any], budget_s: float = 1.0, most: int = 25, least: int = 3) -> float:
        """Warm up, then time as many runs as fit in about `budget_s` (between `least` and `most`)."""
        fn()  # compiles on first use
        self.sync()
        probe = self.once(fn)
        reps = max(least, min(most, int(budget_s / max(probe, 1e-6))))
        for _ in range(min(3, reps)):
            fn()
        return statistics.median(self.once(fn) for _ in range(reps))


# ---------------------------------------------------------------------------------------------- one case


@dataclass
class Result:
    implementation: str
    seconds: float | None = None
    note: str = ""


@dataclass
class CaseReport:
    case: BenchCase
    ideal: int
    flops: float | None
    check: str = "not run"  # "ok", or what went wrong
    results: list[Result] = field(default_factory=list)

    @property
    def intent_ok(self) -> bool:
        return self.check == "ok"


def compare(got: Mapping[str, Any], want: Mapping[str, torch.Tensor], tol: Mapping[str, float]) -> str | None:
    """None when every output matches, else the first mismatch."""
    for name, expected in want.items():
        have = got[name]
        if have.dtype.is_floating_point:
            ok = torch.allclose(have.double(), expected.double(), equal_nan=True, **tol)
        else:
            ok = torch.equal(have, expected.to(have.dtype))
        if not ok:
            diff = (have.double() - expected.double()).abs().nan_to_num(float("inf")).max().item()
            return f"{name}: max abs diff {diff:.3g}"
    return None


def reference(case: BenchCase, args: Mapping[str, Any], hand_written: Any) -> dict[str, torch.Tensor]:
    """Expected outputs: torch's, or where torch computes something different (RNG), the hand-written kernel's."""
    if case.eager_is_reference:
        return case.eager(clone_args(args))
    if hand_written is None:
        raise RuntimeError("no reference: the hand-written Triton kernel is not available here")
    work = clone_args(args)
    hand_written.run(case.family, work)
    return {name: work[name] for name in output_names(case.kernel)}


def run_case(case: BenchCase, device: torch.device, timer: Timer, hand_written: Any, use_compile: bool,
             deadline: float, autotune: bool = False) -> CaseReport:
    args = case.build(device, torch.Generator().manual_seed(0))
    report = CaseReport(case, ideal_bytes(case.kernel, args), case.flops(args) if case.flops else None)
    want: dict[str, torch.Tensor] | None = None
    try:
        want = reference(case, args, hand_written)
        work = clone_args(args)
        case.kernel(**work)
        timer.sync()
        wrong = compare(work, want, case.tol)
        report.check = "ok" if wrong is None else f"WRONG RESULT: {wrong}"
    except Exception as exc:  # recorded in the table: a failing kernel is a result too
        report.check = f"FAILED: {failure_text(exc)}"
    contenders: list[tuple[str, Callable[[], Any] | None, str]] = []
    intent_args = clone_args(args)
    runs = report.intent_ok or report.check.startswith("WRONG")  # a wrong kernel is still timed, and marked
    contenders.append(("intent", (lambda: case.kernel(**intent_args)) if runs else None,
                       "" if report.intent_ok else report.check))
    if autotune:  # the first launch tunes (outside the timed runs: the timer warms up first)
        tuned, tuned_args = case.kernel.with_options(autotune=True), clone_args(args)
        contenders.append(("intent (autotuned)", (lambda: tuned(**tuned_args)) if runs else None,
                           "" if report.intent_ok else report.check))
    contenders.append(("torch eager", lambda: case.eager(args), ""))
    if not use_compile:
        contenders.append(("torch.compile", None, "skipped"))
    elif time.monotonic() > deadline:
        contenders.append(("torch.compile", None, "skipped: time budget spent"))
    else:
        compiled = torch.compile(case.eager, dynamic=False)
        contenders.append(("torch.compile", lambda: compiled(args), ""))
    if hand_written is None:
        contenders.append(("triton (hand-written)", None, "skipped: needs TRITON_INTERPRET=1 on CPU"))
    elif case.family not in hand_written.RUNNERS:
        contenders.append(("triton (hand-written)", None, "none written"))
    else:
        ref_args = clone_args(args)
        contenders.append(("triton (hand-written)", lambda: hand_written.run(case.family, ref_args),
                           _hand_written_check(case, args, want, hand_written) if want is not None else ""))
    for name, fn, note in contenders:
        if fn is None:
            report.results.append(Result(name, None, note))
            continue
        try:
            report.results.append(Result(name, timer.median(fn), note))
        except Exception as exc:
            report.results.append(Result(name, None, f"FAILED: {failure_text(exc)}"))
    return report


def _hand_written_check(case: BenchCase, args: Mapping[str, Any], want: Mapping[str, torch.Tensor],
                        hand_written: Any) -> str:
    """A note for the hand-written kernel's row: empty when it computes the reference's result."""
    if not case.eager_is_reference:
        return "the reference"
    work = clone_args(args)
    try:
        hand_written.run(case.family, work)
    except Exception as exc:
        return f"FAILED: {failure_text(exc)}"
    wrong = compare(work, want, case.tol)
    return "" if wrong is None else f"WRONG RESULT: {wrong}"


# ---------------------------------------------------------------------------------------------- tables

HEADERS = ("kernel", "size", "implementation", "ms", "GB/s", "% peak BW", "TFLOP/s", "% peak TC", "time / intent",
           "notes")


def table(reports: list[CaseReport], peaks: Peaks) -> str:
    out = []
    for rep in reports:
        intent = next((r.seconds for r in rep.results if r.implementation == "intent"), None)
        for r in rep.results:
            if r.seconds is None:
                out.append((rep.case.family, rep.case.label, r.implementation, "-", "-", "-", "-", "-", "-", r.note))
                continue
            bw = rep.ideal / r.seconds
            tf = rep.flops / r.seconds if rep.flops else None
            out.append((rep.case.family, rep.case.label, r.implementation, f"{r.seconds * 1e3:.3f}", f"{bw / 1e9:.0f}",
                        f"{100 * bw / peaks.bandwidth:.1f}%" if peaks.bandwidth else "-",
                        f"{tf / 1e12:.1f}" if tf else "-",
                        f"{100 * tf / peaks.flops:.1f}%" if tf and peaks.flops else "-",
                        f"{r.seconds / intent:.2f}" if intent else "-", r.note))
    return markdown_table(HEADERS, out)


def launch_latency(device: torch.device, hand_written: Any, calls: int) -> str:
    """End-to-end microseconds per call of a tiny vector add, host overhead included (no per-call sync)."""
    from bench.kernels import vector_add_case

    case = vector_add_case(1024)
    args = case.build(device, torch.Generator().manual_seed(0))
    rows = []
    candidates: list[tuple[str, Callable[[], Any]]] = [("intent", lambda: case.kernel(**args)),
                                                       ("torch eager", lambda: torch.add(args["x"], args["y"],
                                                                                         out=args["out"]))]
    if hand_written is not None:
        candidates.append(("triton (hand-written)", lambda: hand_written.run("vector_add", args)))
    for name, fn in candidates:
        try:
            for _ in range(10):
                fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            rows.append((name, f"{(time.perf_counter() - start) / calls * 1e6:.1f}", ""))
        except Exception as exc:
            rows.append((name, "-", f"FAILED: {failure_text(exc)}"))
    return markdown_table(("tiny vector add (1024)", "us per call", "notes"), rows)


def timed_cases(dry_run: bool) -> list[BenchCase]:
    """What a run times: the large GPU sizes and every kernel of the whole-device model (`bench/model.py`) at the
    model's sizes (the skewed segment, jagged and argmax kernels among them), so the first GPU run checks the model;
    a dry run, the tiny sizes of both sets."""
    if dry_run:
        return traffic_cases("tiny") + model_cases("tiny")
    return gpu_cases() + model_cases("full")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", metavar="FAMILY")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument("--quick", action="store_true", help="the same as --no-compile (torch.compile dominates the time)")
    ap.add_argument("--budget-s", type=float, default=400.0,
                    help="after this many seconds, skip the remaining torch.compile baselines (default 400)")
    ap.add_argument("--peak-gbs", type=float, default=None, help="the device's peak memory bandwidth in GB/s")
    ap.add_argument("--dry-run", action="store_true", help="the same flow on CPU at tiny sizes (checks the script)")
    ap.add_argument("--tests", action="store_true", help="only run the CUDA test suite (tests/gpu)")
    ap.add_argument("--no-tests", action="store_true", help="skip the CUDA test suite that follows the timings")
    ap.add_argument("--autotune", action="store_true",
                    help="also time Intent kernels with autotune=True (a handful of num_warps/num_stages "
                         "configurations)")
    opts = ap.parse_args(argv)
    start = time.monotonic()
    if opts.dry_run:
        device = torch.device("cpu")
        cases = timed_cases(dry_run=True)
        peaks = Peaks("cpu (dry run)", None, None)
        use_compile = False
    else:
        if not torch.cuda.is_available():
            print("no CUDA device; nothing to time")
            return 0
        if opts.tests:
            return run_gpu_tests()
        device = torch.device("cuda")
        cases = timed_cases(dry_run=False)
        peaks = device_peaks(torch.cuda.get_device_name(device), opts.peak_gbs)
        use_compile = not (opts.no_compile or opts.quick)
    if opts.only:
        cases = [c for c in cases if c.family in opts.only]
    from bench import triton_ref

    hand_written = triton_ref if device.type == "cuda" or triton_ref.is_interpreting() else None
    timer = Timer(device)
    reports = []
    for case in cases:
        t0 = time.monotonic()
        reports.append(run_case(case, device, timer, hand_written, use_compile, start + opts.budget_s,
                                opts.autotune))
        print(f"timed {case.name}: {time.monotonic() - t0:.1f}s ({reports[-1].check})", file=sys.stderr, flush=True)
    bandwidth = f"{peaks.bandwidth / 1e12:.2f} TB/s" if peaks.bandwidth else "unknown (pass --peak-gbs)"
    print(f"device: {peaks.device}; peak bandwidth {bandwidth}; torch {torch.__version__}")
    print()
    print(table(reports, peaks))
    print()
    print(launch_latency(device, hand_written, 20 if opts.dry_run else 2000))
    print(f"\ntotal {time.monotonic() - start:.0f}s")
    failed = [r for r in reports if not r.intent_ok]
    for r in failed:
        print(f"intent {r.case.name}: {r.check}", file=sys.stderr)
    tests_failed = device.type == "cuda" and not opts.no_tests and run_gpu_tests() != 0
    return 1 if failed or tests_failed else 0


def run_gpu_tests() -> int:
    """The tests that need a device (tests/gpu: CUDA graphs, torch.compile on CUDA); pytest's exit status."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    print("\nCUDA tests (tests/gpu):", flush=True)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "tests/gpu"], cwd=root,
                          check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
