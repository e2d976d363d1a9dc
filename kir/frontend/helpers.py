"""`@intent.func` helpers (inlined at each call site) and `@intent.combine` functions (inlined into the
combine region of a reduce or scan)."""

from __future__ import annotations

import ast
import inspect
from typing import TYPE_CHECKING

from ..control import Yield
from ..core import Region, scalar
from ..dtypes import ElemType
from .coerce import coerce_to
from .scope import Env
from .source import function_source
from .values import FValue, HelperRef, NoneLit, TupleV, TVal, describe, from_python

if TYPE_CHECKING:
    from .lower import Lowerer


def _check_recursion(lw: Lowerer, fn: object, node: ast.AST) -> None:
    for fr in lw.frames:
        if fr.fn is fn:
            raise lw.error(node, f"recursive call to `{getattr(fn, '__name__', '?')}`: helpers are inlined, so they "
                                 f"cannot call themselves; write the recursion as a loop")


def _inline_body(lw: Lowerer, fn: object, node: ast.AST, bind: dict[str, FValue], kind: str) -> FValue:
    """Lower the function body in its own scope; its last statement may be `return value`."""
    _check_recursion(lw, fn, node)
    src = function_source(fn)
    env = Env()
    for name, fv in bind.items():
        env.set(name, fv)
    body = list(src.tree.body)
    ret: ast.Return | None = None
    if body and isinstance(body[-1], ast.Return):
        ret = body.pop()  # type: ignore[assignment]
    with lw.function(fn, src, kind, env):
        lw.block(body)
        if ret is None or ret.value is None:
            return NoneLit()
        return lw.expr(ret.value)


def call_helper(lw: Lowerer, ref: HelperRef, node: ast.Call) -> FValue:
    fn = ref.fn
    name = getattr(fn, "__name__", "helper")
    for a in node.args:
        if isinstance(a, ast.Starred):
            raise lw.error(a, "`*` arguments are not supported in kernel bodies; pass each argument explicitly")
    if any(kw.arg is None for kw in node.keywords):
        raise lw.error(node, "`**` arguments are not supported in kernel bodies; pass each keyword explicitly")
    args = [lw.expr(a) for a in node.args]
    kwargs = {kw.arg: lw.expr(kw.value) for kw in node.keywords if kw.arg is not None}
    try:
        sig = inspect.signature(fn)
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise lw.error(node, f"{name}(): {exc}") from None
    except ValueError as exc:
        raise lw.error(node, f"cannot read the signature of {name}: {exc}") from None
    bind: dict[str, FValue] = {}
    for pname, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise lw.error(node, f"helper `{name}` takes *args/**kwargs, which kernels do not support")
        if pname in bound.arguments:
            bind[pname] = bound.arguments[pname]
        else:
            try:
                bind[pname] = from_python(p.default, lw.dtype_bindings)
            except Exception:
                raise lw.error(node, f"the default of `{pname}` in helper `{name}` cannot be used in a kernel") \
                    from None
    return _inline_body(lw, fn, node, bind, "func")


def combine_region(lw: Lowerer, ref: object, dtypes: tuple[ElemType, ...], as_tuple: bool, node: ast.AST,
                   what: str) -> Region:
    """The combine region of a custom reduce/scan: args (a_1..a_k, b_1..b_k) scalars, yields k scalars."""
    if not isinstance(ref, HelperRef):
        shown = describe(ref) if not callable(ref) else "a plain Python function"
        raise lw.error(node, f"{what}: the combine function must be decorated with @intent.combine, got {shown}")
    fn = ref.fn
    name = getattr(fn, "__name__", "combine")
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError) as exc:
        raise lw.error(node, f"cannot read the signature of {name}: {exc}") from None
    if len(params) != 2:
        raise lw.error(node, f"{what}: the combine function `{name}` takes two parameters (a, b): the two partial "
                             f"results to combine; it has {len(params)}")
    k = len(dtypes)
    args = lw.b.begin_region(tuple(scalar(d) for d in dtypes) * 2,
                             tuple(f"{params[0]}{i}" for i in range(k)) + tuple(f"{params[1]}{i}" for i in range(k)))
    vals = [TVal(a) for a in args]
    bind: dict[str, FValue] = {params[0]: TupleV(tuple(vals[:k])) if as_tuple else vals[0],
                               params[1]: TupleV(tuple(vals[k:])) if as_tuple else vals[k]}
    result = _inline_body(lw, fn, node, bind, "combine")
    parts = list(result.items) if isinstance(result, TupleV) else [result]
    if isinstance(result, NoneLit) or len(parts) != k:
        got = "nothing" if isinstance(result, NoneLit) else f"{len(parts)} value(s)"
        raise lw.error(node, f"{what}: the combine function `{name}` must return {k} value(s), one per component, "
                             f"but returns {got}")
    ys = [coerce_to(lw, p, d, (), node, f"{what}: component {i} returned by `{name}`")
          for i, (p, d) in enumerate(zip(parts, dtypes))]
    lw.make(Yield, node, values=tuple(y.value for y in ys))
    return lw.b.end_region()
