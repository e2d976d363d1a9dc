"""Reductions: `intent.sum/prod/max/min/any/all/argmax/argmin/mean` and `intent.reduce` with a combine
function -> KIR reduce, or region_fold when the argument reads a data-dependent subregion `x[b:e]`."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..core import DynSlice
from ..dims import DConst, Dim, dim_bin
from ..dtypes import DType, ElemType
from ..pointwise import BinaryFn
from ..reduce import Reduce, ReduceKind
from ..region import RegionFold
from .calls import CallArgs, spelling
from .coerce import WEAK_FLOAT, broadcast_all, cast, constant, is_pred, to_tval
from .helpers import combine_region
from .pointwise import binary, cast_value, is_float_like
from .region import SeveralSubregions, find_region, fold_map, region_scope
from .region_loop import custom_fold_as_loop, fold_as_loop
from .values import DimExpr, FValue, NoneLit, Num, TupleV, TVal, describe

if TYPE_CHECKING:
    from .lower import Lowerer

BUILTIN_KINDS = ("sum", "prod", "max", "min", "any", "all", "argmax", "argmin")


def normalize_axes(lw: Lowerer, call: CallArgs, rank: int, pname: str = "axis") -> tuple[int, ...]:
    fv = call.value(pname)
    node = call.arg_node(pname)
    if isinstance(fv, NoneLit):
        return tuple(range(rank))
    parts = list(fv.items) if isinstance(fv, TupleV) else [fv]
    axes: list[int] = []
    for p in parts:
        if not (isinstance(p, Num) and isinstance(p.value, int) and not isinstance(p.value, bool)):
            hint = ""
            if isinstance(p, TVal) or call.name in ("max", "min"):
                hint = f"; for the elementwise {call.name}imum of two tensors write intent.{call.name}imum(a, b)" \
                    if call.name in ("max", "min") else ""
            raise lw.error(node, f"intent.{call.name}(): `{pname}` must be None, an integer or a tuple of integers, "
                                 f"got {describe(p)}{hint}")
        ax = p.value
        if not -rank <= ax < rank:
            raise lw.error(node, f"intent.{call.name}(): axis {ax} is out of range for a rank-{rank} value")
        ax %= rank
        if ax in axes:
            raise lw.error(node, f"intent.{call.name}(): axis {ax} is repeated")
        axes.append(ax)
    return tuple(sorted(axes))


def identity_literals(lw: Lowerer, call: CallArgs, dtypes: tuple[ElemType, ...]) -> tuple:
    """The `identity=` of a custom combine: one literal per component, given the components' dtypes."""
    fv = call.value("identity")
    node = call.arg_node("identity")
    if isinstance(fv, NoneLit):
        raise lw.error(call.node, f"intent.{call.name}() with a combine function needs identity=(...), one literal per "
                                  f"component ({len(dtypes)}), e.g. identity=({', '.join(['0.0'] * len(dtypes))})")
    parts = list(fv.items) if isinstance(fv, TupleV) else [fv]
    if len(parts) != len(dtypes):
        raise lw.error(node, f"intent.{call.name}(): identity has {len(parts)} component(s) but the values have "
                             f"{len(dtypes)}")
    out = []
    for p, dt in zip(parts, dtypes):
        if not isinstance(p, Num):
            raise lw.error(node, f"intent.{call.name}(): identity components are number literals, got {describe(p)}")
        v = p.value
        if is_pred(dt):
            v = bool(v)
        elif is_float_like(dt):
            v = float(v)
        elif isinstance(v, float):
            if not v.is_integer():
                raise lw.error(node, f"intent.{call.name}(): identity {v!r} does not fit the {dt} component")
            v = int(v)
        else:
            v = int(v)
        out.append(v)
    return tuple(out)


def _extent_product(shape: tuple[Dim, ...], axes: tuple[int, ...]) -> Dim:
    out: Dim = DConst(1)
    for a in axes:
        out = dim_bin("*", out, shape[a])
    return out


def _acc(call: CallArgs) -> ElemType | None:
    return call.optional_dtype("acc") if "acc" in call.signature.parameters else None


def _check_loop_axes(lw: Lowerer, call: CallArgs, several: SeveralSubregions, what: str) -> None:
    """A fold over several subregions (or a jagged `x[b:e, :]`) runs along the data-dependent axis only."""
    if several.axis is not None:  # `values[b:e, :]`: reduced along the subregion's axis only
        axes = normalize_axes(lw, call, several.rank) if not call.is_none("axis") else ()
        if axes != (several.axis,) or call.static_bool("keepdims"):
            raise lw.error(call.node, f"{what}: a jagged subregion `x[b:e, :]` is reduced along its "
                                      f"data-dependent axis: write axis={several.axis} (no keepdims)") from None
    elif not call.is_none("axis") or call.static_bool("keepdims"):
        raise lw.error(call.node, f"{what}: subregions x[b:e] are reduced as a whole; drop `axis` and "
                                  f"`keepdims`") from None


