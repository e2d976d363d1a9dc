"""Jagged subregions keeping whole trailing axes, as written: `intent.sum(values[b:e, :], axis=0)`,
`intent.argmax(values[b:e, :], axis=0)`, `intent.reduce((values[b:e, :] * w[b:e, :], ...), welford, axis=0,
identity=...)`, `out[b:e, :] = intent.cumsum(values[b:e, :], axis=0)`.

A jagged scan whose kept axes are whole (`:`) in its target and source is a region scan per point of those axes
(`scan_per_column`: `for c in parallel(D): out[b:e, c] = intent.cumsum(values[b:e, c], axis=0)`), so its instances
run at once and a long segment splits over programs like any region scan; other jagged scans, and the folds below,
are ordered loops (a fold stored whole in a `parallel` body of such stores is a region fold per column instead:
jagged_folds.py).

The fold runs along the data-dependent axis with the kept axes as the carried tile, as the ordered loop an author
would write by hand: `acc = identity; for k in range(b, e): acc = combine(acc, <the expression at k>)`, built here
from the expression's own syntax (each subregion `a[b:e, :]` read as `a[k, :]`). Several scalar subregions with
the same bounds (`intent.sum(data[b:e] * x[indices[b:e]])`) are one region fold instead (`region.find_region`)."""

from __future__ import annotations

import ast
import copy
import importlib
import itertools
from typing import TYPE_CHECKING

from ..dtypes import DType
from .values import DTypeLit, FValue, OpRef, TupleV

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


def _whole(e: ast.expr) -> bool:
    """Whether an index item is a bare `:` (a whole kept axis)."""
    return isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None


def _items(sub: ast.Subscript) -> list[ast.expr]:
    return list(sub.slice.elts) if isinstance(sub.slice, ast.Tuple) else [sub.slice]


def scan_per_column(lw: Lowerer, scan: FValue, target: ast.Subscript, src: ast.Subscript, call: ast.Call,
                    axis: int, extents: tuple, reverse: bool, exclusive: bool) -> bool:
    """`out[b:e, :] = intent.<scan>(x[b:e, :], axis=0)` as a region scan per point of the kept axes:
    `for c in parallel(D): out[b:e, c] = intent.<scan>(x[b:e, c], axis=0)`, so that each column of a segment is a
    region scan (its instances run at once, a long segment split over programs) rather than one ordered loop over
    the segment's rows. `extents`: the target's axes; False (nothing written) where a kept axis is not a bare `:` of
    the same extent in both, which the ordered loop handles."""
    dst_items, src_items = _items(target), _items(src)
    kept = [k for k, e in enumerate(dst_items) if k != axis]
    if len(dst_items) != len(src_items) or len(extents) != len(dst_items) or not kept or not all(
            _whole(dst_items[k]) and _whole(src_items[k]) for k in kept):
        return False
    source = lw.expr(src.value)
    shape = getattr(getattr(source, "type", None), "shape", None)
    if shape is None or len(shape) != len(extents) or any(str(shape[k]) != str(extents[k]) for k in kept):
        return False
    from .values import DimExpr

    n = next(_COUNTER)
    cols = [f"__region{n}_col{k}" for k in kept]
    dims = [f"__region{n}_extent{k}" for k in kept]
    fn, loop = f"__region{n}_scan", f"__region{n}_parallel"
    for name, k in zip(dims, kept):
        lw.env.set(name, DimExpr(extents[k]))
    lw.env.set(fn, scan)
    lw.env.set(loop, OpRef("parallel", importlib.import_module("intent.ops").SPELLINGS["parallel"]))

    def at_columns(sub: ast.Subscript, items: list[ast.expr], ctx: ast.expr_context) -> ast.Subscript:
        index = [copy.deepcopy(e) for e in items]
        for k, c in zip(kept, cols):
            index[k] = ast.Name(c, ast.Load())
        return ast.Subscript(copy.deepcopy(sub.value), ast.Tuple(index, ast.Load()), ctx)

    value = ast.Call(ast.Name(fn, ast.Load()), [at_columns(src, src_items, ast.Load())],
                     [ast.keyword("axis", ast.Constant(axis)), ast.keyword("reverse", ast.Constant(reverse)),
                      ast.keyword("exclusive", ast.Constant(exclusive))])
    loop_target: ast.expr = ast.Tuple([ast.Name(c, ast.Store()) for c in cols], ast.Store()) if len(cols) > 1 \
        else ast.Name(cols[0], ast.Store())
    stmt = ast.For(loop_target, ast.Call(ast.Name(loop, ast.Load()), [ast.Name(d, ast.Load()) for d in dims],
                                         []), [ast.Assign([at_columns(target, dst_items, ast.Store())], value)], [])
    for node in ast.walk(stmt):
        ast.copy_location(node, call)
    lw.block([stmt])
    return True


