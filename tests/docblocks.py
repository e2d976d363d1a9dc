"""Run the code blocks of Markdown pages, so that documentation cannot drift from the code.

Every fenced block of a page names its language (```python, ```text, ```bash, ...). The ```python
blocks of one page run in order in one namespace, so a later block uses what an earlier one defined.
A block whose lines start with `>>>` is a doctest: its expected output (and the exact message of an
expected exception) is checked. Any other block is executed as written and must not raise.

A block that truly cannot run here (it needs a GPU, say) is fenced ```python no-run; keep those rare.

Blocks are compiled with the page as their file name and their real line numbers, so a kernel
defined in a page is compiled from the page itself (`inspect` reads the lines back from the file) and
its diagnostics point at `docs/page.md:LINE:COL`.

    from tests.docblocks import run_page
    run_page("docs/language.md")
"""

from __future__ import annotations

import doctest
import os
import re
import textwrap
import traceback
from dataclasses import dataclass

# An opening or closing fence: up to three spaces of indentation, three or more backticks, an info string.
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<ticks>`{3,})(?P<info>[^`]*)$")

NO_RUN = "no-run"


@dataclass(frozen=True)
class Block:
    """A fenced code block: the page, the line of its first code line, its language and flags, its text."""

    path: str
    line: int
    lang: str
    flags: tuple[str, ...]
    source: str

    @property
    def runs(self) -> bool:
        return self.lang == "python" and NO_RUN not in self.flags

    @property
    def is_doctest(self) -> bool:
        return any(ln.lstrip().startswith(">>>") for ln in self.source.splitlines())

    def where(self) -> str:
        return f"{self.path}:{self.line}"


class DocBlockError(AssertionError):
    """A block failed: the message names the page and line."""


def blocks(path: str) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        ticks, info, indent = m["ticks"], m["info"].strip(), len(m["indent"])
        words = info.split()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            close = _FENCE.match(lines[j])
            if close is not None and close["ticks"].startswith(ticks) and not close["info"].strip():
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        if j == len(lines):
            raise DocBlockError(f"{path}:{i + 1}: the code block opened here is never closed")
        out.append(Block(path, i + 2, words[0] if words else "", tuple(words[1:]),
                         textwrap.dedent("\n".join(body)) + "\n"))
        i = j + 1
    return out


def untagged(path: str) -> list[Block]:
    """Blocks without a language: a reader cannot tell whether they are Python, and they never run."""
    return [b for b in blocks(path) if not b.lang]


def _run_doctest(block: Block, namespace: dict[str, object]) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.source, namespace, f"{block.path}:{block.line}", block.path, block.line - 1)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=False)
    if runner.failures:
        raise DocBlockError(f"{block.where()}: doctest failed\n" + "".join(report))


def run_block(block: Block, namespace: dict[str, object]) -> None:
    """Run one ```python block in `namespace` (doctest when it has `>>>` lines)."""
    if block.is_doctest:
        _run_doctest(block, namespace)
        return
    # Blank lines in front give the code its line numbers in the page.
    code = compile("\n" * (block.line - 1) + block.source, block.path, "exec")
    try:
        exec(code, namespace)
    except Exception as exc:
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == block.path]
        at = f" at line {lines[-1]}" if lines else ""
        raise DocBlockError(f"{block.where()}: the block raised {type(exc).__name__}{at}: {exc}") from exc


def run_page(path: str, cwd: str | None = None) -> int:
    """Run every runnable ```python block of a page in order, in one fresh namespace; returns how many ran.

    `cwd` is the directory the blocks run in (paths in pages are relative to the repository root)."""
    path = os.path.abspath(path)
    if cwd is not None:
        here = os.getcwd()
        os.chdir(cwd)
        try:
            return run_page(path)
        finally:
            os.chdir(here)
    stem = os.path.splitext(os.path.basename(path))[0]
    namespace: dict[str, object] = {"__name__": "docs_" + re.sub(r"\W", "_", stem), "__file__": path}
    ran = 0
    for block in blocks(path):
        if block.runs:
            run_block(block, namespace)
            ran += 1
    return ran
