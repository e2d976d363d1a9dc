"""Bad-input fuzzing: mutated `.kir` text, mutated Python kernel sources, and wrong launch arguments.

The contract: input the compiler cannot accept gets a clear error and nothing else.

* mutated `.kir` files (byte flips, token deletions/duplications/replacements, line edits, truncation):
  parsing, verification and lowering raise `DiagnosticError` or succeed; `kirc check` exits 0 or 1 with
  no traceback;
* mutated Python kernel sources: importing the file with `intent.kernels_in_file` (which builds every
  kernel) raises `DiagnosticError` or succeeds; `kirc check` exits 0 or 1;
* wrong launch arguments (tests/badlaunch.py): the launcher raises `LaunchError` or, for arguments
  that are in fact fine (non-contiguous strides), runs and agrees with the oracle.

Cases are drawn from a `random.Random(seed)` so that every run with a seed is the same.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kir.errors import DiagnosticError

REPO = Path(__file__).resolve().parents[1]
ACCEPTANCE = REPO / "tests" / "acceptance"

# Tokens spliced into mutated text: punctuation, keywords, dtypes, odd numbers and characters that
# lexers and parsers tend to trip on.
SPLICE = ("%", "{", "}", "(", ")", "[", "]", ":", ",", "=", "->", "\"", "'", "#", "\\", "\n", "\t", " ", "0", "-1",
          "99999999999999999999999", "1e999", "nan", "inf", "-0.0", "0x1F", "i64", "f32", "bf16", "pred", "u64",
          "kernel", "yield", "parallel", "in", "out", "inout", "local", "symbols", "requires", "loc", "for", "range",
          "if", "else", "while", "def", "return", "lambda", "import", "None", "True", "__import__", "\x00", "\x7f",
          "é", "ｐ", "\u2028", "\ufeff", "𝔁", ";", "@", "$", "`", "...", "**", "//", "<<", "M", "N", "S + 1")
TOKEN_RE = re.compile(r"\s+|%?[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\"(?:[^\"\\\n]|\\.)*\"|.",
                      re.S)


def tokens(text: str) -> list[str]:
    return TOKEN_RE.findall(text)


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One to three random edits of `data`; returns the result and what was done."""
    done = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.choice(("flip", "delete", "duplicate", "replace", "swap", "splice", "line", "truncate"))
        data = EDITS[kind](data, rng)
        done.append(kind)
    return data, "+".join(done)


def _flip(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    at = rng.randrange(len(data))
    value = rng.randrange(256) if rng.random() < 0.5 else data[at] ^ (1 << rng.randrange(8))
    return data[:at] + bytes([value]) + data[at + 1:]


def _on_tokens(edit: Callable[[list[str], random.Random], list[str]]) -> Callable[[bytes, random.Random], bytes]:
    def apply(data: bytes, rng: random.Random) -> bytes:
        toks = tokens(data.decode("utf-8", errors="surrogateescape"))
        if not toks:
            return data
        return "".join(edit(toks, rng)).encode("utf-8", errors="surrogateescape")

    return apply


def _delete(toks: list[str], rng: random.Random) -> list[str]:
    at = rng.randrange(len(toks))
    return toks[:at] + toks[at + rng.choice((1, 1, 2, 3)):]


def _duplicate(toks: list[str], rng: random.Random) -> list[str]:
    at = rng.randrange(len(toks))
    n = rng.choice((1, 1, 2, 4))
    return toks[:at + n] + toks[at:at + n] + toks[at + n:]


def _replace(toks: list[str], rng: random.Random) -> list[str]:
    at = rng.randrange(len(toks))
    return toks[:at] + [rng.choice(toks)] + toks[at + 1:]


def _swap(toks: list[str], rng: random.Random) -> list[str]:
    a, b = rng.randrange(len(toks)), rng.randrange(len(toks))
    toks = list(toks)
    toks[a], toks[b] = toks[b], toks[a]
    return toks


def _splice(toks: list[str], rng: random.Random) -> list[str]:
    at = rng.randrange(len(toks) + 1)
    return toks[:at] + [rng.choice(SPLICE)] + toks[at:]


def _line(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    at = rng.randrange(len(lines))
    if rng.random() < 0.5:
        del lines[at]
    else:
        lines.insert(rng.randrange(len(lines) + 1), lines[at])
    return b"\n".join(lines)


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randrange(len(data) + 1)] if data else data


EDITS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "flip": _flip, "delete": _on_tokens(_delete), "duplicate": _on_tokens(_duplicate),
    "replace": _on_tokens(_replace), "swap": _on_tokens(_swap), "splice": _on_tokens(_splice), "line": _line,
    "truncate": _truncate}


