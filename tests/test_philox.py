"""Philox against Triton's own tl.rand/randn/randint, in a process where Triton starts interpreted."""

import os
import re
import subprocess
import sys
from pathlib import Path

CASES = Path(__file__).with_name("philox_triton_cases.py")


def test_philox_matches_triton_interpreter_bit_exactly() -> None:
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           str(CASES)], env=env, capture_output=True, text=True, timeout=900,
                          cwd=Path(__file__).parents[1])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed is not None and int(passed.group(1)) >= 50, proc.stdout[-2000:]
    assert " failed" not in proc.stdout
