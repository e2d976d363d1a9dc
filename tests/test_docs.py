"""Every code block of README.md and docs/*.md runs; every public name of `intent` is documented in
docs/language.md."""

from __future__ import annotations

import glob
import inspect
import os
import re

import pytest

import intent
from tests.docblocks import DocBlockError, blocks, run_page, untagged

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]


def _page_id(path: str) -> str:
    return os.path.relpath(path, ROOT)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_page_blocks_run(page: str) -> None:
    run_page(page, cwd=ROOT)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_page_blocks_name_their_language(page: str) -> None:
    bare = [f"{_page_id(b.path)}:{b.line - 1}" for b in untagged(page)]
    assert not bare, f"fence these blocks with a language (```python, ```text, ```bash): {', '.join(bare)}"


def test_every_public_name_is_in_the_language_guide() -> None:
    with open(os.path.join(ROOT, "docs", "language.md"), encoding="utf-8") as fh:
        text = fh.read()
    public = [n for n in dir(intent) if not n.startswith("_")]
    missing = [n for n in public if not re.search(rf"`@?(intent\.)?{re.escape(n)}[`(\[.]", text)]
    assert not missing, f"docs/language.md does not document: {', '.join(missing)}"


def _signature(fn: object) -> str:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    sig = sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()],
                      return_annotation=inspect.Signature.empty)
    return str(sig)


def test_the_signature_list_is_complete_and_exact() -> None:
    path = os.path.join(ROOT, "docs", "language.md")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    head = text[:text.index("## Every operation's signature")].count("\n") + 1
    listed = next(b for b in blocks(path) if b.lang == "text" and b.line > head)
    want = [f"intent.{n}{_signature(intent.SPELLINGS[n])}" for n in sorted(intent.SPELLINGS)]
    assert listed.source.splitlines() == want


# ---------------------------------------------------------------------------------------------- the runner


def _page(tmp_path, text: str) -> str:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_blocks_share_a_namespace_in_order(tmp_path) -> None:
    page = _page(tmp_path, "# t\n\n```python\nx = 2\n```\n\n```text\nnot python\n```\n\n"
                           "```python\nassert x == 2\n```\n")
    assert run_page(page) == 2
    assert [(b.lang, b.line) for b in blocks(page)] == [("python", 4), ("text", 8), ("python", 12)]


def test_a_failing_block_names_its_page_and_line(tmp_path) -> None:
    page = _page(tmp_path, "```python\nx = 1\n```\n\n```python\ny = 1\nraise ValueError('boom')\n```\n")
    with pytest.raises(DocBlockError, match=r"page\.md:6: the block raised ValueError at line 7: boom"):
        run_page(page)


def test_no_run_blocks_are_skipped(tmp_path) -> None:
    page = _page(tmp_path, "```python no-run\nraise ValueError\n```\n")
    assert run_page(page) == 0


def test_doctest_output_is_checked(tmp_path) -> None:
    page = _page(tmp_path, "```python\n>>> 1 + 1\n3\n```\n")
    with pytest.raises(DocBlockError, match=r"doctest failed"):
        run_page(page)
    page = _page(tmp_path, "```python\n>>> 1 + 1\n2\n>>> int('x')\nTraceback (most recent call last):\n"
                           "    ...\nValueError: invalid literal for int() with base 10: 'x'\n```\n")
    assert run_page(page) == 1


def test_an_unclosed_fence_is_an_error(tmp_path) -> None:
    page = _page(tmp_path, "```python\nx = 1\n")
    with pytest.raises(DocBlockError, match=r"page\.md:1: the code block opened here is never closed"):
        blocks(page)


def test_untagged_blocks_are_found(tmp_path) -> None:
    page = _page(tmp_path, "```\nplain\n```\n\n```text\nok\n```\n")
    assert [b.line for b in untagged(page)] == [2]


def test_kernels_compile_from_the_page_and_errors_point_into_it(tmp_path) -> None:
    page = _page(tmp_path, "```python\nimport intent\nfrom intent import f32, Out, dims, parallel\nN = dims('N')\n\n"
                           "@intent.kernel\ndef k(x: f32[N], y: Out[f32[N]]):\n    for i in parallel(N):\n"
                           "        y[i] = x[i] * 2.0\n```\n\n```python\n@intent.kernel\ndef bad(x: f32[N]):\n"
                           "    return nope\n```\n")
    with pytest.raises(DocBlockError) as info:
        run_page(page)
    assert f"{page}:15:5: error: a kernel returns nothing" in str(info.value.__cause__)
