"""What a name or an expression denotes while a kernel body is lowered.

Only `TVal` and `RefV` stand for KIR values; the other kinds are compile-time facts of the
Python surface (numbers, dims, dtypes, tuples, intent operations, helpers) that the frontend
folds or turns into explicit KIR ops where they meet tensors.
"""

from __future__ import annotations

import builtins
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass

from ..core import RefType, TensorType, Value
from ..dims import Dim, Pred
from ..dtypes import DType, DTypeVar, ElemType


@dataclass(frozen=True)
class TVal:
    """An SSA tensor value. `weak` values (from numbers, dims, loop indices) take the dtype of the strong
    operand they meet; `affine` is the value as a Presburger expression over loop symbols and dims when it
    is one (it decides between a proven point load and a gather)."""

    value: Value
    weak: bool = False
    affine: Dim | None = None

    @property
    def type(self) -> TensorType:
        assert isinstance(self.value.type, TensorType)
        return self.value.type

    @property
    def dtype(self) -> ElemType:
        return self.type.dtype

    @property
    def shape(self) -> tuple[Dim, ...]:
        return self.type.shape

    @property
    def rank(self) -> int:
        return len(self.type.shape)


@dataclass(frozen=True)
class RefV:
    """Memory: a tensor parameter or a local buffer."""

    value: Value
    name: str

    @property
    def type(self) -> RefType:
        assert isinstance(self.value.type, RefType)
        return self.value.type


@dataclass(frozen=True)
class Num:
    """A Python number (or bool) known at compile time; weakly typed."""

    value: int | float | bool


@dataclass(frozen=True)
class DimExpr:
    """A shape expression used as a value; a weakly typed integer known as a dim."""

    dim: Dim


@dataclass(frozen=True)
class TupleV:
    items: tuple[FValue, ...]


@dataclass(frozen=True)
class DTypeLit:
    dtype: ElemType


@dataclass(frozen=True)
class StrLit:
    value: str


@dataclass(frozen=True)
class NoneLit:
    absent: str = ""  # the optional tensor parameter this None stands for (passed as None), if any


@dataclass(frozen=True)
class OpRef:
    """An `intent.*` operation spelling; `fn` is its placeholder (its signature binds the call)."""

    name: str
    fn: Callable


@dataclass(frozen=True)
class HelperRef:
    """An `@intent.func` helper or `@intent.combine` function, inlined where it is called."""

    fn: Callable
    kind: str  # "func" or "combine"


@dataclass(frozen=True)
class ModuleRef:
    module: types.ModuleType


@dataclass(frozen=True)
class BuiltinRef:
    name: str


FValue = TVal | RefV | Num | DimExpr | TupleV | DTypeLit | StrLit | NoneLit | OpRef | HelperRef | ModuleRef \
    | BuiltinRef

# Python builtins a kernel body may call, each with a meaning of its own (see calls.py).
BUILTINS = ("range", "len", "abs", "min", "max", "float", "int", "bool")


def a_type(t: object) -> str:
    """'an f32 value', 'a pred[N] value': a type named in a message, with its article."""
    text = str(t.dtype) if isinstance(t, TensorType) and not t.shape else str(t)
    return f"{'an' if text[:1] in ('i', 'f') else 'a'} {text} value"


def describe(fv: FValue) -> str:
    """A short phrase for error messages: 'an f32[N] value', 'the number 2.5', ..."""
    if isinstance(fv, TVal):
        return a_type(fv.type)
    if isinstance(fv, RefV):
        return f"the tensor `{fv.name}` ({fv.type})"
    if isinstance(fv, Num):
        return f"the {'bool' if isinstance(fv.value, bool) else 'number'} {fv.value!r}"
    if isinstance(fv, DimExpr):
        return f"the dim {fv.dim}"
    if isinstance(fv, TupleV):
        return f"a tuple of {len(fv.items)}"
    if isinstance(fv, DTypeLit):
        return f"the dtype {fv.dtype}"
    if isinstance(fv, StrLit):
        return f"the string {fv.value!r}"
    if isinstance(fv, NoneLit):
        return f"None (the optional parameter `{fv.absent}` is absent in this specialisation: test `if " \
               f"{fv.absent} is not None:` before using it)" if fv.absent else "None"
    if isinstance(fv, OpRef):
        return f"the operation intent.{fv.name}"
    if isinstance(fv, HelperRef):
        return f"the helper `{getattr(fv.fn, '__name__', '?')}`"
    if isinstance(fv, ModuleRef):
        return f"the module `{fv.module.__name__}`"
    return f"the builtin `{fv.name}`"


