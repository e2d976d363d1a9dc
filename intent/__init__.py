"""Intent: write GPU kernels at the logical level; get verified, readable Triton.

    import intent
    from intent import f32, Out, dims, parallel

    M, N = dims("M N")

    @intent.kernel(requires=[N <= 65536])
    def softmax(x: f32[M, N], out: Out[f32[M, N]]):
        for i in parallel(M):
            row = x[i, :]
            e = intent.exp(row - intent.max(row))
            out[i, :] = e / intent.sum(e)

`import intent` loads only the error classes, the op spellings, `intent.load` and `intent.profile`:
the compiler (the frontend, Z3, the physical planner) is imported on first use of a name that needs
it (`intent.kernel`, `intent.f32`, ...). A process that only runs prebuilt kernels
(`intent.load(DIR)`) therefore never imports it.
"""

import sys as _sys
import types as _types
from typing import TYPE_CHECKING
from typing import Any as _Any

from .errors import DiagnosticError, IntentError, LaunchError, NotExpressible
from .ops import (
    SPELLINGS,
    abs,
    all,
    any,
    arange,
    argmax,
    argmin,
    argsort,
    atomic_add,
    atomic_and,
    atomic_and_,
    atomic_cas,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_or_,
    atomic_xchg,
    atomic_xor,
    bitcast,
    broadcast_to,
    ceil,
    clamp,
    concat,
    cos,
    cummax,
    cummin,
    cumprod,
    cumsum,
    dot,
    einsum,
    empty,
    empty_like,
    erf,
    exp,
    exp2,
    expand_dims,
    floor,
    full,
    full_like,
    gather,
    histogram,
    isinf,
    isnan,
    lerp,
    log,
    log1p,
    log2,
    max,
    maximum,
    mean,
    min,
    minimum,
    neg,
    ones,
    ones_like,
    parallel,
    permute,
    pow,
    prod,
    rand,
    randint,
    randn,
    reduce,
    reshape,
    round,
    rsqrt,
    scan,
    sigmoid,
    sin,
    sort,
    sqrt,
    squeeze,
    store,
    sum,
    tanh,
    topk,
    transpose,
    where,
    zeros,
    zeros_like,
)
from .runtime import load, profile

# Names that need the compiler, by the module that defines them (imported on first use).
_LAZY: dict[str, str] = {
    **dict.fromkeys(("Dim", "DTypeObject", "DTypeVariable", "InOut", "Out", "Pred", "TensorAnnotation", "bf16",
                     "const", "dims", "dtype_var", "f16", "f32", "f64", "f8e4m3", "f8e5m2", "i4", "i8", "i16", "i32",
                     "i64", "pred", "u8", "u16", "u32", "u64"), ".dsl"),
    **dict.fromkeys(("Helper", "KernelObject", "combine", "func", "kernel"), ".kernel"),
    "kernels_in_file": ".loading",
    **dict.fromkeys(("AutogradKernel", "autograd"), ".torch_autograd"),
}

if TYPE_CHECKING:
    from .dsl import (
        Dim,
        DTypeObject,
        DTypeVariable,
        InOut,
        Out,
        Pred,
        TensorAnnotation,
        bf16,
        const,
        dims,
        dtype_var,
        f8e4m3,
        f8e5m2,
        f16,
        f32,
        f64,
        i4,
        i8,
        i16,
        i32,
        i64,
        pred,
        u8,
        u16,
        u32,
        u64,
    )
    from .kernel import Helper, KernelObject, combine, func, kernel
    from .loading import kernels_in_file
    from .torch_autograd import AutogradKernel, autograd


_SUBMODULES = ("dsl", "ops", "loading")


def __getattr__(name: str) -> _Any:
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'intent' has no attribute {name!r}")
    found = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = found
    return found


def __dir__() -> list[str]:
    return sorted(set(__all__) | set(_SUBMODULES))


class _Package(_types.ModuleType):
    def __setattr__(self, name: str, value: _Any) -> None:
        # Importing the submodule `intent.kernel` binds it on the package; the public name is the decorator.
        if name == "kernel" and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package

__all__ = ["kernel", "autograd", "AutogradKernel",
           "func", "combine", "dims", "Dim", "Pred", "parallel", "const", "dtype_var", "Out", "InOut",
           "pred", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64",
           "f8e4m3", "f8e5m2", "i4", "IntentError", "DiagnosticError", "LaunchError", "NotExpressible",
           "kernels_in_file", "KernelObject",
           "load", "profile", "Helper", "DTypeObject", "DTypeVariable", "TensorAnnotation", "SPELLINGS",
           *sorted(SPELLINGS)]

# The errors are part of the public surface: tracebacks and reprs name them as users import them.
for _error in (IntentError, DiagnosticError, LaunchError, NotExpressible):
    _error.__module__ = "intent"
del _error
