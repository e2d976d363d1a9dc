"""Cache safety beyond tests/test_launch_cache.py: an entry forged consistently (its hash matching its text)
is replaced and never executed, corrupted entries of the real emitter's output are rebuilt, and
entries are private whatever the umask."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import numpy as np
import pytest

import emit_triton
from emit_triton import cache as cache_mod
from emit_triton import targets
from emit_triton.compile import clear_emitted
from tests import samples


@pytest.fixture
def root(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("INTENT_CACHE_DIR", str(path))
    targets.clear_loaded()
    clear_emitted()
    yield path
    targets.clear_loaded()


def _run() -> np.ndarray:
    x, y = np.arange(9, dtype=np.float32), np.full(9, 2.0, np.float32)
    out = np.zeros(9, np.float32)
    emit_triton.launch(samples.vector_add(), {"x": x, "y": y, "out": out})
    return out


def _entry(root):
    # the module entry holds kernel.py; `emitted/` beside it records emitted kernels for new processes
    (entry,) = [p for p in root.iterdir() if p.is_dir() and p.name != "emitted"]
    return entry


def test_a_consistently_forged_entry_is_replaced_not_executed(root, tmp_path) -> None:
    """Hash checks stop accidents; what is executed is the emitted text itself, so even an entry whose
    meta.json matches a planted kernel.py never runs."""
    want = _run()
    targets.clear_loaded()
    entry = _entry(root)
    planted = f"open({str(tmp_path / 'PLANTED')!r}, 'w').close()\n"
    (entry / "kernel.py").write_text(planted)
    meta = json.loads((entry / "meta.json").read_text())
    meta["source_sha256"] = hashlib.sha256(planted.encode()).hexdigest()
    (entry / "meta.json").write_text(json.dumps(meta))
    assert np.array_equal(_run(), want)
    assert not (tmp_path / "PLANTED").exists()
    assert (entry / "kernel.py").read_text() != planted


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "empty_meta", "meta_of_another_entry"])
def test_damaged_entries_of_emitted_kernels_are_rebuilt(root, damage) -> None:
    want = _run()
    targets.clear_loaded()
    entry = _entry(root)
    src, meta = entry / "kernel.py", entry / "meta.json"
    good = src.read_bytes()
    if damage == "truncate":
        src.write_bytes(good[: len(good) // 2])
    elif damage == "flip_byte":
        src.write_bytes(good[:10] + bytes([good[10] ^ 0x20]) + good[11:])
    elif damage == "empty_meta":
        meta.write_text("")
    else:
        record = json.loads(meta.read_text())
        record["key"] = "0" * 64
        meta.write_text(json.dumps(record))
    assert np.array_equal(_run(), want)
    assert src.read_bytes() == good
    assert json.loads(meta.read_text())["source_sha256"] == hashlib.sha256(good).hexdigest()


def test_entries_are_private_whatever_the_umask(root) -> None:
    previous = os.umask(0)
    try:
        _run()
    finally:
        os.umask(previous)
    entry = _entry(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(entry.stat().st_mode) == 0o700
    for f in entry.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_an_unsafe_root_is_never_used(tmp_path, monkeypatch) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setenv("INTENT_CACHE_DIR", str(shared))
    with pytest.warns(cache_mod.CacheWarning, match="is writable by group or others"):
        root = cache_mod.cache_root()
    assert root != shared
    targets.clear_loaded()
    _run()
    assert list(shared.iterdir()) == []
