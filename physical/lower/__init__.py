"""KIR -> physical lowering, one module per KIR op family; `LOWER` maps each KIR op class to its rule.

A rule `rule(lw, op)` appends physical ops to the lowerer's current region and binds the op's
results. Rules that cannot lower some forms raise a located `DiagnosticError` (see `REFUSALS`).
"""

from __future__ import annotations

from collections.abc import Callable

from kir import core as K

from .context import Lowerer, ProgramState

LOWER: dict[type[K.Op], Callable[[Lowerer, K.Op], None]] = {}

# KIR op classes whose rule refuses some forms (each refusal has a test).
REFUSALS: dict[type[K.Op], str] = {}


rule = K.registrar(LOWER, "lowering rule for {key}")


def lower_ops(lw: Lowerer, ops: tuple[K.Op, ...]) -> None:
    """Lower `ops` in order into the current region (a trailing yield is left to the caller)."""
    for op in ops:
        if op.TERMINATOR:
            continue
        saved = lw.current_op
        lw.current_op = op
        try:
            LOWER[type(op)](lw, op)
        finally:
            lw.current_op = saved


K.load_families(__name__)  # each family's module registers its rules

__all__ = ["LOWER", "REFUSALS", "Lowerer", "ProgramState", "lower_ops", "rule"]
