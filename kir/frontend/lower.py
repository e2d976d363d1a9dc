"""The lowering driver: AST of a kernel body -> KIR through `kir.Builder`.

Expressions and statements dispatch here; each construct's lowering lives in the module named after
its op family (pointwise, access, control, reduce, ...), as in the rest of the compiler.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..builder import Builder
from ..core import Op, Value
from ..dims import DSym, Pred
from ..dtypes import DType, DTypeVar
from ..errors import DiagnosticError, IntentError, Loc
from ..solver import ShapeSolver, with_names
from .scope import Dead, Env, assigned_names, store_targets
from .source import SourceInfo, closure_vars
from .suggest import equivalent, foreign_package, suggestion

if TYPE_CHECKING:
    from .jagged_folds import ColumnLoop

from .values import (
    DimExpr,
    DTypeLit,
    FValue,
    ModuleRef,
    NotRepresentable,
    RefV,
    StrLit,
    TupleV,
    TVal,
    describe,
    from_python,
)


@functools.cache
def _family_rules() -> dict[type[ast.AST], Callable[[Lowerer, Any], FValue]]:
    """The expressions an op family's module lowers, by syntax node (imported late: those modules import this one)."""
    from . import access, calls, pointwise

    return {ast.Subscript: access.subscript, ast.BinOp: pointwise.binop, ast.UnaryOp: pointwise.unaryop,
            ast.Compare: pointwise.compare, ast.BoolOp: pointwise.boolop, ast.IfExp: pointwise.ifexp,
            ast.Call: calls.lower_call}


@dataclass
class Frame:
    """The function whose body is being lowered: the kernel, or an inlined helper or combine."""

    src: SourceInfo
    fn: object
    kind: str  # "kernel", "func" or "combine"
    globals: dict[str, Any]
    closure: dict[str, Any]
    local_names: frozenset[str]
    store_targets: frozenset[str]


_REJECTED_EXPRS: dict[type, str] = {
    ast.ListComp: "comprehensions are not supported in kernel bodies; use a parallel loop "
                  "(for i in parallel(N): ...) or whole-tensor operations",
    ast.SetComp: "comprehensions are not supported in kernel bodies; use a parallel loop or whole-tensor operations",
    ast.DictComp: "comprehensions are not supported in kernel bodies; use a parallel loop or whole-tensor operations",
    ast.GeneratorExp: "generator expressions are not supported in kernel bodies; use a parallel loop or "
                      "whole-tensor operations",
    ast.Lambda: "lambdas are not supported in kernel bodies; define a helper at module level with @intent.func",
    ast.Dict: "dict literals are not supported in kernel bodies; use separate names or tuples",
    ast.Set: "set literals are not supported in kernel bodies; use a tuple",
    ast.JoinedStr: "f-strings are not supported in kernel bodies (kernels produce no text)",
    ast.FormattedValue: "f-strings are not supported in kernel bodies (kernels produce no text)",
    ast.Yield: "yield is not supported in kernel bodies; write results into Out[...] parameters",
    ast.YieldFrom: "yield is not supported in kernel bodies; write results into Out[...] parameters",
    ast.Await: "await is not supported in kernel bodies",
    ast.NamedExpr: "assignment expressions (:=) are not supported in kernel bodies; assign on a separate line",
    ast.Starred: "starred expressions (*x) are not supported in kernel bodies; pass each value explicitly",
    ast.Slice: "a slice is only valid inside brackets, e.g. x[a:b]",
}


