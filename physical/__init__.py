"""The physical program: construction from KIR, passes, verifier, printer and explanations."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kir.lazy import make_lazy

if TYPE_CHECKING:
    from . import model
    from .construct import construct, segments_for
    from .explain import explain
    from .lowering import lower
    from .model import Program
    from .passes import PIPELINE, Pass
    from .printer import print_program
    from .verify import verify

# Loaded on first use: the launcher imports `physical.launch_expr` alone, without networkx and the passes.
make_lazy(__name__, {
    "model": (".model", ""), "construct": (".construct", "construct"), "segments_for": (".construct", "segments_for"),
    "explain": (".explain", "explain"), "lower": (".lowering", "lower"), "Program": (".model", "Program"),
    "PIPELINE": (".passes", "PIPELINE"), "Pass": (".passes", "Pass"), "print_program": (".printer", "print_program"),
    "verify": (".verify", "verify")})


__all__ = ["construct", "lower", "PIPELINE", "Pass", "verify", "print_program", "explain", "Program", "model",
           "segments_for"]
