"""Region fold and region scan over a data-dependent subregion `[begin, end)` of one axis.

The source is `src[p0, ..., begin:end, ..., pk]`: exactly one `DynSlice`, the other items points.
An optional `map` region (the summariser's element map) turns each element into the fold's
components; without it the components are the elements themselves. The map's arguments are the
element and, optionally, its position along the subregion's axis (i64, as an index of the source:
`b`, `b + 1`, ...), at which it may read other tensors (`x[indices[k]]` beside `data[k]`: several
subregions over one range). An empty region yields the
identity.
"""

from __future__ import annotations

from .core import (
    READS,
    STRUCTURED,
    WRITES,
    DynSlice,
    Index,
    Op,
    RefType,
    Region,
    TensorType,
    Type,
    TypeContext,
    Value,
    op,
    scalar,
)
from .dtypes import DType, ElemType
from .pointwise import Literal
from .reduce import ReduceKind, check_builtin, check_combine, default_acc
from .scan import ScanKind


def check_region_index(ctx: TypeContext, ref: RefType, index: Index, what: str) -> DynSlice:
    if len(index) != ref.rank:
        raise ctx.fail(f"{what} indexes {len(index)} axes of a rank-{ref.rank} tensor")
    dyn = [it for it in index if isinstance(it, DynSlice)]
    if len(dyn) != 1:
        raise ctx.fail(f"{what} needs exactly one data-dependent subregion b:e, got {len(dyn)}")
    for ax, it in enumerate(index):
        if isinstance(it, Value):
            ctx.scalar_int(it, f"{what} index on axis {ax}")
        elif isinstance(it, DynSlice):
            ctx.scalar_int(it.begin, f"{what} subregion begin")
            ctx.scalar_int(it.end, f"{what} subregion end")
        else:
            raise ctx.fail(f"{what}: axis {ax} must be a point index or the subregion")
    return dyn[0]


@op("region_fold", READS | STRUCTURED)
class RegionFold(Op):
    src: Value
    index: Index
    kind: ReduceKind
    acc_dtype: ElemType | None = None
    identity: tuple[Literal, ...] | None = None
    map: Region | None = None
    combine: Region | None = None

    def component_dtypes(self, ctx: TypeContext) -> tuple[ElemType, ...]:
        ref = ctx.ref(self.src, "region fold source")
        if self.map is None:
            return (ref.dtype,)
        if tuple(a.type for a in self.map.args) not in ((scalar(ref.dtype),), (scalar(ref.dtype), scalar(DType.i64))):
            raise ctx.fail(f"region fold map takes one {ref.dtype} element (and optionally its i64 position)")
        out = []
        for v in self.map.yielded:
            t = v.type
            if not isinstance(t, TensorType) or not t.is_scalar:
                raise ctx.fail("region fold map must yield scalars")
            out.append(t.dtype)
        if not out:
            raise ctx.fail("region fold map yields nothing")
        return tuple(out)

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        ref = ctx.ref(self.src, "region fold source")
        check_region_index(ctx, ref, self.index, "region fold")
        dts = self.component_dtypes(ctx)
        if self.kind is ReduceKind.custom:
            check_combine(ctx, self.combine, self.identity, dts, "region fold")
            return tuple(scalar(d) for d in dts)
        if len(dts) != 1:
            raise ctx.fail(f"region fold {self.kind} folds one component, got {len(dts)}")
        check_builtin(ctx, self.kind, dts[0], "region fold")
        if self.kind in (ReduceKind.argmax, ReduceKind.argmin):
            from .reduce import ARG_INDEX_DTYPE

            return (scalar(ARG_INDEX_DTYPE),)
        return (scalar(dts[0]),)

    def effective_acc(self) -> ElemType:
        dt = self.src.type.dtype if self.map is None else self.map.yielded[0].type.dtype
        return self.acc_dtype or default_acc(self.kind, dt) or dt


@op("region_scan", READS | WRITES)
class RegionScan(Op):
    """`dst[dst_index] = scan(src[src_index])` over matching data-dependent subregions (an effect)."""

    dst: Value
    dst_index: Index
    src: Value
    src_index: Index
    kind: ScanKind
    reverse: bool = False
    exclusive: bool = False
    identity: tuple[Literal, ...] | None = None
    combine: Region | None = None

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        sref = ctx.ref(self.src, "region scan source")
        dref = ctx.ref(self.dst, "region scan target")
        from .access import check_writable

        check_writable(ctx, dref, "region scan")
        check_region_index(ctx, sref, self.src_index, "region scan source")
        check_region_index(ctx, dref, self.dst_index, "region scan target")
        if sref.dtype != dref.dtype:
            raise ctx.fail(f"region scan source is {sref.dtype} but the target is {dref.dtype}")
        if self.kind is ScanKind.custom:
            check_combine(ctx, self.combine, self.identity, (sref.dtype,), "region scan")
        else:
            check_builtin(ctx, self.kind.as_reduce, sref.dtype, "region scan")
        return ()
