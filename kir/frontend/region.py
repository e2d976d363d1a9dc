"""Data-dependent subregions `x[b:e]`: found inside the argument of a reduction or scan, they turn it into a
region fold (the element expression becomes the fold's `map` region) or, as a store, a region scan."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..control import Yield
from ..core import IndexItem, Region, scalar
from ..dtypes import DType, ElemType
from ..region import RegionScan
from ..scan import ScanKind
from .access import Item, load_items, region_index, resolve_index
from .calls import CallArgs
from .values import OpRef, RefV, TVal

if TYPE_CHECKING:
    from .lower import Lowerer

# spellings whose own argument owns the subregions inside it
FOLDING_SPELLINGS = frozenset({"sum", "prod", "max", "min", "any", "all", "argmax", "argmin", "mean", "reduce",
                               "cumsum", "cumprod", "cummax", "cummin", "scan"})
SCAN_KINDS = {"cumsum": ScanKind.sum, "cumprod": ScanKind.prod, "cummax": ScanKind.max, "cummin": ScanKind.min}


class SeveralSubregions(Exception):
    """Raised by `find_region` for several subregions with the same bounds (`data[b:e] * x[idx[b:e]]`)."""

    def __init__(self, subs: list[ast.Subscript], begin: object, end: object, axis: int | None = None,
                 rank: int = 1) -> None:
        super().__init__("several subregions")
        self.subs, self.begin, self.end, self.rank = subs, begin, end, rank
        self.axis = axis  # a jagged subregion keeping whole axes (`values[b:e, :]`): the position of b:e


@dataclass
class RegionAccess:
    ref: RefV
    index: tuple[IndexItem, ...]
    subs: list[ast.Subscript]  # the subscripts that denote the element inside the fold
    # further subregions with the same bounds (`indices[b:e]` beside `data[b:e]`): each read inside the fold's map
    # at the element's position along the subregion's axis
    others: list[tuple[list[ast.Subscript], RefV, list[Item]]] = field(default_factory=list)

    @property
    def dtype(self) -> ElemType:
        return self.ref.type.dtype


@contextmanager
def region_scope(lw: Lowerer) -> Iterator[None]:
    saved = lw.overrides
    lw.overrides = dict(saved)
    try:
        yield
    finally:
        lw.overrides = saved


def _callee_name(node: ast.Call) -> str | None:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _candidates(nodes: list[ast.AST]) -> list[ast.Subscript]:
    out: list[ast.Subscript] = []
    stack = list(nodes)[::-1]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Call) and _callee_name(n) in FOLDING_SPELLINGS and n not in nodes:
            continue  # a nested reduction owns its own subregions
        if isinstance(n, ast.Lambda | ast.ListComp | ast.GeneratorExp | ast.SetComp | ast.DictComp):
            continue
        if isinstance(n, ast.Subscript):
            elts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            if any(isinstance(e, ast.Slice) and (e.lower is not None or e.upper is not None) for e in elts):
                out.append(n)
        stack.extend(reversed(list(ast.iter_child_nodes(n))))
    return out


def find_region(lw: Lowerer, nodes: list[ast.AST], node: ast.AST, what: str) -> RegionAccess | None:
    """Evaluate the sliced subscripts inside `nodes` once; return the subregion when one has runtime bounds.
    Must run inside `region_scope` (the evaluated subscripts are remembered there)."""
    found: list[tuple[ast.Subscript, RefV, list[Item]]] = []
    for sub in _candidates(nodes):
        base = lw.expr(sub.value)
        lw.overrides[id(sub.value)] = base
        if not isinstance(base, RefV):
            continue
        items = resolve_index(lw, base.type.shape, sub.slice, sub, f"reading `{base.name}`")
        if any(it.kind == "dyn" for it in items):
            found.append((sub, base, items))
        else:
            lw.overrides[id(sub)] = load_items(lw, base, items, sub)
    if not found:
        return None
    if len({ast.dump(s) for s, _, _ in found}) > 1:
        bounds = {_bounds_text(items) for _, _, items in found}
        jagged = any(it.kind == "slice" for _, _, items in found for it in items)
        if len(bounds) == 1 and None not in bounds and not jagged:
            # several subregions over one range: the first is the fold's source, the others are read at its
            # elements' positions (one entry per distinct subscript; repeats denote the same element)
            groups: dict[str, tuple[list[ast.Subscript], RefV, list[Item]]] = {}
            for s, ref, items in found:
                groups.setdefault(ast.dump(s), ([], ref, items))[0].append(s)
            (subs, ref, items), *others = groups.values()
            return RegionAccess(ref, region_index(lw, ref, items, subs[0], what), subs, others)
        if len(bounds) == 1 and None not in bounds:  # jagged subregions over one range
            items = next(items for _, _, items in found if any(it.kind == "slice" for it in items))
            dyn = next(it for it in items if it.kind == "dyn")
            kept = [it for it in items if it.kind != "point"]
            raise SeveralSubregions([s for s, _, _ in found], dyn.begin, dyn.end, kept.index(dyn), len(kept))
        first, second = (ast.unparse(s) for s, _, _ in found[:2])
        raise lw.error(found[1][0], f"{what} reads two data-dependent subregions, `{first}` and `{second}`; a region "
                                    f"fold reads one subregion and maps each of its elements. To combine several "
                                    f"arrays over one range (a CSR row's values and column indices), write an "
                                    f"ordered loop: `for k in range(b, e): acc += ...`")
    sub, ref, items = found[0]
    if any(it.kind == "slice" for it in items) and all(it.kind in ("slice", "dyn", "point") for it in items):
        # jagged data of any rank: the fold runs over the range with the kept axes as the carried tile
        dyn = next(it for it in items if it.kind == "dyn")
        kept = [it for it in items if it.kind != "point"]
        raise SeveralSubregions([s for s, _, _ in found], dyn.begin, dyn.end, kept.index(dyn), len(kept))
    index = region_index(lw, ref, items, sub, what)
    return RegionAccess(ref, index, [s for s, _, _ in found])


def _bounds_text(items: list[Item]) -> str | None:
    dyn = [it for it in items if it.kind == "dyn"]
    if len(dyn) != 1:
        return None
    s = dyn[0].node
    assert isinstance(s, ast.Slice)
    return f"{ast.dump(s.lower) if s.lower else ''}:{ast.dump(s.upper) if s.upper else ''}"


def fold_map(lw: Lowerer, acc: RegionAccess, components: list[ast.AST], what: str) -> tuple[Region | None,
                                                                                             tuple[ElemType, ...]]:
    """The fold's element map: its arguments are the element and, when other subregions are read
    (`x[indices[b:e]]` beside `data[b:e]`), the element's position along the subregion's axis (i64), at
    which those are loaded; it yields each component as a scalar."""
    if len(components) == 1 and any(components[0] is s for s in acc.subs) and not acc.others:
        return None, (acc.dtype,)
    args = lw.b.begin_region((scalar(acc.dtype),) + ((scalar(DType.i64),) if acc.others else ()),
                             ("elem", "pos")[:1 + bool(acc.others)])
    for s in acc.subs:
        lw.overrides[id(s)] = TVal(args[0])
    for subs, ref, items in acc.others:
        at = [Item("point", it.node, value=TVal(args[1])) if it.kind == "dyn" else it for it in items]
        loaded = load_items(lw, ref, at, subs[0])
        for s in subs:
            lw.overrides[id(s)] = loaded
    from .coerce import to_tval

    vals = []
    for n in components:
        tv = to_tval(lw, lw.expr(n), n, what)
        if tv.shape:
            raise lw.error(n, f"{what}: an expression over a subregion x[b:e] must be elementwise (each element gives "
                              f"one scalar), but this one has shape {tv.type}")
        vals.append(tv)
    lw.make(Yield, components[0], values=tuple(v.value for v in vals))
    for s in acc.subs + [s for subs, _, _ in acc.others for s in subs]:
        del lw.overrides[id(s)]
    return lw.b.end_region(), tuple(v.dtype for v in vals)


def region_scan_store(lw: Lowerer, ref: RefV, items: list[Item], value_node: ast.AST, node: ast.AST,
                      target: ast.Subscript) -> None:
    from .helpers import combine_region
    from .scan import scan_flags

    hint = f"a data-dependent subregion `{ref.name}[b:e]` can only be assigned a scan of a matching subregion, e.g. " \
           f"`{ref.name}[b:e] = intent.cumsum(x[b:e])`; to write a window of fixed size, index with a vector: " \
           f"`{ref.name}[b + intent.arange(K)] = ...`"
    if not isinstance(value_node, ast.Call):
        raise lw.error(value_node, hint)
    callee = lw.expr(value_node.func)
    if not (isinstance(callee, OpRef) and (callee.name in SCAN_KINDS or callee.name == "scan")):
        raise lw.error(value_node, hint)
    call = CallArgs(lw, callee.name, callee.fn, value_node)
    src_param = "values" if callee.name == "scan" else "x"
    src_node = call.arg_node(src_param)
    what = f"intent.{callee.name}"
    with region_scope(lw):
        try:
            acc = find_region(lw, [src_node], value_node, what)
        except SeveralSubregions as several:
            if several.axis is None or callee.name not in SCAN_KINDS or not isinstance(src_node, ast.Subscript) \
                    or _bounds_text(items) != _bounds_text(resolve_index(lw, ref.type.shape, src_node.slice,
                                                                         src_node, what)):
                raise lw.error(src_node, f"{what}: a jagged region scan `out[b:e, :] = intent.{callee.name}"
                                         f"(x[b:e, :], axis=0)` scans a subregion with the target's bounds") from None
            from .region_loop import scan_as_loop, scan_per_column

            if call.static_int("axis") % several.rank != several.axis:
                raise lw.error(call.arg_node("axis"), f"{what}: a region scan runs along the subregion's axis "
                                                      f"{several.axis}") from None
            reverse, exclusive = scan_flags(call)
            if scan_per_column(lw, callee, target, src_node, value_node, several.axis, ref.type.shape, reverse,
                               exclusive):
                return
            if reverse:
                raise lw.error(value_node, f"{what}: a reverse jagged region scan is not supported") from None
            scan_as_loop(lw, callee.name, target, src_node, value_node, several.begin, several.end, exclusive)
            return
        if acc is None or not any(src_node is s for s in acc.subs):
            raise lw.error(src_node, f"{what}: the scanned value must be a subregion itself, e.g. "
                                     f"intent.{callee.name}(x[b:e]), to be stored into `{ref.name}[b:e]`")
    dst_index = region_index(lw, ref, items, target, "the region scan target")
    dyn_axis = next(k for k, it in enumerate(items) if it.kind == "dyn")
    axis = call.static_int("axis")
    if not (axis == dyn_axis or axis == dyn_axis - ref.type.rank):
        raise lw.error(call.arg_node("axis"), f"{what}: a region scan runs along the subregion's axis {dyn_axis}, "
                                              f"not axis {axis}")
    reverse, exclusive = scan_flags(call)
    if callee.name == "scan":
        identity = _identity(lw, call, (acc.dtype,))
        combine = combine_region(lw, call.value("combine"), (acc.dtype,), False, value_node, what)
        kind = ScanKind.custom
    else:
        if call.given("acc") and not call.is_none("acc"):
            raise lw.error(call.arg_node("acc"), f"{what}: a region scan accumulates in the element dtype; `acc` is "
                                                 f"not supported here")
        identity, combine, kind = None, None, SCAN_KINDS[callee.name]
    lw.make(RegionScan, node, dst=ref.value, dst_index=dst_index, src=acc.ref.value, src_index=acc.index,
            kind=kind, reverse=reverse, exclusive=exclusive, identity=identity, combine=combine)


def _identity(lw: Lowerer, call: CallArgs, dtypes: tuple[ElemType, ...]) -> tuple:
    from .reduce import identity_literals

    return identity_literals(lw, call, dtypes)
