"""Memory access: load/view, gather, store, scatter (dynamic subregions live in kir/region.py)."""

from __future__ import annotations

from .core import (
    READS,
    WRITES,
    DynSlice,
    Index,
    Op,
    RefType,
    Role,
    Slice,
    TensorType,
    Type,
    TypeContext,
    Value,
    op,
    shape_str,
)
from .dims import DConst, Dim, PCmp
from .dtypes import DType
from .pointwise import Literal, literal_fits


def check_index(ctx: TypeContext, ref: RefType, index: Index, what: str) -> tuple[Dim, ...]:
    """Type an index tuple against `ref`; returns the shape it selects (one dim per slice)."""
    if len(index) != ref.rank:
        raise ctx.fail(f"{what} indexes {len(index)} axes of a rank-{ref.rank} tensor {shape_str(ref.shape)}")
    shape: list[Dim] = []
    for ax, it in enumerate(index):
        if isinstance(it, Value):
            ctx.scalar_int(it, f"{what} index on axis {ax}")
        elif isinstance(it, Slice):
            ctx.prove(PCmp("<=", DConst(0), it.start), f"{what} slice start on axis {ax}")
            ctx.prove(PCmp("<=", it.start, it.stop), f"{what} slice start <= stop on axis {ax}")
            ctx.prove(PCmp("<=", it.stop, ref.shape[ax]), f"{what} slice stop within {ref.shape[ax]} on "
                      f"axis {ax}")
            shape.append(it.extent)
        elif isinstance(it, DynSlice):
            raise ctx.fail(f"{what}: a data-dependent subregion (b:e) is only allowed in region folds/scans")
        else:
            raise ctx.fail(f"{what}: bad index item {it!r}")
    return tuple(shape)


@op("load", READS)
class Load(Op):
    """Read `src[index]`; point indices are affine in loop indices and proven in bounds."""

    src: Value
    index: Index

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        ref = ctx.ref(self.src, "load source")
        return (TensorType(ref.dtype, check_index(ctx, ref, self.index, "load")),)


def gather_shape(ctx: TypeContext, indices: tuple[Value, ...], what: str) -> tuple[Dim, ...]:
    shape: tuple[Dim, ...] | None = None
    for ax, v in enumerate(indices):
        t = ctx.tensor(v, f"{what} index {ax}")
        if not (isinstance(t.dtype, DType) and t.dtype.is_int):
            raise ctx.fail(f"{what} index {ax} must be an integer tensor, got {t}")
        if t.is_scalar:
            continue
        if shape is None:
            shape = t.shape
        else:
            ctx.same_shape(shape, t.shape, f"{what} index shapes")
    return shape or ()


@op("gather", READS)
class Gather(Op):
    """Read `src[i0, i1, ...]` at data-dependent coordinates; out-of-range reads give `fill`.

    `masked`: out-of-range coordinates are part of the meaning (a masked read, `intent.gather(x, i, fill)`),
    so the in-range check that `checks` compiles in does not apply to them."""

    src: Value
    indices: tuple[Value, ...]
    fill: Literal = 0
    masked: bool = False

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        ref = ctx.ref(self.src, "gather source")
        if len(self.indices) != ref.rank:
            raise ctx.fail(f"gather needs {ref.rank} indices for {shape_str(ref.shape)}, got {len(self.indices)}")
        if not literal_fits(self.fill, ref.dtype):
            raise ctx.fail(f"gather fill {self.fill!r} does not fit {ref.dtype}")
        return (TensorType(ref.dtype, gather_shape(ctx, self.indices, "gather")),)


def check_writable(ctx: TypeContext, ref: RefType, what: str) -> None:
    if ref.role is Role.IN:
        raise ctx.fail(f"{what} to an `in` parameter; declare it Out[...] or InOut[...]")


@op("store", WRITES)
class Store(Op):
    """Write `dst[index] = value`; `unique` states that instances write disjoint elements."""

    dst: Value
    index: Index
    value: Value
    unique: bool = False

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        ref = ctx.ref(self.dst, "store target")
        check_writable(ctx, ref, "store")
        shape = check_index(ctx, ref, self.index, "store")
        t = ctx.tensor(self.value, "stored value")
        if t.dtype != ref.dtype:
            raise ctx.fail(f"stored value is {t.dtype} but the target is {ref.dtype}; insert a cast")
        ctx.same_shape(t.shape, shape, "stored value and target slice")
        return ()


@op("scatter", WRITES)
class Scatter(Op):
    """Write `dst[i0, i1, ...] = value` at data-dependent coordinates; out-of-range writes are dropped."""

    dst: Value
    indices: tuple[Value, ...]
    value: Value
    unique: bool = False

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        ref = ctx.ref(self.dst, "scatter target")
        check_writable(ctx, ref, "scatter")
        if len(self.indices) != ref.rank:
            raise ctx.fail(f"scatter needs {ref.rank} indices, got {len(self.indices)}")
        shape = gather_shape(ctx, self.indices, "scatter")
        t = ctx.tensor(self.value, "scattered value")
        if t.dtype != ref.dtype:
            raise ctx.fail(f"scattered value is {t.dtype} but the target is {ref.dtype}; insert a cast")
        if not t.is_scalar:
            ctx.same_shape(t.shape, shape, "scattered value and indices")
        return ()