def _combine(lw: Lowerer, combine: str, fn: str, acc: str, element: ast.expr) -> ast.expr:
    if combine in ("maximum", "minimum"):
        spellings = importlib.import_module("intent.ops").SPELLINGS  # as suggest.py: kir does not import intent
        lw.env.set(fn, OpRef(combine, spellings[combine]))
        return ast.Call(ast.Name(fn, ast.Load()), [ast.Name(acc, ast.Load()), element], [])
    op = {"+": ast.Add(), "*": ast.Mult(), "|": ast.BitOr(), "&": ast.BitAnd()}[combine]
    return ast.BinOp(ast.Name(acc, ast.Load()), op, element)


def _run_loop(lw: Lowerer, call: ast.Call, init: list[ast.stmt], k: str, lo: str, hi: str,
              step: list[ast.stmt]) -> None:
    """`init; for k in range(lo, hi): step`, located at the call."""
    body = [*init, ast.For(ast.Name(k, ast.Store()), ast.Call(ast.Name("range", ast.Load()),
                                                            [ast.Name(lo, ast.Load()), ast.Name(hi, ast.Load())], []),
                           step, [])]
    for stmt in body:
        for node in ast.walk(stmt):
            ast.copy_location(node, call)
    ast.fix_missing_locations(ast.Module(body, []))
    lw.block(body)


def _element(arg: ast.AST, subs: list[ast.Subscript], k: str) -> ast.expr:
    """A copy of `arg` with each subregion `a[b:e]` read as `a[k]`."""
    memo: dict[int, object] = {}
    copied = copy.deepcopy(arg, memo)
    return _AtPosition([memo[id(s)] for s in subs], k).visit(copied)  # type: ignore[misc,return-value]


def _name(n: str) -> ast.Name:
    return ast.Name(n, ast.Load())


def _assign(n: str, value: ast.expr) -> ast.Assign:
    return ast.Assign([ast.Name(n, ast.Store())], value)


def _arg_fold(lw: Lowerer, name: str, arg: ast.AST, call: ast.Call, subs: list[ast.Subscript], n: int) -> FValue:
    """argmax/argmin as an ordered loop carrying (best value, its position in the range): the first extreme
    wins, NaN counts as the extreme (the first NaN), an empty range gives -1, as the other reductions."""
    best, at, v, take, k, lo, hi, where, i64 = (f"__region{n}_{part}" for part in
                                                 ("best", "at", "elem", "take", "k", "begin", "end", "where", "i64"))
    spellings = importlib.import_module("intent.ops").SPELLINGS  # as suggest.py: kir does not import intent
    lw.env.set(where, OpRef("where", spellings["where"]))
    lw.env.set(i64, DTypeLit(DType.i64))
    better = ast.Gt() if name == "argmax" else ast.Lt()
    # no extreme yet (`at < 0`), a strictly better element, or the first NaN after a number
    first = ast.Compare(_name(at), [ast.Lt()], [ast.Constant(0)])
    strictly = ast.Compare(_name(v), [better], [_name(best)])
    nan = ast.BinOp(ast.Compare(_name(v), [ast.NotEq()], [_name(v)]), ast.BitAnd(),
                    ast.Compare(_name(best), [ast.Eq()], [_name(best)]))
    cond = ast.BinOp(ast.BinOp(first, ast.BitOr(), strictly), ast.BitOr(), nan)
    position = ast.Call(ast.Attribute(ast.BinOp(_name(k), ast.Sub(), _name(lo)), "to", ast.Load()), [_name(i64)], [])
    step = [_assign(v, _element(arg, subs, k)), _assign(take, cond),
            _assign(best, ast.Call(_name(where), [_name(take), _name(v), _name(best)], [])),
            _assign(at, ast.Call(_name(where), [_name(take), position, _name(at)], []))]
    init = [_assign(best, ast.Constant(0)),  # never read: the first element is always taken
            _assign(at, ast.Call(_name(i64), [ast.UnaryOp(ast.USub(), ast.Constant(1))], []))]
    _run_loop(lw, call, init, k, lo, hi, step)
    return lw.expr(ast.copy_location(_name(at), call))