# ---------------------------------------------------------------------------------------------- corpora


def kir_corpus() -> list[bytes]:
    """The example `.kir` files and printed sample kernels."""
    from kir.text import print_module
    from tests import samples

    out = [p.read_bytes() for p in sorted((REPO / "examples" / "kir").glob("*.kir"))]
    built = [getattr(samples, name)() for name in ("softmax", "vector_add", "segment_sum", "recurrence", "histogram")
             if hasattr(samples, name)]
    out.append(print_module(built).encode("utf-8"))
    return out


# A few kernels of the Python surface, so that the corpus does not depend on files outside tests/.
PY_CORPUS = '''import intent
from intent import InOut, Out, dims, f16, f32, i32, i64, parallel

M, N, S, E, B = dims("M N S E B")
T = intent.dtype_var("T", f16, f32)


@intent.combine
def add_pairs(a, b):
    return a[0] + b[0], a[1] + b[1]


@intent.func
def scaled(v, k=2.0):
    return v * k


@intent.kernel(requires=[N <= 65536])
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        out[i, :] = e / intent.sum(e)


@intent.kernel
def mean_rows(x: T[M, N], out: Out[T[M]]):
    for i in parallel(M):
        s, c = intent.reduce((x[i, :], intent.ones_like(x[i, :])), add_pairs, identity=(0.0, 0.0))
        out[i] = s / c


@intent.kernel
def segments(values: f32[E], offsets: i64[S + 1], out: Out[f32[S]], scan: Out[f32[E]]):
    for s in parallel(S):
        out[s] = intent.max(values[offsets[s]:offsets[s + 1]])
    scan[:] = intent.cumsum(scaled(values), reverse=True)


@intent.kernel
def bins(keys: i32[N], counts: InOut[i32[B]], idx: i64[N], table: f32[B], got: Out[f32[N]]):
    for n in parallel(N):
        intent.atomic_add(counts, keys[n], 1)
        got[n] = table[idx[n]]
    total = 0.0
    for t in range(N):
        if keys[t] > 0:
            total = total + 1.0
        else:
            total = total - 0.5
'''


def python_corpus() -> list[bytes]:
    """Kernel sources: the built-in corpus, the examples, and the acceptance kernels (without their drivers)."""
    out = [PY_CORPUS.encode("utf-8")]
    paths = sorted((REPO / "examples").glob("*.py"))
    if ACCEPTANCE.is_dir():
        paths += [p for p in sorted(ACCEPTANCE.glob("*.py")) if not p.name.startswith("_")]
    for p in paths:
        text = p.read_text(encoding="utf-8")
        out.append(text.split("\ndef cases(")[0].encode("utf-8"))
    return out


# ---------------------------------------------------------------------------------------------- running


@dataclass
class BadInputReport:
    total: int = 0
    outcomes: Counter = field(default_factory=Counter)
    messages: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def text(self) -> str:
        lines = [f"{self.total} bad inputs in {self.seconds:.0f} s: "
                 + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))]
        if self.messages:
            lines.append(f"{len(self.messages)} distinct diagnostics; the most common:")
            lines += [f"  {n:5d}  {m}" for m, n in self.messages.most_common(8)]
        if self.failures:
            lines.append(f"{len(self.failures)} failure(s):")
            lines += ["  " + f.replace("\n", "\n    ") for f in self.failures[:20]]
        return "\n".join(lines)


