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
"""

from kir.errors import DiagnosticError, IntentError, LaunchError, NotExpressible

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
    f16,
    f32,
    f64,
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
from .ops import (
    SPELLINGS,
    abs,
    all,
    any,
    arange,
    argmax,
    argmin,
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
    sqrt,
    squeeze,
    store,
    sum,
    tanh,
    transpose,
    where,
    zeros,
    zeros_like,
)
from .torch_autograd import AutogradKernel, autograd

__all__ = ["kernel", "autograd", "AutogradKernel",
           "func", "combine", "dims", "Dim", "Pred", "parallel", "const", "dtype_var", "Out", "InOut",
           "pred", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64",
           "IntentError", "DiagnosticError", "LaunchError", "NotExpressible", "kernels_in_file", "KernelObject",
           "Helper", "DTypeObject", "DTypeVariable", "TensorAnnotation", "SPELLINGS", *sorted(SPELLINGS)]

# The errors are part of the public surface: tracebacks and reprs name them as users import them.
for _error in (IntentError, DiagnosticError, LaunchError, NotExpressible):
    _error.__module__ = "intent"
del _error
