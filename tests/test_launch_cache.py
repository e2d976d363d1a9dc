"""The compile cache: entries on disk, verification, rebuilding, permissions, concurrent processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path

import pytest
import torch

import emit_triton
from emit_triton import cache as cache_mod
from emit_triton import targets
from emit_triton.compile import entry_key, intent_version, kernel_text, triton_version
from tests import launch_fixtures as lf
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.samples import vector_add


@pytest.fixture(autouse=True)
def fixtures(monkeypatch, isolated_cache):  # noqa: F811
    lf.install(monkeypatch, {vector_add(): lf.vadd_emitted(), lf.sum_diff_kernel(): lf.sum_diff_emitted()})
    targets.clear_loaded()
    yield
    targets.clear_loaded()


def run_vector_add() -> torch.Tensor:
    x, y = torch.arange(300.0), torch.ones(300)
    out = emit_triton.launch(vector_add(), {"x": x, "y": y})
    assert torch.equal(out, x + y)
    return out


def the_entry(root: Path) -> Path:
    entries = [p for p in root.iterdir() if p.is_dir()]
    assert len(entries) == 1
    return entries[0]


# ---------------------------------------------------------------------------------------------- layout


def test_entry_holds_source_and_json_metadata(isolated_cache):  # noqa: F811
    run_vector_add()
    entry = the_entry(isolated_cache)
    assert entry.name == entry_key(vector_add(), lf.vadd_emitted())
    assert sorted(p.name for p in entry.iterdir()) == ["kernel.py", "meta.json"]
    source = (entry / "kernel.py").read_text()
    assert source == lf.VADD_SOURCE
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["source_sha256"] == cache_mod.sha256_text(source)
    assert meta["key"] == entry.name and meta["name"] == "vadd"
    assert meta["triton"] == triton_version() and meta["intent"] == intent_version()
    assert [a["name"] for a in meta["abi"]["args"]] == ["x", "x_stride_0", "y", "y_stride_0", "out", "out_stride_0",
                                                        "N"]
    assert meta["abi"]["grid"] == "cdiv(N, 128)"


def test_directories_are_private(isolated_cache):  # noqa: F811
    run_vector_add()
    assert stat.S_IMODE(isolated_cache.stat().st_mode) == 0o700
    entry = the_entry(isolated_cache)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o700
    assert stat.S_IMODE((entry / "kernel.py").stat().st_mode) == 0o600


def test_no_temporary_files_or_bytecode_are_left(isolated_cache):  # noqa: F811
    run_vector_add()
    emit_triton.launch(lf.sum_diff_kernel(), {"x": torch.ones(4), "y": torch.ones(4)})
    names = {p.name for p in isolated_cache.rglob("*")}
    assert not [n for n in names if n.endswith(".tmp") or n == "__pycache__" or n.endswith(".pyc")]


def test_key_changes_with_source_kernel_and_versions(monkeypatch):
    emitted = lf.vadd_emitted()
    base = entry_key(vector_add(), emitted)
    other_source = lf.vadd_emitted().__class__(**{**emitted.__dict__, "source": emitted.source + "\n# v2\n"})
    assert entry_key(vector_add(), other_source) != base
    assert entry_key(lf.sum_diff_kernel(), emitted) != base
    import emit_triton.compile as compile_mod

    monkeypatch.setattr(compile_mod, "triton_version", lambda: "0.0.0")
    assert entry_key(vector_add(), emitted) != base


def test_kernel_text_is_deterministic():
    assert kernel_text(vector_add()) == kernel_text(vector_add())


def test_second_load_reads_the_entry_instead_of_writing(isolated_cache, monkeypatch):  # noqa: F811
    run_vector_add()
    targets.clear_loaded()
    writes: list[Path] = []
    original = cache_mod.atomic_write
    monkeypatch.setattr(cache_mod, "atomic_write", lambda path, data: (writes.append(path), original(path, data)))
    run_vector_add()
    assert writes == []


# ---------------------------------------------------------------------------------------------- corruption


@pytest.mark.parametrize("damage", ["truncate_source", "edit_source", "bad_json", "wrong_hash", "drop_meta",
                                    "drop_source"])
def test_damaged_entry_is_rebuilt_not_executed(isolated_cache, damage):  # noqa: F811
    run_vector_add()
    targets.clear_loaded()
    entry = the_entry(isolated_cache)
    src, meta = entry / "kernel.py", entry / "meta.json"
    if damage == "truncate_source":
        src.write_bytes(src.read_bytes()[:40])
    elif damage == "edit_source":
        # A syntactically valid module that would do something else if it were imported.
        src.write_text("raise SystemExit('a damaged cache entry was executed')\n")
    elif damage == "bad_json":
        meta.write_text('{"format": 1, "key": ')
    elif damage == "wrong_hash":
        record = json.loads(meta.read_text())
        record["source_sha256"] = "0" * 64
        meta.write_text(json.dumps(record))
    elif damage == "drop_meta":
        meta.unlink()
    else:
        src.unlink()
    run_vector_add()
    assert src.read_text() == lf.VADD_SOURCE
    assert json.loads(meta.read_text())["source_sha256"] == cache_mod.sha256_text(lf.VADD_SOURCE)


def test_read_source_rejects_and_removes_a_mismatched_entry(isolated_cache):  # noqa: F811
    disk = cache_mod.DiskCache(isolated_cache)
    disk.write_source("k1", "print('hello')\n", {"name": "hello"})
    assert disk.read_source("k1") == "print('hello')\n"
    (isolated_cache / "k1" / "kernel.py").write_text("print('HELLO')\n")
    assert disk.read_source("k1") is None
    assert not (isolated_cache / "k1" / "meta.json").exists()


def test_artifacts_are_verified(isolated_cache):  # noqa: F811
    disk = cache_mod.DiskCache(isolated_cache)
    disk.write_artifact("k1", "sm90-a", {"ptx": ".entry"})
    assert disk.read_artifact("k1", "sm90-a") == {"ptx": ".entry"}
    path = isolated_cache / "k1" / "sm90-a.json"
    record = json.loads(path.read_text())
    record["payload"]["ptx"] = ".entry tampered"
    path.write_text(json.dumps(record))
    assert disk.read_artifact("k1", "sm90-a") is None
    assert not path.exists()
    path.write_text("not json")
    assert disk.read_artifact("k1", "sm90-a") is None


# ---------------------------------------------------------------------------------------------- the root


def test_unsafe_root_falls_back_to_a_private_directory(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("INTENT_CACHE_DIR", str(shared))
    with pytest.warns(cache_mod.CacheWarning, match=r"is writable by group or others \(mode 777\)"):
        root = cache_mod.cache_root()
    assert root != shared and stat.S_IMODE(root.stat().st_mode) == 0o700
    run_vector_add()
    assert list(shared.iterdir()) == []
    assert the_entry(root).name == entry_key(vector_add(), lf.vadd_emitted())


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to chown")
def test_root_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    os.chown(other, 12345, 12345)
    monkeypatch.setenv("INTENT_CACHE_DIR", str(other))
    with pytest.warns(cache_mod.CacheWarning, match=r"is owned by another user \(uid 12345\)"):
        assert cache_mod.cache_root() != other


def test_root_that_is_a_file_is_refused(tmp_path, monkeypatch):
    f = tmp_path / "file"
    f.write_text("")
    monkeypatch.setenv("INTENT_CACHE_DIR", str(f))
    with pytest.warns(cache_mod.CacheWarning, match="cannot be created or read"):
        assert cache_mod.cache_root() != f


def test_default_root_is_under_the_home_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("INTENT_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_mod.configured_root() == tmp_path / ".cache" / "intent"


# ---------------------------------------------------------------------------------------------- processes


def _compile_in_child(root: str, barrier, results) -> None:
    os.environ["INTENT_CACHE_DIR"] = root
    import emit_triton.compile as compile_mod

    table = {vector_add(): lf.vadd_emitted()}
    compile_mod.emitted_for = table.__getitem__
    x, y = torch.arange(500.0), torch.full((500,), 2.0)
    barrier.wait(timeout=120)
    try:
        out = emit_triton.launch(vector_add(), {"x": x, "y": y})
        ptx = emit_triton.ptx(vector_add(), {"x": x, "y": y})
        results.put((torch.equal(out, x + y), ".entry" in ptx))
    except Exception as exc:  # reported to the parent
        results.put((f"{type(exc).__name__}: {exc}", False))


def test_two_processes_compiling_the_same_kernel_at_once(isolated_cache):  # noqa: F811
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_compile_in_child, args=(str(isolated_cache), barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert outcomes == [(True, True), (True, True)]
    assert [p.exitcode for p in procs] == [0, 0]
    entry = the_entry(isolated_cache)
    assert cache_mod.DiskCache(isolated_cache).read_source(entry.name) == lf.VADD_SOURCE
    artifacts = [p for p in entry.iterdir() if p.name.startswith("sm90-")]
    assert len(artifacts) == 1
    assert not [p for p in entry.iterdir() if p.name.endswith(".tmp")]


def _hammer_entry(root: str, barrier, results) -> None:
    disk = cache_mod.DiskCache(Path(root))
    source = "x = 1\n" * 5000  # large enough that a torn write would be visible
    seen = set()
    barrier.wait(timeout=120)
    for n in range(120):
        text = disk.read_source("shared")
        seen.add("none" if text is None else ("whole" if text == source else "torn"))
        if n % 3 == 0:
            disk.write_source("shared", source, {"name": "x"})
        else:
            disk.source_file("shared", source, {"name": "x"})
    results.put(sorted(seen))


def test_concurrent_writers_and_readers_never_see_a_partial_entry(isolated_cache):  # noqa: F811
    isolated_cache.mkdir(mode=0o700)
    # The workers only read and write files: fork them (spawn would re-import torch in each).
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_hammer_entry, args=(str(isolated_cache), barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    seen = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all("torn" not in s and "whole" in s for s in seen), seen
    assert cache_mod.DiskCache(isolated_cache).read_source("shared") == "x = 1\n" * 5000
