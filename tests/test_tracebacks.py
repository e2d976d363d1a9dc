"""User-facing errors leave Intent with a traceback that starts and ends in the author's code (as JAX filters
its internal frames); `INTENT_TRACEBACK=full` keeps every frame; internal errors are never filtered."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from intent import tracebacks
from kir.errors import DiagnosticError, IntentError

ROOT = Path(__file__).resolve().parents[1]
INTERNAL_FRAME = re.compile(r'File "[^"]*/(kir|physical|emit_triton|oracle|intent)/[^"]*\.py"')

BAD_KERNEL = '''\
import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel
def broken(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = x[i, :]
'''

LAUNCH = '''\
import torch

import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel
def row_sums(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.sum(x[i, :])


row_sums(torch.ones(3, 4), torch.empty(5))
'''


def run(tmp_path: Path, files: dict[str, str], main: str, full: bool = False) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != tracebacks.ENV}
    env["PYTHONPATH"] = str(ROOT)
    if full:
        env[tracebacks.ENV] = "full"
    done = subprocess.run([sys.executable, main], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    return done.stderr


def frames(stderr: str) -> list[str]:
    return re.findall(r'File "([^"]+)", line (\d+)', stderr)


def test_a_kernel_rejected_at_import_shows_only_the_authors_frames(tmp_path: Path) -> None:
    err = run(tmp_path, {"bad.py": BAD_KERNEL, "main.py": "import bad  # noqa: F401\n"}, "main.py")
    assert not INTERNAL_FRAME.search(err), err
    assert frames(err) == [(str(tmp_path / "main.py"), "1"), (str(tmp_path / "bad.py"), "7")]
    assert f"DiagnosticError: {tmp_path / 'bad.py'}:10:9: error: cannot broadcast [N] to the lower-rank shape [] " \
           f"(store to `out`)\n            out[i] = x[i, :]\n            ^\n" in err
    assert err.rstrip().endswith("^")  # the located message ends the output
    assert "During handling" not in err and "direct cause" not in err


def test_full_tracebacks_show_the_compiler_frames(tmp_path: Path) -> None:
    err = run(tmp_path, {"bad.py": BAD_KERNEL, "main.py": "import bad  # noqa: F401\n"}, "main.py", full=True)
    assert INTERNAL_FRAME.search(err)
    assert any("/kir/frontend/" in f for f, _ in frames(err))


def test_a_launch_error_shows_the_call_site(tmp_path: Path) -> None:
    err = run(tmp_path, {"launch.py": LAUNCH}, "launch.py")
    assert not INTERNAL_FRAME.search(err), err
    assert frames(err) == [(str(tmp_path / "launch.py"), "15")]
    assert "LaunchError: parameter out: axis 0 has extent 5 but M = 3 from parameter x" in err


def test_internal_errors_keep_every_frame() -> None:
    def internal() -> None:
        raise IntentError("internal error in kernel k: something broke")

    boundary = tracebacks.api_boundary(internal)
    with pytest.raises(IntentError) as info:
        boundary()
    assert info.traceback[-1].name == "internal"


def test_the_filter_drops_intent_frames_and_the_chained_cause() -> None:
    def deep() -> None:
        try:
            raise KeyError("x")
        except KeyError as cause:
            raise DiagnosticError("bad kernel") from cause

    def here() -> None:
        tracebacks.api_boundary(deep)()

    with pytest.raises(DiagnosticError) as info:
        here()
    err = info.value
    # `deep` is a test function (not internal), so it stays; the boundary's own frame (intent/) is gone.
    names = [entry.name for entry in info.traceback]
    assert "boundary" not in names and names[-1] == "deep"
    assert err.__cause__ is None and err.__suppress_context__ and not getattr(err, "__notes__", None)
