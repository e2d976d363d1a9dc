"""The KIR data model: types, SSA values, ops, regions and kernels. Everything here is frozen.

Ops are frozen dataclasses. Their fields are of a few kinds that one format (the printer and the
parser in `kir/text.py`) reads from the annotations:

* `Value`, `tuple[Value, ...]`        -- SSA operands
* `Region`, `Region | None`           -- nested regions (the last op of a region is a `Yield`)
* `Index` items                       -- `tuple[Value | Slice | DynSlice, ...]` for accesses
* everything else is an attribute     -- enums, ints, floats, bools, dims, dtypes and tuples of them

Every op class provides `infer(ctx) -> tuple[Type, ...]` (its typing rule) next to its definition;
the verifier checks that the op's results have exactly those types.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from enum import Flag, auto
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from .dims import Dim, Pred, as_dim
from .dtypes import DType, DTypeVar, ElemType, SpelledEnum
from .errors import DiagnosticError, Loc

if TYPE_CHECKING:
    from .solver import ShapeSolver


# ---------------------------------------------------------------------------------------------- types


@dataclass(frozen=True)
class TensorType:
    """An immutable SSA tensor value; shape () is a scalar."""

    dtype: ElemType
    shape: tuple[Dim, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_scalar(self) -> bool:
        return not self.shape

    def with_dtype(self, dtype: ElemType) -> TensorType:
        return TensorType(dtype, self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"


class Role(SpelledEnum):
    IN = "in"
    OUT = "out"
    INOUT = "inout"
    LOCAL = "local"  # a local buffer made by `Alloc`


@dataclass(frozen=True)
class RefType:
    """Memory: a tensor parameter or a local buffer. Read with Load/Gather, written with Store/Scatter."""

    dtype: ElemType
    shape: tuple[Dim, ...]
    role: Role

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def writable(self) -> bool:
        return self.role is not Role.IN

    def __str__(self) -> str:
        return f"{self.role} {self.dtype}[{', '.join(str(d) for d in self.shape)}]"


Type = TensorType | RefType


def scalar(dtype: ElemType) -> TensorType:
    return TensorType(dtype, ())


# ---------------------------------------------------------------------------------------------- values


_ids = itertools.count()


TypeT = TypeVar("TypeT")


@dataclass(frozen=True)
class SSAValue(Generic[TypeT]):
    """An SSA value (KIR's `Value`, the physical program's `PValue`). Identity is `id`; `name` is a printing hint
    only. Printed `%name#id: type` (a physical value: `%nameid: type`)."""

    id: int
    type: TypeT
    name: str | None = field(default=None, compare=False)

    UNNAMED: ClassVar[str] = "v"  # printed for a value without a name
    ID_MARK: ClassVar[str] = "#"

    def __repr__(self) -> str:
        return f"%{self.name or self.UNNAMED}{self.ID_MARK}{self.id}: {self.type}"


@dataclass(frozen=True, repr=False)
class Value(SSAValue[Type]):
    """An SSA value of a kernel: a tensor or memory (a parameter, a buffer)."""


def new_value(type_: Type, name: str | None = None) -> Value:
    return Value(next(_ids), type_, name)


@dataclass(frozen=True)
class Slice:
    """A static slice `start:stop` of one axis (dims); `Slice(0, D)` is `:`."""

    start: Dim
    stop: Dim

    @property
    def extent(self) -> Dim:
        from .dims import dim_bin

        return dim_bin("-", self.stop, self.start)


@dataclass(frozen=True)
class DynSlice:
    """A data-dependent subregion `begin:end` of one axis (runtime i32/i64 scalars)."""

    begin: Value
    end: Value


IndexItem = Value | Slice | DynSlice
Index = tuple[IndexItem, ...]


def index_values(index: Index) -> Iterator[Value]:
    for it in index:
        if isinstance(it, Value):
            yield it
        elif isinstance(it, DynSlice):
            yield it.begin
            yield it.end


# ---------------------------------------------------------------------------------------------- ops

# The op families: `kir/<family>.py` defines a family's op classes, and every backend (the NumPy oracle, the
# StableHLO exit, the physical lowering) has a module of the same name that registers its rules for them.
OP_FAMILIES = ("access", "atomic", "buffers", "contract", "control", "histogram", "layout", "pointwise", "reduce",
               "region", "rng", "scan", "sort")


def load_families(package: str) -> None:
    """Import `<package>.<family>` for every op family: importing a backend's module registers its rules."""
    for family in OP_FAMILIES:
        importlib.import_module(f"{package}.{family}")


OP_CLASSES: dict[str, type[Op]] = {}

K = TypeVar("K")
V = TypeVar("V")
ValueT = TypeVar("ValueT")
OpT = TypeVar("OpT")
F = TypeVar("F", bound=Callable[..., Any])


def register(table: MutableMapping[K, V], key: K, value: V, what: str) -> None:
    """Add one entry to a registry; a second entry for the same key is a programming error (`what` names it)."""
    if key in table:
        raise ValueError(f"duplicate {what}")
    table[key] = value


