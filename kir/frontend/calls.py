"""Calls in a kernel body: the registry of `intent.*` spellings, argument binding against each spelling's
placeholder signature, typed constants (`f32(0.0)`), helpers and the few Python builtins with a meaning."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core import registrar
from ..dims import DConst
from ..dtypes import DType, DTypeVar, ElemType
from .values import (
    BuiltinRef,
    DimExpr,
    DTypeLit,
    FValue,
    HelperRef,
    ModuleRef,
    NoneLit,
    Num,
    OpRef,
    RefV,
    StrLit,
    TupleV,
    TVal,
    describe,
    from_python,
)

if TYPE_CHECKING:
    from .lower import Lowerer

Handler = Callable[["Lowerer", "CallArgs"], FValue]

CALLS: dict[str, Handler] = {}


# `@spelling(name, ...)` registers the lowering of `intent.<name>(...)`.
spelling = registrar(CALLS, "lowering for intent.{key}")


class CallArgs:
    """A call's arguments bound to the spelling's parameters; values are lowered when first asked for."""

    def __init__(self, lw: Lowerer, name: str, fn: Callable, node: ast.Call) -> None:
        self.lw, self.name, self.node = lw, name, node
        kwargs: dict[str, ast.expr] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise lw.error(kw, "`**` arguments are not supported in kernel bodies; pass each keyword explicitly")
            kwargs[kw.arg] = kw.value
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise lw.error(a, "`*` arguments are not supported in kernel bodies; pass each argument explicitly")
        try:
            self.signature = inspect.signature(fn)
            self.bound = self.signature.bind(*node.args, **kwargs)
        except TypeError as exc:
            raise lw.error(node, f"intent.{name}(): {exc}; the signature is intent.{name}{self._sig(fn)}") from None
        self._values: dict[str, FValue] = {}

    @staticmethod
    def _sig(fn: Callable) -> str:
        try:
            return str(inspect.signature(fn))
        except (TypeError, ValueError):
            return "(...)"

    def given(self, pname: str) -> bool:
        return pname in self.bound.arguments

    def arg_node(self, pname: str) -> ast.AST:
        n = self.bound.arguments.get(pname)
        return n if isinstance(n, ast.AST) else self.node

    def default(self, pname: str) -> Any:
        return self.signature.parameters[pname].default

    def value(self, pname: str) -> FValue:
        if pname not in self._values:
            if self.given(pname):
                self._values[pname] = self.lw.expr(self.bound.arguments[pname])
            else:
                d = self.default(pname)
                if d is inspect.Parameter.empty:
                    raise self.lw.error(self.node, f"intent.{self.name}() is missing the argument `{pname}`")
                self._values[pname] = from_python(d, self.lw.dtype_bindings)
        return self._values[pname]

    # --- compile-time arguments
    def static_int(self, pname: str, what: str | None = None) -> int:
        fv = self.value(pname)
        if isinstance(fv, Num) and isinstance(fv.value, int) and not isinstance(fv.value, bool):
            return fv.value
        if isinstance(fv, DimExpr) and isinstance(fv.dim, DConst):
            return fv.dim.value
        raise self.lw.error(self.arg_node(pname), f"intent.{self.name}(): `{what or pname}` must be an integer "
                                                  f"constant, got {describe(fv)}")

    def static_bool(self, pname: str) -> bool:
        fv = self.value(pname)
        if isinstance(fv, Num) and isinstance(fv.value, bool | int):
            return bool(fv.value)
        raise self.lw.error(self.arg_node(pname), f"intent.{self.name}(): `{pname}` must be True or False (a "
                                                  f"compile-time constant), got {describe(fv)}")

    def optional_dtype(self, pname: str) -> ElemType | None:
        fv = self.value(pname)
        if isinstance(fv, NoneLit):
            return None
        if isinstance(fv, DTypeLit):
            return fv.dtype
        raise self.lw.error(self.arg_node(pname), f"intent.{self.name}(): `{pname}` must be a dtype such as f32, got "
                                                  f"{describe(fv)}")

    def choice(self, pname: str, choices: tuple[str, ...]) -> str:
        fv = self.value(pname)
        if isinstance(fv, StrLit) and fv.value in choices:
            return fv.value
        shown = repr(fv.value) if isinstance(fv, StrLit) else describe(fv)
        raise self.lw.error(self.arg_node(pname), f"intent.{self.name}(): `{pname}` must be one of "
                                                  f"{', '.join(repr(c) for c in choices)}, got {shown}")

    def is_none(self, pname: str) -> bool:
        return isinstance(self.value(pname), NoneLit)


# ---------------------------------------------------------------------------------------------- dispatch


def lower_call(lw: Lowerer, node: ast.Call) -> FValue:
    from . import helpers, pointwise

    f = node.func
    if isinstance(f, ast.Attribute):
        base = lw.expr(f.value)
        if isinstance(base, TVal | RefV):
            return pointwise.tensor_method(lw, base, node, f)
        if isinstance(base, Num | DimExpr) and f.attr == "to":
            if len(node.args) != 1 or node.keywords:
                raise lw.error(node, "`.to` takes one dtype: x.to(f32)")
            dt = pointwise.dtype_arg(lw, lw.expr(node.args[0]), node.args[0], ".to()")
            return pointwise.static_to(lw, base, dt, node)
        callee = lw.attribute_of(base, f)
    else:
        callee = lw.expr(f)
    if isinstance(callee, OpRef):
        if callee.name == "parallel":
            raise lw.error(node, "parallel(...) is only valid as the iterable of a for loop: `for i in parallel(N):`")
        handler = CALLS.get(callee.name)
        if handler is None:
            raise lw.error(node, f"intent.{callee.name} cannot be used in a kernel body")
        return handler(lw, CallArgs(lw, callee.name, callee.fn, node))
    if isinstance(callee, DTypeLit):
        return typed_constant(lw, callee.dtype, node)
    if isinstance(callee, HelperRef):
        return helpers.call_helper(lw, callee, node)
    if isinstance(callee, BuiltinRef):
        return builtin_call(lw, callee.name, node)
    if isinstance(callee, ModuleRef):
        raise lw.error(node, f"the module `{callee.module.__name__}` is not callable")
    raise lw.error(node, f"{describe(callee)} is not callable")


def _positional(lw: Lowerer, node: ast.Call, what: str, lo: int, hi: int) -> list[FValue]:
    if node.keywords:
        raise lw.error(node, f"{what} takes no keyword arguments here")
    for a in node.args:
        if isinstance(a, ast.Starred):
            raise lw.error(a, "`*` arguments are not supported in kernel bodies; pass each argument explicitly")
    if not lo <= len(node.args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise lw.error(node, f"{what} takes {want} argument(s), got {len(node.args)}")
    return [lw.expr(a) for a in node.args]


def typed_constant(lw: Lowerer, dtype: ElemType, node: ast.Call) -> FValue:
    """`f32(0.0)`: a strongly typed constant; `f32(x)` converts a value."""
    from .pointwise import cast_value

    (x,) = _positional(lw, node, f"{dtype}(...)", 1, 1)
    if not isinstance(x, Num | DimExpr | TVal | RefV):
        raise lw.error(node.args[0], f"{dtype}(...) needs a number or a tensor, got {describe(x)}")
    if isinstance(x, Num) and isinstance(x.value, float) and isinstance(dtype, DType) and dtype.is_int:
        raise lw.error(node.args[0], f"{dtype}({x.value!r}): a float literal is not an integer constant; write an "
                                     f"integer, or convert a value with .to({dtype})")
    if isinstance(dtype, DTypeVar) and isinstance(x, Num) and isinstance(x.value, bool):
        raise lw.error(node.args[0], f"{dtype}({x.value!r}): a bool is not a {dtype} constant")
    return cast_value(lw, x, dtype, node, node.args[0])


def builtin_call(lw: Lowerer, name: str, node: ast.Call) -> FValue:
    from ..pointwise import BinaryFn, UnaryFn
    from .pointwise import binary, unary_fn

    if name == "range":
        raise lw.error(node, "range(...) is only valid as the iterable of a for loop: `for t in range(T):`")
    if name == "len":
        (x,) = _positional(lw, node, "len()", 1, 1)
        if isinstance(x, TupleV):
            return Num(len(x.items))
        if isinstance(x, TVal | RefV) and x.type.shape:
            return DimExpr(x.type.shape[0])
        raise lw.error(node, f"len() needs a tuple or a tensor of rank >= 1, got {describe(x)}")
    if name == "abs":
        (x,) = _positional(lw, node, "abs()", 1, 1)
        if isinstance(x, Num):
            return Num(abs(x.value))
        return unary_fn(lw, UnaryFn.abs, x, node, node.args[0])
    if name in ("min", "max"):
        vals = _positional(lw, node, f"{name}()", 1, 64)
        if len(vals) == 1:
            raise lw.error(node, f"{name}() of one value: to reduce a tensor write intent.{name}(x); for two values "
                                 f"write {name}(a, b)")
        acc, acc_node = vals[0], node.args[0]
        fn = BinaryFn.minimum if name == "min" else BinaryFn.maximum
        for v, n in zip(vals[1:], node.args[1:]):
            if isinstance(acc, Num) and isinstance(v, Num):
                acc = Num(min(acc.value, v.value) if name == "min" else max(acc.value, v.value))
            else:
                acc = binary(lw, f"{name}()", fn, acc, v, node, acc_node, n)
            acc_node = node
        return acc
    if name in ("float", "int", "bool"):
        (x,) = _positional(lw, node, f"{name}()", 1, 1)
        if isinstance(x, StrLit) and name == "float":
            try:
                return Num(float(x.value))
            except ValueError:
                raise lw.error(node, f"float({x.value!r}) is not a number") from None
        if isinstance(x, Num):
            try:
                return Num({"float": float, "int": int, "bool": bool}[name](x.value))
            except (OverflowError, ValueError) as exc:
                raise lw.error(node, f"{name}({x.value!r}): {exc}") from None
        if isinstance(x, DimExpr) and name == "int":
            return x
        hint = {"float": ".to(f32)", "int": ".to(i64)", "bool": "a comparison such as `x != 0`"}[name]
        raise lw.error(node, f"{name}() works on constants only; convert {describe(x)} with {hint}")
    raise lw.error(node, f"the builtin `{name}` cannot be called in a kernel body")
