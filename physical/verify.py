"""Construction verifier entry point: `verify(program, kernel=None)` runs every rule of `physical.verifier`.

The rules (and the one error class, `PhysicalVerifyError`) live in `physical.verifier`; this module is the
stable name callers use.
"""

from __future__ import annotations

from .model import Program
from .verifier import PhysicalVerifyError, Prover
from .verifier import verify as verify_rules


def proof_memo() -> Prover:
    """A memo of the verifier's Z3 verdicts, for the verifications of one kernel's successive programs (each
    query is a statement about integers: its verdict holds for any program that asks it)."""
    return Prover()


def verify(program: Program, kernel=None, proofs: Prover | None = None) -> Program:
    """Check the construction rules once; raises PhysicalVerifyError naming the broken rule.

    Every rule of seed 001 section 9 runs (physical.verifier); with `kernel`, the rules that check
    semantic preservation also compare the program with the KIR it came from. A group's body in each
    form a launch selects (the regions of its `looped_rows` op) is checked like any other region.
    """
    verify_rules(program, kernel, proofs)
    return program


__all__ = ["verify", "proof_memo", "Prover", "PhysicalVerifyError"]