def registrar(table: MutableMapping[Any, F], what: str) -> Callable[..., Callable[[F], F]]:
    """The decorator `@registers(key, ...)` that enters the decorated function in `table` under each key (an op
    class, a name); `what` names an entry, with `{key}` for the key, in the error about a key registered twice."""

    def registers(*keys: Any) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            for key in keys:
                register(table, key, fn, what.format(key=getattr(key, "__name__", key)))
            return fn

        return deco

    return registers


class OpTrait(Flag):
    """Properties a KIR op class declares (`@op(name, traits)`); the physical construction, the analyses and the
    verifier ask for these instead of keeping their own tuples of op classes. Every op class declares its set
    (possibly empty, `OpTrait(0)`); tests/test_kir_traits.py checks the laws between them."""

    READS = auto()       # reads memory: the buffer its `src` names (an atomic: its `dst`)
    WRITES = auto()      # writes memory the kernel's author observes: the buffer its `dst` names
    ATOMIC = auto()      # an atomic read-modify-write of `dst` (it READS and WRITES): instances may share elements
    CONTROL = auto()     # runs the ops of its regions (parallel, for, while, if); it has effects, as they may
    STRUCTURED = auto()  # computes over whole axes of its operands at once (a reduction, scan, sort, contraction,
    #                      histogram, region fold): costly to repeat, so one computation is shared by the statements
    #                      that use it, and a per-element rebuild must not recompute it per instance


# Shorthands for the declarations (`@op("store", WRITES)`).
READS, WRITES, ATOMIC, CONTROL, STRUCTURED = OpTrait.READS, OpTrait.WRITES, OpTrait.ATOMIC, OpTrait.CONTROL, \
    OpTrait.STRUCTURED
NO_OP_TRAITS = OpTrait(0)


def op(name: str, traits: OpTrait):
    """Register an op class under its text name, with the traits it declares (required: an op whose properties
    nobody stated would fall silently outside every analysis' reach)."""
    if not isinstance(traits, OpTrait):
        raise TypeError(f"op {name}: traits must be an OpTrait, got {traits!r}")

    def deco(cls: type[Op]) -> type[Op]:
        cls = dataclass(frozen=True, kw_only=True, eq=False)(cls)  # equality and hash: `Op.__eq__`
        cls.NAME = name
        cls.TRAITS = traits
        register(OP_CLASSES, name, cls, f"op name {name}")
        return cls

    return deco


@dataclass(frozen=True, kw_only=True)
class Op:
    results: tuple[Value, ...] = ()
    loc: Loc | None = field(default=None, compare=False)

    NAME: ClassVar[str] = "?"
    # Attribute fields that are omitted from the text when they hold their default.
    TERMINATOR: ClassVar[bool] = False
    TRAITS: ClassVar[OpTrait] = OpTrait(0)

    # --- equality: field by field, with float literals compared by representation (-0.0 is not 0.0,
    # NaN is NaN), so that caches keyed by kernels never confuse two kernels that compute differently
    def _eq_key(self) -> tuple[object, ...]:
        return (type(self),) + tuple(_literal_key(getattr(self, f.name)) for f in dataclasses.fields(self) if f.compare)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        return self._eq_key() == other._eq_key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._eq_key())

    # --- generic structure, read from the fields
    def fields(self) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(self) if f.name not in ("results", "loc")]

    def operands(self) -> tuple[Value, ...]:
        out: list[Value] = []
        for f in self.fields():
            out.extend(_values_in(getattr(self, f.name)))
        return tuple(out)

    def regions(self) -> tuple[Region, ...]:
        out: list[Region] = []
        for f in self.fields():
            v = getattr(self, f.name)
            if isinstance(v, Region):
                out.append(v)
        return tuple(out)

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"{self.NAME} has {len(self.results)} results")
        return self.results[0]

    # --- typing
    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        raise NotImplementedError(f"{type(self).__name__}.infer")

    def has(self, traits: OpTrait) -> bool:
        """Whether the op's class declares every trait of `traits`."""
        return traits in self.TRAITS

    def has_effects(self) -> bool:
        """Whether running the op is observable beyond its results: it writes memory, or holds ops that may."""
        return bool(self.TRAITS & (OpTrait.WRITES | OpTrait.CONTROL))


def _literal_key(x: object) -> object:
    if isinstance(x, float):
        return ("float", repr(x))
    if isinstance(x, tuple):
        return tuple(_literal_key(y) for y in x)
    return x


def _values_in(v: object) -> Iterator[Value]:
    if isinstance(v, Value):
        yield v
    elif isinstance(v, DynSlice):
        yield v.begin
        yield v.end
    elif isinstance(v, tuple):
        for x in v:
            yield from _values_in(x)


