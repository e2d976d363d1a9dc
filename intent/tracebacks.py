"""Tracebacks that start at the author's code.

A diagnostic about the author's kernel (`DiagnosticError`), a launch with arguments that do not fit
(`LaunchError`) or an exit that cannot express a kernel (`NotExpressible`) leaves Intent's public entry
points with Intent's own frames (the frontend, the physical program, the emitter, the oracle) removed
from its traceback, as JAX does with its internal frames: what remains is the author's code, down to the
line that defined or launched the kernel, and the located message. Internal errors keep every frame.
`INTENT_TRACEBACK=full` keeps every frame of every error. (No note is added to the exception: its printed
form stays the message alone, which doctests and callers matching on it rely on.)
"""

from __future__ import annotations

import functools
import os
import types
from collections.abc import Callable
from typing import Any, TypeVar

from kir.errors import DiagnosticError, LaunchError, NotExpressible

ENV = "INTENT_TRACEBACK"
USER_FACING = (DiagnosticError, LaunchError, NotExpressible)

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTERNAL = tuple(os.path.join(_ROOT, package) + os.sep
                 for package in ("intent", "kir", "physical", "emit_triton", "oracle"))

F = TypeVar("F", bound=Callable[..., Any])


def full() -> bool:
    return os.environ.get(ENV, "").strip().lower() == "full"


def is_internal(filename: str) -> bool:
    return filename.startswith(INTERNAL)


def without_internal_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    kept: list[types.TracebackType] = []
    while tb is not None:
        if not is_internal(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    out: types.TracebackType | None = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def filter_exception(exc: BaseException) -> None:
    """Drop Intent's frames from `exc` (in place): call it in an `except` block, then re-raise with a bare
    `raise`, which adds no frame of its own. Its chained causes are internal and are dropped too."""
    if full() or not isinstance(exc, USER_FACING):
        return
    exc.__traceback__ = without_internal_frames(exc.__traceback__)
    exc.__cause__ = None
    exc.__suppress_context__ = True


def api_boundary(fn: F) -> F:
    """A public entry point: user-facing errors leave it without Intent's frames."""

    @functools.wraps(fn)
    def boundary(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except USER_FACING as exc:
            filter_exception(exc)
            raise

    return boundary  # type: ignore[return-value]
