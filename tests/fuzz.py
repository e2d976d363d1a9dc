"""Differential fuzzing campaigns: random kernels through the oracle, the launcher and the StableHLO exit.

    python -m tests.fuzz --kernels 20000 --seed 7            a long campaign (progress bar on stderr)
    python -m tests.fuzz --kernels 200 --no-stablehlo         launcher against oracle only
    python -m tests.fuzz --bad-inputs 20000 --seed 7          the bad-input fuzzers (.kir, Python, launch)
    python -m tests.fuzz --replay tests/fuzz_cases/case_x.json    rerun one saved case
    python -m tests.fuzz --source --kernels 2000 --seed 11    generated Python source (tests/srcgen.py) instead
    python -m tests.fuzz --kernels 200 --no-sanitize          without the memory sanitizer (on by default)

Each failure (a mismatch, a crash, a launch error on valid arguments, an oracle error) is minimised by
hypothesis' shrinker and saved as `tests/fuzz_cases/case_<hash>.kir` plus `.json` (shapes, input
specs, seed, the failure); `tests/test_fuzz_regressions.py` replays every saved case. Failures whose
signature is already saved there count as known and are not shrunk again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis.database import InMemoryExampleDatabase, choices_to_bytes
from hypothesis.errors import Flaky

from emit_triton.sanitize import sanitizing
from tests.differential import Outcome, run_case
from tests.diffgen import cases, random_case
from tests.diffinputs import Case, InputSpec, load_case, save_case

CASES_DIR = Path(__file__).resolve().parent / "fuzz_cases"
SHRINK_SECONDS = 120.0


class _Failure(Exception):
    """Raised inside the property so that hypothesis shrinks the case."""


def _fail() -> None:
    # One raise site: hypothesis tells failures apart by where they are raised, and every failure of a
    # round must be the same one for the shrinker to accept smaller cases.
    raise _Failure()


@dataclass
class Found:
    """A failure of the campaign: its minimised case and where the reproducer was saved."""

    signature: str
    outcome: Outcome
    case: Case
    path: Path | None
    known: bool = False


@dataclass
class Summary:
    total: int = 0
    outcomes: Counter = field(default_factory=Counter)
    stablehlo: Counter = field(default_factory=Counter)
    refusals: Counter = field(default_factory=Counter)
    not_expressible: Counter = field(default_factory=Counter)
    features: Counter = field(default_factory=Counter)
    failures: list[Found] = field(default_factory=list)
    known_hits: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def count(self, case: Case, outcome: Outcome) -> None:
        self.total += 1
        self.outcomes[outcome.kind] += 1
        self.stablehlo[outcome.stablehlo] += 1
        if outcome.kind == "refused":
            self.refusals[outcome.message[:100]] += 1
        if outcome.stablehlo == "not_expressible" and outcome.details:
            self.not_expressible[outcome.details[0].split(":", 1)[-1].strip()[:80]] += 1
        self.features.update(case.notes)

    @property
    def new_failures(self) -> list[Found]:
        return [f for f in self.failures if not f.known]

    def text(self) -> str:
        rate = self.seconds / max(self.total, 1)
        lines = [f"{self.total} kernels in {self.seconds:.0f} s ({rate:.2f} s per kernel)",
                 "launcher vs oracle: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())),
                 "StableHLO vs oracle: " + ", ".join(f"{k} {v}" for k, v in sorted(self.stablehlo.items()))]
        if self.refusals:
            lines.append("refusals (lowering said the kernel is outside what it supports):")
            lines += [f"  {n:5d}  {m}" for m, n in self.refusals.most_common(12)]
        if self.not_expressible:
            lines.append("not expressible at the StableHLO exit:")
            lines += [f"  {n:5d}  {m}" for m, n in self.not_expressible.most_common(8)]
        if self.known_hits:
            lines.append("known failures met again (saved in tests/fuzz_cases):")
            lines += [f"  {n:5d}  {m}" for m, n in self.known_hits.most_common()]
        if self.failures:
            lines.append(f"{len(self.new_failures)} new failure(s):")
            for f in self.new_failures:
                where = f" -> {f.path}" if f.path else ""
                lines.append(f"  {f.signature}{where}")
        rare = [k for k, _ in sorted(self.features.items(), key=lambda kv: kv[1])[:6]]
        if rare:
            lines.append("rarest features: " + ", ".join(f"{k} ({self.features[k]})" for k in rare))
        return "\n".join(lines)


class Known(dict):
    """Signatures already saved (signature -> case), and the patterns of saved cases that explain a
    whole family of signatures (a case's JSON may say `"covers": REGEX`, e.g. every failure of a kernel
    holding bf16 values while bf16 arithmetic is known to be wrong under the interpreter)."""

    def __init__(self) -> None:
        super().__init__()
        self.patterns: dict[str, Path] = {}

    def __contains__(self, signature: object) -> bool:
        return dict.__contains__(self, signature) or \
            any(re.search(p, str(signature)) for p in self.patterns)

    def update_from(self, folder: Path) -> None:
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("signature"):
                self[str(record["signature"])] = path
                if record.get("covers"):
                    self.patterns[str(record["covers"])] = path


def known_signatures(*folders: Path) -> Known:
    known = Known()
    for folder in folders:
        known.update_from(folder)
    return known


class Progress:
    """Progress on stderr: a bar redrawn in place on a terminal, a line every `every` kernels otherwise."""

    def __init__(self, total: int, enabled: bool, every: int = 100) -> None:
        self.total, self.enabled, self.start = total, enabled, time.time()
        self.tty = sys.stderr.isatty()
        self.every = every

    def update(self, summary: Summary, extra: str = "") -> None:
        if not self.enabled:
            return
        done = summary.total
        if not self.tty and (extra or done % self.every):
            return
        width = 30
        filled = int(width * done / max(self.total, 1))
        rate = (time.time() - self.start) / max(done, 1)
        eta = rate * (self.total - done)
        counts = " ".join(f"{k}={v}" for k, v in sorted(summary.outcomes.items()))
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} {counts} "
                f"{rate:.2f}s/k eta {eta / 60:.0f}m {extra}")
        sys.stderr.write(f"\r{line}\x1b[K" if self.tty else f"{time.strftime('%H:%M:%S')} {line}\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")


def campaign(kernels: int, seed: int, *, stablehlo: bool = True, save_dir: Path | None = CASES_DIR,
             progress: bool = False, shrink: bool = True, shrink_seconds: float = SHRINK_SECONDS,
             blocks: tuple[str, ...] | None = None, log: Callable[[str], None] | None = None,
             sanitize: bool = True, shrink_attempts: int | None = None) -> Summary:
    """Run `kernels` random cases; shrink and save each new failure. Deterministic for a seed.
    Launches run under the memory sanitizer (`emit_triton.sanitize`) unless `sanitize` is False.

    Case `i` is drawn uniformly from `random.Random(f"{seed}/{i}")` (hypothesis' own generation
    repeats itself too much for a campaign); a failure is handed to hypothesis' shrinker as the
    choice sequence that drew it. Shrinking stops after `shrink_seconds` or, when given, after
    `shrink_attempts` candidate runs, whichever comes first (a test that asserts on the shrunk case
    bounds it by attempts, so the result does not depend on how loaded the machine is).
    """
    with sanitizing(sanitize):
        return _campaign(kernels, seed, stablehlo, save_dir, progress, shrink, (shrink_seconds, shrink_attempts),
                         blocks, log)


def _campaign(kernels: int, seed: int, stablehlo: bool, save_dir: Path | None, progress: bool, shrink: bool,
              shrink_budget: tuple[float, int | None], blocks: tuple[str, ...] | None,
              log: Callable[[str], None] | None) -> Summary:
    summary = Summary()
    known = known_signatures(CASES_DIR, *((save_dir,) if save_dir is not None else ()))
    bar = Progress(kernels, progress)
    start = time.time()
    for i in range(kernels):
        case, choices = random_case(random.Random(f"{seed}/{i}"), blocks=blocks)
        outcome = run_case(case, stablehlo)
        summary.count(case, outcome)
        bar.update(summary)
        if not outcome.failed:
            continue
        fresh = [sig for sig in outcome.signatures() if sig not in known]
        for sig in outcome.signatures():
            if sig in known:
                summary.known_hits[sig] += 1
        if not fresh:
            continue
        found = Found(fresh[0], outcome, case, None)
        if shrink:
            bar.update(summary, "(shrinking)")
            found.case, found.outcome = shrink_case(choices, fresh[0], case, outcome, stablehlo, *shrink_budget,
                                                    blocks=blocks)
        if save_dir is not None:
            stem = "case_" + hashlib.sha1(found.signature.encode()).hexdigest()[:10]
            found.path = save_case(found.case, save_dir, stem, {
                "signature": found.signature, "failure": found.outcome.text(), "campaign_seed": seed,
                "campaign_case": i, "features": list(found.case.notes)})
        known[found.signature] = found.path or Path("?")
        summary.failures.append(found)
        if log is not None:
            log(f"new failure: {found.signature} -> {found.path}")
    summary.seconds = time.time() - start
    bar.close()
    return summary


SHRINK_KEY = b"intent-differential-fuzz"


def shrink_case(choices: list[int], signature: str, case: Case, outcome: Outcome, stablehlo: bool,
                seconds: float, attempts: int | None = None, *, blocks: tuple[str, ...] | None
                ) -> tuple[Case, Outcome]:
    """The smallest case hypothesis' shrinker finds that still fails with `signature`, within `seconds`
    and at most `attempts` candidate runs (no limit when None)."""
    database = InMemoryExampleDatabase()
    # The secondary corpus: hypothesis takes primary entries as already shrunk and would stop there.
    database.save(SHRINK_KEY + b".secondary", choices_to_bytes(choices))
    best: dict[str, object] = {"case": case, "outcome": outcome}
    since = time.time()
    tried = [0]

    @settings(max_examples=1000, database=database, deadline=None, phases=[Phase.reuse, Phase.shrink],
              suppress_health_check=list(HealthCheck), print_blob=False, verbosity=Verbosity.quiet,
              report_multiple_bugs=False)
    @given(cases(blocks=blocks))
    def still_fails(candidate: Case) -> None:
        out_of_budget = time.time() - since > seconds or (attempts is not None and tried[0] >= attempts)
        if out_of_budget:  # only the best so far still "fails"
            if _same_case(candidate, best["case"]):  # type: ignore[arg-type]
                _fail()
            return
        tried[0] += 1
        result = run_case(candidate, stablehlo)
        if result.failed and signature in result.signatures():
            best["case"], best["outcome"] = candidate, result
            _fail()

    still_fails._hypothesis_internal_database_key = SHRINK_KEY  # type: ignore[attr-defined]
    try:
        still_fails()
    except (_Failure, Flaky):
        pass
    return best["case"], best["outcome"]  # type: ignore[return-value]


def _same_case(a: Case, b: Case) -> bool:
    return a.kernel == b.kernel and a.shapes == b.shapes and a.seed == b.seed and a.specs == b.specs


# ---------------------------------------------------------------------------------------------- command line


def replay(path: Path, stablehlo: bool = True) -> Outcome:
    case, _ = load_case(path)
    return run_case(case, stablehlo)


def refresh(folder: Path = CASES_DIR) -> list[str]:
    """Replay every saved case and rewrite its recorded failure and signature (after the comparison or
    the signatures change); returns one line per case."""
    lines = []
    for path in sorted(folder.glob("*.json")):
        case, record_ = load_case(path)
        outcome = run_case(case, record_.get("stablehlo", True))
        record_["failure"] = outcome.text()
        record_["signature"] = outcome.signature() if outcome.failed else ""
        path.write_text(json.dumps(record_, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        lines.append(f"{path.stem}: {record_['signature'] or 'passes'}")
    return lines


def adopt(json_path: Path, name: str, reason: str, folder: Path = CASES_DIR) -> Path:
    """Copy a campaign's saved case into the regression cases under `name`, as an expected failure."""
    case, record_ = load_case(json_path)
    info = {k: v for k, v in record_.items() if k not in ("kernel", "shapes", "seed", "inputs")}
    if reason:
        info["xfail"] = reason
    return save_case(case, folder, name, info)


