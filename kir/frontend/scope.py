"""Names: nested environments of locals, names without a value, and the syntactic scans that decide
loop-carried values, branch results and which locals are buffers."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .values import FValue


@dataclass(frozen=True)
class Dead:
    """A local that has no value at this point; `why` says why and what to write instead."""

    why: str


class Env:
    """One level of locals: the kernel body, a loop body, an `if` branch. Reads see the enclosing levels."""

    def __init__(self, parent: Env | None = None) -> None:
        self.parent = parent
        self.vars: dict[str, FValue] = {}
        self.dead: dict[str, Dead] = {}
        self.order: list[str] = []  # names assigned at this level, in order of first assignment

    def lookup(self, name: str) -> FValue | Dead | None:
        env: Env | None = self
        while env is not None:
            if name in env.vars:
                return env.vars[name]
            if name in env.dead:
                return env.dead[name]
            env = env.parent
        return None

    def live(self, name: str) -> FValue | None:
        r = self.lookup(name)
        return None if isinstance(r, Dead) else r

    def set(self, name: str, fv: FValue) -> None:
        self.vars[name] = fv
        self.dead.pop(name, None)
        if name not in self.order:
            self.order.append(name)

    def kill(self, name: str, why: str) -> None:
        self.vars.pop(name, None)
        self.dead[name] = Dead(why)
        if name not in self.order:
            self.order.append(name)

    def assigned(self) -> list[str]:
        return list(self.order)


# ---------------------------------------------------------------------------------------------- scans


def _walk_same_scope(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Walk statements without entering nested function, class, lambda or comprehension scopes."""
    stack = list(nodes)[::-1]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda | ast.ListComp
                      | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def assigned_names(stmts: Iterable[ast.AST]) -> list[str]:
    """Names bound (assigned, augmented, loop targets) in `stmts`, in order of first appearance."""
    out: list[str] = []
    for node in _walk_same_scope(stmts):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in out:
            out.append(node.id)
    return out


_STORE_CALLS = ("store", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_and_", "atomic_or",
                "atomic_or_", "atomic_xor", "atomic_xchg", "atomic_cas")


def store_targets(stmts: Iterable[ast.AST]) -> frozenset[str]:
    """Locals that are written through (`buf[i] = v`, `intent.store(buf, ...)`, atomics): a name assigned
    from zeros/ones/full/empty is a buffer exactly when it is one of these."""
    out: set[str] = set()

    def base_name(target: ast.AST) -> None:
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            out.add(target.value.id)
        elif isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                base_name(t)

    for node in _walk_same_scope(stmts):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                base_name(t)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            base_name(node.target)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if fname in _STORE_CALLS:
                out.add(node.args[0].id)
    return frozenset(out)
