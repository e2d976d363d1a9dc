"""Jagged folds as region folds per column: inside `for s in parallel(S)`, a stored reduction of a jagged subregion
keeping whole axes,

    out[s, :] = intent.mean(values[b:e, :], axis=0)

is written as the region folds of its columns,

    for c in parallel(D):
        out[s, c] = intent.mean(values[b:e, c])

so that the segments' columns run at once (several a program: enlarge-ownership packs a segment's columns) and a
long segment splits over programs (split-segments; beside jagged scans of the same body, scan-folds), instead of one
ordered loop over the segment's rows in one program (`region_loop.fold_as_loop`).

The rewrite is decided for the whole `parallel` body before it is lowered (`plan_body`), since construction makes
one (segments, columns) workset of the body only where nothing else in it has effects: the body may hold such
stores, jagged scans that `region_loop.scan_per_column` writes per column, and names bound to pure scalar
expressions (the bounds `b, e = offsets[s], offsets[s + 1]`), all their column loops over the same axes, none of its
stores writing a buffer the body reads. The reduced expression must be elementwise in the subregions
(`values[b:e, :] * w[b:e, :]`, `intent.abs(...)`, scalars, `.to(dtype)`); the target's axes beyond points are bare
`:` matching the kept axes. Any other body keeps the ordered loops, as before."""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..dims import Dim
from ..errors import DiagnosticError
from ..pointwise import UnaryFn
from .region import SCAN_KINDS, _candidates
from .values import DimExpr, DTypeLit, FValue, ModuleRef, Num, OpRef, RefV, TVal

if TYPE_CHECKING:
    from .lower import Lowerer

_FOLDS = frozenset({"sum", "prod", "max", "min", "any", "all", "mean", "argmax", "argmin", "reduce"})
# intent operations applied per element: the column of their result is their result on the column
_ELEMENTWISE = frozenset({fn.value for fn in UnaryFn if fn is not UnaryFn.not_}
                         | {"maximum", "minimum", "pow", "where", "clamp", "lerp", "bitcast", "zeros_like", "ones_like",
                            "full_like"})
_PURE_METHODS = frozenset({"to"})
_COUNTER = itertools.count()


@dataclass(frozen=True)
class ColumnLoop:
    """The statement that replaces a jagged fold store: `for c.. in parallel(D..): <store of column c..>`, with the
    names it reads that the body does not bind."""

    stmt: ast.For
    env: tuple[tuple[str, FValue], ...]


def lower_column_loop(lw: Lowerer, plan: ColumnLoop) -> None:
    for name, fv in plan.env:
        lw.env.set(name, fv)
    lw.block([plan.stmt])


def _items(sub: ast.Subscript) -> list[ast.expr]:
    return list(sub.slice.elts) if isinstance(sub.slice, ast.Tuple) else [sub.slice]


def _whole(e: ast.expr) -> bool:
    return isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None


def _bounded(e: ast.expr) -> bool:
    return isinstance(e, ast.Slice) and e.lower is not None and e.upper is not None and e.step is None


