"""Bad input never crashes: mutated `.kir` files and Python kernel sources get `DiagnosticError` (exit code 1
from `kirc check`), wrong launch arguments get `LaunchError`. 1,600 + 400 + 320 cases (fixed seeds);
`python -m tests.fuzz --bad-inputs N --seed S` runs more."""

from __future__ import annotations

import random

import pytest
import torch

import emit_triton
from kir.errors import DiagnosticError, LaunchError
from kir.text import parse_file
from tests import samples
from tests.badinput import BadInputReport, kir_corpus, mutate, python_corpus, run_text_fuzz
from tests.badlaunch import run_launch_fuzz


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("seed", [101, 102, 103, 104])
def test_mutated_kir_files_only_get_diagnostics(seed: int, tmp_path) -> None:
    report = BadInputReport()
    run_text_fuzz(400, seed, report, kinds=("kir",), folder=tmp_path)
    assert not report.failures, report.text()
    assert report.outcomes["kir:diagnostic"] > 200 and report.outcomes["kir:accepted"] > 10, report.text()
    assert len(report.messages) > 40, report.text()  # the mutations reach many different diagnostics


@pytest.mark.parametrize("seed", [201, 202])
def test_mutated_python_sources_only_get_diagnostics(seed: int, tmp_path) -> None:
    report = BadInputReport()
    run_text_fuzz(200, seed, report, kinds=("py",), folder=tmp_path)
    assert not report.failures, report.text()
    assert report.outcomes["py:diagnostic"] > 100 and report.outcomes["py:accepted"] > 5, report.text()


@pytest.mark.parametrize("seed", [301, 302])
def test_wrong_launch_arguments_only_get_launch_errors(seed: int) -> None:
    report = BadInputReport()
    run_launch_fuzz(160, seed, report)
    assert not report.failures, report.text()
    assert report.outcomes["launch:rejected"] > 80 and report.outcomes["launch:accepted"] > 10, report.text()


# ---------------------------------------------------------------------------------------------- the mutators


def test_mutations_are_deterministic_and_varied() -> None:
    source = kir_corpus()[0]
    first = [mutate(source, random.Random(s)) for s in range(50)]
    again = [mutate(source, random.Random(s)) for s in range(50)]
    assert first == again
    assert len({data for data, _ in first}) > 45
    assert {"flip", "delete", "duplicate", "truncate"} <= {k for _, how in first for k in how.split("+")}


def test_the_corpora_hold_every_example() -> None:
    kir = kir_corpus()
    assert len(kir) >= 10 and all(b"kernel " in text for text in kir)
    assert any(b"@intent.kernel" in text for text in python_corpus())


# ---------------------------------------------------------------------------------------------- exact messages


def test_a_truncated_kir_file_points_at_its_end(tmp_path) -> None:
    path = tmp_path / "cut.kir"
    path.write_bytes(b"kernel k(x: in f32[N]) symbols(N) {\n  %a: f32[N] = load %x[0:N]\n")
    with pytest.raises(DiagnosticError) as err:
        parse_file(str(path))
    assert (err.value.line, err.value.col) == (2, 28)
    assert err.value.message == "unexpected end of file: the region opened at line 1, column 35 is not closed with '}'"


def test_a_kir_file_that_is_not_utf8_is_a_located_diagnostic(tmp_path) -> None:
    path = tmp_path / "bytes.kir"
    path.write_bytes(b"kernel k(x: in f32[N]) symbols(N) {\n  %a\xff: f32[N] = load %x[0:N]\n}\n")
    with pytest.raises(DiagnosticError) as err:
        parse_file(str(path))
    assert str(err.value).splitlines()[0] == f"{path}:2:5: error: the file is not valid UTF-8 (byte 0xff)"


def test_launch_errors_name_the_parameter() -> None:
    k = samples.vector_add()
    x = torch.zeros(4)
    cases = {
        "x": ({"x": None, "y": x, "out": x.clone()}, "parameter x: expected a tensor (in f32[N]), got None"),
        "y": ({"x": x, "y": x.double(), "out": x.clone()}, "parameter y: expected f32, got torch.float64"),
    }
    for name, (args, message) in cases.items():
        with pytest.raises(LaunchError) as err:
            emit_triton.launch(k, args)
        assert str(err.value) == message, name
