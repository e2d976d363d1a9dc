"""Compile latency per kernel and stage (medians): frontend -> KIR, physical construction, passes,
emission, and Triton -> cubin for sm_90a.

    python bench/compile.py [--quick] [--repeat N] [--cubin-repeat N] [--acceptance DIR] [--no-cubin]

Kernels: every acceptance kernel (`../shared/acceptance/*.py`, else `tests/acceptance/*.py`; first
case's arguments) and every bench kernel. Each repetition starts from the Python function, so nothing is
reused between runs:

* frontend: `intent.kernel(fn, requires=...)` (signature, AST -> KIR, Z3 typing, KIR verifier) and
  `.specialize(args)` (the per-dtype/const specialisation a launch needs); the parsed AST of a
  function is cached per code object, as it is in a process that decorates once;
* construct: `physical.construct(kernel)`; passes: each legal and profitable pass of
  `physical.PIPELINE`, through `physical.lowering.run_passes` as `physical.lower` (the launch path)
  runs them (checked to give the same program); verify: `physical.verify` of the result (not on the
  launch path; shown for scale);
* emit: `emit_triton.emit(program)`;
* cubin: `emit_triton.cubin(kernel, args, 90)` with every cache cold (a fresh Intent cache directory,
  loaded modules cleared, Triton's `always_compile`): what the first launch of a specialisation pays.

Stages are timed in CPU time of this process (`time.process_time`), which a busy shared machine
disturbs far less than wall time; the wall time of the same stages is shown next to it.
Target: frontend + construct + passes + emit <= 50 ms (median) per acceptance kernel.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository's packages, not bench/'s siblings
    _ROOT = Path(__file__).resolve().parent.parent
    sys.path[:] = [str(_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _ROOT / "bench"]

import torch  # noqa: E402

import emit_triton  # noqa: E402
import intent  # noqa: E402
import physical  # noqa: E402
from bench.kernels import one_per_kernel  # noqa: E402
from bench.report import failure_text, markdown_table, median, verdict  # noqa: E402
from intent.kernel import KernelObject  # noqa: E402
from physical.lowering import run_passes  # noqa: E402

TARGET_MS = 50.0
STAGES = ("frontend", "construct", "passes", "emit", "verify")


def default_acceptance_dir() -> Path:
    """The shared acceptance kernels beside the checkout when there are some, else the project's own."""
    root = Path(__file__).resolve().parent.parent
    shared = root.parent / "shared" / "acceptance"
    return shared if shared.is_dir() else root / "tests" / "acceptance"


@dataclass
class Subject:
    """One kernel to time, with the arguments of one launch."""

    origin: str  # "acceptance" or "bench"
    label: str
    kernel: KernelObject
    args: dict[str, Any]


@dataclass
class Row:
    subject: Subject
    ms: dict[str, float] = field(default_factory=dict)  # stage -> median CPU milliseconds (cubin: wall)
    wall_ms: float | None = None  # median wall milliseconds of frontend + construct + passes + emit
    error: str | None = None
    cubin_error: str | None = None

    @property
    def front_ms(self) -> float | None:
        """frontend + construct + passes + emit (CPU): everything before Triton."""
        if self.error is not None or any(s not in self.ms for s in STAGES[:4]):
            return None
        return sum(self.ms[s] for s in STAGES[:4])

    @property
    def met(self) -> bool | None:
        if self.subject.origin != "acceptance":
            return None
        return self.front_ms is not None and self.front_ms <= TARGET_MS


# ---------------------------------------------------------------------------------------------- subjects


def acceptance_subjects(directory: Path) -> list[Subject]:
    """Each distinct kernel object of the acceptance modules with its first case's arguments."""
    out: list[Subject] = []
    for path in sorted(directory.glob("*.py")):
        if path.name in ("run.py", "negatives.py", "traffic.py", "ptx_quality.py") or path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"acceptance_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        seen: set[int] = set()
        for kernel, args, _ in module.cases():
            if id(kernel) in seen:
                continue
            seen.add(id(kernel))
            out.append(Subject("acceptance", f"{path.stem}.{kernel.__name__}", kernel, args))
    return out


def bench_subjects() -> list[Subject]:
    return [Subject("bench", f"bench.{c.family}", c.kernel, c.build(torch.device("cpu"), torch.Generator()))
            for c in one_per_kernel("quick")]


# ---------------------------------------------------------------------------------------------- timing


def fresh_kernel(kernel: KernelObject) -> KernelObject:
    """A new kernel object from the same Python function: decoration runs the frontend again."""
    return intent.kernel(kernel.__wrapped__, requires=list(kernel.signature.requires), checks=kernel.checks)


def time_front_stages(subject: Subject, repeat: int) -> tuple[dict[str, float], float]:
    """Median CPU milliseconds of each stage before Triton, each run starting from the function, and the
    median wall milliseconds of all of them together."""
    clock = time.process_time
    samples: dict[str, list[float]] = {s: [] for s in STAGES}
    walls = []
    for _ in range(repeat):
        w0 = time.perf_counter()
        t0 = clock()
        k = fresh_kernel(subject.kernel).specialize(subject.args)
        t1 = clock()
        program = physical.construct(k)
        t2 = clock()
        program = run_passes(program)
        t3 = clock()
        emit_triton.emit(program)
        t4 = clock()
        walls.append((time.perf_counter() - w0) * 1e3)
        physical.verify(program)
        t5 = clock()
        for stage, (a, b) in zip(STAGES, ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5))):
            samples[stage].append((b - a) * 1e3)
    return {s: median(v) for s, v in samples.items()}, median(walls)


