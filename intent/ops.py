"""The operation spellings of kernel bodies (`intent.exp`, `intent.sum`, `intent.dot`, ...).

Kernel bodies are compiled, not run: the frontend binds each call against the signature below and lowers
it to KIR. Called outside a kernel body, every spelling raises an error saying so.
"""

# ruff: noqa: A001, A002  (the spellings deliberately mirror NumPy names such as sum, max, min, abs, round)

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .errors import IntentError

F = TypeVar("F", bound=Callable[..., Any])

SPELLINGS: dict[str, Callable[..., Any]] = {}


def _spelling(fn: F) -> F:
    name = fn.__name__

    def outside(*args: object, **kwargs: object) -> Any:
        raise IntentError(f"intent.{name}(...) is a kernel operation: it can only be used inside the body of an "
                          f"@intent.kernel or @intent.func function")

    outside.__name__ = name
    outside.__qualname__ = name
    outside.__doc__ = fn.__doc__
    outside.__wrapped__ = fn  # type: ignore[attr-defined]  (inspect.signature reads the spelling's signature)
    outside.__intent_op__ = name  # type: ignore[attr-defined]
    SPELLINGS[name] = outside
    return outside  # type: ignore[return-value]


def parallel(*extents: object) -> Any:
    """`for i in parallel(M):` / `for i, j in parallel(M, N):` -- unordered instances over a domain."""
    raise IntentError("parallel(...) describes the iteration of a kernel loop; it can only be used as "
                      "`for i in parallel(N):` inside an @intent.kernel body")


parallel.__intent_op__ = "parallel"  # type: ignore[attr-defined]
SPELLINGS["parallel"] = parallel


# --- pointwise unary
@_spelling
def neg(x): """-x"""
@_spelling
def abs(x): """|x|"""
@_spelling
def exp(x): """e ** x"""
@_spelling
def exp2(x): """2 ** x"""
@_spelling
def log(x): """natural logarithm"""
@_spelling
def log2(x): """base-2 logarithm"""
@_spelling
def log1p(x): """log(1 + x)"""
@_spelling
def sqrt(x): """square root"""
@_spelling
def rsqrt(x): """1 / sqrt(x)"""
@_spelling
def sin(x): """sine"""
@_spelling
def cos(x): """cosine"""
@_spelling
def tanh(x): """hyperbolic tangent"""
@_spelling
def sigmoid(x): """1 / (1 + exp(-x))"""
@_spelling
def erf(x): """the error function"""
@_spelling
def floor(x): """round toward -inf"""
@_spelling
def ceil(x): """round toward +inf"""
@_spelling
def round(x): """round half to even"""
@_spelling
def isnan(x): """pred: x is NaN"""
@_spelling
def isinf(x): """pred: x is +-inf"""


# --- pointwise binary, select, bit reinterpretation
@_spelling
def maximum(a, b): """elementwise maximum (NaN-propagating)"""
@_spelling
def minimum(a, b): """elementwise minimum (NaN-propagating)"""
@_spelling
def pow(a, b): """a ** b"""
@_spelling
def where(cond, a, b): """elementwise choice: a where cond, else b"""
@_spelling
def clamp(x, lo=None, hi=None): """minimum(maximum(x, lo), hi), as torch.clamp (either bound may be None)"""
@_spelling
def lerp(a, b, w): """a + w * (b - a), as torch.lerp (w = 1 gives b exactly)"""
@_spelling
def topk(x, k, axis=-1, largest=True):
    """(values, i64 indices) of the k largest (largest=False: smallest) elements along `axis`, in that order (NaN
    counts as the largest, ties in index order)"""
@_spelling
def gather(src, index, fill=0):
    """a masked read: src[index] where index is in range, else fill (a tuple of indices for rank > 1)"""
@_spelling
def bitcast(x, dtype): """reinterpret the bits of x as dtype (same width)"""


# --- reductions
@_spelling
def sum(x, axis=None, keepdims=False, acc=None): """sum (f16/bf16 accumulate in f32 unless acc says otherwise)"""
@_spelling
def prod(x, axis=None, keepdims=False, acc=None): """product"""
@_spelling
def max(x, axis=None, keepdims=False): """maximum (NaN-propagating)"""
@_spelling
def min(x, axis=None, keepdims=False): """minimum (NaN-propagating)"""
@_spelling
def any(x, axis=None, keepdims=False): """pred: some element is true"""
@_spelling
def all(x, axis=None, keepdims=False): """pred: every element is true"""
@_spelling
def argmax(x, axis=None, keepdims=False): """i64 index of the first maximum (NaN counts as the maximum)"""
@_spelling
def argmin(x, axis=None, keepdims=False): """i64 index of the first minimum (NaN counts as the minimum)"""
@_spelling
def mean(x, axis=None, keepdims=False): """sum / count"""
@_spelling
def reduce(values, combine, axis=None, keepdims=False, identity=None):
    """Reduce a value or a tuple of values with an @intent.combine function and its identity."""