@dataclass(frozen=True)
class Block(Generic[ValueT, OpT]):
    """A block of ops with arguments, whose last op may be its terminator: what KIR's `Region` and the
    physical program's `PRegion` share (ops answer `TERMINATOR`, `operands()` and `regions()`)."""

    args: tuple[ValueT, ...]
    ops: tuple[OpT, ...]

    @property
    def terminator(self) -> OpT | None:
        return self.ops[-1] if self.ops and self.ops[-1].TERMINATOR else None  # type: ignore[attr-defined]

    @property
    def yielded(self) -> tuple[ValueT, ...]:
        t = self.terminator
        return t.operands() if t is not None else ()  # type: ignore[attr-defined]

    def walk(self) -> Iterator[OpT]:
        for o in self.ops:
            yield o
            for r in o.regions():  # type: ignore[attr-defined]
                yield from r.walk()


@dataclass(frozen=True)
class Region(Block[Value, Op]):
    """A block of ops with arguments; the last op is the region's terminator (`Yield`)."""


# ---------------------------------------------------------------------------------------------- kernel


class ParamKind(SpelledEnum):
    """A kernel parameter is a tensor or a runtime scalar (in KIR and in the physical program's ABI alike)."""

    TENSOR = "tensor"
    SCALAR = "scalar"


@dataclass(frozen=True)
class Param:
    name: str
    value: Value  # RefType for tensors, scalar TensorType for runtime scalars

    @property
    def kind(self) -> ParamKind:
        return ParamKind.TENSOR if isinstance(self.value.type, RefType) else ParamKind.SCALAR

    @property
    def role(self) -> Role:
        t = self.value.type
        return t.role if isinstance(t, RefType) else Role.IN

    @property
    def type(self) -> Type:
        return self.value.type


@dataclass(frozen=True)
class Kernel:
    name: str
    params: tuple[Param, ...]
    symbols: tuple[str, ...]
    body: Region  # args are the params' values, in order
    requires: tuple[Pred, ...] = ()
    axioms: tuple[Pred, ...] = ()  # the product escape hatch: stated facts, checked at launch
    dtype_vars: tuple[DTypeVar, ...] = ()
    consts: tuple[tuple[str, int | float | bool | str], ...] = ()  # specialised compile-time values
    checks: bool = False
    loc: Loc | None = field(default=None, compare=False)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def outputs(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.role in (Role.OUT, Role.INOUT))

    def walk(self) -> Iterator[Op]:
        return self.body.walk()

    def solver(self) -> ShapeSolver:
        from .solver import ShapeSolver

        return ShapeSolver(self.symbols, self.requires, self.axioms)

    def __str__(self) -> str:
        from .text import print_kernel

        return print_kernel(self)


# ---------------------------------------------------------------------------------------------- typing


class TypeContext:
    """What a typing rule may ask: dim equalities (Z3 under the refinements) and located errors."""

    def __init__(self, solver: ShapeSolver | None, loc: Loc | None = None) -> None:
        self.solver = solver
        self.loc = loc

    def fail(self, message: str) -> DiagnosticError:
        return DiagnosticError(message, self.loc)

    def same_dim(self, a: Dim, b: Dim, what: str) -> None:
        a, b = as_dim(a), as_dim(b)
        if a == b:
            return
        from .solver import format_counterexample

        if self.solver is None:
            raise self.fail(f"cannot prove {a} == {b} ({what})")
        cex = self.solver.equal(a, b)
        if cex is not None:
            raise self.fail(f"cannot prove {a} == {b} ({what}): {format_counterexample(cex)}")

    def same_shape(self, a: tuple[Dim, ...], b: tuple[Dim, ...], what: str) -> None:
        if len(a) != len(b):
            raise self.fail(f"rank mismatch ({what}): [{_shape(a)}] vs [{_shape(b)}]")
        for x, y in zip(a, b):
            self.same_dim(x, y, what)

    def prove(self, pred: Pred, what: str) -> None:
        from .solver import format_counterexample

        if self.solver is None:
            raise self.fail(f"cannot prove {pred} ({what})")
        cex = self.solver.prove(pred)
        if cex is not None:
            raise self.fail(f"cannot prove {pred} ({what}): {format_counterexample(cex)}")

    def tensor(self, v: Value, what: str) -> TensorType:
        if not isinstance(v.type, TensorType):
            raise self.fail(f"{what} must be a tensor value, got memory {v.type}")
        return v.type

    def ref(self, v: Value, what: str) -> RefType:
        if not isinstance(v.type, RefType):
            raise self.fail(f"{what} must be a tensor parameter or buffer, got value {v.type}")
        return v.type

    def scalar_int(self, v: Value, what: str) -> TensorType:
        t = self.tensor(v, what)
        if not t.is_scalar or not isinstance(t.dtype, DType) or not t.dtype.is_int:
            raise self.fail(f"{what} must be an integer scalar, got {t}")
        return t


def _shape(s: tuple[Dim, ...]) -> str:
    return ", ".join(str(d) for d in s)


def shape_str(s: tuple[Dim, ...]) -> str:
    return f"[{_shape(s)}]"