def _where(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    return f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"


def _diagnostic(report: BadInputReport, kind: str, exc: DiagnosticError, what: str) -> None:
    if exc.message.startswith("internal"):
        report.failures.append(f"{what}: internal diagnostic: {exc.message[:200]}")
        report.outcomes[f"{kind}:internal"] += 1
        return
    report.outcomes[f"{kind}:diagnostic"] += 1
    report.messages[re.sub(r"\d+", "#", exc.message.split(":")[0])[:70]] += 1


def check_kir(data: bytes, path: Path, report: BadInputReport, what: str, lower: bool) -> None:
    """Parse, verify and (when `lower`) lower the kernels of a `.kir` file written with `data`."""
    from kir import verify
    from kir.text import parse_file

    path.write_bytes(data)
    report.total += 1
    try:
        kernels = parse_file(str(path))
        for k in kernels:
            verify(k)
            if lower and not k.dtype_vars:
                import physical

                physical.lower(k)
    except DiagnosticError as exc:
        _diagnostic(report, "kir", exc, what)
        return
    except Exception as exc:
        report.outcomes["kir:crash"] += 1
        report.failures.append(f"{what}: {type(exc).__name__}: {str(exc)[:200]} (raised at {_where(exc)})")
        return
    report.outcomes["kir:accepted"] += 1


def check_python(data: bytes, path: Path, report: BadInputReport, what: str) -> None:
    """Import a kernel file written with `data`: every kernel in it is built (or diagnosed)."""
    import intent

    path.write_bytes(data)
    report.total += 1
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            found = intent.kernels_in_file(str(path))
            for k in set(found.values()):
                try:
                    k.kir  # noqa: B018  (a kernel with a const parameter and no default has no generic KIR)
                except DiagnosticError as exc:
                    if "compile-time parameter" not in exc.message:
                        raise
    except DiagnosticError as exc:
        _diagnostic(report, "py", exc, what)
        return
    except Exception as exc:
        report.outcomes["py:crash"] += 1
        report.failures.append(f"{what}: {type(exc).__name__}: {str(exc)[:200]} (raised at {_where(exc)})")
        return
    report.outcomes["py:accepted"] += 1


def check_cli(path: Path, report: BadInputReport, what: str) -> None:
    """`kirc check FILE`: exit code 0 or 1, no traceback, no internal error."""
    from kir.cli import main

    report.total += 1
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["check", str(path)])
    text = err.getvalue()
    if code not in (0, 1) or "Traceback" in text or "internal error" in text:
        report.outcomes["cli:failure"] += 1
        report.failures.append(f"{what}: kirc check exited {code}: {text.strip()[:300]}")
    else:
        report.outcomes[f"cli:exit{code}"] += 1


def run_text_fuzz(count: int, seed: int, report: BadInputReport, kinds: Iterable[str] = ("kir", "py"),
                  lower_every: int = 8, cli_every: int = 10, folder: Path | None = None,
                  tick: Callable[[], None] | None = None) -> None:
    """`count` mutated files, shared between the kinds; deterministic for a seed."""
    rng = random.Random(seed)
    kinds = tuple(kinds)
    corpora = {"kir": kir_corpus(), "py": python_corpus()}
    with tempfile.TemporaryDirectory(prefix="intent-badinput-") as tmp:
        base = folder or Path(tmp)
        for n in range(count):
            kind = kinds[n % len(kinds)]
            source = rng.choice(corpora[kind])
            data, edits = mutate(source, rng)
            # A fresh name per case: Python caches modules and linecache caches lines by file name.
            path = base / f"case_{seed}_{n}.{kind}"
            what = f"{kind} case {n} (seed {seed}, {edits})"
            if kind == "kir":
                check_kir(data, path, report, what, lower=n % lower_every == 0)
            else:
                check_python(data, path, report, what)
            if n % cli_every == 0:
                check_cli(path, report, what)
            if tick is not None:
                tick()


def bad_input_campaign(count: int, seed: int, progress: bool = False) -> BadInputReport:
    """The long mode: text fuzzing of both kinds, then launch-argument fuzzing (a tenth of `count`)."""
    from tests.badlaunch import run_launch_fuzz

    report = BadInputReport()
    start = time.time()

    def tick() -> None:
        if progress and report.total % 20 == 0:
            sys.stderr.write(f"\r{report.total} bad inputs, {len(report.failures)} failure(s)\x1b[K")
            sys.stderr.flush()

    run_text_fuzz(count - count // 10, seed, report, tick=tick)
    run_launch_fuzz(count // 10, seed, report, tick=tick)
    if progress:
        sys.stderr.write("\n")
    report.seconds = time.time() - start
    return report
