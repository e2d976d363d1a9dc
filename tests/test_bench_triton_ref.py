"""The hand-written Triton baselines of bench/triton_ref.py, run under Triton's interpreter on CPU tensors
(in a fresh process: the interpreter is chosen when `triton` is imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, torch
from bench import kernels as bk, triton_ref
assert triton_ref.is_interpreting()
cases = bk.traffic_cases("tiny") + [bk.cumsum_case(2, 5000), bk.layernorm_case(2, 5000), bk.welford_case(2, 5000),
                                    bk.segment_sum_case(5, 3000), bk.matmul_case(20, 36, 40)]
report = {}
for case in cases:
    args = case.build(torch.device("cpu"), torch.Generator().manual_seed(0))
    want = case.eager(bk.clone_args(args))
    triton_ref.run(case.family, args)
    if not case.eager_is_reference:
        kept = args["out"] != 0
        ok = torch.equal(args["out"][kept], args["x"][kept] / torch.tensor(1.0 - args["p"]))
        report[case.name] = "ok" if ok else "wrong"
        continue
    bad = []
    for name, w in want.items():
        g = args[name]
        close = torch.allclose(g.double(), w.double(), **case.tol) if w.dtype.is_floating_point else torch.equal(g, w)
        if not close:
            bad.append(name)
    report[case.name] = "ok" if not bad else "wrong: " + ", ".join(bad)
print(json.dumps(report))
"""


def test_hand_written_kernels_compute_what_torch_computes():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(report) == 14
    assert {name: verdict for name, verdict in report.items() if verdict != "ok"} == {}