class Lowerer:
    def __init__(self, solver: ShapeSolver, dtype_bindings: dict[str, DType],
                 dtype_vars: tuple[DTypeVar, ...] = ()) -> None:
        self.solver = solver
        self.dtype_vars = dtype_vars  # the kernel's dtype variables (bound ones are replaced on lookup)
        self.b = Builder(solver)
        self.dtype_bindings = dtype_bindings
        self.frames: list[Frame] = []
        self.env = Env()
        self.overrides: dict[int, FValue] = {}  # AST node id -> value (region elements, pre-evaluated nodes)
        # (name, id of the call node) while `name = intent.zeros(...)` is lowered and `name` is written into
        self.alloc_target: tuple[str, int] | None = None
        self._loop_counter = 0
        self.symbol_names: dict[str, str] = {}  # loop symbol -> the author's loop variable
        self.current: ast.AST | None = None  # innermost node being lowered, for the last-resort diagnostic
        self.facts: list[Pred] = []
        # jagged fold stores of the `parallel` body being lowered, written per column (statement id -> its loop)
        self.column_folds: dict[int, ColumnLoop] = {}

    # ------------------------------------------------------------------------------------------ frames, locs
    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def loc(self, node: ast.AST | None) -> Loc:
        return self.frame.src.loc(node)

    def error(self, node: ast.AST | None, message: str) -> DiagnosticError:
        # Loop symbols read as the author's loop variables (`j`, not `__j2`) in every message.
        return DiagnosticError(with_names(message, self.symbol_names), self.loc(node))

    @contextmanager
    def function(self, fn: object, src: SourceInfo, kind: str, env: Env) -> Iterator[None]:
        body = src.tree.body
        params = [a.arg for a in src.tree.args.args + src.tree.args.kwonlyargs]
        frame = Frame(src, fn, kind, getattr(fn, "__globals__", {}), closure_vars(fn),
                      frozenset(params) | frozenset(assigned_names(body)), store_targets(body))
        saved_env, saved_over = self.env, self.overrides
        self.frames.append(frame)
        self.env, self.overrides = env, {}
        try:
            yield
        finally:
            self.frames.pop()
            self.env, self.overrides = saved_env, saved_over

    @contextmanager
    def child_env(self, env: Env) -> Iterator[Env]:
        saved = self.env
        self.env = env
        try:
            yield env
        finally:
            self.env = saved

    @contextmanager
    def loop_facts(self, facts: list[Pred]) -> Iterator[None]:
        """Ranges of the enclosing loop indices. They are kept apart from the builder's solver, whose cache
        of typing obligations only works without local facts."""
        n = len(self.facts)
        self.facts.extend(facts)
        try:
            yield
        finally:
            del self.facts[n:]

    def proves_in_loops(self, goal: Pred) -> bool:
        n = len(self.solver.facts)
        self.solver.facts.extend(self.facts)
        try:
            return self.solver.proves(goal)
        finally:
            del self.solver.facts[n:]

    def loop_symbol(self, hint: str) -> DSym:
        self._loop_counter += 1
        sym = DSym(f"__{hint}{self._loop_counter}")
        taken = set(self.symbol_names.values()) | set(self.solver.symbols)
        unique = hint not in taken and hint.isidentifier()
        self.symbol_names[sym.name] = hint if unique else f"{hint}#{self._loop_counter}"
        return sym

    # ------------------------------------------------------------------------------------------ building
    def make(self, cls: type[Op], node: ast.AST | None, names: tuple[str | None, ...] | str | None = None,
             **fields: Any) -> Op:
        return self.b.make(cls, loc=self.loc(node), names=names, **fields)

    def add(self, cls: type[Op], node: ast.AST | None, name: str | None = None, **fields: Any) -> Value:
        return self.b.add(cls, loc=self.loc(node), name=name, **fields)

    def name_last(self, tv: TVal, name: str) -> TVal:
        """Give the value its Python name as a printing hint when it is the result of the last op."""
        ops = self.b.current_ops()
        if not ops or ops[-1].results != (tv.value,) or tv.value.name is not None:
            return tv
        import dataclasses

        named = Value(tv.value.id, tv.value.type, name)
        ops[-1] = dataclasses.replace(ops[-1], results=(named,))
        return TVal(named, weak=tv.weak, affine=tv.affine)

    # ------------------------------------------------------------------------------------------ names
    def lookup(self, node: ast.Name) -> FValue:
        name = node.id
        r = self.env.lookup(name)
        if isinstance(r, Dead):
            raise self.error(node, f"`{name}` has no value here: {r.why}")
        if r is not None:
            return r
        fr = self.frame
        if name in fr.local_names:
            raise self.error(node, f"`{name}` is used before it is assigned")
        if name in fr.closure:
            obj, origin = fr.closure[name], "the enclosing function"
        elif name in fr.globals:
            obj, origin = fr.globals[name], "the module"
        elif hasattr(builtins, name):
            obj, origin = getattr(builtins, name), "builtins"
        else:
            raise self.error(node, f"undefined name `{name}`{self._suggest(name)}")
        return self.python_value(obj, name, node, origin)

    def python_value(self, obj: object, name: str, node: ast.AST, origin: str) -> FValue:
        try:
            fv = from_python(obj, self.dtype_bindings)
        except NotRepresentable as exc:
            if origin == "builtins":
                if name == "print":
                    raise self.error(node, "print is not available in a kernel body: the body is compiled, not "
                                           "run; inspect values with kernel.oracle(...) instead") from None
                clause = equivalent(name)
                raise self.error(node, f"the Python builtin `{name}` cannot be used in a kernel body; " + (
                    clause if clause is not None else "kernel bodies call intent operations and @intent.func "
                                                      "helpers")) from None
            package = foreign_package(obj, name)
            hint = equivalent(name.rpartition(".")[2]) if package is not None else None
            if hint is not None:
                raise self.error(node, f"`{name}` is {package}'s, not Intent's; {hint}") from None
            raise self.error(node, f"`{name}` from {origin} is {exc.what}; a kernel body can use only numbers, dims, "
                                   f"dtypes, strings, tuples, intent operations and @intent.func helpers from its "
                                   f"enclosing scope; pass tensors and other data as kernel parameters") from None
        self._known_dims(fv, name, node)
        return fv

    def _known_dims(self, fv: FValue, name: str, node: ast.AST) -> None:
        if isinstance(fv, DTypeLit) and isinstance(fv.dtype, DTypeVar) and fv.dtype not in self.dtype_vars:
            raise self.error(node, f"the dtype variable {fv.dtype.name} does not type any parameter of this kernel, so "
                                   f"no call can tell which dtype it is; use a concrete dtype or give a parameter "
                                   f"the type {fv.dtype.name}[...]")
        if isinstance(fv, TupleV):
            for item in fv.items:
                self._known_dims(item, name, node)
        elif isinstance(fv, DimExpr):
            unknown = sorted(fv.dim.symbols() - set(self.solver.symbols))
            if unknown:
                raise self.error(node, f"`{name}` uses the shape symbol {unknown[0]}, which is not a symbol of this "
                                       f"kernel; symbols come from the parameters' shapes (and requires=[...])")

    def _suggest(self, name: str) -> str:
        known: list[str] = []
        env: Env | None = self.env
        while env is not None:
            known.extend(env.vars)
            env = env.parent
        known.extend(k for k in self.frame.globals if not k.startswith("_"))
        return suggestion(name, known)

    # ------------------------------------------------------------------------------------------ expressions
    def expr(self, node: ast.AST) -> FValue:
        hit = self.overrides.get(id(node))
        if hit is not None:
            return hit
        saved = self.current
        self.current = node
        try:
            return self._expr(node)
        finally:
            self.current = saved

    def _expr(self, node: ast.AST) -> FValue:
        from .values import NoneLit, Num

        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool | int | float):
                return Num(v)
            if isinstance(v, str):
                return StrLit(v)
            if v is None:
                return NoneLit()
            if v is Ellipsis:
                raise self.error(node, "`...` (Ellipsis) is not supported in kernel bodies; write the slices out")
            raise self.error(node, f"{type(v).__name__} constants are not supported in kernel bodies")
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                raise self.error(node, f"`{node.id}` cannot be deleted or assigned here")
            return self.lookup(node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        family_rule = _family_rules().get(type(node))
        if family_rule is not None:
            return family_rule(self, node)
        if isinstance(node, ast.Tuple | ast.List):
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    raise self.error(e, _REJECTED_EXPRS[ast.Starred])
            return TupleV(tuple(self.expr(e) for e in node.elts))
        msg = _REJECTED_EXPRS.get(type(node))
        if msg is not None:
            raise self.error(node, msg)
        raise self.error(node, f"{type(node).__name__} expressions are not supported in kernel bodies")

    def attribute(self, node: ast.Attribute) -> FValue:
        return self.attribute_of(self.expr(node.value), node)

    def attribute_of(self, base: FValue, node: ast.Attribute) -> FValue:
        from . import pointwise

        if isinstance(base, ModuleRef):
            try:
                obj = getattr(base.module, node.attr)
            except AttributeError:
                names = [n for n in dir(base.module) if not n.startswith("_")]
                if base.module.__name__ == "intent":
                    hint = suggestion(node.attr, names)
                else:
                    close = difflib.get_close_matches(node.attr, names, n=1)
                    hint = f"; did you mean `{close[0]}`?" if close else ""
                raise self.error(node, f"module `{base.module.__name__}` has no attribute `{node.attr}`{hint}") \
                    from None
            return self.python_value(obj, f"{base.module.__name__}.{node.attr}", node, "the module")
        if isinstance(base, TVal | RefV):
            return pointwise.tensor_attribute(self, base, node)
        raise self.error(node, f"{describe(base)} has no attribute `{node.attr}`")

    # ------------------------------------------------------------------------------------------ statements
    def block(self, stmts: list[ast.stmt]) -> None:
        from .stmts import lower_stmt

        for s in stmts:
            saved = self.current
            self.current = s
            try:
                lower_stmt(self, s)
            except DiagnosticError:
                raise
            except Exception as exc:  # located while the failing statement's frame is still active
                raise internal_error(self, exc, None) from exc
            finally:
                self.current = saved


def internal_error(lw: Lowerer | None, exc: BaseException, fallback: Loc | None) -> DiagnosticError:
    """The last resort: a failure inside the frontend still reaches the author as a located diagnostic."""
    loc = fallback
    if lw is not None and lw.frames and lw.current is not None:
        loc = lw.loc(lw.current)
    if isinstance(exc, RecursionError):
        return DiagnosticError("this expression is nested too deeply to compile; split it into several assignments",
                               loc)
    if isinstance(exc, IntentError) and not isinstance(exc, DiagnosticError):
        return DiagnosticError(str(exc), loc)
    return DiagnosticError(f"internal error in the Python frontend while compiling this code "
                           f"({type(exc).__name__}: {exc}); please report it", loc)
