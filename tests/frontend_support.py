"""Helpers for the frontend tests: kernels written to real files, so that diagnostics point at real lines."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest

import intent
import kir
from kir.errors import DiagnosticError

HEADER = """import math
import intent
from intent import Out, InOut, dims, parallel, const, pred, i8, i32, i64, u32, f16, bf16, f32, f64
M, N, K, S, E, B = dims("M N K S E B")
T = intent.dtype_var("T", f16, bf16, f32)
"""

_counter = itertools.count()


def write(tmp_path: Path, source: str) -> Path:
    path = tmp_path / f"kernels_{next(_counter)}.py"
    path.write_text(HEADER + textwrap.dedent(source).lstrip("\n"))
    return path


def kernels(tmp_path: Path, source: str) -> dict[str, intent.KernelObject]:
    return intent.kernels_in_file(str(write(tmp_path, source)))


def kernel(tmp_path: Path, source: str) -> intent.KernelObject:
    ks = kernels(tmp_path, source)
    assert len({id(k) for k in ks.values()}) == 1, list(ks)
    return next(iter(ks.values()))


def build(tmp_path: Path, source: str) -> kir.Kernel:
    k = kernel(tmp_path, source).kir
    kir.verify(k)
    return k


def position(path: Path, marker: str, occurrence: int = 1) -> tuple[int, int]:
    """1-based (line, column) of the `occurrence`-th `marker` in the written file."""
    text = path.read_text()
    at = -1
    for _ in range(occurrence):
        at = text.index(marker, at + 1)
    line = text.count("\n", 0, at) + 1
    col = at - (text.rfind("\n", 0, at) + 1) + 1
    return line, col


def diagnostic(tmp_path: Path, source: str, marker: str, message: str, occurrence: int = 1) -> DiagnosticError:
    """Compile `source`, expect a DiagnosticError at `marker` whose message is exactly `message`."""
    path = write(tmp_path, source)
    with pytest.raises(DiagnosticError) as info:
        intent.kernels_in_file(str(path))
    err = info.value
    assert err.message == message
    assert err.file == str(path)
    assert (err.line, err.col) == position(path, marker, occurrence), str(err)
    return err


def ops(kernel: kir.Kernel, cls: type) -> list:
    return [o for o in kernel.walk() if isinstance(o, cls)]


def op_names(kernel: kir.Kernel) -> set[str]:
    return {type(o).__name__ for o in kernel.walk()}
