"""The vocabulary of kernel signatures: dtype objects, shape dims, `Out`/`InOut`, `const`, `dtype_var`.

These objects are evaluated by Python when a kernel is defined (annotations, `requires=`); inside kernel
bodies the frontend reads their meaning through the `__kir_*__` attributes, never by calling them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from kir.core import Role
from kir.dims import DConst, DSym, PAnd, PCmp, PNot, POr, dim_bin
from kir.dims import Dim as KirDim
from kir.dims import Pred as KirPred
from kir.dtypes import DType, DTypeVar
from kir.errors import DiagnosticError, IntentError, Loc
from kir.frontend.signature import ConstSpec, TensorSpec


def user_loc() -> Loc | None:
    """The innermost frame outside this package: where the author wrote the offending expression."""
    frame = sys._getframe(1)
    here = os.path.dirname(os.path.abspath(__file__))
    while frame is not None and frame.f_code.co_filename.startswith(here):
        frame = frame.f_back
    if frame is None:
        return None
    return Loc(frame.f_code.co_filename, frame.f_lineno, 1)


def _definition_error(message: str) -> DiagnosticError:
    return DiagnosticError(message, user_loc())


# ---------------------------------------------------------------------------------------------- dims


class Dim:
    """A shape symbol or a Presburger expression of symbols (`N`, `S + 1`, `N // 4`).

    Arithmetic (`+ - * // %`) builds dims; comparisons (including `==` and `!=`) build predicates for
    `requires=[...]`. Dims are hashable (by structure)."""

    __slots__ = ("_dim",)

    def __init__(self, dim: KirDim | str | int) -> None:
        if isinstance(dim, Dim):
            dim = dim._dim
        elif isinstance(dim, str):
            if not dim.isidentifier():
                raise _definition_error(f"a dim name must be an identifier, got {dim!r}")
            dim = DSym(dim)
        elif isinstance(dim, int) and not isinstance(dim, bool):
            dim = DConst(dim)
        if not isinstance(dim, KirDim):
            raise _definition_error(f"cannot make a dim from {type(dim).__name__}")
        self._dim = dim

    @property
    def __kir_dim__(self) -> KirDim:
        return self._dim

    def __repr__(self) -> str:
        return f"Dim({self._dim})"

    def __str__(self) -> str:
        return str(self._dim)

    def __hash__(self) -> int:
        return hash(("intent.Dim", self._dim))

    # --- arithmetic
    def _bin(self, op: str, other: object, reflected: bool = False) -> Dim:
        o = _as_kir_dim(other)
        if o is None:
            return NotImplemented  # type: ignore[return-value]
        a, b = (o, self._dim) if reflected else (self._dim, o)
        if op in ("//", "%") and b == DConst(0):
            raise _definition_error(f"division by zero in the dim expression {a} {op} 0")
        return Dim(dim_bin(op, a, b))

    def __add__(self, o: object) -> Dim:
        return self._bin("+", o)

    def __radd__(self, o: object) -> Dim:
        return self._bin("+", o, True)

    def __sub__(self, o: object) -> Dim:
        return self._bin("-", o)

    def __rsub__(self, o: object) -> Dim:
        return self._bin("-", o, True)

    def __mul__(self, o: object) -> Dim:
        return self._bin("*", o)

    def __rmul__(self, o: object) -> Dim:
        return self._bin("*", o, True)

    def __floordiv__(self, o: object) -> Dim:
        return self._bin("//", o)

    def __rfloordiv__(self, o: object) -> Dim:
        return self._bin("//", o, True)

    def __mod__(self, o: object) -> Dim:
        return self._bin("%", o)

    def __rmod__(self, o: object) -> Dim:
        return self._bin("%", o, True)

    def __neg__(self) -> Dim:
        return Dim(dim_bin("-", DConst(0), self._dim))

    # --- comparisons build predicates
    def _cmp(self, op: str, other: object) -> Pred:
        o = _as_kir_dim(other)
        if o is None:
            return NotImplemented  # type: ignore[return-value]
        return Pred(PCmp(op, self._dim, o))

    def __eq__(self, o: object) -> Pred:  # type: ignore[override]
        return self._cmp("==", o)

    def __ne__(self, o: object) -> Pred:  # type: ignore[override]
        return self._cmp("!=", o)

    def __lt__(self, o: object) -> Pred:
        return self._cmp("<", o)

    def __le__(self, o: object) -> Pred:
        return self._cmp("<=", o)

    def __gt__(self, o: object) -> Pred:
        return self._cmp(">", o)

    def __ge__(self, o: object) -> Pred:
        return self._cmp(">=", o)

    def __bool__(self) -> bool:
        raise IntentError(f"the dim {self._dim} has no truth value; compare it (e.g. {self._dim} > 0) inside "
                          f"requires=[...]")

    def __index__(self) -> int:
        raise IntentError(f"the dim {self._dim} is symbolic and has no integer value outside a kernel")


def _as_kir_dim(x: object) -> KirDim | None:
    if isinstance(x, Dim):
        return x._dim
    if isinstance(x, KirDim):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return DConst(x)
    return None


class Pred:
    """A refinement predicate over dims; combine with `&`, `|` and `~` (Python's and/or/not cannot be
    overloaded)."""

    __slots__ = ("_pred",)

    def __init__(self, pred: KirPred) -> None:
        self._pred = pred

    @property
    def __kir_pred__(self) -> KirPred:
        return self._pred

    def __and__(self, o: object) -> Pred:
        if not isinstance(o, Pred):
            return NotImplemented
        return Pred(PAnd((self._pred, o._pred)))

    def __or__(self, o: object) -> Pred:
        if not isinstance(o, Pred):
            return NotImplemented
        return Pred(POr((self._pred, o._pred)))

    def __invert__(self) -> Pred:
        return Pred(PNot(self._pred))

    def __bool__(self) -> bool:
        raise IntentError(f"the shape predicate `{self._pred}` has no truth value at definition time; put it in "
                          f"requires=[...] (combine predicates with & | ~, not and/or/not)")

    def __repr__(self) -> str:
        return f"Pred({self._pred})"

    def __str__(self) -> str:
        return str(self._pred)


def dims(names: str) -> Dim | tuple[Dim, ...]:
    """`M, N = dims("M N")`; a single name gives a single dim."""
    parts = names.replace(",", " ").split()
    if not parts:
        raise _definition_error("dims() needs at least one name, e.g. dims(\"M N\")")
    out = tuple(Dim(p) for p in parts)
    return out[0] if len(out) == 1 else out


# ---------------------------------------------------------------------------------------------- types


def _shape_of(shape: object, what: str) -> tuple[KirDim, ...]:
    items = shape if isinstance(shape, tuple) else (shape,)
    out = []
    for it in items:
        d = _as_kir_dim(it)
        if d is None and isinstance(it, str) and it.isidentifier():
            d = DSym(it)
        if d is None:
            raise _definition_error(f"{what}: a shape lists dims or integers, got {it!r}")
        if isinstance(d, DConst) and d.value < 0:
            raise _definition_error(f"{what}: negative extent {d.value}")
        out.append(d)
    return tuple(out)


@dataclass(frozen=True)
class TensorAnnotation:
    """`f32[M, N]` (an input tensor), or with `Out[...]` / `InOut[...]` an output."""

    dtype: DType | DTypeVar
    shape: tuple[KirDim, ...]
    role: Role = Role.IN

    optional: bool = False

    def __kir_annotation__(self) -> TensorSpec:
        return TensorSpec(self.dtype, self.shape, self.role, self.optional)

    def __or__(self, other: object) -> TensorAnnotation:
        """`f32[N] | None`: an optional tensor parameter."""
        if other is not None:
            return NotImplemented
        return TensorAnnotation(self.dtype, self.shape, self.role, True)

    __ror__ = __or__

    def __repr__(self) -> str:
        body = f"{self.dtype}[{', '.join(map(str, self.shape))}]"
        shown = {Role.IN: body, Role.OUT: f"Out[{body}]", Role.INOUT: f"InOut[{body}]"}.get(self.role, body)
        return f"{shown} | None" if self.optional else shown


class DTypeObject:
    """An element type: `f32` (a runtime scalar parameter), `f32[M, N]` (a tensor type) or, in a kernel
    body, `f32(0.0)` (a typed constant) and `x.to(f32)`."""

    def __init__(self, dtype: DType) -> None:
        self._dtype = dtype

    @property
    def __kir_dtype__(self) -> DType:
        return self._dtype

    @property
    def kir(self) -> DType:
        return self._dtype

    def __getitem__(self, shape: object) -> TensorAnnotation:
        return TensorAnnotation(self._dtype, _shape_of(shape, f"{self._dtype}[...]"))

    def __call__(self, *args: object) -> object:
        raise IntentError(f"{self._dtype}(...) makes a typed constant inside a kernel body only; outside kernels use "
                          f"NumPy or torch")

    def __repr__(self) -> str:
        return f"intent.{self._dtype}"

    def __str__(self) -> str:
        return str(self._dtype)


class DTypeVariable:
    """`T = intent.dtype_var("T", f16, bf16, f32)`: a generic element type, specialised per call."""

    def __init__(self, name: str, choices: tuple[DType, ...]) -> None:
        self._var = DTypeVar(name, choices)

    @property
    def __kir_dtype__(self) -> DTypeVar:
        return self._var

    @property
    def name(self) -> str:
        return self._var.name

    @property
    def choices(self) -> tuple[DType, ...]:
        return self._var.choices

    def __getitem__(self, shape: object) -> TensorAnnotation:
        return TensorAnnotation(self._var, _shape_of(shape, f"{self._var.name}[...]"))

    def __call__(self, *args: object) -> object:
        raise IntentError(f"{self._var.name}(...) makes a typed constant inside a kernel body only")

    def __repr__(self) -> str:
        return f"dtype_var({self._var.name!r}, {', '.join(map(str, self._var.choices))})"


def dtype_var(name: str, *choices: DTypeObject) -> DTypeVariable:
    if not isinstance(name, str) or not name.isidentifier():
        raise _definition_error(f"dtype_var needs a name, got {name!r}")
    if not choices:
        raise _definition_error(f"dtype_var({name!r}) needs at least one dtype choice, e.g. dtype_var({name!r}, "
                                f"f16, f32)")
    kir_choices = []
    for c in choices:
        dt = getattr(c, "__kir_dtype__", None) if not isinstance(c, DType) else c
        if not isinstance(dt, DType):
            raise _definition_error(f"dtype_var({name!r}): the choices are dtypes like intent.f32, got {c!r}")
        if dt not in kir_choices:
            kir_choices.append(dt)
    return DTypeVariable(name, tuple(kir_choices))


class _RoleMarker:
    role: Role

    def __class_getitem__(cls, item: object) -> TensorAnnotation:
        if not isinstance(item, TensorAnnotation):
            raise _definition_error(f"{cls.__name__}[...] wraps a tensor type like f32[N], got {item!r}")
        if item.role is not Role.IN:
            raise _definition_error(f"{cls.__name__}[...] wraps a plain tensor type, got {item!r}")
        return TensorAnnotation(item.dtype, item.shape, cls.role, item.optional)


class Out(_RoleMarker):
    """`Out[f32[M, N]]`: written by the kernel (omitted at a call, it is allocated and returned)."""

    role = Role.OUT


class InOut(_RoleMarker):
    """`InOut[i32[B]]`: read and written by the kernel."""

    role = Role.INOUT


@dataclass(frozen=True)
class ConstAnnotation:
    kind: type

    def __kir_annotation__(self) -> ConstSpec:
        return ConstSpec(self.kind)

    def __repr__(self) -> str:
        return f"intent.const[{self.kind.__name__}]"


class _ConstFactory:
    """`intent.const[int]`: a compile-time parameter; each value gives a separate specialisation."""

    def __getitem__(self, kind: object) -> ConstAnnotation:
        if kind not in (int, float, bool):
            raise _definition_error(f"intent.const[...] takes int, float or bool, got {kind!r}")
        return ConstAnnotation(kind)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return "intent.const"


const = _ConstFactory()

pred = DTypeObject(DType.pred)
i8 = DTypeObject(DType.i8)
i16 = DTypeObject(DType.i16)
i32 = DTypeObject(DType.i32)
i64 = DTypeObject(DType.i64)
u8 = DTypeObject(DType.u8)
u16 = DTypeObject(DType.u16)
u32 = DTypeObject(DType.u32)
u64 = DTypeObject(DType.u64)
f16 = DTypeObject(DType.f16)
bf16 = DTypeObject(DType.bf16)
f32 = DTypeObject(DType.f32)
f64 = DTypeObject(DType.f64)
i4 = DTypeObject(DType.i4)
f8e4m3 = DTypeObject(DType.f8e4m3)
f8e5m2 = DTypeObject(DType.f8e5m2)

__all__ = ["Dim", "Pred", "dims", "TensorAnnotation", "DTypeObject", "DTypeVariable", "dtype_var", "Out", "InOut",
           "ConstAnnotation", "const", "pred", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
           "f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2", "i4"]