def record(kir_path: Path, shapes: dict[str, int], inputs: dict[str, InputSpec], seed: int, reason: str,
           name: str, folder: Path = CASES_DIR, stablehlo: bool = True) -> tuple[Path, Outcome]:
    """Save a hand-minimised `.kir` kernel as a regression case (an expected failure when `reason` is set)."""
    from kir.text import parse_kernel

    kernel = parse_kernel(kir_path.read_text(encoding="utf-8"), str(kir_path))
    specs = tuple((p.name, inputs.get(p.name, InputSpec("values"))) for p in kernel.params)
    case = Case(kernel, tuple((s, shapes[s]) for s in kernel.symbols), specs, seed)
    outcome = run_case(case, stablehlo)
    info: dict[str, object] = {"signature": outcome.signature() if outcome.failed else "",
                               "failure": outcome.text(), "stablehlo": stablehlo}
    if reason:
        info["xfail"] = reason
    return save_case(case, folder, name, info), outcome


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", type=int, default=0, help="random kernels to run (differential)")
    ap.add_argument("--source", action="store_true",
                    help="generate Python source kernels with a torch reference (tests/srcgen.py) instead of KIR")
    ap.add_argument("--bad-inputs", type=int, default=0, help="mutated inputs to run (bad-input fuzzers)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-stablehlo", action="store_true", help="compare the launcher with the oracle only")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--no-sanitize", action="store_true",
                    help="launch without the memory sanitizer (emit_triton.sanitize), which campaigns run under")
    ap.add_argument("--blocks", default="", help="comma-separated block kinds (rows,points,segments,...)")
    ap.add_argument("--save-dir", default=str(CASES_DIR), help="where reproducers go")
    ap.add_argument("--replay", metavar="CASE.json", help="rerun one saved case and print its outcome")
    ap.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    ap.add_argument("--record", metavar="FILE.kir|CASE.json",
                    help="save a hand-written kernel, or adopt a campaign's case, as a regression case")
    ap.add_argument("--shape", nargs="*", default=[], metavar="S=N", help="with --record: the shapes")
    ap.add_argument("--input", nargs="*", default=[], metavar="P=KIND[:EXTENT]",
                    help="with --record: how a parameter is drawn (index:B, perm:K, offsets:E, values+wide+specials)")
    ap.add_argument("--reason", default="", help="with --record: why the case is expected to fail (xfail)")
    ap.add_argument("--name", default="", help="with --record: the case's file name (without suffix)")
    ap.add_argument("--refresh", action="store_true", help="replay the saved cases and update their signatures")
    ap.add_argument("--sms", type=int, default=None, metavar="N",
                    help="size grids as for a GPU of N multiprocessors (persistent groups then run several programs "
                         "under the interpreter)")
    opts = ap.parse_args(argv)
    with sanitizing(not opts.no_sanitize):
        if opts.sms is not None:
            from emit_triton.targets import simulated_multiprocessors

            with simulated_multiprocessors(opts.sms):
                return _main(ap, opts)
        return _main(ap, opts)


