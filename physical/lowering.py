"""`physical.lower`: construction, then every legal and profitable pass of the pipeline."""

from __future__ import annotations

from kir.core import Kernel

from .construct import construct
from .model import Program
from .passes import PIPELINE
from .verify import verify as _verify_program


def lower(kernel: Kernel, verify: bool = False) -> Program:  # noqa: A002 (the documented keyword)
    """Construct the initial program, then run every pass of `PIPELINE` in order.

    With `verify=True` the construction verifier runs after construction and after each pass, with the
    kernel, so that the rules of semantic preservation compare every stage with the KIR.
    """
    program = construct(kernel)
    if verify:
        _verify_program(program, kernel)
    for p in PIPELINE:
        if p.legal(program) is True and p.profitable(program):
            program = p.run(program)
            if verify:
                _verify_program(program, kernel)
    return program
