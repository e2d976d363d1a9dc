"""The kernel header: parameters from annotations, shape symbols, refinements and dtype variables."""

from __future__ import annotations

import ast
import inspect
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..core import Role
from ..dims import DBin, Dim, DSym, PAnd, PCmp, PNot, POr, Pred
from ..dtypes import DTypeVar, ElemType
from ..errors import DiagnosticError, Loc
from .source import SourceInfo, closure_vars
from .values import dim_of, dtype_of, pred_of


@dataclass(frozen=True)
class TensorSpec:
    """`f32[M, N]`, `Out[f32[M, N]]`, `InOut[T[N]]`: a tensor parameter in memory."""

    dtype: ElemType
    shape: tuple[Dim, ...]
    role: Role = Role.IN
    # `f32[N] | None`: the caller may pass None; each presence pattern is its own specialisation, and in the
    # body the name of an absent parameter is None (tested with `if w is not None:` at compile time).
    optional: bool = False


@dataclass(frozen=True)
class ScalarSpec:
    """`f32`: a runtime scalar parameter."""

    dtype: ElemType


@dataclass(frozen=True)
class ConstSpec:
    """`intent.const[int]`: a compile-time value that specialises the kernel."""

    kind: type  # int, float or bool


ParamSpec = TensorSpec | ScalarSpec | ConstSpec

NO_DEFAULT = inspect.Parameter.empty


@dataclass(frozen=True)
class ParamInfo:
    name: str
    spec: ParamSpec
    default: object
    loc: Loc

    @property
    def is_const(self) -> bool:
        return isinstance(self.spec, ConstSpec)


@dataclass(frozen=True)
class KernelSignature:
    name: str
    params: tuple[ParamInfo, ...]
    requires: tuple[Pred, ...]
    symbols: tuple[str, ...]  # shape symbols (const int parameters included, for the generic kernel)
    dtype_vars: tuple[DTypeVar, ...]
    loc: Loc

    def param(self, name: str) -> ParamInfo:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def consts(self) -> tuple[ParamInfo, ...]:
        return tuple(p for p in self.params if p.is_const)

    @property
    def runtime(self) -> tuple[ParamInfo, ...]:
        return tuple(p for p in self.params if not p.is_const)

    @property
    def optional(self) -> tuple[ParamInfo, ...]:
        """The optional tensor parameters (`f32[N] | None`)."""
        return tuple(p for p in self.params if isinstance(p.spec, TensorSpec) and p.spec.optional)


def annotation_spec(obj: object) -> ParamSpec | None:
    """What an evaluated annotation means (None when it means nothing to Intent)."""
    conv = getattr(obj, "__kir_annotation__", None) if not isinstance(obj, type) else None
    if callable(conv):
        spec = conv()
        if isinstance(spec, TensorSpec | ScalarSpec | ConstSpec):
            return spec
    dt = dtype_of(obj)
    if dt is not None:
        return ScalarSpec(dt)
    return None


_ANNOTATION_HELP = "a tensor type like f32[M, N] (Out[...] / InOut[...] for outputs), a scalar dtype like f32, " \
                   "or intent.const[int]"


def _eval_annotation(fn: object, text: str, where: Loc) -> object:
    """A postponed (string) annotation, evaluated like Python would but only as a type expression:
    names, attributes, subscripts, tuples, constants, dim arithmetic and `| None`; no calls, never `eval`."""
    env = dict(getattr(fn, "__globals__", {}))
    env.update(closure_vars(fn))
    try:
        return _type_expression(ast.parse(text, mode="eval").body, env)
    except Exception as exc:
        raise DiagnosticError(f"cannot evaluate the annotation `{text}`: {type(exc).__name__}: {exc}",
                              where) from None


_BUILTIN_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str}
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
               ast.Mod: operator.mod, ast.BitOr: operator.or_}  # `|`: `f32[N] | None`


def _type_expression(node: ast.expr, env: dict[str, object]) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in _BUILTIN_TYPES:
            return _BUILTIN_TYPES[node.id]
        raise NameError(f"name '{node.id}' is not defined")
    if isinstance(node, ast.Attribute) and not node.attr.startswith("_"):
        return getattr(_type_expression(node.value, env), node.attr)
    if isinstance(node, ast.Subscript):
        return _type_expression(node.value, env)[_type_expression(node.slice, env)]  # type: ignore[index]
    if isinstance(node, ast.Tuple | ast.List):
        items = [_type_expression(e, env) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_type_expression(node.left, env), _type_expression(node.right, env))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_type_expression(node.operand, env)  # type: ignore[operator]
    raise ValueError(f"{ast.unparse(node)} is not a type expression (names, [], attributes, dim arithmetic and "
                     f"`| None`)")


def symbols_in_dim(d: Dim, out: list[str]) -> None:
    if isinstance(d, DSym):
        if d.name not in out:
            out.append(d.name)
    elif isinstance(d, DBin):
        symbols_in_dim(d.lhs, out)
        symbols_in_dim(d.rhs, out)


def symbols_in_pred(p: Pred, out: list[str]) -> None:
    if isinstance(p, PCmp):
        symbols_in_dim(p.lhs, out)
        symbols_in_dim(p.rhs, out)
    elif isinstance(p, PAnd | POr):
        for q in p.items:
            symbols_in_pred(q, out)
    elif isinstance(p, PNot):
        symbols_in_pred(p.item, out)