# ---------------------------------------------------------------------------------------------- surface protocol
# The user-facing package (`intent`) builds on kir, never the other way round: its objects tell the
# frontend what they mean through these attributes.


def _attr(obj: object, name: str) -> object:
    if isinstance(obj, type):  # classes (Out, InOut) mean nothing by themselves
        return None
    try:
        return getattr(obj, name, None)
    except Exception:  # an object whose __getattr__ misbehaves means nothing to us
        return None


def dtype_of(obj: object) -> ElemType | None:
    if isinstance(obj, DType | DTypeVar):
        return obj
    dt = _attr(obj, "__kir_dtype__")
    return dt if isinstance(dt, DType | DTypeVar) else None


def dim_of(obj: object) -> Dim | None:
    if isinstance(obj, Dim):
        return obj
    d = _attr(obj, "__kir_dim__")
    return d if isinstance(d, Dim) else None


def pred_of(obj: object) -> Pred | None:
    if isinstance(obj, Pred):
        return obj
    p = _attr(obj, "__kir_pred__")
    return p if isinstance(p, Pred) else None


def op_name_of(obj: object) -> str | None:
    name = _attr(obj, "__intent_op__")
    return name if isinstance(name, str) else None


def helper_of(obj: object) -> HelperRef | None:
    for kind in ("combine", "func"):
        fn = _attr(obj, f"__intent_{kind}__")
        if callable(fn):
            return HelperRef(fn, kind)
    return None


class NotRepresentable(Exception):
    """A Python object from the enclosing scope that a kernel body cannot use."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def from_python(obj: object, dtype_bindings: dict[str, DType]) -> FValue:
    """The meaning of a Python object named in a kernel body (a global, a closure cell, a default)."""
    if isinstance(obj, bool | int | float):
        return Num(obj)
    np = sys.modules.get("numpy")  # a NumPy scalar exists only once NumPy is imported
    if np is not None and isinstance(obj, np.bool_ | np.integer | np.floating):
        return Num(obj.item())
    if isinstance(obj, str):
        return StrLit(obj)
    if obj is None:
        return NoneLit()
    if isinstance(obj, tuple | list) and not isinstance(obj, str):
        if isinstance(obj, list):
            raise NotRepresentable("a list (kernels use only immutable values from outside; use a tuple)")
        return TupleV(tuple(from_python(x, dtype_bindings) for x in obj))
    dt = dtype_of(obj)
    if dt is not None:
        if isinstance(dt, DTypeVar) and dt.name in dtype_bindings:
            return DTypeLit(dtype_bindings[dt.name])
        return DTypeLit(dt)
    d = dim_of(obj)
    if d is not None:
        return DimExpr(d)
    if pred_of(obj) is not None:
        raise NotRepresentable("a shape predicate (predicates belong in requires=[...])")
    name = op_name_of(obj)
    if name is not None:
        return OpRef(name, obj)  # type: ignore[arg-type]
    helper = helper_of(obj)
    if helper is not None:
        return helper
    if isinstance(obj, types.ModuleType):
        return ModuleRef(obj)
    for b in BUILTINS:
        if obj is getattr(builtins, b):
            return BuiltinRef(b)
    kind = type(obj).__name__
    if callable(obj):
        raise NotRepresentable(f"a plain Python {kind} (decorate helpers with @intent.func)")
    raise NotRepresentable(f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind} object")
