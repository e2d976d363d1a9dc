"""The author's source: the function's AST and the map from AST positions to file:line:col."""

from __future__ import annotations

import ast
import inspect
import linecache
import os
from dataclasses import dataclass, field
from types import CodeType

from ..errors import DiagnosticError, Loc, register_source


@dataclass
class SourceInfo:
    """A function's source as parsed; `loc` maps AST nodes back to the real file, line and column."""

    file: str
    first_line: int  # file line number of the first parsed line
    indent: int  # columns removed from each dedented line
    tree: ast.FunctionDef
    dedented: frozenset[int] = field(default_factory=frozenset)  # parsed line numbers that lost `indent`

    def loc(self, node: ast.AST | None) -> Loc:
        if node is None or not hasattr(node, "lineno"):
            return self.def_loc
        line = node.lineno  # type: ignore[attr-defined]
        col = node.col_offset + (self.indent if line in self.dedented else 0)  # type: ignore[attr-defined]
        return Loc(self.file, self.first_line + line - 1, col + 1)

    @property
    def def_loc(self) -> Loc:
        return self.loc(self.tree) if hasattr(self.tree, "lineno") else Loc(self.file, self.first_line, 1)

    @property
    def name(self) -> str:
        return self.tree.name


# Code objects compare equal across files when their bytecode and line numbers agree, so the file is part
# of the key.
_CACHE: dict[tuple[str, CodeType], SourceInfo] = {}


def function_source(fn: object) -> SourceInfo:
    """Parse the source of a kernel or helper function (cached per code object)."""
    code = getattr(fn, "__code__", None)
    qual = getattr(fn, "__qualname__", repr(fn))
    if not isinstance(code, CodeType):
        raise DiagnosticError(f"{qual} is not a Python function; kernels and helpers are `def` functions")
    file = code.co_filename
    hit = _CACHE.get((file, code))
    if hit is not None:
        return hit
    where = Loc(file, code.co_firstlineno, 1)
    try:
        lines, start = inspect.getsourcelines(fn)  # type: ignore[arg-type]
    except (OSError, TypeError) as exc:
        raise DiagnosticError(f"cannot read the source of {qual} ({exc}); kernels are compiled from their source, "
                              f"so define them in a file", where) from None
    if not os.path.exists(file):  # a source that only linecache knows (exec'd text, notebooks)
        register_source(file, "".join(linecache.getlines(file)))
    indent = len(lines[0]) - len(lines[0].lstrip(" \t"))
    prefix = lines[0][:indent]
    dedented: set[int] = set()
    text_lines = []
    for n, line in enumerate(lines, start=1):
        if line.startswith(prefix):
            text_lines.append(line[indent:])
            dedented.add(n)
        else:  # blank lines, and continuation lines inside brackets or strings
            text_lines.append(line.lstrip(" \t") if not line.strip() else line)
    try:
        module = ast.parse("".join(text_lines))
    except SyntaxError as exc:
        raise DiagnosticError(f"cannot parse the source of {qual}: {exc.msg}", where) from None
    defs = [n for n in module.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not defs:
        raise DiagnosticError(f"{qual} is not a `def` function (a lambda cannot be a kernel or helper)", where)
    tree = defs[0]
    info = SourceInfo(file, start, indent, tree, frozenset(dedented))  # type: ignore[arg-type]
    if isinstance(tree, ast.AsyncFunctionDef):
        raise DiagnosticError("kernels and helpers cannot be `async def` functions", info.loc(tree))
    _CACHE[(file, code)] = info
    return info


def closure_vars(fn: object) -> dict[str, object]:
    """The function's closure cells by name (empty cells are left out)."""
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None) or ()
    out: dict[str, object] = {}
    if code is None:
        return out
    for name, cell in zip(code.co_freevars, cells):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            continue
    return out