class _Body:
    """What the body binds so far: names of scalars (the bounds, loop indices) and other names."""

    def __init__(self, lw: Lowerer) -> None:
        self.lw = lw
        self.local: dict[str, bool] = {}  # name bound in the body -> whether it is a scalar

    def value(self, node: ast.expr) -> FValue | None:
        """`node` (a name or an attribute of one) as the frontend sees it, without lowering anything."""
        if isinstance(node, ast.Attribute):  # `intent.sum`: only a module's attributes (nothing is lowered)
            if not isinstance(self.value(node.value), ModuleRef):
                return None
        elif not isinstance(node, ast.Name) or node.id in self.local:
            return None
        try:
            return self.lw.expr(node)
        except DiagnosticError:
            return None

    def op(self, call: ast.Call) -> str | None:
        fv = self.value(call.func)
        return fv.name if isinstance(fv, OpRef) else None

    def ref(self, node: ast.expr) -> RefV | None:
        fv = self.value(node)
        return fv if isinstance(fv, RefV) else None

    def scalar(self, node: ast.expr) -> bool:
        """Whether `node` is a scalar that reads no subregion, calls nothing with effects and lowers the same in
        every column."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, bool | int | float)
        if isinstance(node, ast.Name):
            if node.id in self.local:
                return self.local[node.id]
            fv = self.value(node)
            return isinstance(fv, Num | DimExpr) or isinstance(fv, TVal) and not fv.shape
        if isinstance(node, ast.Subscript):
            ref = self.ref(node.value)
            items = _items(node)
            return ref is not None and len(items) == len(ref.type.shape) and all(
                not isinstance(e, ast.Slice | ast.Starred) and self.scalar(e) for e in items)
        if isinstance(node, ast.BinOp):
            return self.scalar(node.left) and self.scalar(node.right)
        if isinstance(node, ast.UnaryOp):
            return self.scalar(node.operand)
        if isinstance(node, ast.BoolOp):
            return all(self.scalar(v) for v in node.values)
        if isinstance(node, ast.Compare):
            return self.scalar(node.left) and all(self.scalar(c) for c in node.comparators)
        if isinstance(node, ast.IfExp):
            return self.scalar(node.test) and self.scalar(node.body) and self.scalar(node.orelse)
        if isinstance(node, ast.Call):
            return self._pure_call(node, self.scalar)
        return False

    def _pure_call(self, node: ast.Call, arg_ok) -> bool:  # noqa: ANN001 (a predicate over argument nodes)
        args = [*node.args, *(k.value for k in node.keywords)]
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return False
        if isinstance(node.func, ast.Attribute) and node.func.attr in _PURE_METHODS \
                and not isinstance(self.value(node.func), OpRef):
            return arg_ok(node.func.value) and all(self._dtype(a) for a in args)
        if self.op(node) not in _ELEMENTWISE:
            return False
        return all(arg_ok(a) or self._dtype(a) for a in args)

    def _dtype(self, node: ast.expr) -> bool:
        return isinstance(self.value(node), DTypeLit)

    def elementwise(self, node: ast.expr, subs: list[ast.Subscript]) -> bool:
        """Whether `node` is an elementwise expression of the subregions `subs` and scalars."""
        if any(node is s for s in subs):
            return True
        if self.scalar(node):
            return True
        if isinstance(node, ast.BinOp):
            return self.elementwise(node.left, subs) and self.elementwise(node.right, subs)
        if isinstance(node, ast.UnaryOp):
            return self.elementwise(node.operand, subs)
        if isinstance(node, ast.BoolOp):
            return all(self.elementwise(v, subs) for v in node.values)
        if isinstance(node, ast.Compare):
            return self.elementwise(node.left, subs) and all(self.elementwise(c, subs) for c in node.comparators)
        if isinstance(node, ast.IfExp):
            return all(self.elementwise(n, subs) for n in (node.test, node.body, node.orelse))
        if isinstance(node, ast.Call):
            return self._pure_call(node, lambda a: self.elementwise(a, subs))
        return False


@dataclass(frozen=True)
class _Jagged:
    """The jagged subregions of one reduction: where their data-dependent axis is among the kept (non-point)
    axes, and the kept axes' extents (as text)."""

    subs: list[ast.Subscript]
    axis: int
    kept: tuple[str, ...]
    extents: tuple[Dim, ...]  # the kept axes'


def _jagged(body: _Body, nodes: list[ast.AST]) -> _Jagged | None:
    subs = _candidates(nodes)
    if not subs:
        return None
    shapes: set[tuple[str, int, tuple[str, ...]]] = set()
    extents: tuple[Dim, ...] = ()
    for sub in subs:
        ref = body.ref(sub.value)
        if ref is None:
            return None
        items = _items(sub)
        rank = len(ref.type.shape)
        if len(items) > rank:
            return None
        items += [ast.Slice()] * (rank - len(items))
        bounded = [k for k, e in enumerate(items) if _bounded(e)]
        if len(bounded) != 1 or any(isinstance(e, ast.Slice) and not (_whole(e) or _bounded(e)) for e in items):
            return None
        if any(not isinstance(e, ast.Slice) and not body.scalar(e) for e in items):
            return None
        kept = [k for k, e in enumerate(items) if isinstance(e, ast.Slice)]
        if len(kept) < 2:
            return None  # a subregion of scalars: a region fold as written
        extents = tuple(ref.type.shape[k] for k in kept)
        shapes.add((ast.dump(items[bounded[0]]), kept.index(bounded[0]), tuple(map(str, extents))))
    if len(shapes) != 1:
        return None  # different bounds or shapes: the frontend's own diagnostics say which
    (_, axis, kept_extents), = shapes
    return _Jagged(subs, axis, kept_extents, extents)


