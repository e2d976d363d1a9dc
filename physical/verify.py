"""Construction verifier entry point: `verify(program, kernel=None)` runs every rule of `physical.verifier`.

The rules (and the one error class, `PhysicalVerifyError`) live in `physical.verifier`; this module is the
stable name callers use.
"""

from __future__ import annotations

from .model import Program, with_looped_bodies
from .verifier import PhysicalVerifyError
from .verifier import verify as verify_rules


def verify(program: Program, kernel=None) -> Program:
    """Check the construction rules; raises PhysicalVerifyError naming the broken rule.

    Every rule of seed 001 section 9 runs (physical.verifier); with `kernel`, the rules that check
    semantic preservation also compare the program with the KIR it came from. Groups with a looped
    body (`Group.looped`) are checked a second time with that body in place.
    """
    verify_rules(program, kernel)
    looped = with_looped_bodies(program)
    if looped is not None:  # the chunked alternative bodies are checked as the groups' bodies
        verify_rules(looped, kernel)
    return program


__all__ = ["verify", "PhysicalVerifyError"]
