"""Markdown tables and number formatting shared by the bench scripts."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table; numbers are right-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [any(_looks_numeric(r[i]) and r[i] not in ("-", "") for r in cells)
               and all(_looks_numeric(r[i]) for r in cells) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        padded = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if num else ("-" * (w + 2)) for w, num in zip(widths, numeric)) + "|"
    return "\n".join([line(list(headers)), rule] + [line(r) for r in cells])


def _looks_numeric(text: str) -> bool:
    try:
        float(text.replace(",", "").rstrip("%x"))
    except ValueError:
        return text in ("-", "")
    return True


def megabytes(n: float) -> str:
    return f"{n / 1e6:.3f}"


def ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def verdict(ok: bool | None) -> str:
    """The target column: met, missed, or no target for this row."""
    return "-" if ok is None else ("yes" if ok else "NO")


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def failure_text(exc: BaseException, limit: int = 160) -> str:
    """A failure as one table cell: exception type and first line, shortened, pipes escaped."""
    first = (str(exc).strip().splitlines() or [""])[0]
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text.replace("|", "\\|")
