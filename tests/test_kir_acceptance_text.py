"""`kirc lower --emit=kir` of every acceptance kernel prints KIR that `kirc check` accepts from a .kir file."""

from __future__ import annotations

from pathlib import Path

import pytest

import intent
from kir.cli import main
from kir.text import parse_kernel
from tests.acceptance import FILES

KERNELS = [(path, name) for path in FILES
           for name in intent.kernels_in_file(str(path))]


def test_every_acceptance_file_has_kernels() -> None:
    assert {p.stem for p, _ in KERNELS} == {p.stem for p in FILES}


@pytest.mark.parametrize("path,name", KERNELS, ids=[f"{p.stem}.{n}" for p, n in KERNELS])
def test_lowered_kir_checks_as_a_kir_file(path: Path, name: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / f"{name}.kir"
    assert main(["lower", str(path), "--kernel", name, "--emit=kir", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith(f"kernel {name}(")
    assert main(["check", str(out)]) == 0, capsys.readouterr().err
    # The file is a fixed point of the printer and equal to what the frontend built.
    kernel = parse_kernel(text, str(out))
    assert str(kernel).strip() == text.strip()
    assert kernel == intent.kernels_in_file(str(path))[name].kir