# --- sorting
@_spelling
def sort(x, axis=-1, descending=False, return_indices=False):
    """x sorted along `axis` (stable; NaN last ascending, first descending); with return_indices, (values, i64
    indices)"""
@_spelling
def argsort(x, axis=-1, descending=False):
    """the i64 indices that sort x along `axis` (stable)"""


# --- scans
@_spelling
def cumsum(x, axis=-1, reverse=False, exclusive=False, acc=None): """running sum"""
@_spelling
def cumprod(x, axis=-1, reverse=False, exclusive=False, acc=None): """running product"""
@_spelling
def cummax(x, axis=-1, reverse=False, exclusive=False): """running maximum"""
@_spelling
def cummin(x, axis=-1, reverse=False, exclusive=False): """running minimum"""
@_spelling
def scan(values, combine, axis=-1, reverse=False, exclusive=False, identity=None):
    """Scan a value or a tuple of values with an @intent.combine function and its identity."""


# --- contraction, histogram
@_spelling
def dot(a, b, acc=None, precision=None):
    """Matrix product with NumPy matmul semantics (leading batch dims); accumulates in f32 for f16/bf16/f32 and
    in i32 for i8. precision='tf32' allows TF32 for f32 inputs."""
@_spelling
def einsum(spec, a, b, acc=None, precision=None): """two-operand contraction, e.g. einsum('bmk,bnk->bmn', a, b)"""
@_spelling
def histogram(values, bins): """i32 counts of integer values in [0, bins)"""


# --- memory: atomics and explicit stores
@_spelling
def atomic_add(dst, index, value, order="acq_rel"): """dst[index] += value atomically; returns the old value"""
@_spelling
def atomic_max(dst, index, value, order="acq_rel"): """atomic maximum; returns the old value"""
@_spelling
def atomic_min(dst, index, value, order="acq_rel"): """atomic minimum; returns the old value"""
@_spelling
def atomic_and(dst, index, value, order="acq_rel"): """atomic bitwise and; returns the old value"""
@_spelling
def atomic_or(dst, index, value, order="acq_rel"): """atomic bitwise or; returns the old value"""
@_spelling
def atomic_xor(dst, index, value, order="acq_rel"): """atomic bitwise xor; returns the old value"""
@_spelling
def atomic_xchg(dst, index, value, order="acq_rel"): """atomic exchange; returns the old value"""
@_spelling
def atomic_cas(dst, index, expected, value, order="acq_rel"):
    """compare-and-swap; returns the old value (it succeeded when old == expected)"""
@_spelling
def store(dst, index, value, unique=True):
    """dst[index] = value, stating that parallel instances write distinct elements (unique=True)"""


@_spelling
def atomic_and_(dst, index, value, order="acq_rel"): """the same as atomic_and"""
@_spelling
def atomic_or_(dst, index, value, order="acq_rel"): """the same as atomic_or"""


# --- random numbers
@_spelling
def rand(seed, offset): """uniform f32 in [0, 1), Philox 4x32-10 (bit-exact with tl.rand)"""
@_spelling
def randn(seed, offset): """standard normal f32 (bit-exact with tl.randn)"""
@_spelling
def randint(seed, offset): """raw u32 Philox output (bit-exact with tl.randint)"""


# --- creation
@_spelling
def arange(start, stop=None, dtype=None): """0, 1, ..., n-1 (or start..stop-1); weakly typed i64 by default"""
@_spelling
def zeros(shape, dtype=None): """zeros; a local buffer when the name it is assigned to is written into"""
@_spelling
def ones(shape, dtype=None): """ones; a local buffer when written into"""
@_spelling
def full(shape, value, dtype=None): """a constant fill; a local buffer when written into"""
@_spelling
def empty(shape, dtype=None): """an uninitialised local buffer (write before reading)"""
@_spelling
def zeros_like(x, dtype=None): """zeros with the shape and dtype of x"""
@_spelling
def ones_like(x, dtype=None): """ones with the shape and dtype of x"""
@_spelling
def full_like(x, value, dtype=None): """a constant fill with the shape and dtype of x"""
@_spelling
def empty_like(x, dtype=None): """an uninitialised buffer with the shape and dtype of x"""


# --- layout
@_spelling
def broadcast_to(x, shape): """NumPy broadcasting to shape"""
@_spelling
def reshape(x, shape): """reshape (one axis may be -1)"""
@_spelling
def permute(x, dims): """reorder axes: result axis k is input axis dims[k]"""
@_spelling
def transpose(x, axes=None): """reverse the axes, or reorder them as `axes`"""
@_spelling
def concat(values, axis=0): """join a tuple of tensors along axis"""
@_spelling
def expand_dims(x, axis): """insert an axis of extent 1"""
@_spelling
def squeeze(x, axis=None): """remove axes of extent 1"""
