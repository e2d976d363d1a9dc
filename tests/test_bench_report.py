"""Markdown tables and cells of bench/report.py."""

from __future__ import annotations

from bench.report import failure_text, markdown_table, ratio, verdict


def test_table_right_aligns_numeric_columns():
    text = markdown_table(("name", "ms", "note"), [("a", "1.5", ""), ("bb", "-", "x")])
    assert text.splitlines() == [
        "| name |  ms | note |",
        "|------|----:|------|",
        "| a    | 1.5 |      |",
        "| bb   |   - | x    |",
    ]


def test_failure_text_is_one_escaped_shortened_line():
    exc = ValueError("bad | value\nsecond line")
    assert failure_text(exc) == "ValueError: bad \\| value"
    assert failure_text(ValueError("x" * 500), limit=20) == "ValueError: xxxxx..."
    assert failure_text(KeyError()) == "KeyError"


def test_verdicts_and_ratios():
    assert (verdict(True), verdict(False), verdict(None)) == ("yes", "NO", "-")
    assert (ratio(1.0), ratio(None)) == ("1.000", "-")
