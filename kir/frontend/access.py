"""Indexing and stores: `x[i, :]` -> load (affine points, proven in bounds), `x[idx[n]]` -> gather,
`out[i, :] = v` -> store, `out[idx] = v` -> scatter; the data-dependent subregion `x[b:e]` is resolved
here and lowered by region.py."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..access import Gather, Load, Scatter, Store
from ..core import DynSlice, IndexItem, Role, Slice, Value, shape_str
from ..dims import DConst, Dim, dim_bin
from ..dtypes import DType
from ..layout import Reshape, SliceOp
from ..pointwise import BinaryFn, Iota, literal_fits
from .calls import CallArgs, spelling
from .coerce import (
    WEAK_INT,
    broadcast_shapes,
    broadcast_to,
    coerce_to,
    constant,
    dim_value,
    is_int_like,
    is_pred,
    to_tval,
)
from .values import DimExpr, FValue, NoneLit, Num, RefV, TupleV, TVal, a_type, describe
from .windows import window_length

if TYPE_CHECKING:
    from .lower import Lowerer


@dataclass
class Item:
    """One axis of an index, resolved: a point, a static slice, an integer-tensor index or a runtime slice."""

    kind: str  # "point" | "slice" | "tensor" | "dyn" | "window"
    node: ast.AST
    static: Dim | None = None  # point known at compile time
    value: TVal | None = None  # point or tensor index computed at run time
    start: Dim = DConst(0)
    stop: Dim = DConst(0)
    step: int = 1
    begin: FValue | None = None  # runtime slice bounds (either may be static)
    end: FValue | None = None

    @property
    def is_affine_point(self) -> bool:
        return self.kind == "point" and (self.static is not None or
                                         (self.value is not None and self.value.affine is not None))

    @property
    def extent(self) -> Dim:
        if self.kind == "window":
            return self.stop  # its launch-known length
        ext = dim_bin("-", self.stop, self.start)
        return ext if self.step == 1 else dim_bin("//", dim_bin("+", ext, self.step - 1), self.step)


def _elts(index: ast.AST) -> list[ast.AST]:
    return list(index.elts) if isinstance(index, ast.Tuple) else [index]


def _static_bound(fv: FValue, extent: Dim) -> Dim | None:
    if isinstance(fv, Num) and isinstance(fv.value, int) and not isinstance(fv.value, bool):
        return DConst(fv.value) if fv.value >= 0 else dim_bin("-", extent, -fv.value)
    if isinstance(fv, DimExpr):
        return fv.dim
    return None


def _point(lw: Lowerer, fv: FValue, e: ast.AST, extent: Dim, ax: int, what: str) -> Item:
    d = _static_bound(fv, extent)
    if d is not None:
        return Item("point", e, static=d)
    if isinstance(fv, Num):
        kind = "bool" if isinstance(fv.value, bool) else "float"
        raise lw.error(e, f"{what}: the index on axis {ax} is the {kind} {fv.value!r}; indices must be integers")
    if isinstance(fv, NoneLit):
        raise lw.error(e, f"{what}: None (a new axis) is not supported in an index; use intent.expand_dims(x, axis)")
    if isinstance(fv, RefV):
        fv = to_tval(lw, fv, e, what)
    if not isinstance(fv, TVal):
        raise lw.error(e, f"{what}: the index on axis {ax} is {describe(fv)}; indices are integers, dims, loop "
                          f"indices or integer tensors")
    if is_pred(fv.dtype):
        raise lw.error(e, f"{what}: boolean mask indexing is not supported; use intent.where(mask, x, 0) to select "
                          f"elements")
    if not is_int_like(fv.dtype):
        raise lw.error(e, f"{what}: the index on axis {ax} is {a_type(fv.dtype)}; indices must be integers: convert "
                          f"with `.to(i64)`")
    return Item("point" if not fv.shape else "tensor", e, value=fv)


def _slice(lw: Lowerer, s: ast.Slice, extent: Dim, ax: int, what: str) -> Item:
    step = 1
    if s.step is not None:
        fv = lw.expr(s.step)
        if not (isinstance(fv, Num) and isinstance(fv.value, int) and not isinstance(fv.value, bool)
                and fv.value >= 1):
            raise lw.error(s.step, f"{what}: a slice step must be a positive integer constant, got {describe(fv)}")
        step = fv.value
    bounds: list[FValue] = []
    for part, default in ((s.lower, DConst(0)), (s.upper, extent)):
        bounds.append(DimExpr(default) if part is None else lw.expr(part))
    static = [_static_bound(b, extent) for b in bounds]
    if all(d is not None for d in static):
        return Item("slice", s, start=static[0], stop=static[1], step=step)  # type: ignore[arg-type]
    for b, part in zip(bounds, (s.lower, s.upper)):
        if not (isinstance(b, TVal) and not b.shape and is_int_like(b.dtype)) and _static_bound(b, extent) is None:
            raise lw.error(part or s, f"{what}: a slice bound must be an integer (a constant, a dim or an integer "
                                      f"scalar), got {describe(b)}")
    if step != 1:
        raise lw.error(s, f"{what}: a slice with runtime bounds cannot have a step")
    length = window_length(lw, s.lower, s.upper)
    if length is not None:  # `h * L:(h + 1) * L`: a window of launch-known length, not a subregion
        from .pointwise import binary

        iota = TVal(lw.add(Iota, s, extent=length, dtype=WEAK_INT), weak=True)
        vec = binary(lw, "+", BinaryFn.add, iota, bounds[0], s, s, s.lower or s)
        assert isinstance(vec, TVal)
        return Item("window", s, value=vec, stop=length)
    return Item("dyn", s, begin=bounds[0], end=bounds[1])


def resolve_index(lw: Lowerer, shape: tuple[Dim, ...], index: ast.AST, node: ast.AST, what: str) -> list[Item]:
    elts = _elts(index)
    if len(elts) > len(shape):
        raise lw.error(node, f"{what}: {len(elts)} indices for a rank-{len(shape)} tensor {shape_str(shape)}")
    items: list[Item] = []
    for ax, e in enumerate(elts):
        if isinstance(e, ast.Slice):
            items.append(_slice(lw, e, shape[ax], ax, what))
        elif isinstance(e, ast.Constant) and e.value is Ellipsis:
            raise lw.error(e, f"{what}: `...` is not supported in an index; write the slices out")
        else:
            items.append(_point(lw, lw.expr(e), e, shape[ax], ax, what))
    items += [Item("slice", node, start=DConst(0), stop=shape[ax]) for ax in range(len(elts), len(shape))]
    return items


def index_value(lw: Lowerer, it: Item) -> Value:
    """A scalar integer value for a point (static points become `constant`/`dim` ops)."""
    if it.value is not None:
        return it.value.value
    assert it.static is not None
    if isinstance(it.static, DConst):
        return constant(lw, it.static.value, WEAK_INT, it.node).value
    return dim_value(lw, it.static, WEAK_INT, it.node).value


# ---------------------------------------------------------------------------------------------- reads


def load_full(lw: Lowerer, ref: RefV, node: ast.AST) -> TVal:
    index = tuple(Slice(DConst(0), d) for d in ref.type.shape)
    return TVal(lw.add(Load, node, src=ref.value, index=index))


def _direct(items: list[Item]) -> bool:
    return all(it.kind == "slice" or it.is_affine_point for it in items)


def load_items(lw: Lowerer, ref: RefV, items: list[Item], node: ast.AST) -> TVal:
    dyn = [it for it in items if it.kind == "dyn"]
    if dyn:
        raise lw.error(dyn[0].node, f"`{ref.name}[b:e]` with runtime bounds is a data-dependent subregion: reduce it "
                                    f"(intent.sum({ref.name}[b:e])) or scan it into a matching subregion "
                                    f"(out[b:e] = intent.cumsum({ref.name}[b:e])); to read a window of fixed "
                                    f"size, index with a vector: {ref.name}[b + intent.arange(K)]")
    if not _direct(items):
        indices, _ = gather_indices(lw, items, node, f"reading `{ref.name}`")
        return TVal(lw.add(Gather, node, src=ref.value, indices=indices))
    index: list[IndexItem] = []
    for it in items:
        index.append(Slice(it.start, it.stop) if it.kind == "slice" else index_value(lw, it))
    tv = TVal(lw.add(Load, node, src=ref.value, index=tuple(index)))
    sliced = [it for it in items if it.kind == "slice"]
    if any(it.step != 1 for it in sliced):
        stops = tuple(dim_bin("-", it.stop, it.start) for it in sliced)
        tv = TVal(lw.add(SliceOp, node, x=tv.value, starts=(DConst(0),) * len(sliced), stops=stops,
                         steps=tuple(it.step for it in sliced)))
    return tv


def gather_indices(lw: Lowerer, items: list[Item], node: ast.AST, what: str) -> tuple[tuple[Value, ...],
                                                                                        tuple[Dim, ...]]:
    """One integer index per axis for gather/scatter: points stay scalars, slices become `iota` vectors."""
    from .pointwise import binary

    tensors = [it for it in items if it.kind == "tensor"]
    slices = [it for it in items if it.kind in ("slice", "window")]  # each an axis of the result
    if tensors and slices:
        raise lw.error(node, f"{what}: integer-tensor indices cannot be mixed with slices; index every axis with "
                             f"integer tensors or scalars (intent.arange(N) gives an index vector)")
    if tensors:
        shape = broadcast_shapes(lw, [t.value.shape for t in tensors if t.value is not None], node, what)
    else:
        shape = tuple(it.extent for it in slices)
    out: list[Value] = []
    pos = 0
    for it in items:
        if it.kind == "point":
            out.append(index_value(lw, it))
        elif it.kind == "tensor":
            assert it.value is not None
            out.append(broadcast_to(lw, it.value, shape, it.node, what).value)
        elif it.kind == "window":
            from ..layout import Broadcast

            assert it.value is not None
            win = it.value if len(shape) == 1 else \
                TVal(lw.add(Broadcast, it.node, x=it.value.value, shape=shape, dims=(pos,)))
            out.append(win.value)
            pos += 1
        else:
            vec: FValue = TVal(lw.add(Iota, it.node, extent=it.extent, dtype=WEAK_INT), weak=True)
            if it.step != 1:
                vec = binary(lw, "*", BinaryFn.mul, vec, Num(it.step), it.node, it.node, it.node)
            if it.start != DConst(0):
                vec = binary(lw, "+", BinaryFn.add, vec, DimExpr(it.start), it.node, it.node, it.node)
            assert isinstance(vec, TVal)
            from ..layout import Broadcast

            if len(shape) > 1:
                vec = TVal(lw.add(Broadcast, it.node, x=vec.value, shape=shape, dims=(pos,)))
            out.append(vec.value)
            pos += 1
    return tuple(out), shape


def subscript(lw: Lowerer, node: ast.Subscript) -> FValue:
    base = lw.expr(node.value)
    if isinstance(base, RefV):
        items = resolve_index(lw, base.type.shape, node.slice, node, f"reading `{base.name}`")
        return load_items(lw, base, items, node)
    if isinstance(base, TVal):
        return value_subscript(lw, base, node)
    if isinstance(base, TupleV):
        return tuple_subscript(lw, base, node)
    raise lw.error(node, f"{describe(base)} cannot be indexed")


def value_subscript(lw: Lowerer, tv: TVal, node: ast.Subscript) -> FValue:
    """Indexing a computed value: constant points and slices only (a static `slice` + `reshape`)."""
    if not tv.shape:
        raise lw.error(node, "a scalar value cannot be indexed")
    items = resolve_index(lw, tv.shape, node.slice, node, "indexing a value")
    for it in items:
        if it.kind in ("tensor", "dyn", "window"):
            raise lw.error(it.node, "a computed value can be indexed with scalar indices and slices only; index the "
                                    "tensor parameter itself (x[idx]) or store the value into a buffer "
                                    "(buf = intent.empty(...)) and index that")
    if any(it.kind == "point" and it.static is None for it in items):
        tv, items = _select_points(lw, tv, items, node)
        if not items:
            return tv
    starts = tuple(it.static if it.kind == "point" else it.start for it in items)
    stops = tuple(dim_bin("+", it.static, 1) if it.kind == "point" else it.stop for it in items)  # type: ignore
    steps = tuple(it.step for it in items)
    out = tv
    whole = all(a == DConst(0) for a in starts) and all(b == d for b, d in zip(stops, tv.shape)) \
        and all(s == 1 for s in steps)
    if not whole:
        out = TVal(lw.add(SliceOp, node, x=tv.value, starts=starts, stops=stops, steps=steps), weak=tv.weak)
    if any(it.kind == "point" for it in items):
        shape = tuple(it.extent for it in items if it.kind == "slice")
        out = TVal(lw.add(Reshape, node, x=out.value, shape=shape), weak=tv.weak)
    return out


def _select_points(lw: Lowerer, tv: TVal, items: list[Item], node: ast.AST) -> tuple[TVal, list[Item]]:
    """`row[t[i]]` on a computed value: the element at data-dependent scalar points, selected in registers as
    `max(where(iota == t, row, lowest))` over those axes (exact: only the selected element competes with the
    lowest value, so NaN, -0.0 and the extremes come through), then 0 where a point lies outside its axis, as
    a gather from memory reads. Returns the selection and the items left for the other axes."""
    from ..layout import Broadcast
    from ..reduce import Reduce, ReduceKind, identity
    from .pointwise import compare_pair, logical, select

    dt = tv.dtype
    if not isinstance(dt, DType):
        raise lw.error(node, "indexing a computed value at data-dependent points needs a concrete dtype, not a "
                             "dtype variable")
    lowest = identity(ReduceKind.max, dt)  # -inf, the lowest integer, False; f8e4m3 (no infinities): -448
    shape = tv.shape
    axes = tuple(ax for ax, it in enumerate(items) if it.kind == "point" and it.static is None)
    mask: FValue | None = None
    inside: FValue | None = None
    for ax in axes:
        it = items[ax]
        assert it.value is not None
        iota = TVal(lw.add(Iota, it.node, extent=shape[ax], dtype=WEAK_INT), weak=True)
        if len(shape) > 1:
            iota = TVal(lw.add(Broadcast, it.node, x=iota.value, shape=shape, dims=(ax,)), weak=True)
        hit = compare_pair(lw, ast.Eq, iota, it.value, it.node, it.node, it.node)
        mask = hit if mask is None else logical(lw, "and", mask, hit, it.node)
        ok = logical(lw, "and", compare_pair(lw, ast.GtE, it.value, Num(0), it.node, it.node, it.node),
                     compare_pair(lw, ast.Lt, it.value, DimExpr(shape[ax]), it.node, it.node, it.node), it.node)
        inside = ok if inside is None else logical(lw, "and", inside, ok, it.node)
    assert isinstance(mask, TVal) and isinstance(inside, TVal)
    kept = select(lw, mask, tv, constant(lw, lowest, dt, node), node, node, node)
    kind = ReduceKind.any if dt.is_pred else ReduceKind.max
    picked = TVal(lw.add(Reduce, node, inputs=(kept.value,), axes=axes, kind=kind), weak=tv.weak)
    zero = False if dt.is_pred else 0.0 if dt.is_float else 0
    picked = select(lw, inside, picked, constant(lw, zero, dt, node), node, node, node)
    rest = [it for ax, it in enumerate(items) if ax not in axes]
    if all(it.kind == "slice" and it.start == DConst(0) and it.stop == d and it.step == 1
           for it, d in zip(rest, picked.shape)):
        rest = []
    return picked, rest


def tuple_subscript(lw: Lowerer, base: TupleV, node: ast.Subscript) -> FValue:
    idx = node.slice
    n = len(base.items)
    if isinstance(idx, ast.Slice):
        parts = []
        for part in (idx.lower, idx.upper, idx.step):
            fv = lw.expr(part) if part is not None else NoneLit()
            if not isinstance(fv, NoneLit | Num) or isinstance(fv, Num) and not isinstance(fv.value, int):
                raise lw.error(part or idx, "a tuple slice needs integer constants")
            parts.append(None if isinstance(fv, NoneLit) else fv.value)
        return TupleV(base.items[slice(*parts)])
    fv = lw.expr(idx)
    if isinstance(fv, Num) and isinstance(fv.value, int) and not isinstance(fv.value, bool):
        if not -n <= fv.value < n:
            raise lw.error(idx, f"index {fv.value} is out of range for a tuple of {n}")
        return base.items[fv.value]
    raise lw.error(idx, f"a tuple is indexed with an integer constant, got {describe(fv)}")


# ---------------------------------------------------------------------------------------------- writes


def writable_ref(lw: Lowerer, base: FValue, node: ast.AST) -> RefV:
    if isinstance(base, RefV):
        if base.type.role is Role.IN:
            raise lw.error(node, f"cannot write to `{base.name}`: it is an input parameter; declare it Out[...] or "
                                 f"InOut[...] in the kernel signature")
        return base
    if isinstance(base, TVal):
        raise lw.error(node, "this is a value, not memory, so it cannot be written into; allocate a buffer with "
                             "intent.zeros(shape, dtype) / intent.empty(shape, dtype) and write into that")
    raise lw.error(node, f"cannot write into {describe(base)}")


def store_subscript(lw: Lowerer, target: ast.Subscript, value_node: ast.AST | None, value: FValue | None,
                    node: ast.AST) -> None:
    ref = writable_ref(lw, lw.expr(target.value), target.value)
    items = resolve_index(lw, ref.type.shape, target.slice, target, f"store to `{ref.name}`")
    if any(it.kind == "dyn" for it in items):
        from .region import region_scan_store

        if value_node is None:
            raise lw.error(target, "a data-dependent subregion out[b:e] can only be assigned a scan of a matching "
                                   "subregion: out[b:e] = intent.cumsum(x[b:e])")
        region_scan_store(lw, ref, items, value_node, node, target)
        return
    fv = value if value is not None else lw.expr(value_node)  # type: ignore[arg-type]
    write(lw, ref, items, fv, node, value_node)


def write(lw: Lowerer, ref: RefV, items: list[Item], fv: FValue, node: ast.AST, hint_node: ast.AST | None,
          unique: bool = False) -> None:
    what = f"store to `{ref.name}`"
    dtype = ref.type.dtype
    if _direct(items) and all(it.step == 1 for it in items):
        shape = tuple(it.extent for it in items if it.kind == "slice")
        val = coerce_to(lw, fv, dtype, shape, node, what, hint_node)
        index = tuple(Slice(it.start, it.stop) if it.kind == "slice" else index_value(lw, it) for it in items)
        lw.make(Store, node, dst=ref.value, index=index, value=val.value, unique=unique)
        return
    indices, shape = gather_indices(lw, items, node, what)
    val = coerce_to(lw, fv, dtype, None, node, what, hint_node)
    if val.shape:
        val = broadcast_to(lw, val, shape, node, what)
    lw.make(Scatter, node, dst=ref.value, indices=indices, value=val.value, unique=unique)


def augmented_store(lw: Lowerer, node: ast.AugAssign) -> None:
    from .pointwise import BINOPS, binary

    target = node.target
    assert isinstance(target, ast.Subscript)
    ref = writable_ref(lw, lw.expr(target.value), target.value)
    items = resolve_index(lw, ref.type.shape, target.slice, target, f"update of `{ref.name}`")
    sym, fn = BINOPS[type(node.op)]
    if fn is None:
        raise lw.error(node, "the `@=` operator is not supported; write intent.dot(a, b)")
    current = load_items(lw, ref, items, target)
    new = binary(lw, sym, fn, current, lw.expr(node.value), node, target, node.value)
    write(lw, ref, items, new, node, None)


def point_indices(lw: Lowerer, fv: FValue, node: ast.AST, rank: int, what: str) -> list[Item]:
    """The `index` argument of intent.store / atomics: one point (or integer tensor) per axis."""
    parts = list(fv.items) if isinstance(fv, TupleV) else [fv]
    if len(parts) != rank:
        raise lw.error(node, f"{what}: the index has {len(parts)} component(s) but the target has rank {rank}; pass "
                             f"one index per axis{' as a tuple (i, j)' if rank > 1 else ''}")
    items = []
    for ax, p in enumerate(parts):
        if isinstance(p, Num) and isinstance(p.value, int) and not isinstance(p.value, bool) and p.value < 0:
            raise lw.error(node, f"{what}: negative index {p.value} on axis {ax}")
        items.append(_point(lw, p, node, DConst(0), ax, what))
    return items


def int_index_values(lw: Lowerer, items: list[Item], node: ast.AST, what: str) -> tuple[Value, ...]:
    tensors = [it.value for it in items if it.kind == "tensor" and it.value is not None]
    shape = broadcast_shapes(lw, [t.shape for t in tensors], node, what) if tensors else ()
    out = []
    for it in items:
        if it.kind == "tensor" and it.value is not None:
            out.append(broadcast_to(lw, it.value, shape, node, what).value)
        else:
            out.append(index_value(lw, it))
    return tuple(out)


def region_index(lw: Lowerer, ref: RefV, items: list[Item], node: ast.AST, what: str) -> tuple[IndexItem, ...]:
    """The index of a region fold/scan: points on every axis but one, `DynSlice(begin, end)` on that one."""
    out: list[IndexItem] = []
    for ax, it in enumerate(items):
        if it.kind == "dyn":
            bounds = []
            for b in (it.begin, it.end):
                if isinstance(b, TVal):
                    bounds.append(b.value)
                else:
                    d = _static_bound(b, ref.type.shape[ax]) if b is not None else None
                    assert d is not None
                    bounds.append(constant(lw, d.value, WEAK_INT, it.node).value if isinstance(d, DConst)
                                  else dim_value(lw, d, WEAK_INT, it.node).value)
            out.append(DynSlice(bounds[0], bounds[1]))
        elif it.kind == "point":
            out.append(index_value(lw, it))
        else:
            raise lw.error(it.node, f"{what}: the other axes of a subregion `{ref.name}[..., b:e, ...]` must be "
                                    f"single indices, not {'slices' if it.kind == 'slice' else 'index tensors'}")
    if sum(1 for it in items if it.kind == "dyn") != 1:
        raise lw.error(node, f"{what}: a subregion has exactly one axis with runtime bounds b:e")
    return tuple(out)


@spelling("gather")
def _gather_call(lw: Lowerer, call: CallArgs) -> FValue:
    """`intent.gather(src, index, fill)`: a masked read. `index` is one integer value per axis of `src` (a tuple
    for rank > 1; scalars and tensors broadcast together); an element whose coordinates fall outside `src`
    reads `fill`, which is part of the meaning, so `checks` does not report it."""
    src = call.value("src")
    if not isinstance(src, RefV):
        raise lw.error(call.arg_node("src"), f"intent.gather reads from a tensor parameter or buffer, got "
                                             f"{describe(src)}")
    fill = call.value("fill")
    if not isinstance(fill, Num):
        raise lw.error(call.arg_node("fill"), f"intent.gather(): `fill` must be a number constant, got "
                                              f"{describe(fill)}")
    if not literal_fits(fill.value, src.type.dtype):
        raise lw.error(call.arg_node("fill"), f"intent.gather(): the fill {fill.value!r} does not fit "
                                              f"{src.type.dtype}")
    inode = call.arg_node("index")
    index = call.value("index")
    parts = list(index.items) if isinstance(index, TupleV) else [index]
    nodes = list(inode.elts) if isinstance(inode, ast.Tuple) else [inode] * len(parts)
    shape = src.type.shape
    what = f"intent.gather({src.name}, ...)"
    if len(parts) != len(shape):
        raise lw.error(inode, f"{what}: {len(parts)} indices for a rank-{len(shape)} tensor {shape_str(shape)}; give "
                              f"one integer index per axis")
    items = []
    for ax, (fv, n) in enumerate(zip(parts, nodes)):
        if isinstance(fv, TVal | RefV) and not is_int_like(to_tval(lw, fv, n, what).dtype):
            raise lw.error(n, f"{what}: the index on axis {ax} is {describe(fv)}; indices must be integers")
        it = _point(lw, fv, n, shape[ax], ax, what)
        if it.kind == "point" and it.value is None:  # static: still a data-dependent coordinate here
            it = Item("point", n, value=TVal(index_value(lw, it), weak=True))
        items.append(it)
    indices, _ = gather_indices(lw, items, call.node, what)
    value = fill.value
    dt = src.type.dtype
    if isinstance(dt, DType) and dt.is_float:
        value = float(value)
    elif isinstance(dt, DType) and dt.is_pred:
        value = bool(value)
    return TVal(lw.add(Gather, call.node, src=src.value, indices=indices, fill=value, masked=True))