@spelling(*BUILTIN_KINDS, "mean")
def builtin_reduction(lw: Lowerer, call: CallArgs) -> FValue:
    name = call.name
    what = f"intent.{name}"
    with region_scope(lw):
        try:
            region = find_region(lw, [call.arg_node("x")], call.node, what)
        except SeveralSubregions as several:
            _check_loop_axes(lw, call, several, what)
            return fold_as_loop(lw, name, call.arg_node("x"), call.node, several.subs, several.begin,
                                several.end)
        if region is not None:
            if not call.is_none("axis"):
                raise lw.error(call.arg_node("axis"), f"{what}: a subregion x[b:e] is reduced as a whole; drop "
                                                      f"`axis`")
            if call.static_bool("keepdims"):
                raise lw.error(call.arg_node("keepdims"), f"{what}: keepdims does not apply to a subregion x[b:e]")
            fmap, dts = fold_map(lw, region, [call.arg_node("x")], what)
            kind = ReduceKind.sum if name == "mean" else ReduceKind(name)
            if name == "mean" and not is_float_like(dts[0]):
                raise lw.error(call.node, f"intent.mean of {dts[0]} values; convert first, e.g. "
                                          f"intent.mean(x[b:e].to(f32))")
            _check_logical(lw, call, kind, dts[0])
            folded = TVal(lw.add(RegionFold, call.node, src=region.ref.value, index=region.index, kind=kind,
                                 acc_dtype=_acc(call), map=fmap))
            if name != "mean":
                return folded
            dyn = next(it for it in region.index if isinstance(it, DynSlice))
            count = binary(lw, "-", BinaryFn.sub, TVal(dyn.end), TVal(dyn.begin), call.node, call.node, call.node)
            count = cast_value(lw, count, folded.dtype, call.node, call.node)
            return binary(lw, "/", BinaryFn.div, folded, count, call.node, call.node, call.node)
        x = to_tval(lw, call.value("x"), call.arg_node("x"), what)
    axes = normalize_axes(lw, call, x.rank)
    keepdims = call.static_bool("keepdims")
    if name == "mean":
        if not is_float_like(x.dtype):
            if not x.weak:
                raise lw.error(call.node, f"intent.mean of {x.dtype} values; convert first, e.g. "
                                          f"intent.mean(x.to(f32))")
            x = cast(lw, x, WEAK_FLOAT, call.node, weak=True)
        total = _reduce(lw, call, x, axes, keepdims, ReduceKind.sum)
        return binary(lw, "/", BinaryFn.div, total, DimExpr(_extent_product(x.shape, axes)), call.node, call.node,
                      call.node)
    kind = ReduceKind(name)
    _check_logical(lw, call, kind, x.dtype)
    return _reduce(lw, call, x, axes, keepdims, kind)


def _check_logical(lw: Lowerer, call: CallArgs, kind: ReduceKind, dtype: ElemType) -> None:
    if kind in (ReduceKind.any, ReduceKind.all) and not is_pred(dtype):
        raise lw.error(call.node, f"intent.{call.name}() needs conditions (pred values), got {dtype}; compare first, "
                                  f"e.g. intent.{call.name}(x != 0)")
    if kind not in (ReduceKind.any, ReduceKind.all) and is_pred(dtype):
        raise lw.error(call.node, f"intent.{call.name}() is not defined on pred values; count with "
                                  f"intent.sum(cond.to(i32)) or use intent.any/intent.all")


def _reduce(lw: Lowerer, call: CallArgs, x: TVal, axes: tuple[int, ...], keepdims: bool, kind: ReduceKind) -> TVal:
    arg = kind in (ReduceKind.argmax, ReduceKind.argmin)
    if not x.shape:  # a scalar is its own reduction
        return constant(lw, 0, DType.i64, call.node) if arg else x
    v = lw.add(Reduce, call.node, inputs=(x.value,), axes=axes, kind=kind, keepdims=keepdims, acc_dtype=_acc(call))
    return TVal(v, weak=x.weak and not arg)


@spelling("reduce")
def custom_reduction(lw: Lowerer, call: CallArgs) -> FValue:
    what = "intent.reduce"
    values_node = call.arg_node("values")
    as_tuple = isinstance(values_node, ast.Tuple | ast.List)
    components = list(values_node.elts) if as_tuple else [values_node]  # type: ignore[attr-defined]
    with region_scope(lw):
        try:
            region = find_region(lw, components, call.node, what)
        except SeveralSubregions as several:
            _check_loop_axes(lw, call, several, what)
            if call.is_none("identity"):
                raise lw.error(call.node, f"{what}: a fold over subregions x[b:e] starts from the combine's identity; "
                                          f"give identity=(...), one per value") from None
            return custom_fold_as_loop(lw, values_node, call.value("combine"), call.arg_node("identity"), call.node,
                                       several.subs, several.begin, several.end)
        if region is not None:
            if not call.is_none("axis") or call.static_bool("keepdims"):
                raise lw.error(call.node, f"{what}: a subregion x[b:e] is reduced as a whole; drop axis/keepdims")
            fmap, dts = fold_map(lw, region, components, what)
            identity = identity_literals(lw, call, dts)
            combine = combine_region(lw, call.value("combine"), dts, as_tuple, call.node, what)
            op = lw.make(RegionFold, call.node, src=region.ref.value, index=region.index, kind=ReduceKind.custom,
                         identity=identity, map=fmap, combine=combine)
            outs = tuple(TVal(r) for r in op.results)
            return TupleV(outs) if as_tuple else outs[0]
        fv = call.value("values")
    parts = list(fv.items) if isinstance(fv, TupleV) else [fv]
    as_tuple = isinstance(fv, TupleV)
    if not parts:
        raise lw.error(values_node, f"{what} needs at least one value")
    vals = [to_tval(lw, p, values_node, what) for p in parts]
    vals = broadcast_all(lw, vals, call.node, f"{what} values")
    axes = normalize_axes(lw, call, vals[0].rank)
    keepdims = call.static_bool("keepdims")
    dts = tuple(v.dtype for v in vals)
    identity = identity_literals(lw, call, dts)
    combine = combine_region(lw, call.value("combine"), dts, as_tuple, call.node, what)
    op = lw.make(Reduce, call.node, inputs=tuple(v.value for v in vals), axes=axes, kind=ReduceKind.custom,
                 keepdims=keepdims, identity=identity, combine=combine)
    outs = tuple(TVal(r) for r in op.results)
    return TupleV(outs) if as_tuple else outs[0]
