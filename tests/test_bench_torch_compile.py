"""bench/torch_compile.py: graph breaks and compiles across sizes of compiled functions calling kernels."""

from __future__ import annotations

import torch

from bench.torch_compile import Case, cases, measure, operator_overhead, table


def test_every_case_compiles_without_graph_breaks_and_once_more_for_dynamic_sizes():
    rows = [measure(c, "aot_eager", sizes=(3, 5, 7)) for c in cases()]
    assert [(r.error, r.graph_breaks, r.frames) for r in rows] == [(None, 0, 2)] * len(rows)
    text = table(rows, sizes=(3, 5, 7))
    assert "| rmsnorm (forward+backward) " in text and "frames compiled (rows 3, 5, 7)" in text


def test_a_wrong_result_is_a_failed_row():
    wrong = Case("wrong", lambda x: x + 1, lambda x: x, lambda m: (torch.zeros(m),))
    row = measure(wrong, "eager", sizes=(2,))
    assert row.error is not None and "FAILED" in table([row])


def test_operator_overhead_table():
    text = operator_overhead(calls=50)
    assert "| kernel object (eager launch) " in text and "| torch.ops.intent operator " in text
