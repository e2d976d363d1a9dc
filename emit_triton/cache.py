"""The on-disk compile cache: generated module sources and compiled artifacts, as text and JSON.

Layout, under a user-owned 0700 root (`$INTENT_CACHE_DIR`, else `~/.cache/intent`):

    <root>/<entry key>/kernel.py              the generated Triton module (Triton's JIT needs a file)
    <root>/<entry key>/meta.json              name, ABI description, sha256 of kernel.py
    <root>/<entry key>/<artifact key>.json    a compiled specialisation (PTX text, base64 cubin)
    <root>/emitted/<kernel key>.json          a kernel's emitted form (source, ABI, launch expressions;
                                              see emitted_cache): a new process launches without lowering

Nothing is ever pickled. Every file is written to a private temporary file in the same directory
and renamed into place, so a concurrent reader sees either no file or a whole one; readers check
the recorded sha256 before using anything, and a corrupted or truncated entry is deleted and
rebuilt, never executed. Two processes building the same entry at once write identical bytes, and
whichever rename lands last wins.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CACHE_ENV = "INTENT_CACHE_DIR"
FORMAT = 1
SOURCE_FILE = "kernel.py"
META_FILE = "meta.json"


class CacheWarning(UserWarning):
    """The configured cache directory is unsafe or unusable; a private temporary one is used."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------- the root

_roots: dict[str, Path] = {}
_roots_lock = threading.Lock()


def configured_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "intent").expanduser()


def cache_root() -> Path:
    """The cache directory to use now; an unsafe configured one is replaced by a private temp dir."""
    configured = configured_root()
    with _roots_lock:
        known = _roots.get(str(configured))
        if known is not None:
            return known
        problem = _root_problem(configured)
        if problem is None:
            root = configured
        else:
            root = Path(tempfile.mkdtemp(prefix="intent-cache-"))
            atexit.register(shutil.rmtree, root, ignore_errors=True)
            warnings.warn(f"Intent cache directory {configured} {problem}; using the private temporary "
                          f"directory {root} for this process instead", CacheWarning, stacklevel=3)
        _roots[str(configured)] = root
        return root


def _root_problem(path: Path) -> str | None:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as exc:
        return f"cannot be created or read ({exc.strerror or exc})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"is owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


# ---------------------------------------------------------------------------------------------- files


def atomic_write(path: Path, data: bytes) -> None:
    """Write `path` so that no reader ever sees part of it: temp file in the same dir, then rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


class DiskCache:
    """Entries of one cache root (see the module doc for the layout and the guarantees)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry_dir(self, key: str) -> Path:
        return self.root / key

    def _ensure_dir(self, key: str) -> Path:
        d = self.entry_dir(key)
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        return d

    # --- generated module sources
    def read_source(self, key: str) -> str | None:
        """The entry's source when kernel.py and meta.json are whole and agree, else None.

        A present but corrupted entry (bad JSON, wrong key, hash mismatch) is deleted.
        """
        d = self.entry_dir(key)
        src_path, meta_path = d / SOURCE_FILE, d / META_FILE
        try:
            meta_text = meta_path.read_text(encoding="utf-8")
            data = src_path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            meta = json.loads(meta_text)
            ok = isinstance(meta, dict) and meta.get("format") == FORMAT and meta.get("key") == key \
                and meta.get("source_sha256") == hashlib.sha256(data).hexdigest()
            text = data.decode("utf-8") if ok else None
        except (ValueError, UnicodeDecodeError):
            text = None
        if text is None:
            self.discard(key)
        return text

    def write_source(self, key: str, source: str, meta: Mapping[str, Any]) -> Path:
        d = self._ensure_dir(key)
        record = dict(meta, format=FORMAT, key=key, source_sha256=sha256_text(source))
        # The source goes first: meta.json is what makes an entry valid, and it names the hash.
        atomic_write(d / SOURCE_FILE, source.encode("utf-8"))
        atomic_write(d / META_FILE, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode("utf-8"))
        return d / SOURCE_FILE

    def source_file(self, key: str, source: str, meta: Mapping[str, Any]) -> Path:
        """The path of a verified kernel.py holding exactly `source`, writing the entry if needed."""
        if self.read_source(key) != source:
            self.write_source(key, source, meta)
        return self.entry_dir(key) / SOURCE_FILE

    def discard(self, key: str) -> None:
        d = self.entry_dir(key)
        for name in (META_FILE, SOURCE_FILE):
            _remove(d / name)

    # --- compiled artifacts (JSON records whose payload hash is checked on read)
    def read_artifact(self, key: str, name: str) -> dict[str, Any] | None:
        path = self.entry_dir(key) / f"{name}.json"
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (ValueError, UnicodeDecodeError):
            _remove(path)
            return None
        payload = record.get("payload") if isinstance(record, dict) else None
        if not isinstance(payload, dict) or record.get("format") != FORMAT \
                or record.get("sha256") != sha256_text(canonical_json(payload)):
            _remove(path)
            return None
        return payload

    def write_artifact(self, key: str, name: str, payload: Mapping[str, Any]) -> None:
        d = self._ensure_dir(key)
        record = {"format": FORMAT, "payload": dict(payload), "sha256": sha256_text(canonical_json(dict(payload)))}
        atomic_write(d / f"{name}.json", (json.dumps(record, sort_keys=True) + "\n").encode("utf-8"))


def default_cache() -> DiskCache:
    return DiskCache(cache_root())


def encode_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_bytes(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)
