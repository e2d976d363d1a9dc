"""The rule registry, violations and the error the construction verifier raises.

A rule is a function `rule(program, kernel=None) -> list[Violation]` registered under a stable name (written
as a function that reports into a `Reporter`, with the obligation it checks as its docstring: see `rule`).
Rules never raise on a malformed program: they report what is wrong. The optional `kernel` lets the rules that
check semantic preservation compare the program with the immutable KIR it came from (through origins only);
without it they check what the program alone can show.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from kir.core import Kernel, register
from kir.errors import Loc, VerifyError

from ..model import Origin, POp, Program

RuleFn = Callable[..., "list[Violation]"]
RuleBody = Callable[[Program, "Kernel | None", "Reporter"], None]

RULES: dict[str, RuleFn] = {}
RULE_DOCS: dict[str, str] = {}


@dataclass(frozen=True)
class Violation:
    """One broken rule: what is wrong, and where (the physical op's KIR origin, the group)."""

    rule: str
    message: str
    origin: Origin | None = None
    group: int | None = None

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


class PhysicalVerifyError(VerifyError):
    """A physical program broke a construction rule (the one error of the physical verifier).

    `rule` is the rule's name; the message starts with `[rule]` and the error is located at the KIR
    source of the offending item when its origin is known.
    """

    def __init__(self, rule: str, message: str, origin: Origin | None = None, loc: Loc | None = None,
                 others: tuple[Violation, ...] = ()) -> None:
        self.rule = rule
        self.origin = origin
        self.others = others
        super().__init__(f"[{rule}] {message}", loc)
        if others:
            more = "; ".join(str(v) for v in others[:3])
            self.context = f"also: {more}" + (f" (and {len(others) - 3} more)" if len(others) > 3 else "")
            self.args = (self.render(),)

    def __str__(self) -> str:
        return self.render()


def rule(name: str) -> Callable[[RuleBody], RuleFn]:
    """Register the rule `name`. The decorated function states the obligation it checks (seed 001 section 9) in
    its docstring and reports each violation into the `Reporter` it is given; what is registered (and bound to
    the function's name) is the rule `(program, kernel=None) -> list[Violation]`."""

    def deco(body: RuleBody) -> RuleFn:
        if not body.__doc__:
            raise TypeError(f"verifier rule {name}: state the obligation it checks in the docstring")

        @functools.wraps(body)
        def check(program: Program, kernel: Kernel | None = None) -> list[Violation]:
            report = Reporter(name)
            body(program, kernel, report)
            return report.found

        register(RULES, name, check, f"verifier rule {name}")
        RULE_DOCS[name] = " ".join(body.__doc__.split())
        return check

    return deco


class Reporter:
    """Collects the violations of one rule, attributing each to a physical op when there is one."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.found: list[Violation] = []

    def __call__(self, message: str, op: POp | None = None, group: int | None = None,
                 origin: Origin | None = None) -> None:
        org = origin if origin is not None else (op.origin if op is not None else None)
        self.found.append(Violation(self.name, message, org, group))


def locate(program: Program, violation: Violation) -> Loc | None:
    """The KIR source location of a violation (through its origin, else its group's location)."""
    info = program.op_info(violation.origin) if violation.origin is not None else None
    if info is not None and info.loc is not None:
        return info.loc
    if violation.group is not None:
        for g in program.groups:
            if g.id == violation.group:
                return g.loc
    return None


def describe(program: Program, op: POp) -> str:
    """`store (store at softmax.py:14)`-style naming of a physical op for messages."""
    info = program.op_info(op.origin)
    if info is None:
        return op.NAME
    where = info.where()
    return f"{op.NAME} (from {info.name}{' at ' + where if where else ''})"


__all__ = ["RULES", "RULE_DOCS", "Violation", "PhysicalVerifyError", "rule", "Reporter", "locate", "describe",
           "Kernel"]
