"""Start-up cost of a prebuilt kernel against the compiler path, each in a fresh process.

    python bench/startup.py [--repeat N] [--device cpu|cuda]

Builds examples/softmax.py (`kirc build --shape M=64 N=1000`) into a temporary directory once, then
runs each measurement in a fresh Python process, N times, and reports the median of each phase:

* prebuilt: `import intent`, `intent.load(DIR)`, the first call (which imports triton and loads the
  stored source or cubin) and a later call;
* compiler: `import intent` and defining the kernel, the first call (frontend, Z3, lowering, emission;
  the disk cache is warm from the build) and a later call.

`import torch` is outside every phase (both paths need it). CPU calls run Triton's interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PREBUILT = """
import json, sys, time
import torch
t0 = time.perf_counter()
import intent
t1 = time.perf_counter()
lib = intent.load(sys.argv[1])
t2 = time.perf_counter()
x = torch.randn(64, 1000, device=sys.argv[2])
lib.softmax(x)
if x.is_cuda: torch.cuda.synchronize()
t3 = time.perf_counter()
lib.softmax(x)
if x.is_cuda: torch.cuda.synchronize()
t4 = time.perf_counter()
compiler = sorted(m for m in sys.modules if m.split(".")[0] in ("z3", "networkx", "kir", "physical", "emit_triton"))
print(json.dumps({"import intent": t1 - t0, "load": t2 - t1, "first call": t3 - t2, "later call": t4 - t3,
                  "compiler modules": len(compiler)}))
"""

COMPILER = """
import json, sys, time
import torch
t0 = time.perf_counter()
import intent
sys.path.insert(0, sys.argv[1])
from softmax import softmax
t1 = time.perf_counter()
x = torch.randn(64, 1000, device=sys.argv[2])
softmax(x)
if x.is_cuda: torch.cuda.synchronize()
t2 = time.perf_counter()
softmax(x)
if x.is_cuda: torch.cuda.synchronize()
t3 = time.perf_counter()
print(json.dumps({"import intent + define": t1 - t0, "first call": t2 - t1, "later call": t3 - t2}))
"""


def _run(script: str, *args: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          check=False, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(directory: Path, device: str, repeat: int) -> dict[str, dict[str, float]]:
    """Median seconds per phase, over `repeat` fresh processes per path."""
    out: dict[str, dict[str, float]] = {}
    for name, script, arg in (("prebuilt", PREBUILT, str(directory)), ("compiler", COMPILER, str(ROOT / "examples"))):
        runs = [_run(script, arg, device) for _ in range(repeat)]
        out[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return out


def build(directory: Path) -> None:
    from kir.cli import main as kirc

    if kirc(["build", str(ROOT / "examples" / "softmax.py"), "--shape", "M=64", "N=1000", "-o", str(directory)]):
        raise RuntimeError("kirc build failed")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    opts = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        results = measure(Path(tmp), opts.device, opts.repeat)
    for path, phases in results.items():
        shown = ", ".join(f"{k} {v * 1e3:.1f} ms" if k != "compiler modules" else f"{k} {int(v)}"
                          for k, v in phases.items())
        print(f"{path}: {shown}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
