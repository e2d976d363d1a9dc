"""bench/gpu.py without a GPU: the peak table, the no-device exit, and the whole flow as a CPU dry run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import torch

from bench import gpu

ROOT = Path(__file__).resolve().parent.parent


def test_device_peaks_match_the_most_specific_name():
    assert gpu.device_peaks("NVIDIA H200").bandwidth == 4.8e12
    assert gpu.device_peaks("NVIDIA GH200 480GB").bandwidth == 4.0e12
    assert gpu.device_peaks("NVIDIA H100 80GB HBM3").bandwidth == 3.35e12
    assert gpu.device_peaks("NVIDIA H100 PCIe").bandwidth == 2.0e12
    assert gpu.device_peaks("NVIDIA A100-SXM4-80GB").bandwidth == 2.039e12
    unknown = gpu.device_peaks("Some Future GPU")
    assert unknown.bandwidth is None and unknown.flops is None
    assert gpu.device_peaks("Some Future GPU", override_gbs=1000).bandwidth == 1e12


def test_without_cuda_it_says_so_and_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu.main([]) == 0
    assert capsys.readouterr().out == "no CUDA device; nothing to time\n"


def test_a_gpu_run_times_every_kernel_of_the_device_model():
    """The first GPU run checks the model: every kernel `bench/model.py` reports is timed at the model's sizes,
    the skewed argmax, segment and jagged kernels among them."""
    from bench.kernels import model_cases

    timed = {(c.family, c.label) for c in gpu.timed_cases(dry_run=False)}
    assert {(c.family, c.label) for c in model_cases("full")} <= timed
    for family, label in (("segment_argmax_skewed", "64seg/2M"), ("segment_argmax_skewed", "65536seg/2M"),
                          ("jagged_argmax_skewed", "64seg/131072x16"), ("jagged_mean_skewed", "64seg/131072x16"),
                          ("jagged_cumsum_skewed", "64seg/131072x16"), ("span_cumsum", "2097152x1"),
                          ("segment_cumsum_skewed", "64seg/2M")):
        assert (family, label) in timed, (family, label)
    dry = {c.family for c in gpu.timed_cases(dry_run=True)}
    assert {"segment_argmax_skewed", "jagged_argmax_skewed", "jagged_mean_skewed"} <= dry


def test_compare_names_the_first_mismatch():
    got = {"out": torch.tensor([1.0, 2.0]), "n": torch.tensor([1, 2])}
    assert gpu.compare(got, {"out": torch.tensor([1.0, 2.0])}, {"atol": 0, "rtol": 0}) is None
    assert gpu.compare(got, {"out": torch.tensor([1.0, 2.5])}, {"atol": 0, "rtol": 0}) == "out: max abs diff 0.5"
    assert gpu.compare(got, {"n": torch.tensor([1, 3])}, {}) == "n: max abs diff 1"


def test_dry_run_on_cpu_checks_and_times_every_implementation():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), "--dry-run", "--only", "vector_add",
                           "dropout", "sum", "--autotune"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("device: cpu (dry run)")
    rows = [line for line in lines if line.startswith("| vector_add ") or line.startswith("| dropout ")]
    assert len(rows) == 10
    assert sum(re.search(r"\| intent +\|", r) is not None for r in rows) == 2
    model_rows = [line for line in lines if line.startswith("| sum ")]  # a kernel of the device model's set
    assert len(model_rows) == 5 and "none written" in model_rows[-1]
    assert sum("| intent (autotuned) " in r for r in rows) == 2
    assert any("| triton (hand-written) " in r and "the reference" in r for r in rows)
    assert "timed vector_add 1000: " in done.stderr and "(ok)" in done.stderr
    assert "timed dropout 1000: " in done.stderr and "WRONG" not in done.stderr
