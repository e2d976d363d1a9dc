"""Statements: assignment and unpacking, augmented and annotated assignment, expression statements, and
the diagnostics for every statement outside the kernel language."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from . import access, control
from .coerce import coerce_to, is_weak, weak_to
from .jagged_folds import lower_column_loop
from .pointwise import BINOPS, binary, dtype_arg
from .values import FValue, RefV, TupleV, TVal, describe

if TYPE_CHECKING:
    from .lower import Lowerer

_REJECTED_STMTS: dict[type, str] = {
    ast.FunctionDef: "nested function definitions are not supported in kernel bodies; define a helper at module "
                     "level and decorate it with @intent.func",
    ast.AsyncFunctionDef: "nested function definitions are not supported in kernel bodies; define a helper at "
                          "module level and decorate it with @intent.func",
    ast.ClassDef: "class definitions are not supported in kernel bodies",
    ast.Try: "try/except is not supported in kernel bodies: a compiled kernel cannot catch errors; remove the try "
             "block (out-of-range accesses are checked with checks=True)",
    ast.With: "with blocks are not supported in kernel bodies; remove the with statement",
    ast.AsyncWith: "with blocks are not supported in kernel bodies; remove the with statement",
    ast.AsyncFor: "async for is not supported in kernel bodies; use `for i in parallel(N):` or `for t in range(T):`",
    ast.Raise: "raise is not supported in kernel bodies; state conditions on shapes in requires=[...] (checked at "
               "launch)",
    ast.Assert: "assert is not supported in kernel bodies; state conditions on shapes in requires=[...] (checked at "
                "launch), or use checks=True to check indices at run time",
    ast.Global: "global declarations are not supported in kernel bodies; pass values as parameters",
    ast.Nonlocal: "nonlocal declarations are not supported in kernel bodies; pass values as parameters",
    ast.Delete: "del is not supported in kernel bodies; names simply go out of use",
    ast.Import: "imports are not allowed in kernel bodies; import at module level",
    ast.ImportFrom: "imports are not allowed in kernel bodies; import at module level",
    ast.Break: "break is not supported in kernel bodies; use a while loop whose condition stops it",
    ast.Continue: "continue is not supported in kernel bodies; put the rest of the body under an if",
}
if hasattr(ast, "TryStar"):
    _REJECTED_STMTS[ast.TryStar] = _REJECTED_STMTS[ast.Try]
if hasattr(ast, "Match"):
    _REJECTED_STMTS[ast.Match] = "match statements are not supported in kernel bodies; use if/elif/else"


def lower_stmt(lw: Lowerer, s: ast.stmt) -> None:
    if isinstance(s, ast.Assign):
        assign(lw, s)
    elif isinstance(s, ast.AugAssign):
        aug_assign(lw, s)
    elif isinstance(s, ast.AnnAssign):
        ann_assign(lw, s)
    elif isinstance(s, ast.Expr):
        if isinstance(s.value, ast.Constant) and (isinstance(s.value.value, str) or s.value.value is Ellipsis):
            return  # docstrings and `...`
        lw.expr(s.value)
    elif isinstance(s, ast.Pass):
        return
    elif isinstance(s, ast.For):
        control.lower_for(lw, s)
    elif isinstance(s, ast.While):
        control.lower_while(lw, s)
    elif isinstance(s, ast.If):
        control.lower_if(lw, s)
    elif isinstance(s, ast.Return):
        if lw.frame.kind == "kernel":
            if s.value is not None:
                raise lw.error(s, "a kernel returns nothing: write its results into Out[...] parameters, e.g. "
                                  "`out[i] = value`")
            raise lw.error(s, "`return` before the end of the kernel is not supported; put the rest under an if/else")
        raise lw.error(s, f"a helper returns once, as the last statement of its body; compute the result with "
                          f"intent.where(...) or assign it in both branches and return it at the end of "
                          f"`{lw.frame.src.name}`")
    else:
        msg = _REJECTED_STMTS.get(type(s), f"{type(s).__name__} statements are not supported in kernel bodies")
        raise lw.error(s, msg)


def assign(lw: Lowerer, node: ast.Assign) -> None:
    targets = node.targets
    plan = lw.column_folds.get(id(node))
    if plan is not None:
        lower_column_loop(lw, plan)
        return
    if len(targets) == 1 and isinstance(targets[0], ast.Subscript):
        access.store_subscript(lw, targets[0], node.value, None, node)
        return
    name = targets[0].id if len(targets) == 1 and isinstance(targets[0], ast.Name) else None
    saved = lw.alloc_target
    lw.alloc_target = (name, id(node.value)) if name in lw.frame.store_targets else None  # type: ignore[assignment]
    try:
        value = lw.expr(node.value)
    finally:
        lw.alloc_target = saved
    for t in targets:
        bind_target(lw, t, value, node, node.value)


def bind_target(lw: Lowerer, target: ast.AST, fv: FValue, node: ast.AST, value_node: ast.AST | None) -> None:
    if isinstance(target, ast.Name):
        if isinstance(fv, TVal):
            fv = lw.name_last(fv, target.id)
        lw.env.set(target.id, fv)
    elif isinstance(target, ast.Tuple | ast.List):
        for e in target.elts:
            if isinstance(e, ast.Starred):
                raise lw.error(e, "starred unpacking (*rest) is not supported in kernel bodies; unpack each value")
        if not isinstance(fv, TupleV):
            what = "a tensor value (index it instead)" if isinstance(fv, TVal | RefV) else describe(fv)
            hint = ""
            if isinstance(value_node, ast.Call) and getattr(value_node.func, "attr", None) == "sort":
                # torch.sort gives (values, indices); intent.sort gives the values unless asked
                hint = "; intent.sort gives the values only: write `values, indices = intent.sort(x, " \
                       "return_indices=True)`"
            raise lw.error(target, f"cannot unpack {what} into {len(target.elts)} names{hint}")
        if len(fv.items) != len(target.elts):
            raise lw.error(target, f"cannot unpack a tuple of {len(fv.items)} into {len(target.elts)} names")
        for e, item in zip(target.elts, fv.items):
            bind_target(lw, e, item, node, None)
    elif isinstance(target, ast.Subscript):
        access.store_subscript(lw, target, None, fv, node)
    elif isinstance(target, ast.Attribute):
        raise lw.error(target, "attributes cannot be assigned in kernel bodies; assign a name or store with x[i] = v")
    else:
        raise lw.error(target, f"cannot assign to {type(target).__name__} in a kernel body")


def aug_assign(lw: Lowerer, node: ast.AugAssign) -> None:
    if isinstance(node.target, ast.Subscript):
        access.augmented_store(lw, node)
        return
    if not isinstance(node.target, ast.Name):
        raise lw.error(node.target, "augmented assignment needs a name or an indexed tensor, e.g. `acc += v` or "
                                    "`out[i] += v`")
    sym, fn = BINOPS[type(node.op)]
    if fn is None:
        raise lw.error(node, "the `@=` operator is not supported; write intent.dot(a, b)")
    name = node.target.id
    current = lw.lookup(ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node.target))
    if isinstance(current, RefV):
        raise lw.error(node, f"`{name} {sym}= ...` would rebind the tensor `{name}`; update its elements instead: "
                             f"`{name}[...] {sym}= ...`")
    bind_target(lw, node.target, binary(lw, sym, fn, current, lw.expr(node.value), node, node.target, node.value),
                node, node.value)


def ann_assign(lw: Lowerer, node: ast.AnnAssign) -> None:
    if not isinstance(node.target, ast.Name):
        raise lw.error(node.target, "only names can be annotated in kernel bodies: `x: f32 = value`")
    if node.value is None:
        raise lw.error(node, f"`{node.target.id}` is declared without a value; write `{node.target.id}: dtype = value`")
    dtype = dtype_arg(lw, lw.expr(node.annotation), node.annotation, "an annotation in a kernel body")
    fv = lw.expr(node.value)
    if is_weak(fv):
        tv = weak_to(lw, fv, dtype, node.value, f"`{node.target.id}: {dtype}`")
    else:
        tv = coerce_to(lw, fv, dtype, None, node.value, f"`{node.target.id}: {dtype}`", node.value)
    bind_target(lw, node.target, tv, node, node.value)
