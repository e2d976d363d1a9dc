"""Messages and explanations name loop variables as the author wrote them (`i`, `j`), never the internal
proof symbols (`_i6`, `_c3`, `_l14`, `_t6`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import intent
import physical
from kir.cli import main
from kir.solver import named_model, with_names
from tests import acceptance

INTERNAL = re.compile(r"\b(_[citlv]\d+|__[A-Za-z_]+\d+|(?!i8\b|i16\b|i32\b|i64\b)i\d+)\b")  # not dtypes

OUT_OF_BOUNDS = '''\
import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel
def shifted(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        for j in range(N):
            out[i, j] = x[i, j + 1]
'''

TWO_LOOPS = '''\
import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel
def rows(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        acc = f32(0.0)
        for t in range(N):
            acc = acc + x[i, t]
        out[i] = acc
    for i in parallel(M):
        out[0] = x[i, 0]
'''


def test_with_names_replaces_whole_symbols_only() -> None:
    names = {"_i6": "j", "_i2": "i"}
    assert with_names("_i6 + 1 < N and _i60 >= 0", names) == "j + 1 < N and _i60 >= 0"
    assert named_model({"M": 1, "_i2": 0}, names) == {"M": 1, "i": 0}


def test_a_counterexample_names_the_loop_variables(tmp_path: Path, capsys) -> None:
    path = tmp_path / "shifted.py"
    path.write_text(OUT_OF_BOUNDS, encoding="utf-8")
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:11:25: error: load index on axis 1 may be out of bounds: cannot prove j + 1 < N: "
                          "counterexample M = 1, N = 1, i = 0, j = 0\n")


def test_explain_names_loop_variables_in_proofs(tmp_path: Path) -> None:
    path = tmp_path / "rows.py"
    path.write_text(TWO_LOOPS, encoding="utf-8")
    text = physical.explain(intent.kernels_in_file(str(path))["rows"].kir)
    accesses = text[text.index("accesses:"):text.index("performance notes:")].splitlines()[1:]
    assert accesses == ["  load x (load at rows.py:12): proven 0 <= i < M and 0 <= t < N",
                        "  store out (store at rows.py:13): proven 0 <= i < M",
                        "  load x (load at rows.py:15): proven 0 <= i < M and 0 <= 0 < N",
                        "  store out (store at rows.py:15): proven 0 <= 0 < M"]
    assert "instances (i=0) and" in text or "(i=0)" in text  # the conflict note names the loop variable too


@pytest.mark.parametrize("path", acceptance.FILES, ids=[p.stem for p in acceptance.FILES])
def test_no_internal_symbol_reaches_an_explanation(path: Path) -> None:
    for name, k in intent.kernels_in_file(str(path)).items():
        kir = k.kir
        if kir.dtype_vars:
            kir = k.specialize_with({kir.dtype_vars[0].name: kir.dtype_vars[0].choices[-1]})
        text = physical.explain(kir, {s: 7 for s in kir.symbols})
        assert not INTERNAL.findall(text), (name, INTERNAL.findall(text))
