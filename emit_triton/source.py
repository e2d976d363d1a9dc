"""Generated Python source as nested statement lists, rendered once.

Emitters append statements (one line of text each) to the list the emitter is writing into; a compound
statement (`Block`: `for`, `while`, `if` without `else`; `IfElse`) holds its own lists. Indentation
exists only in `render`, from the nesting. Rendering drops what cannot change the program: a loop or an
`if` whose body is empty, an empty branch of an `if`/`else` (the other branch then runs under the
negated condition), and the branch a literal `True`/`False` condition never takes. So no `pass` is ever
needed: a non-empty list is all a Python block requires, and `while` loops are never empty (their test
is updated in their body).
"""

from __future__ import annotations

from dataclasses import dataclass, field

INDENT = "    "


@dataclass
class Block:
    """`head:` followed by `body` (`head` is `for ...`, `while ...` or `if ...`, without the colon)."""

    head: str
    body: list[Stmt] = field(default_factory=list)


@dataclass
class IfElse:
    """`if cond:` `then` `else:` `otherwise`."""

    cond: str
    then: list[Stmt] = field(default_factory=list)
    otherwise: list[Stmt] = field(default_factory=list)


Stmt = str | Block | IfElse  # a string is one simple statement (or a comment)


def _empty(stmts: list[Stmt]) -> bool:
    """Whether `stmts` render to nothing but comments (or to nothing at all)."""
    for s in stmts:
        if isinstance(s, str):
            if not s.lstrip().startswith("#"):
                return False
        elif isinstance(s, Block):
            if s.head.startswith("while") or not _empty(s.body):
                return False
        else:
            taken = [s.then] if s.cond == "True" else [s.otherwise] if s.cond == "False" else [s.then, s.otherwise]
            if not all(_empty(b) for b in taken):
                return False
    return True


def render(stmts: list[Stmt], depth: int = 0) -> list[str]:
    """The lines of `stmts` at indentation level `depth`."""
    out: list[str] = []
    pad = INDENT * depth
    for s in stmts:
        if isinstance(s, str):
            out.append(pad + s)
        elif isinstance(s, Block):
            if s.head.startswith("while"):
                assert not _empty(s.body), f"an empty while loop: {s.head}"
            elif _empty(s.body):
                continue
            out.append(f"{pad}{s.head}:")
            out += render(s.body, depth + 1)
        elif s.cond == "True":
            out += render(s.then, depth)
        elif s.cond == "False":
            out += render(s.otherwise, depth)
        else:
            then, otherwise = not _empty(s.then), not _empty(s.otherwise)
            if then:
                out.append(f"{pad}if {s.cond}:")
                out += render(s.then, depth + 1)
                if otherwise:
                    out.append(f"{pad}else:")
                    out += render(s.otherwise, depth + 1)
            elif otherwise:
                out.append(f"{pad}if not ({s.cond}):")
                out += render(s.otherwise, depth + 1)
    return out


__all__ = ["Block", "IfElse", "Stmt", "render", "INDENT"]
