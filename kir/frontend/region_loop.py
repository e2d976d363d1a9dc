"""Region folds over several subregions with the same bounds, as written:
`intent.sum(data[b:e] * x[indices[b:e]])` (a CSR row times a vector), `intent.max(scores[b:e] + bias[cols[b:e]])`.

A region fold maps the elements of one subregion; several subregions over one range are read at a common
position, so the fold is the ordered loop an author would write by hand:
`acc = identity; for k in range(b, e): acc = combine(acc, <the expression at k>)`, built here from the
expression's own syntax (each subregion `a[b:e]` read as `a[k]`)."""

from __future__ import annotations

import ast
import copy
import importlib
import itertools
from typing import TYPE_CHECKING

from .values import FValue, OpRef

if TYPE_CHECKING:
    from .lower import Lowerer

_COUNTER = itertools.count()
# identity (a weakly typed literal) and combine of each built-in kind
_KINDS = {"sum": ("0", "+"), "mean": ("0", "+"), "prod": ("1", "*"), "max": ("-float('inf')", "maximum"),
          "min": ("float('inf')", "minimum"), "any": ("False", "|"), "all": ("True", "&")}


class _AtPosition(ast.NodeTransformer):
    def __init__(self, subs: list[ast.Subscript], k: str) -> None:
        self.subs = {id(s) for s in subs}
        self.k = k

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:  # noqa: N802 (ast's naming)
        if id(node) not in self.subs:
            return self.generic_visit(node)
        elts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        at = [ast.Name(self.k, ast.Load()) if isinstance(e, ast.Slice) and (e.lower is not None or e.upper is not None)
              else e for e in elts]
        index = ast.Tuple(at, ast.Load()) if len(at) > 1 else at[0]
        return ast.copy_location(ast.Subscript(node.value, index, ast.Load()), node)


_SCANS = {"cumsum": "sum", "cumprod": "prod", "cummax": "max", "cummin": "min"}


def scan_as_loop(lw: Lowerer, name: str, target: ast.Subscript, src: ast.Subscript, call: ast.Call, begin: FValue,
                 end: FValue, exclusive: bool) -> None:
    """`out[b:e, :] = intent.<name>(x[b:e, :], axis=0)`: the running value carried over the rows, the kept axes a
    tile, each row stored as the loop reaches it."""
    n = next(_COUNTER)
    acc, k, lo, hi, fn = (f"__region{n}_{part}" for part in ("acc", "k", "begin", "end", "combine"))
    identity, combine = _KINDS[_SCANS[name]]
    lw.env.set(lo, begin)
    lw.env.set(hi, end)
    element = _AtPosition([src], k).visit(src)  # a new node: the subscripts themselves are replaced
    at = _AtPosition([target], k).visit(target)
    assert isinstance(at, ast.Subscript)
    at.ctx = ast.Store()
    step = _combine(lw, combine, fn, acc, element)
    store = ast.Assign([at], ast.Name(acc, ast.Load()))
    update = ast.Assign([ast.Name(acc, ast.Store())], step)
    body = [
        ast.Assign([ast.Name(acc, ast.Store())], ast.parse(identity, mode="eval").body),
        ast.For(ast.Name(k, ast.Store()), ast.Call(ast.Name("range", ast.Load()), [ast.Name(lo, ast.Load()),
                                                                                   ast.Name(hi, ast.Load())], []),
                [store, update] if exclusive else [update, store], []),
    ]
    for stmt in body:
        for node in ast.walk(stmt):
            ast.copy_location(node, call)
    lw.block(body)


def _combine(lw: Lowerer, combine: str, fn: str, acc: str, element: ast.expr) -> ast.expr:
    if combine in ("maximum", "minimum"):
        spellings = importlib.import_module("intent.ops").SPELLINGS  # as suggest.py: kir does not import intent
        lw.env.set(fn, OpRef(combine, spellings[combine]))
        return ast.Call(ast.Name(fn, ast.Load()), [ast.Name(acc, ast.Load()), element], [])
    op = {"+": ast.Add(), "*": ast.Mult(), "|": ast.BitOr(), "&": ast.BitAnd()}[combine]
    return ast.BinOp(ast.Name(acc, ast.Load()), op, element)


def fold_as_loop(lw: Lowerer, name: str, arg: ast.AST, call: ast.Call, subs: list[ast.Subscript], begin: FValue,
                 end: FValue) -> FValue:
    """`intent.<name>(<arg>)` over subregions `subs` sharing the bounds `begin:end`, as an ordered loop."""
    if name not in _KINDS:
        raise lw.error(call, f"intent.{name} over several subregions with the same bounds is not supported; "
                             f"write the ordered loop: `for k in range(b, e): ...`")
    n = next(_COUNTER)
    acc, k, lo, hi, fn = (f"__region{n}_{part}" for part in ("acc", "k", "begin", "end", "combine"))
    identity, combine = _KINDS[name]
    lw.env.set(lo, begin)
    lw.env.set(hi, end)
    memo: dict[int, object] = {}
    copied = copy.deepcopy(arg, memo)
    element = _AtPosition([memo[id(s)] for s in subs], k).visit(copied)  # type: ignore[misc]
    step = _combine(lw, combine, fn, acc, element)
    body = [
        ast.Assign([ast.Name(acc, ast.Store())], ast.parse(identity, mode="eval").body),
        ast.For(ast.Name(k, ast.Store()), ast.Call(ast.Name("range", ast.Load()), [ast.Name(lo, ast.Load()),
                                                                                   ast.Name(hi, ast.Load())], []),
                [ast.Assign([ast.Name(acc, ast.Store())], step)], []),
    ]
    for stmt in body:
        for node in ast.walk(stmt):
            ast.copy_location(node, call)
    ast.fix_missing_locations(ast.Module(body, []))
    lw.block(body)
    total = lw.expr(ast.copy_location(ast.Name(acc, ast.Load()), call))
    if name != "mean":
        return total
    count = ast.BinOp(ast.Name(hi, ast.Load()), ast.Sub(), ast.Name(lo, ast.Load()))
    mean = ast.BinOp(ast.Name(acc, ast.Load()), ast.Div(), ast.Call(ast.Attribute(count, "to", ast.Load()),
                                                                      [ast.Name("__region_f32", ast.Load())], []))
    from .values import DTypeLit

    lw.env.set("__region_f32", DTypeLit(total.dtype))  # type: ignore[union-attr]
    for node in ast.walk(mean):
        ast.copy_location(node, call)
    return lw.expr(mean)