def custom_fold_as_loop(lw: Lowerer, values: ast.AST, combine: FValue, identity: ast.AST, call: ast.Call,
                        subs: list[ast.Subscript], begin: FValue, end: FValue) -> FValue:
    """`intent.reduce(values, combine, identity=...)` over subregions sharing the bounds `begin:end`, as the
    ordered loop `acc = identity; for k in range(b, e): acc = combine(acc, values at k)`."""
    n = next(_COUNTER)
    k, lo, hi, fn = (f"__region{n}_{part}" for part in ("k", "begin", "end", "combine"))
    lw.env.set(lo, begin)
    lw.env.set(hi, end)
    lw.env.set(fn, combine)
    as_tuple = isinstance(values, ast.Tuple | ast.List)
    width = len(values.elts) if as_tuple else 1  # type: ignore[attr-defined]
    accs = [f"__region{n}_acc{i}" for i in range(width)]
    element = _element(values, subs, k)
    if as_tuple:
        element = ast.Tuple(list(element.elts), ast.Load())  # type: ignore[attr-defined]
        target: ast.expr = ast.Tuple([ast.Name(a, ast.Store()) for a in accs], ast.Store())
        carried: ast.expr = ast.Tuple([_name(a) for a in accs], ast.Load())
    else:
        target, carried = ast.Name(accs[0], ast.Store()), _name(accs[0])
    init = ast.Assign([copy.deepcopy(target)], copy.deepcopy(identity))  # type: ignore[arg-type]
    step = ast.Assign([target], ast.Call(_name(fn), [carried, element], []))
    _run_loop(lw, call, [init], k, lo, hi, [step])
    outs = [lw.expr(ast.copy_location(_name(a), call)) for a in accs]
    return TupleV(tuple(outs)) if as_tuple else outs[0]


def fold_as_loop(lw: Lowerer, name: str, arg: ast.AST, call: ast.Call, subs: list[ast.Subscript], begin: FValue,
                 end: FValue) -> FValue:
    """`intent.<name>(<arg>)` over subregions `subs` sharing the bounds `begin:end`, as an ordered loop."""
    n = next(_COUNTER)
    acc, k, lo, hi, fn = (f"__region{n}_{part}" for part in ("acc", "k", "begin", "end", "combine"))
    lw.env.set(lo, begin)
    lw.env.set(hi, end)
    if name in ("argmax", "argmin"):
        return _arg_fold(lw, name, arg, call, subs, n)
    if name not in _KINDS:
        raise lw.error(call, f"intent.{name} over several subregions with the same bounds is not supported; "
                             f"write the ordered loop: `for k in range(b, e): ...`")
    identity, combine = _KINDS[name]
    step = _combine(lw, combine, fn, acc, _element(arg, subs, k))
    _run_loop(lw, call, [_assign(acc, ast.parse(identity, mode="eval").body)], k, lo, hi, [_assign(acc, step)])
    total = lw.expr(ast.copy_location(ast.Name(acc, ast.Load()), call))
    if name != "mean":
        return total
    count = ast.BinOp(ast.Name(hi, ast.Load()), ast.Sub(), ast.Name(lo, ast.Load()))
    mean = ast.BinOp(ast.Name(acc, ast.Load()), ast.Div(), ast.Call(ast.Attribute(count, "to", ast.Load()),
                                                                      [ast.Name("__region_f32", ast.Load())], []))
    lw.env.set("__region_f32", DTypeLit(total.dtype))  # type: ignore[union-attr]
    for node in ast.walk(mean):
        ast.copy_location(node, call)
    return lw.expr(mean)
