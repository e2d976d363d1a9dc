"""Atomics and explicit stores: `intent.atomic_add/max/min/and_/or_/xor/xchg/cas(dst, index, ...)` -> KIR
atomic / atomic_cas (returning the old value); `intent.store(dst, index, value, unique=True)` -> store or
scatter with the author's uniqueness statement."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..access import Scatter, Store
from ..atomic import Atomic, AtomicCAS, AtomicKind, MemOrder
from .access import index_value, int_index_values, point_indices, writable_ref
from .calls import CallArgs, spelling
from .coerce import broadcast_to, coerce_to
from .values import FValue, TVal

if TYPE_CHECKING:
    from .lower import Lowerer

ATOMIC_KINDS = {"atomic_add": AtomicKind.add, "atomic_max": AtomicKind.max, "atomic_min": AtomicKind.min,
                "atomic_and": AtomicKind.and_, "atomic_and_": AtomicKind.and_, "atomic_or": AtomicKind.or_,
                "atomic_or_": AtomicKind.or_, "atomic_xor": AtomicKind.xor, "atomic_xchg": AtomicKind.xchg}
ORDERS = tuple(m.value for m in MemOrder)


def _target(lw: Lowerer, call: CallArgs):
    ref = writable_ref(lw, call.value("dst"), call.arg_node("dst"))
    what = f"intent.{call.name} on `{ref.name}`"
    items = point_indices(lw, call.value("index"), call.arg_node("index"), ref.type.rank, what)
    for it in items:
        if it.kind == "slice":
            raise lw.error(call.arg_node("index"), f"{what}: the index is one element per axis")
    return ref, items, what


def _operand(lw: Lowerer, call: CallArgs, pname: str, ref, what: str) -> TVal:
    return coerce_to(lw, call.value(pname), ref.type.dtype, None, call.arg_node(pname), what, call.arg_node(pname))


@spelling(*ATOMIC_KINDS)
def atomic(lw: Lowerer, call: CallArgs) -> FValue:
    ref, items, what = _target(lw, call)
    indices = int_index_values(lw, items, call.node, what)
    value = _operand(lw, call, "value", ref, what)
    order = MemOrder(call.choice("order", ORDERS))
    v = lw.add(Atomic, call.node, kind=ATOMIC_KINDS[call.name], dst=ref.value, indices=indices, value=value.value,
               order=order)
    return TVal(v)


@spelling("atomic_cas")
def atomic_cas(lw: Lowerer, call: CallArgs) -> FValue:
    ref, items, what = _target(lw, call)
    indices = int_index_values(lw, items, call.node, what)
    expected = _operand(lw, call, "expected", ref, what)
    value = _operand(lw, call, "value", ref, what)
    order = MemOrder(call.choice("order", ORDERS))
    v = lw.add(AtomicCAS, call.node, dst=ref.value, indices=indices, expected=expected.value, value=value.value,
               order=order)
    return TVal(v)


@spelling("store")
def store(lw: Lowerer, call: CallArgs) -> FValue:
    ref, items, what = _target(lw, call)
    unique = call.static_bool("unique")
    if all(it.is_affine_point for it in items):
        value = coerce_to(lw, call.value("value"), ref.type.dtype, (), call.arg_node("value"), what,
                          call.arg_node("value"))
        index = tuple(index_value(lw, it) for it in items)
        lw.make(Store, call.node, dst=ref.value, index=index, value=value.value, unique=unique)
    else:
        indices = int_index_values(lw, items, call.node, what)
        value = _operand(lw, call, "value", ref, what)
        shape = next((v.type.shape for v in indices if v.type.shape), ())  # type: ignore[union-attr]
        if value.shape:
            value = broadcast_to(lw, value, shape, call.node, what)
        lw.make(Scatter, call.node, dst=ref.value, indices=indices, value=value.value, unique=unique)
    from .values import NoneLit

    return NoneLit()
