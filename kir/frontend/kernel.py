"""Building a kernel: signature, parameters, body; specialisation binds dtype variables and const values."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

from ..builder import build_kernel
from ..control import Yield
from ..core import Kernel, Param, RefType, Type, scalar
from ..dims import DSym
from ..dtypes import DType, ElemType
from ..errors import DiagnosticError
from ..solver import ShapeSolver
from ..verify import verify
from .lower import Lowerer, internal_error
from .scope import Env
from .signature import (
    NO_DEFAULT,
    ConstSpec,
    KernelSignature,
    ScalarSpec,
    TensorSpec,
    const_fits,
    read_signature,
    symbols_in_dim,
    symbols_in_pred,
)
from .source import SourceInfo, function_source
from .values import DimExpr, NoneLit, Num, RefV, TVal


def build(fn: object, *, requires: Iterable[object] | None = (), checks: bool = False,
          dtypes: Mapping[str, DType] | None = None, consts: Mapping[str, object] | None = None,
          signature: KernelSignature | None = None, absent: Iterable[str] = ()) -> Kernel:
    """Compile the body of `fn` (never executing it) to a verified `kir.Kernel`.

    Without bindings the kernel is generic: dtype variables stay `DTypeVar`s and const int parameters are
    shape symbols. `dtypes` (variable name -> dtype) and `consts` (parameter name -> value) specialise it;
    `absent` names optional tensor parameters passed as None (they are not parameters of the result).
    Every failure is a `DiagnosticError` located in the author's source."""
    src = function_source(fn)
    try:
        sig = signature or read_signature(fn, src, requires)
        return _build(fn, src, sig, checks, dict(dtypes or {}), dict(consts or {}), frozenset(absent))
    except DiagnosticError:
        raise
    except Exception as exc:  # the last resort: never a traceback from the compiler's internals
        raise internal_error(None, exc, src.def_loc) from exc


def signature(fn: object, requires: Iterable[object] | None = ()) -> KernelSignature:
    """The kernel header of `fn` (parameters, symbols, refinements); failures are located diagnostics."""
    src = function_source(fn)
    try:
        return read_signature(fn, src, requires)
    except DiagnosticError:
        raise
    except Exception as exc:
        raise internal_error(None, exc, src.def_loc) from exc


def _build(fn: object, src: SourceInfo, sig: KernelSignature, checks: bool, dtypes: dict[str, DType],
           consts: dict[str, object], absent: frozenset[str] = frozenset()) -> Kernel:
    optional = {p.name for p in sig.optional}
    for name in sorted(absent - optional):
        raise DiagnosticError(f"parameter `{name}` of {sig.name} is not an optional tensor (`f32[N] | None`), so it "
                              f"cannot be absent", sig.loc)
    for name in dtypes:
        if name not in {v.name for v in sig.dtype_vars}:
            raise DiagnosticError(f"kernel {sig.name} has no dtype variable {name}", sig.loc)
    for var in sig.dtype_vars:
        if var.name in dtypes and dtypes[var.name] not in var.choices:
            raise DiagnosticError(f"{var.name} = {dtypes[var.name]} is not one of {var.name}'s choices "
                                  f"({', '.join(map(str, var.choices))})", sig.loc)
    const_values: dict[str, object] = {}
    for name, value in consts.items():
        try:
            p = sig.param(name)
        except KeyError:
            raise DiagnosticError(f"kernel {sig.name} has no const parameter {name}", sig.loc) from None
        if not isinstance(p.spec, ConstSpec):
            raise DiagnosticError(f"parameter {name} of {sig.name} is not a const parameter", p.loc)
        if not const_fits(value, p.spec.kind):
            raise DiagnosticError(f"const parameter {name} is {p.spec.kind.__name__}, got {value!r}", p.loc)
        const_values[name] = value
    for p in sig.consts:
        if p.name not in const_values and p.default is not NO_DEFAULT:
            const_values[p.name] = p.default
    for p in sig.consts:
        if p.name not in const_values and p.spec.kind is not int:  # type: ignore[union-attr]
            raise DiagnosticError(f"const parameter `{p.name}` ({p.spec.kind.__name__}) has no value; give it a "  # type: ignore
                                  f"default or pass it when specialising", p.loc)
    # A shape symbol only an absent parameter names is not a symbol of this specialisation.
    named: list[str] = []
    for p in sig.params:
        if isinstance(p.spec, TensorSpec) and p.name not in absent:
            for d in p.spec.shape:
                symbols_in_dim(d, named)
    for q in sig.requires:
        symbols_in_pred(q, named)
    symbols = tuple(s for s in sig.symbols if s not in const_values and (s in named or s in
                                                                           {c.name for c in sig.consts}))

    def subst(dt: ElemType) -> ElemType:
        return dtypes.get(dt.name, dt) if not isinstance(dt, DType) else dt

    solver = ShapeSolver(symbols, sig.requires)
    lw = Lowerer(solver, dtypes, sig.dtype_vars)
    runtime = tuple(p for p in sig.runtime if p.name not in absent)
    types: list[Type] = []
    for p in runtime:
        if isinstance(p.spec, TensorSpec):
            types.append(RefType(subst(p.spec.dtype), p.spec.shape, p.spec.role))
        else:
            assert isinstance(p.spec, ScalarSpec)
            types.append(scalar(subst(p.spec.dtype)))
    args = lw.b.begin_region(tuple(types), tuple(p.name for p in runtime))
    env = Env()
    for p, a in zip(runtime, args):
        env.set(p.name, RefV(a, p.name) if isinstance(p.spec, TensorSpec) else TVal(a))
    for name in absent:
        env.set(name, NoneLit(name))
    for p in sig.consts:
        env.set(p.name, Num(const_values[p.name]) if p.name in const_values else DimExpr(DSym(p.name)))  # type: ignore
    body = list(src.tree.body)
    if body and isinstance(body[-1], ast.Return) and body[-1].value is None:
        body.pop()
    try:
        with lw.function(fn, src, "kernel", env):
            lw.block(body)
            lw.make(Yield, None, values=())
    except DiagnosticError:
        raise
    except Exception as exc:
        raise internal_error(lw, exc, src.def_loc) from exc
    region = lw.b.end_region()
    params = tuple(Param(p.name, a) for p, a in zip(runtime, args))
    remaining = tuple(v for v in sig.dtype_vars if v.name not in dtypes)
    const_items = tuple((p.name, const_values[p.name]) for p in sig.consts if p.name in const_values)
    kernel = build_kernel(sig.name, params, symbols, region, sig.requires, (), remaining, const_items, checks,
                          src.def_loc)
    verify(kernel)
    return kernel

