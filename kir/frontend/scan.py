"""Scans: `intent.cumsum/cumprod/cummax/cummin` and `intent.scan` with a combine function -> KIR scan.
A scan of a data-dependent subregion is a store (`out[b:e] = intent.cumsum(x[b:e])`, see region.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..scan import Scan, ScanKind
from .calls import CallArgs, spelling
from .coerce import broadcast_all, is_pred, to_tval
from .helpers import combine_region
from .reduce import identity_literals
from .region import SCAN_KINDS, find_region, region_scope
from .values import FValue, TupleV, TVal

if TYPE_CHECKING:
    from .lower import Lowerer


def scan_flags(call: CallArgs) -> tuple[bool, bool]:
    return call.static_bool("reverse"), call.static_bool("exclusive")


def _axis(lw: Lowerer, call: CallArgs, rank: int) -> int:
    if rank == 0:
        raise lw.error(call.node, f"intent.{call.name}() needs a tensor of rank >= 1, got a scalar")
    ax = call.static_int("axis")
    if not -rank <= ax < rank:
        raise lw.error(call.arg_node("axis"), f"intent.{call.name}(): axis {ax} is out of range for rank {rank}")
    return ax % rank


def _no_subregion(lw: Lowerer, call: CallArgs, pname: str) -> FValue:
    with region_scope(lw):
        if find_region(lw, [call.arg_node(pname)], call.node, f"intent.{call.name}") is not None:
            raise lw.error(call.node, f"a scan of a data-dependent subregion is written into a matching subregion: "
                                      f"`out[b:e] = intent.{call.name}(x[b:e])`")
        return call.value(pname)


@spelling(*SCAN_KINDS)
def builtin_scan(lw: Lowerer, call: CallArgs) -> FValue:
    x = to_tval(lw, _no_subregion(lw, call, "x"), call.arg_node("x"), f"intent.{call.name}")
    if is_pred(x.dtype):
        raise lw.error(call.node, f"intent.{call.name}() is not defined on pred values; convert with `.to(i32)`")
    axis = _axis(lw, call, x.rank)
    reverse, exclusive = scan_flags(call)
    acc = call.optional_dtype("acc") if "acc" in call.signature.parameters else None
    v = lw.add(Scan, call.node, inputs=(x.value,), axis=axis, kind=SCAN_KINDS[call.name], reverse=reverse,
               exclusive=exclusive, acc_dtype=acc)
    return TVal(v, weak=x.weak)


@spelling("scan")
def custom_scan(lw: Lowerer, call: CallArgs) -> FValue:
    fv = _no_subregion(lw, call, "values")
    as_tuple = isinstance(fv, TupleV)
    parts = list(fv.items) if isinstance(fv, TupleV) else [fv]
    if not parts:
        raise lw.error(call.arg_node("values"), "intent.scan needs at least one value")
    vals = broadcast_all(lw, [to_tval(lw, p, call.arg_node("values"), "intent.scan") for p in parts], call.node,
                         "intent.scan values")
    axis = _axis(lw, call, vals[0].rank)
    reverse, exclusive = scan_flags(call)
    dts = tuple(v.dtype for v in vals)
    identity = identity_literals(lw, call, dts)
    combine = combine_region(lw, call.value("combine"), dts, as_tuple, call.node, "intent.scan")
    op = lw.make(Scan, call.node, inputs=tuple(v.value for v in vals), axis=axis, kind=ScanKind.custom,
                 reverse=reverse, exclusive=exclusive, identity=identity, combine=combine)
    outs = tuple(TVal(r) for r in op.results)
    return TupleV(outs) if as_tuple else outs[0]
