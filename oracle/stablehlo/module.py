"""The StableHLO module for one concrete specialisation of a kernel.

Signature of `func.func @main`: inputs in parameter order -- every `in` and `inout` tensor, every
runtime scalar (rank 0), and an `out` tensor only when its prior contents matter (some element may
be left unwritten, or a masked/partial write reads it). Results in parameter order: every `out`
and `inout` tensor's final contents. The module is static-shaped: shape symbols are bound from the
arguments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kir.core import Kernel, Param, RefType, Role, load_families
from kir.dtypes import DType
from kir.errors import IntentError

from .bind import bind_symbols, check_args
from .checks import ERROR_REF, Site, checks_enabled
from .checks import setup as setup_checks
from .context import Ctx, RefState, not_expressible
from .registry import run_region
from .ssa import SSA
from .values import Val
from .version import TARGET_ATTRIBUTE, TARGET_VERSION

load_families(__package__)  # importing each family's module registers its emitters

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


@dataclass(frozen=True)
class Module:
    text: str
    inputs: tuple[Param, ...]   # the function's arguments, in order
    outputs: tuple[Param, ...]  # the function's results, in order (then the error state, with `checks`)
    env: Mapping[str, int]
    checks: tuple[Site, ...] = ()  # one per row of the error state, the module's last result


def _used_ids(kernel: Kernel) -> frozenset[int]:
    return frozenset(v.id for op in kernel.walk() for v in op.operands())


def _param_name(p: Param, n: int) -> str:
    return f"%{p.name}" if _IDENT.fullmatch(p.name) else f"%param{n}"


def _symbol(name: str) -> str:
    if _IDENT.fullmatch(name):
        return f"@{name}"
    return '@"' + "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in name) + '"'


def build(kernel: Kernel, args: Mapping[str, Any], checks: bool | None = None) -> Module:
    for p in kernel.params:
        if not isinstance(p.type.dtype, DType):
            raise not_expressible(None, f"parameter {p.name} has dtype variable {p.type.dtype}; emit a "
                                  "specialised kernel", kernel)
    check_args(kernel, args)
    env = bind_symbols(kernel, args)
    ssa = SSA()
    ctx = Ctx(kernel, env, ssa, _used_ids(kernel))
    setup_checks(ctx, kernel, checks_enabled(kernel, checks))
    arg_vals: list[Val] = []
    for n, p in enumerate(kernel.params):
        dtype = p.type.dtype
        assert isinstance(dtype, DType)
        if isinstance(p.type, RefType):
            val = Val(_param_name(p, n), dtype, ctx.dims(p.type.shape), 0)
            ctx.refs[p.value.id] = RefState(val, p.name)
        else:
            val = Val(_param_name(p, n), dtype, (), 0)
        arg_vals.append(val)
    run_region(ctx, kernel.body, arg_vals)
    results = [ctx.refs[p.value.id].val for p in kernel.outputs]
    sites: tuple[Site, ...] = ()
    if ERROR_REF in ctx.refs:
        results.append(ctx.refs[ERROR_REF].val)
        generic = Site(lambda a, b: f"kernel {kernel.name} failed a run-time check")
        sites = tuple(ctx.site_messages.get(n, generic) for n in range(len(ctx.sites)))
    if results:
        ssa.emit(f"return {ssa.use(*results)} : {', '.join(r.type for r in results)}")
    else:
        ssa.emit("return")
    inputs = tuple(p for p, v in zip(kernel.params, arg_vals)
                   if not (isinstance(p.type, RefType) and p.role is Role.OUT) or v.name in ssa.used)
    vals = {p.name: v for p, v in zip(kernel.params, arg_vals)}
    signature = ", ".join(f"{vals[p.name].name}: {vals[p.name].type}" for p in inputs)
    result_types = ", ".join(r.type for r in results)
    spec = ", ".join(f"{s}={env[s]}" for s in kernel.symbols) or "no shape symbols"
    header = [
        f"// Intent StableHLO exit: kernel {_printable(kernel.name)}, specialised for {spec}.",
        f"// Target StableHLO version {TARGET_VERSION}; serialised as a portable artifact for that version.",
        f"// Inputs: {', '.join(p.name for p in inputs) or 'none'}. "
        f"Results: {', '.join([p.name for p in kernel.outputs] + (['error state'] if sites else [])) or 'none'}.",
        f'module {_symbol(kernel.name)} attributes {{{TARGET_ATTRIBUTE} = "{TARGET_VERSION}"}} {{',
        f"  func.func @main({signature}) -> ({result_types}) {{",
    ]
    text = "\n".join(header + ssa.lines + ["  }", "}", ""])
    return Module(text, inputs, tuple(kernel.outputs), dict(env), sites)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in text)


def emit(kernel: Kernel, args: Mapping[str, Any], checks: bool | None = None) -> str:
    """StableHLO text for the specialisation of `kernel` that `args` select."""
    try:
        return build(kernel, args, checks).text
    except RecursionError:
        raise IntentError(f"kernel {kernel.name} nests too deeply for the StableHLO exit") from None