def _static_int(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


@dataclass(frozen=True)
class _Fold:
    """One reduction of jagged subregions along their data-dependent axis, as bound to its spelling."""

    call: ast.Call
    args: dict[str, ast.expr]
    jag: _Jagged
    components: list[ast.expr]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(e for k, e in enumerate(self.jag.kept) if k != self.jag.axis)


def _fold_call(body: _Body, call: ast.Call, width: int) -> _Fold | None:
    """`intent.<fold>(<elementwise of values[b:e, :]>, axis=0)` giving `width` values, or None."""
    name = body.op(call)
    if name not in _FOLDS:
        return None
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    fv = body.value(call.func)
    assert isinstance(fv, OpRef)
    try:
        bound = inspect.signature(fv.fn).bind(*call.args, **{k.arg: k.value for k in call.keywords if k.arg})
    except TypeError:
        return None
    args = dict(bound.arguments)
    source = args.get("values" if name == "reduce" else "x")
    if source is None:
        return None
    components = list(source.elts) if name == "reduce" and isinstance(source, ast.Tuple) else [source]
    if len(components) != width:
        return None
    jag = _jagged(body, components)
    if jag is None or not all(body.elementwise(c, jag.subs) for c in components):
        return None
    axis = _static_int(args.get("axis"))
    keepdims = args.get("keepdims")
    if axis is None or not -len(jag.kept) <= axis < len(jag.kept) or axis % len(jag.kept) != jag.axis:
        return None
    if keepdims is not None and not (isinstance(keepdims, ast.Constant) and keepdims.value is False):
        return None
    return _Fold(call, args, jag, components)


def _fold_store(body: _Body, st: ast.Assign) -> tuple[ColumnLoop, tuple[str, ...]] | None:
    """`out[s, :] = intent.<fold>(<elementwise of values[b:e, :]>, axis=0)` (or a tuple of such targets for a
    reduce of several values; or a single target given an elementwise expression of such folds and scalars,
    `intent.sum(...) / n`) as a loop over the kept axes (and their extents), or None."""
    if len(st.targets) != 1:
        return None
    target = st.targets[0]
    targets = list(target.elts) if isinstance(target, ast.Tuple) else [target]
    if not targets or not all(isinstance(t, ast.Subscript) for t in targets):
        return None
    if isinstance(st.value, ast.Call) and body.op(st.value) in _FOLDS:
        folds = [_fold_call(body, st.value, len(targets))]
    elif len(targets) == 1:
        folds = [_fold_call(body, n, 1) for n in ast.walk(st.value) if isinstance(n, ast.Call)
                 and body.op(n) in _FOLDS]
        if not folds or not body.elementwise(st.value, [f.call for f in folds if f is not None]):
            return None
    else:
        return None
    if any(f is None for f in folds) or len({f.columns for f in folds}) != 1:  # type: ignore[union-attr]
        return None
    columns = list(folds[0].columns)  # type: ignore[union-attr]
    for t in targets:
        ref = body.ref(t.value)
        if ref is None:
            return None
        items = _items(t)
        if len(items) > len(ref.type.shape):
            return None
        items += [ast.Slice()] * (len(ref.type.shape) - len(items))
        whole = [k for k, e in enumerate(items) if isinstance(e, ast.Slice)]
        if not all(_whole(items[k]) for k in whole) or [str(ref.type.shape[k]) for k in whole] != columns:
            return None
        if not all(body.scalar(e) for e in items if not isinstance(e, ast.Slice)):
            return None
    return _rewrite(body, st, targets, folds), tuple(columns)  # type: ignore[arg-type]


def _at_columns(sub: ast.Subscript, rank: int, cols: list[str], skip: int | None) -> ast.Subscript:
    """`sub` with its whole axes (but the `skip`-th slice, the data-dependent one) read at the columns."""
    items = [copy.deepcopy(e) for e in _items(sub)]
    items += [ast.Slice()] * (rank - len(items))
    slices = [k for k, e in enumerate(items) if isinstance(e, ast.Slice)]
    at = iter(cols)
    for n, k in enumerate(slices):
        if n != skip:
            items[k] = ast.copy_location(ast.Name(next(at), ast.Load()), sub)
    index = ast.copy_location(ast.Tuple(items, ast.Load()), sub.slice)
    return ast.copy_location(ast.Subscript(copy.deepcopy(sub.value), index, sub.ctx), sub)


def _call_at(body: _Body, fold: _Fold, cols: list[str]) -> ast.Call:
    """The fold of one column: its subregions read at the columns, without `axis` and `keepdims`."""
    memo: dict[int, object] = {}
    components = [copy.deepcopy(c, memo) for c in fold.components]
    column_of = {id(memo[id(s)]): _at_columns(s, len(body.ref(s.value).type.shape), cols,  # type: ignore
                                              fold.jag.axis) for s in fold.jag.subs}

    class _Columns(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:  # noqa: N802 (ast's naming)
            hit = column_of.get(id(node))
            return hit if hit is not None else self.generic_visit(node)

    components = [_Columns().visit(c) for c in components]
    source: ast.expr = ast.Tuple(components, ast.Load()) if isinstance(fold.args.get("values"), ast.Tuple) \
        else components[0]
    keywords = [ast.keyword(k, source if k in ("x", "values") else copy.deepcopy(v))
                for k, v in fold.args.items() if k not in ("axis", "keepdims")]
    return ast.copy_location(ast.Call(copy.deepcopy(fold.call.func), [], keywords), fold.call)


def _rewrite(body: _Body, st: ast.Assign, targets: list[ast.Subscript], folds: list[_Fold]) -> ColumnLoop:
    n = next(_COUNTER)
    jag = folds[0].jag
    width = len(jag.kept) - 1
    cols = [f"__columns{n}_c{k}" for k in range(width)]
    dims = [f"__columns{n}_extent{k}" for k in range(width)]
    loop = f"__columns{n}_parallel"
    env: list[tuple[str, FValue]] = [(loop, OpRef("parallel",
                                                  importlib.import_module("intent.ops").SPELLINGS["parallel"]))]
    env += [(d, DimExpr(x)) for d, x in zip(dims, [x for k, x in enumerate(jag.extents) if k != jag.axis])]
    memo: dict[int, object] = {}
    value = copy.deepcopy(st.value, memo)
    at = {id(memo[id(f.call)]): _call_at(body, f, cols) for f in folds}

    class _Folds(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:  # noqa: N802 (ast's naming)
            hit = at.get(id(node))
            return hit if hit is not None else self.generic_visit(node)

    value = _Folds().visit(value)
    stores = [_at_columns(t, len(body.ref(t.value).type.shape), cols, None) for t in targets]  # type: ignore
    for s in stores:
        s.ctx = ast.Store()
    target: ast.expr = ast.Tuple(stores, ast.Store()) if isinstance(st.targets[0], ast.Tuple) else stores[0]
    index: ast.expr = ast.Tuple([ast.Name(c, ast.Store()) for c in cols], ast.Store()) if width > 1 \
        else ast.Name(cols[0], ast.Store())
    loop_stmt = ast.For(index, ast.Call(ast.Name(loop, ast.Load()), [ast.Name(d, ast.Load()) for d in dims], []),
                        [ast.Assign([target], value)], [])
    # the loop and the store at the statement; the value's nodes keep their own places (new ones their parent's)
    for node in (loop_stmt, loop_stmt.iter, loop_stmt.iter.func, *loop_stmt.iter.args, index, *ast.walk(index),
                 loop_stmt.body[0], target):
        ast.copy_location(node, st)
    ast.fix_missing_locations(loop_stmt)
    return ColumnLoop(loop_stmt, tuple(env))


def _scan_store(body: _Body, st: ast.Assign) -> tuple[str, ...] | None:
    """The extents of the column loop of `st` if it is a jagged scan that `region_loop.scan_per_column` writes per
    column, else None."""
    if len(st.targets) != 1 or not isinstance(st.targets[0], ast.Subscript) or not isinstance(st.value, ast.Call):
        return None
    if body.op(st.value) not in SCAN_KINDS:
        return None
    target = st.targets[0]
    src = st.value.args[0] if st.value.args else next((k.value for k in st.value.keywords if k.arg == "x"), None)
    if not isinstance(src, ast.Subscript):
        return None
    shapes = []
    for sub in (target, src):
        ref = body.ref(sub.value)
        items = _items(sub)
        if ref is None or len(items) != len(ref.type.shape):
            return None
        bounded = [k for k, e in enumerate(items) if _bounded(e)]
        if len(bounded) != 1 or not all(_whole(e) for k, e in enumerate(items) if k != bounded[0]):
            return None
        shapes.append((ast.dump(items[bounded[0]]), bounded[0],
                       tuple(str(d) for k, d in enumerate(ref.type.shape) if k != bounded[0])))
    return shapes[0][2] if shapes[0] == shapes[1] and shapes[0][2] else None


def _bind(body: _Body, st: ast.Assign) -> bool:
    """`b, e = offsets[s], offsets[s + 1]`: names bound to pure values reading no subregion (recorded as scalars or
    not); False for anything else."""
    if any(isinstance(n, ast.Slice) and (n.lower is not None or n.upper is not None) for n in ast.walk(st.value)):
        return False  # a subregion: its fold would be recomputed in every column

    def pure(node: ast.expr) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and not body._pure_call(n, lambda _a: True):
                return False
            if isinstance(n, ast.Lambda | ast.NamedExpr):
                return False
        return True

    if not pure(st.value):
        return False
    pairs: list[tuple[ast.expr, ast.expr | None]] = []
    for t in st.targets:
        if isinstance(t, ast.Name):
            pairs.append((t, st.value))
        elif isinstance(t, ast.Tuple) and all(isinstance(e, ast.Name) for e in t.elts):
            vals = st.value.elts if isinstance(st.value, ast.Tuple) and len(st.value.elts) == len(t.elts) else None
            pairs += [(e, vals[k] if vals else None) for k, e in enumerate(t.elts)]
        else:
            return False
    scalars = [v is not None and body.scalar(v) for _, v in pairs]
    for (t, _), sc in zip(pairs, scalars):
        body.local[t.id] = sc  # type: ignore[attr-defined]
    return True


def _written_and_read(st: ast.Assign) -> tuple[set[str], set[str]]:
    targets = list(st.targets[0].elts) if isinstance(st.targets[0], ast.Tuple) else list(st.targets)
    written = {t.value.id for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)}
    read_nodes: list[ast.AST] = [st.value] + [t.slice for t in targets if isinstance(t, ast.Subscript)]
    read = {n.id for r in read_nodes for n in ast.walk(r) if isinstance(n, ast.Name)}
    return written, read


def plan_body(lw: Lowerer, stmts: list[ast.stmt]) -> dict[int, ColumnLoop]:
    """The jagged fold stores of a `parallel` body to write per column (by the statement's id), or none: see the
    module's docstring for the body that qualifies."""
    body = _Body(lw)
    plans: dict[int, ColumnLoop] = {}
    domains: set[tuple[str, ...]] = set()  # the extents of each column loop
    written: set[str] = set()
    read: set[str] = set()
    for st in stmts:
        if isinstance(st, ast.Pass) or isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant) \
                and isinstance(st.value.value, str):
            continue
        if not isinstance(st, ast.Assign):
            return {}
        if all(isinstance(t, ast.Name | ast.Tuple) and not any(isinstance(e, ast.Subscript) for e in ast.walk(t))
               for t in st.targets):
            if not _bind(body, st):
                return {}
            read |= {n.id for n in ast.walk(st.value) if isinstance(n, ast.Name)}
            continue
        plan = _fold_store(body, st)
        scan = None if plan is not None else _scan_store(body, st)
        if plan is None and scan is None:
            return {}
        if plan is not None:
            plans[id(st)] = plan[0]
        domains.add(plan[1] if plan is not None else scan)
        w, r = _written_and_read(st)
        written |= w
        read |= r
    if written & read:
        return {}  # a store the body reads: the instances of the column loops would see one another's writes
    if len(domains) > 1:
        return {}  # column loops over different axes: not one workset with the segments
    return plans
