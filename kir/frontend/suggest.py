"""What to write instead: known torch, NumPy and Triton spellings and common misspellings, with their Intent
equivalents, consulted before fuzzy matching (which would answer `intent.cast` with `bitcast`, a different
operation, and `relu` with `reduce`).

`EQUIVALENTS` maps a name to the clause a diagnostic appends ("write `intent.maximum(x, 0.0)`"); `METHODS`
does the same for tensor methods (`x.float()`). Every entry is tested with its exact message, and every
formula an entry suggests is tested against torch (tests/test_frontend_suggestions.py).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Iterable

from ..dtypes import DType

_TO = "convert values with `x.to(dtype)` (`intent.bitcast(x, dtype)` reinterprets bits instead)"


def _dtype(name: str) -> str:
    return f"the dtype is `intent.{name}`"


EQUIVALENTS: dict[str, str] = {
    # conversions and dtype names (torch, NumPy)
    "cast": _TO,
    "astype": _TO,
    "convert": _TO,
    "float32": _dtype("f32"),
    "float": _dtype("f32"),
    "float16": _dtype("f16"),
    "half": _dtype("f16"),
    "bfloat16": _dtype("bf16"),
    "float64": _dtype("f64"),
    "double": _dtype("f64"),
    "int8": _dtype("i8"),
    "int16": _dtype("i16"),
    "int32": _dtype("i32"),
    "int": _dtype("i32"),
    "int64": _dtype("i64"),
    "long": _dtype("i64"),
    "uint8": _dtype("u8"),
    "uint16": _dtype("u16"),
    "uint32": _dtype("u32"),
    "uint64": _dtype("u64"),
    "bool": _dtype("pred"),
    "bool_": _dtype("pred"),
    # activations and composite functions
    "relu": "write `intent.maximum(x, 0.0)`",
    "gelu": "write `0.5 * x * (1.0 + intent.erf(x * 0.7071067811865476))`",
    "silu": "write `x * intent.sigmoid(x)`",
    "softmax": "write `e = intent.exp(x - intent.max(x))`, then `e / intent.sum(e)`",
    "logsumexp": "write `m = intent.max(x)`, then `m + intent.log(intent.sum(intent.exp(x - m)))`",
    "clip": "write `intent.clamp(x, lo, hi)`",
    "softplus": "write `intent.where(x > 20.0, x, intent.log1p(intent.exp(x)))`",
    "leaky_relu": "write `intent.where(x >= 0.0, x, 0.01 * x)` (0.01 is torch's default slope)",
    "hardtanh": "write `intent.clamp(x, -1.0, 1.0)`",
    "square": "write `x * x`",
    "reciprocal": "write `1.0 / x`",
    "tan": "write `intent.sin(x) / intent.cos(x)`",
    "log10": "write `intent.log(x) * 0.4342944819032518`",
    "isfinite": "write `~(intent.isnan(x) | intent.isinf(x))`",
    "var": "write `d = x - intent.mean(x)`, then `intent.mean(d * d)` (or a Welford `intent.reduce`)",
    "std": "write `d = x - intent.mean(x)`, then `intent.sqrt(intent.mean(d * d))`",
    # arithmetic spelt as functions
    "add": "write `a + b`",
    "subtract": "write `a - b`",
    "multiply": "write `a * b`",
    "divide": "write `a / b`",
    "true_divide": "write `a / b`",
    "floor_divide": "write `a // b` (floored for floats, as in torch; integer `//` truncates toward zero, as in C)",
    "fmod": "Intent's `a % b` is torch.remainder (the sign of `b`); there is no C fmod (the sign of `a`)",
    "remainder": "write `a % b` (the sign of `b`, as torch.remainder)",
    "power": "write `a ** b` or `intent.pow(a, b)`",
    "logical_and": "write `a & b` on preds (`and` on scalar preds)",
    "logical_or": "write `a | b` on preds (`or` on scalar preds)",
    "logical_not": "write `~a` on preds (`not` on a scalar pred)",
    "logical_xor": "write `a ^ b` on preds",
    "bitwise_and": "write `a & b`",
    "bitwise_or": "write `a | b`",
    "bitwise_xor": "write `a ^ b`",
    "bitwise_not": "write `~a`",
    # reductions, contractions, layout
    "amax": "write `intent.max(x, axis)`",
    "amin": "write `intent.min(x, axis)`",
    "average": "write `intent.mean(x, axis)`",
    "matmul": "write `intent.dot(a, b)`",
    "mm": "write `intent.dot(a, b)`",
    "bmm": "write `intent.dot(a, b)`",
    "tensordot": "write `intent.einsum(spec, a, b)`",
    "outer": "write `intent.expand_dims(a, 1) * intent.expand_dims(b, 0)`",
    "bincount": "write `intent.histogram(values, bins)`",
    "cat": "write `intent.concat((a, b), axis)`",
    "concatenate": "write `intent.concat((a, b), axis)`",
    "stack": "write `intent.concat((intent.expand_dims(a, 0), intent.expand_dims(b, 0)), 0)`",
    "unsqueeze": "write `intent.expand_dims(x, axis)`",
    "view": "write `intent.reshape(x, shape)`",
    "flatten": "write `intent.reshape(x, (-1,))`",
    "swapaxes": "write `intent.permute(x, dims)`",
    "moveaxis": "write `intent.permute(x, dims)`",
    "expand": "write `intent.broadcast_to(x, shape)`",
    # memory and random numbers
    "atomic_sub": "write `intent.atomic_add(dst, index, -value)`",
    "scatter": "assign through the index (`out[idx[n]] = v`) or write `intent.store(dst, index, value, unique=True)`",
    "program_id": "write `for i in parallel(N):` (each instance is one `i`)",
    "cdiv": "write `(a + b - 1) // b`",
    "uniform": "write `intent.rand(seed, offset)`",
    "normal": "write `intent.randn(seed, offset)`",
    "dropout": "write `intent.where(intent.rand(seed, offset) >= p, x / (1.0 - p), 0.0)`",
}

# Tensor methods (`x.NAME(...)` on a value); names not here fall back to EQUIVALENTS and the spellings.
METHODS: dict[str, str] = {
    "astype": _TO,
    "type": _TO,
    "cast": _TO,
    "float": "write `x.to(intent.f32)`",
    "half": "write `x.to(intent.f16)`",
    "bfloat16": "write `x.to(intent.bf16)`",
    "double": "write `x.to(intent.f64)`",
    "int": "write `x.to(intent.i32)`",
    "long": "write `x.to(intent.i64)`",
    "bool": "write `x.to(intent.pred)`",
    "reshape": "write `intent.reshape(x, shape)`",
    "size": "write `x.shape`",
    "dim": "write `x.ndim`",
    "t": "write `x.T`",
    "item": "a kernel body computes on values: use the value itself",
    "tolist": "a kernel body computes on values: use the value itself",
    "numpy": "a kernel body computes on values: use the value itself",
    "contiguous": "a kernel body computes on values: use the value itself",
    "clone": "a kernel body computes on values: use the value itself",
}


def _spelling_call(name: str, spellings: dict[str, object]) -> str:
    """`intent.exp(x)`, or `intent.sum(x, ...)` for a spelling with more parameters."""
    fn = spellings[name]
    try:
        params = list(inspect.signature(fn).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        params = []
    first = params[0] if params else "x"
    return f"intent.{name}({first}{', ...' if len(params) > 1 else ''})"


def _intent_spellings() -> dict[str, object]:
    """The user-facing spellings (with their signatures) of the operations the frontend lowers."""
    from .calls import CALLS

    try:  # `intent` sits above `kir`; it is imported only when a message needs its signatures
        spellings: dict[str, object] = dict(importlib.import_module("intent.ops").SPELLINGS)
    except ImportError:
        spellings = {}
    return {name: spellings.get(name, handler) for name, handler in CALLS.items()}


def _clause(name: str, table: dict[str, str]) -> str | None:
    """The clause `table` gives for `name`, else the call of the intent operation of that name, or None."""
    hit = table.get(name)
    if hit is not None:
        return hit
    spellings = _intent_spellings()
    if name in spellings:
        return f"write `{_spelling_call(name, spellings)}`"
    return None


def equivalent(name: str) -> str | None:
    """The clause for a name written as a function (`intent.NAME`, `torch.NAME`, a bare `NAME`), or None."""
    return _clause(name, EQUIVALENTS)


def method_equivalent(name: str) -> str | None:
    """The clause for `x.NAME(...)` on a tensor value, or None."""
    hit = _clause(name, METHODS)
    return hit if hit is not None else EQUIVALENTS.get(name)


def dtype_name_equivalent(name: str | None) -> str | None:
    """The clause for a dtype written as a builtin or a string (`x.to(float)`, `x.to("f32")`), or None."""
    if name is None:
        return None
    if name in DType.__members__:
        return f"the dtype is `intent.{name}`"
    hit = EQUIVALENTS.get(name)
    return hit if hit is not None and hit.startswith("the dtype is") else None


def suggestion(name: str, known: Iterable[str]) -> str:
    """"; <clause>" from the table, else "; did you mean `close`?" from the known names, else ""."""
    hit = equivalent(name)
    if hit is not None:
        return f"; {hit}"
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean `{close[0]}`?" if close else ""


# Packages whose functions and dtypes look usable in a kernel body but are not.
FOREIGN_PACKAGES = frozenset({"torch", "numpy", "math", "cmath", "jax", "triton", "scipy"})


def foreign_package(obj: object, name: str) -> str | None:
    """The package a Python object named in a kernel body comes from, when it is one of FOREIGN_PACKAGES."""
    for module in (getattr(obj, "__module__", None), type(obj).__module__, name.partition(".")[0]):
        root = module.partition(".")[0] if isinstance(module, str) else None
        if root in FOREIGN_PACKAGES:
            return root
    return None