def _main(ap: argparse.ArgumentParser, opts: argparse.Namespace) -> int:
    if opts.refresh:
        print("\n".join(refresh(Path(opts.save_dir))))
        return 0
    if opts.record and opts.record.endswith(".json"):
        saved = adopt(Path(opts.record), opts.name or Path(opts.record).stem, opts.reason, Path(opts.save_dir))
        print(f"saved {saved}")
        return 0
    if opts.record:
        shapes = {k: int(v) for k, v in (a.split("=", 1) for a in opts.shape)}
        inputs = {}
        for a in opts.input:
            pname, spec = a.split("=", 1)
            kind, *flags = spec.split("+")
            kind, _, extent = kind.partition(":")
            inputs[pname] = InputSpec(kind, extent or None, "wide" in flags, "specials" in flags)
        path, outcome = record(Path(opts.record), shapes, inputs, opts.seed, opts.reason,
                               opts.name or Path(opts.record).stem, Path(opts.save_dir), not opts.no_stablehlo)
        print(f"saved {path}\n{outcome.text()}")
        return 0
    if opts.replay and "source" in json.loads(Path(opts.replay).read_text(encoding="utf-8")):
        from tests.srcrun import replay_source

        outcome = replay_source(Path(opts.replay), not opts.no_stablehlo)
        print(outcome.text())
        return 1 if outcome.failed else 0
    if opts.replay:
        outcome = replay(Path(opts.replay), not opts.no_stablehlo)
        print(outcome.text())
        return 1 if outcome.failed else 0
    show = opts.progress == "on" or (opts.progress == "auto" and sys.stderr.isatty())
    status = 0
    if opts.kernels and opts.source:
        from tests.srcrun import SOURCE_CASES_DIR, source_campaign

        blocks = tuple(b for b in opts.blocks.split(",") if b) or None
        save_dir = Path(opts.save_dir) if opts.save_dir != str(CASES_DIR) else SOURCE_CASES_DIR
        summary = source_campaign(opts.kernels, opts.seed, stablehlo=not opts.no_stablehlo, save_dir=save_dir,
                                  progress=show, blocks=blocks, log=lambda m: print(m, file=sys.stderr, flush=True))
        print(summary.text(), flush=True)
        status = 1 if summary.new_failures else 0
    elif opts.kernels:
        blocks = tuple(b for b in opts.blocks.split(",") if b) or None
        summary = campaign(opts.kernels, opts.seed, stablehlo=not opts.no_stablehlo, save_dir=Path(opts.save_dir),
                           progress=show, shrink=not opts.no_shrink, blocks=blocks,
                           log=lambda m: print(m, file=sys.stderr, flush=True), sanitize=not opts.no_sanitize)
        print(summary.text(), flush=True)
        status = 1 if summary.new_failures else 0
    if opts.bad_inputs:
        from tests.badinput import bad_input_campaign

        report = bad_input_campaign(opts.bad_inputs, opts.seed, progress=show)
        print(report.text(), flush=True)
        status = max(status, 1 if report.failures else 0)
    if not (opts.kernels or opts.bad_inputs):
        ap.print_usage()
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
