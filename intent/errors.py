"""The error hierarchy shared by every package (re-exported by `intent` and `kir.errors`).

It depends on the standard library only, so that the compiler-free runtime (`intent.load`) raises
the same classes as the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """Provenance of an op: file, 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class IntentError(Exception):
    """Base of every error Intent raises on purpose."""


class DiagnosticError(IntentError):
    """A compile-time diagnostic about the author's input, located at file:line:col."""

    def __init__(self, message: str, loc: Loc | None = None, source_line: str | None = None,
                 context: str | None = None) -> None:
        self.message = message
        self.loc = loc
        self.file = loc.file if loc else None
        self.line = loc.line if loc else None
        self.col = loc.col if loc else None
        self.source_line = source_line if source_line is not None else _read_line(loc)
        self.context = context
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.loc}: error: {self.message}" if self.loc else f"error: {self.message}"
        parts = [head]
        if self.source_line is not None and self.loc is not None:
            text = self.source_line.rstrip("\n")
            parts.append(f"    {text}")
            parts.append("    " + " " * max(self.loc.col - 1, 0) + "^")
        if self.context:
            parts.append(self.context)
        return "\n".join(parts)


class LaunchError(IntentError):
    """Arguments given at launch do not fit the kernel; names the parameter and the expectation."""


class NotExpressible(IntentError):
    """An exit (StableHLO, ...) cannot express this kernel."""


class VerifyError(DiagnosticError):
    """The KIR verifier rejected a kernel."""


def _read_line(loc: Loc | None) -> str | None:
    if loc is None or loc.line < 1:
        return None
    src = _SOURCES.get(loc.file)
    if src is None:
        try:
            with open(loc.file, encoding="utf-8", errors="replace") as fh:
                src = fh.read()
        except OSError:
            return None
    lines = src.splitlines()
    return lines[loc.line - 1] if loc.line <= len(lines) else None


_SOURCES: dict[str, str] = {}


def register_source(filename: str, text: str) -> None:
    """Let diagnostics show lines of sources that are not files on disk (strings, notebooks)."""
    _SOURCES[filename] = text