def _requires_nodes(src: SourceInfo) -> list[ast.AST]:
    """The AST nodes of the items of `requires=[...]` in the decorator, for locating diagnostics."""
    for deco in src.tree.decorator_list:
        if isinstance(deco, ast.Call):
            for kw in deco.keywords:
                if kw.arg == "requires" and isinstance(kw.value, ast.List | ast.Tuple):
                    return list(kw.value.elts)
    return []


def read_requires(requires: object, src: SourceInfo) -> tuple[Pred, ...]:
    if requires is None:
        return ()
    if not isinstance(requires, Sequence) or isinstance(requires, str):
        raise DiagnosticError(f"requires= takes a list of shape predicates like [N <= 65536], got "
                              f"{type(requires).__name__}", src.def_loc)
    nodes = _requires_nodes(src)
    out: list[Pred] = []
    for n, item in enumerate(requires):
        p = pred_of(item)
        if p is None:
            where = src.loc(nodes[n]) if n < len(nodes) else src.def_loc
            shown = repr(item) if isinstance(item, bool | int | float | str) else type(item).__name__
            raise DiagnosticError(f"requires item {n + 1} is {shown}, not a shape predicate; write a comparison of "
                                  f"dims such as N <= 65536 or N % 4 == 0", where)
        out.append(p)
    return tuple(out)


def read_signature(fn: object, src: SourceInfo, requires: Iterable[object] | None = ()) -> KernelSignature:
    tree = src.tree
    args = tree.args
    if args.vararg or args.kwarg:
        bad = args.vararg or args.kwarg
        raise DiagnosticError("a kernel takes named parameters only (no *args or **kwargs)", src.loc(bad))
    if args.posonlyargs:
        raise DiagnosticError("positional-only parameters are not supported in kernels", src.loc(args.posonlyargs[0]))
    nodes = {a.arg: a for a in args.args + args.kwonlyargs}
    try:
        sig = inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise DiagnosticError(f"cannot read the signature of {src.name}: {exc}", src.def_loc) from None
    params: list[ParamInfo] = []
    symbols: list[str] = []
    dtype_vars: list[DTypeVar] = []
    for name, p in sig.parameters.items():
        node = nodes.get(name)
        where = src.loc(node.annotation if node is not None and node.annotation is not None else node)
        ann = p.annotation
        if ann is inspect.Parameter.empty:
            raise DiagnosticError(f"parameter `{name}` needs an annotation: {_ANNOTATION_HELP}", where)
        if isinstance(ann, str):
            ann = _eval_annotation(fn, ann, where)
        spec = annotation_spec(ann)
        if spec is None:
            if ann in (int, float, bool):
                raise DiagnosticError(f"parameter `{name}` is annotated `{ann.__name__}`; write "
                                      f"intent.const[{ann.__name__}] for a compile-time value or a dtype such as "
                                      f"{'f32' if ann is float else 'i64' if ann is int else 'pred'} for a runtime "
                                      f"scalar", where)
            raise DiagnosticError(f"parameter `{name}` has annotation {ann!r}, which is not a kernel parameter "
                                  f"type; use {_ANNOTATION_HELP}", where)
        optional = isinstance(spec, TensorSpec) and spec.optional
        if optional and spec.role is Role.OUT:  # type: ignore[union-attr]
            raise DiagnosticError(f"parameter `{name}`: an Out[...] parameter cannot be optional; an output "
                                  f"that may be absent is a separate kernel (or an InOut[...] | None)", where)
        if optional and p.default is not inspect.Parameter.empty and p.default is not None:
            raise DiagnosticError(f"parameter `{name}` is an optional tensor; its default can only be None, got "
                                  f"{p.default!r}", where)
        if p.default is not inspect.Parameter.empty and not isinstance(spec, ConstSpec) and not optional:
            raise DiagnosticError(f"parameter `{name}` has a default value; only intent.const[...] parameters "
                                  f"and optional tensors (`f32[N] | None = None`) may have defaults", where)
        if isinstance(spec, ConstSpec) and p.default is not inspect.Parameter.empty \
                and not _const_fits(p.default, spec.kind):
            raise DiagnosticError(f"the default of `{name}` is {p.default!r}, not a {spec.kind.__name__}", where)
        if isinstance(spec, TensorSpec):
            for d in spec.shape:
                symbols_in_dim(d, symbols)
        if isinstance(spec, TensorSpec | ScalarSpec) and isinstance(spec.dtype, DTypeVar) \
                and spec.dtype not in dtype_vars:
            dtype_vars.append(spec.dtype)
        params.append(ParamInfo(name, spec, p.default, where))
    preds = read_requires(requires, src)
    for q in preds:
        symbols_in_pred(q, symbols)
    for p in params:
        if isinstance(p.spec, ConstSpec) and p.spec.kind is int:
            if p.name in symbols:
                raise DiagnosticError(f"const parameter `{p.name}` has the name of a shape symbol", p.loc)
            symbols.append(p.name)
    return KernelSignature(src.name, tuple(params), preds, tuple(symbols), tuple(dtype_vars), src.def_loc)


def _const_fits(value: object, kind: type) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, int | float) and not isinstance(value, bool)


def const_fits(value: object, kind: type) -> bool:
    return _const_fits(value, kind)


def dims_of_shape(items: Iterable[object]) -> tuple[Dim, ...] | None:
    """Shape items of the surface (`intent.Dim`, ints, kir dims) as kir dims; None if one is not a dim."""
    out: list[Dim] = []
    for it in items:
        if isinstance(it, bool):
            return None
        if isinstance(it, int):
            from ..dims import DConst

            out.append(DConst(it))
            continue
        d = dim_of(it)
        if d is None:
            return None
        out.append(d)
    return tuple(out)
