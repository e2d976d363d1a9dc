"""`kernels_in_file`: the `@intent.kernel` objects of a Python file, for `kirc` and other tools."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import traceback

from kir.errors import DiagnosticError, Loc

from .kernel import KernelObject


def _loc_in(path: str, exc: BaseException) -> Loc | None:
    """The innermost traceback frame inside `path`: where the author's file failed."""
    best: Loc | None = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == path and frame.lineno is not None:
            col = (frame.colno + 1) if getattr(frame, "colno", None) is not None else 1
            best = Loc(path, frame.lineno, col)
    return best


def kernels_in_file(path: str) -> dict[str, KernelObject]:
    """Import a Python file as a module and return the kernels defined in it, by name.

    Any failure while importing (syntax errors, exceptions, diagnostics about a kernel) is a
    `DiagnosticError` located in that file."""
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise DiagnosticError(f"cannot read {path}: no such file")
    modname = "_intent_file_" + hashlib.sha1(full.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(modname, full)
    if spec is None or spec.loader is None:
        raise DiagnosticError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(full)
    sys.modules[modname] = module
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except DiagnosticError:
        raise
    except SyntaxError as exc:
        raise DiagnosticError(f"syntax error: {exc.msg}", Loc(full, exc.lineno or 1, exc.offset or 1)) from None
    except Exception as exc:
        raise DiagnosticError(f"importing {path} failed: {type(exc).__name__}: {exc}", _loc_in(full, exc)) from None
    finally:
        sys.modules.pop(modname, None)
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    out: dict[str, KernelObject] = {}
    for attr, obj in vars(module).items():
        if isinstance(obj, KernelObject) and \
                os.path.abspath(obj.__wrapped__.__code__.co_filename) == full:  # type: ignore[attr-defined]
            out.setdefault(attr, obj)
            out.setdefault(obj.__name__, obj)
    return out