def check_passes_match_lower(subject: Subject) -> None:
    """The timed pass loop lowers to the same program as `physical.lower` (the launch path)."""
    k = subject.kernel.specialize(subject.args)
    mine = physical.print_program(run_passes(physical.construct(k)))
    if mine != physical.print_program(physical.lower(k)):
        raise RuntimeError("the timed pass loop and physical.lower produce different programs")


@contextmanager
def cold_caches() -> Iterator[None]:
    """A fresh Intent cache directory, no loaded modules or artifacts, and Triton compiling every time."""
    from triton import knobs

    from emit_triton import targets

    previous_dir = os.environ.get("INTENT_CACHE_DIR")
    previous_always = knobs.compilation.always_compile
    with tempfile.TemporaryDirectory(prefix="intent-bench-cache-") as tmp:
        os.environ["INTENT_CACHE_DIR"] = tmp
        knobs.compilation.always_compile = True
        targets.clear_loaded()
        try:
            yield
        finally:
            targets.clear_loaded()
            knobs.compilation.always_compile = previous_always
            if previous_dir is None:
                os.environ.pop("INTENT_CACHE_DIR", None)
            else:
                os.environ["INTENT_CACHE_DIR"] = previous_dir


def time_cubin(subject: Subject, repeat: int) -> float:
    """Median milliseconds of a cold `emit_triton.cubin` (sm_90a) for the subject's specialisation."""
    kernel = subject.kernel.specialize(subject.args)
    consts = {p.name for p in subject.kernel.signature.consts}
    abi = {k: v for k, v in subject.args.items() if k not in consts}
    emit_triton.source(kernel, abi)  # emission happens once per process, outside the timed region
    samples = []
    for _ in range(repeat):
        with cold_caches():
            t0 = time.perf_counter()
            blob = emit_triton.cubin(kernel, abi, 90)
            samples.append((time.perf_counter() - t0) * 1e3)
        if not blob.startswith(b"\x7fELF"):
            raise RuntimeError("the cubin is not an ELF file")
    return median(samples)


def measure(subject: Subject, repeat: int, cubin_repeat: int) -> Row:
    row = Row(subject)
    try:
        check_passes_match_lower(subject)  # also warms imports and lazily built tables
        stages, row.wall_ms = time_front_stages(subject, repeat)
        row.ms.update(stages)
    except Exception as exc:  # the table records a failing kernel instead of hiding it
        row.error = failure_text(exc)
        return row
    if cubin_repeat > 0:
        try:
            row.ms["cubin"] = time_cubin(subject, cubin_repeat)
        except Exception as exc:
            row.cubin_error = failure_text(exc)
    return row


# ---------------------------------------------------------------------------------------------- tables

HEADERS = ("kernel", "frontend", "construct", "passes", "emit", "total", "total wall", "verify", "cubin wall",
           "<= 50 ms", "notes")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def table(rows: list[Row]) -> str:
    out = []
    for r in rows:
        if r.error is not None:
            out.append((r.subject.label, "-", "-", "-", "-", "-", "-", "-", "-", verdict(r.met), f"FAILED: {r.error}"))
            continue
        notes = f"cubin FAILED: {r.cubin_error}" if r.cubin_error else ""
        out.append((r.subject.label, _ms(r.ms.get("frontend")), _ms(r.ms.get("construct")), _ms(r.ms.get("passes")),
                    _ms(r.ms.get("emit")), _ms(r.front_ms), _ms(r.wall_ms), _ms(r.ms.get("verify")),
                    _ms(r.ms.get("cubin")), verdict(r.met), notes))
    return ("Milliseconds, medians. Stages and `total` are CPU time of this process (stable on a shared machine); "
            "`total wall` is wall time of the same stages; `cubin wall` includes ptxas, a child process.\n\n"
            + markdown_table(HEADERS, out))


def summary(rows: list[Row]) -> str:
    accepted = [r for r in rows if r.subject.origin == "acceptance"]
    totals = [r.front_ms for r in accepted if r.front_ms is not None]
    met = sum(1 for r in accepted if r.met)
    if not totals:
        return f"acceptance kernels: {met}/{len(accepted)} within {TARGET_MS:.0f} ms"
    return (f"acceptance kernels: {met}/{len(accepted)} within {TARGET_MS:.0f} ms; median of totals "
            f"{median(totals):.1f} ms, max {max(totals):.1f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, no cubin")
    ap.add_argument("--repeat", type=int, default=None, help="repetitions of the stages before Triton (default 15)")
    ap.add_argument("--cubin-repeat", type=int, default=None, help="repetitions of the cubin compile (default 3)")
    ap.add_argument("--no-cubin", action="store_true")
    ap.add_argument("--acceptance", type=Path, default=default_acceptance_dir(), help="acceptance kernel directory")
    ap.add_argument("--only", nargs="*", metavar="LABEL", help="labels (or parts of labels) to run")
    opts = ap.parse_args(argv)
    repeat = opts.repeat or (5 if opts.quick else 15)
    cubin_repeat = 0 if opts.no_cubin else (opts.cubin_repeat if opts.cubin_repeat is not None
                                            else (1 if opts.quick else 3))
    subjects: list[Subject] = []
    if opts.acceptance.is_dir():
        subjects += acceptance_subjects(opts.acceptance)
    else:
        print(f"no acceptance directory at {opts.acceptance}; timing the bench kernels only", file=sys.stderr)
    subjects += bench_subjects()
    if opts.only:
        subjects = [s for s in subjects if any(part in s.label for part in opts.only)]
    rows = []
    for s in subjects:
        rows.append(measure(s, repeat, cubin_repeat))
        print(f"timed {s.label}", file=sys.stderr, flush=True)
    print(table(rows))
    print()
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
