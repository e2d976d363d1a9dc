"""`kirc` through the later stages (physical, Triton, PTX, StableHLO, the oracle and the launcher)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir import cli

SOFTMAX = str(Path(__file__).resolve().parent.parent / "examples" / "kir" / "softmax.kir")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_lower_to_triton_source(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "lower", SOFTMAX, "--emit=triton", "--shape", "M=3", "N=5")
    assert (code, err) == (0, "")
    assert "@triton.jit" in out and "import triton.language as tl" in out


def test_lower_to_ptx(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "softmax.ptx"
    code, out, err = run(capsys, "lower", SOFTMAX, "--emit=ptx", "--shape", "M=3", "N=5", "--arch", "80",
                         "-o", str(target))
    assert (code, out, err) == (0, "", "")
    ptx = target.read_text(encoding="utf-8")
    assert ".entry" in ptx and ".target sm_80" in ptx


def test_lower_to_stablehlo_and_physical(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "lower", SOFTMAX, "--emit=stablehlo", "--shape", "M=3", "N=5")
    assert code == 0 and "stablehlo." in out and "func.func @main" in out
    code, out, _ = run(capsys, "lower", SOFTMAX, "--emit=physical")
    assert code == 0 and out.startswith("program softmax")


def test_explain(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "explain", SOFTMAX)
    assert code == 0 and out.startswith("kernel softmax: one launch")


def test_run_compares_the_launcher_with_the_oracle(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "run", SOFTMAX, "--shape", "M=3", "N=5", "--seed", "7")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("out: max abs error ") and lines[0].endswith("(f32, atol 0.0001, rtol 0.0001)  PASS")
    assert lines[1] == "PASS"
