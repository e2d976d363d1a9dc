"""The construction verifier: every obligation of seed 001 section 9 as a named rule.

    from physical.verifier import verify, check, RULES

    verify(program)            # raises PhysicalVerifyError("[rule] ...") at the first broken rule
    verify(program, kernel)    # also compares with the KIR the program came from (through origins)
    check(program)             # every violation of every rule, without raising

Rules run in the order of `RULES` (structure first, so that later rules see a well-formed program);
`verify` reports the first rule that fails, with its first violation located at the KIR source.
Each rule lives in the module of its concern:

    structure.py   self-contained, ssa-defined, launch-extent, segments-partition
    fragments.py   fragment-types
    ownership.py   ownership, effect-coverage
    persistent.py  loop-invariant
    structured.py  structured-complete, region-op-complete
    buffers.py     buffer-complete, buffer-init
    workspace.py   workspace-protocol
    lookback.py    lookback-protocol
    splits.py      split-effects
    accesses.py    access-complete, coordinate-provenance, narrowing-explicit, bounds-justified
    dependence.py  ordered-dependence, unordered-conflict, buffer-visibility
    atomics.py     atomic-preserved

Shared machinery: index.py (definitions, placement, accesses, launch expressions on sample
bindings), affine.py (affine forms of coordinates and facts of masks, for the Z3 proofs),
relations.py (physical coordinates against the KIR access relation), tiles.py (tile ownership,
tile-level ops and the exclusive branches of one `if`).
"""

from __future__ import annotations

from kir.core import Kernel

from ..model import Program

# Importing a module registers its rules; `_ORDER` below is the order they run in.
from . import (
    accesses,
    atomics,
    buffers,
    dependence,
    fragments,
    lookback,
    ownership,
    persistent,
    splits,
    structure,
    structured,
    tiles,
    workspace,
)
from .affine import Prover
from .base import RULE_DOCS, RULES, PhysicalVerifyError, Violation, locate
from .index import index_of

_ORDER = ["self-contained", "ssa-defined", "fragment-types", "launch-extent", "segments-partition", "ownership",
          "loop-invariant",
          "effect-coverage", "structured-complete", "region-op-complete", "buffer-complete", "buffer-init",
          "workspace-protocol", "split-effects",
          "lookback-protocol",
          "access-complete", "coordinate-provenance", "narrowing-explicit", "bounds-justified",
          "ordered-dependence", "unordered-conflict", "buffer-visibility", "atomic-preserved"]
_registered = dict(RULES)
RULES.clear()
RULES.update({name: _registered[name] for name in _ORDER})
if set(RULES) != set(_registered):
    raise ImportError(f"verifier rules without a place in the order: {sorted(set(_registered) - set(RULES))}")


def run_rule(name: str, program: Program, kernel: Kernel | None = None) -> list[Violation]:
    """One rule's violations; a rule that cannot finish reports that as its own violation."""
    try:
        return RULES[name](program, kernel)
    except Exception as exc:  # noqa: BLE001  (a rule never turns a bad program into a traceback)
        return [Violation(name, f"the rule could not be checked on this program: {type(exc).__name__}: {exc}")]


def _share(program: Program, prover: Prover | None) -> None:
    """Let the rules of `program` ask `prover` (one that verified earlier programs of the same kernel remembers
    its verdicts: a pass changes some groups, and the queries about the others come again)."""
    if prover is not None:
        ix = index_of(program)
        if ix.prover is None:
            ix.prover = prover


def check(program: Program, kernel: Kernel | None = None, prover: Prover | None = None) -> list[Violation]:
    """Every violation of every rule, in rule order (the Z3 queries asked of `prover` where given)."""
    _share(program, prover)
    out: list[Violation] = []
    for name in RULES:
        out.extend(run_rule(name, program, kernel))
    return out


def verify(program: Program, kernel: Kernel | None = None, prover: Prover | None = None) -> None:
    """Raise `PhysicalVerifyError` for the first rule the program breaks (None when it keeps them all; the Z3
    queries asked of `prover` where given)."""
    _share(program, prover)
    for name in RULES:
        found = run_rule(name, program, kernel)
        if found:
            first = found[0]
            raise PhysicalVerifyError(first.rule, first.message, first.origin, locate(program, first),
                                      tuple(found[1:]))


__all__ = ["verify", "check", "run_rule", "Prover", "RULES", "RULE_DOCS", "PhysicalVerifyError", "Violation",
           "structure", "fragments", "ownership", "structured", "buffers", "accesses", "dependence", "atomics", "tiles",
           "persistent", "workspace", "splits"]
