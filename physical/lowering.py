"""`physical.lower`: construction, then every legal and profitable pass of the pipeline."""

from __future__ import annotations

from collections.abc import Sequence

from kir.core import Kernel

from .construct import construct
from .model import Program
from .passes import PIPELINE, Pass, PassContext
from .verify import PhysicalVerifyError, Prover, proof_memo
from .verify import verify as _verify_program


def lower(kernel: Kernel, verify: bool = False) -> Program:  # noqa: A002 (the documented keyword)
    """Construct the initial program, then run every pass of `PIPELINE` in order.

    With `verify=True` the construction verifier runs after construction and after each pass, with the
    kernel, so that the rules of semantic preservation compare every stage with the KIR.
    """
    program = construct(kernel)
    proofs = proof_memo() if verify else None
    if verify:
        _verify_program(program, kernel, proofs)
    return run_pipeline(program, kernel if verify else None, proofs=proofs)[0]


def run_passes(program: Program, verify_with: Kernel | None = None) -> Program:
    """Every legal and profitable pass of `PIPELINE` over a constructed `program`, in order, in one run: a
    `PassContext` of this run keeps each pass's plan, so each pass plans once. With `verify_with` (the kernel)
    the construction verifier runs after each pass that changed the program."""
    return run_pipeline(program, verify_with)[0]


def run_pipeline(program: Program, verify_with: Kernel | None = None, passes: Sequence[Pass] | None = None,
                 proofs: Prover | None = None) -> tuple[Program, list[str]]:
    """`run_passes` over `passes` (`PIPELINE` when None: a test may swap a pass for one configured otherwise, or
    leave one out), giving also the names of the passes that ran, in order. A verification failure after a
    pass raises `PhysicalVerifyError` with a note naming that pass. The verifications share `proofs` (a memo of
    Z3 verdicts: `physical.verify.proof_memo`; a new one when None)."""
    ctx = PassContext()
    ran: list[str] = []
    if verify_with is not None and proofs is None:
        proofs = proof_memo()  # one memo of Z3 verdicts for the verifications after each pass
    for p in PIPELINE if passes is None else passes:
        if p.legal(program, ctx) is True and p.profitable(program, ctx):
            program = p.run(program, ctx)
            ran.append(p.name)
            if verify_with is not None:
                try:
                    _verify_program(program, verify_with, proofs)
                except PhysicalVerifyError as exc:
                    exc.add_note(f"after the pass {p.name} (passes run: {', '.join(ran)})")
                    raise
    return program, ran
