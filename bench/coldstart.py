"""Cold start: `import intent` alone, and the first call of a kernel whose compiled form is on disk,
each in a new Python process.

    python bench/coldstart.py [--runs N] [--keep-cache]

* import: `python -X importtime -c "import intent"`, the cumulative microseconds of the `intent` line
  (what `-X importtime` reports), and the modules it left imported (none of torch, triton, numpy, z3,
  networkx, the physical program's construction, the emitter may be among them);
* first call: a new process imports torch and intent, decorates a small row-sum kernel and calls it
  once on CPU tensors (Triton's interpreter); the call is timed alone. A first process fills a fresh
  cache directory (the generated module and the emitted kernel), the timed processes find it there.
  The heavy modules each call imported are listed (networkx and the passes must not be).

Each measurement runs `--runs` times (default 7); the table shows the minimum (the run least disturbed
by other work on a shared machine), the median, and for the first call the least CPU time of the process
during the call (what the call costs when the machine is not oversubscribed). Subprocesses may write bytecode
(`PYTHONDONTWRITEBYTECODE` is cleared for them), as an installed package has it.
Targets: import <= 0.15 s, first call <= 0.3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository's packages, not bench/'s siblings
    _ROOT = Path(__file__).resolve().parent.parent
    sys.path[:] = [str(_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _ROOT / "bench"]

from bench.report import markdown_table, median, verdict  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
IMPORT_TARGET_S = 0.15
FIRST_CALL_TARGET_S = 0.3
HEAVY = ("torch", "triton", "numpy", "z3", "networkx", "jax", "oracle", "physical.construct", "physical.passes",
         "emit_triton.emit", "emit_triton.launcher", "triton.runtime.interpreter")

KERNEL = '''
import sys
import time

import torch

import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel
def row_sums(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.sum(x[i, :])


x = torch.arange(24, dtype=torch.float32).reshape(4, 6)
out = torch.empty(4)
start, cpu = time.perf_counter(), time.process_time()
row_sums(x, out)
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
assert torch.equal(out, x.sum(1)), (out, x.sum(1))
HEAVY = {heavy!r}
print("RESULT " + repr({{"seconds": seconds, "cpu": cpu, "imported": [m for m in HEAVY if m in sys.modules]}}))
'''


def child_env(cache: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if cache is not None:
        env["INTENT_CACHE_DIR"] = str(cache)
    return env


def import_time() -> tuple[float, list[str]]:
    """Seconds `-X importtime` gives `import intent`, and the heavy modules left imported."""
    probe = f"import intent, sys; print('IMPORTED', [m for m in {HEAVY!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], capture_output=True, text=True,
                          env=child_env(), cwd=ROOT, check=True)
    found = re.search(r"^import time:\s+\d+ \|\s+(\d+) \| intent$", done.stderr, re.M)
    if found is None:
        raise RuntimeError(f"no `intent` line in -X importtime output:\n{done.stderr[-2000:]}")
    imported = json.loads(done.stdout.split("IMPORTED", 1)[1].strip().replace("'", '"'))
    return int(found.group(1)) / 1e6, imported


def first_call(script: Path, cache: Path) -> tuple[float, list[str], float]:
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=child_env(cache),
                          cwd=script.parent, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the kernel process failed:\n{done.stderr[-3000:]}")
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT "))
    result = eval(line[len("RESULT "):], {})  # a dict of a float and a list of strings, printed by repr
    return float(result["seconds"]), list(result["imported"]), float(result["cpu"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="new processes per measurement (default 7)")
    ap.add_argument("--keep-cache", action="store_true", help="leave the cache directory (its path is printed)")
    opts = ap.parse_args(argv)
    if opts.runs < 1:
        ap.error("--runs must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="intent-coldstart-"))
    try:
        script = work / "row_sums.py"
        script.write_text(textwrap.dedent(KERNEL.format(heavy=HEAVY)), encoding="utf-8")
        cache = work / "cache"
        imports = [import_time() for _ in range(opts.runs)]
        print("filling the cache ...", file=sys.stderr)
        fill_seconds, fill_imported, fill_cpu = first_call(script, cache)
        calls = [first_call(script, cache) for _ in range(opts.runs)]
        rows = []
        for label, samples, target in (("import intent", [(t, mods, None) for t, mods in imports], IMPORT_TARGET_S),
                                       ("first call, compiled form on disk", calls, FIRST_CALL_TARGET_S)):
            seconds = [t for t, _, _ in samples]
            cpu = [c for _, _, c in samples if c is not None]
            heavy = sorted({m for _, mods, _ in samples for m in mods})
            rows.append([label, f"{min(seconds):.3f}", f"{median(seconds):.3f}",
                         f"{min(cpu):.3f}" if cpu else "-", f"{target:.2f}", verdict(min(seconds) <= target),
                         ", ".join(heavy) or "none"])
        rows.append(["first call, empty cache (for scale)", f"{fill_seconds:.3f}", "-", f"{fill_cpu:.3f}", "-", "-",
                     ", ".join(fill_imported)])
        print(markdown_table(["measurement", "min s", "median s", "min CPU s", "target s", "met (min)",
                              "heavy modules imported"], rows))
        print(f"\n{opts.runs} new processes each; python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
              f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        if opts.keep_cache:
            print(f"cache: {cache}")
    finally:
        if not opts.keep_cache:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
