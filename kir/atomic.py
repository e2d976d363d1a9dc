"""Atomics: read-modify-write of one element per member, returning the old value."""

from __future__ import annotations

from .access import check_writable, gather_shape
from .core import ATOMIC, READS, WRITES, Op, TensorType, Type, TypeContext, Value, op
from .dtypes import DType, SpelledEnum


class AtomicKind(SpelledEnum):
    add = "add"
    max = "max"
    min = "min"
    and_ = "and"
    or_ = "or"
    xor = "xor"
    xchg = "xchg"


# Atomic kinds (by name) whose updates commute: the same one from several instances gives one result in any
# interleaving (exchange and compare-and-swap, "cas", do not). Construction and the verifier both read it.
COMMUTING_KINDS = frozenset(k.value for k in AtomicKind if k is not AtomicKind.xchg)


class MemOrder(SpelledEnum):
    relaxed = "relaxed"
    acquire = "acquire"
    release = "release"
    acq_rel = "acq_rel"


def _check(ctx: TypeContext, dst: Value, indices: tuple[Value, ...], values: tuple[Value, ...], what: str):
    ref = ctx.ref(dst, f"{what} target")
    check_writable(ctx, ref, what)
    if len(indices) != ref.rank:
        raise ctx.fail(f"{what} needs {ref.rank} indices, got {len(indices)}")
    shape = gather_shape(ctx, indices, what)
    for v in values:
        t = ctx.tensor(v, f"{what} operand")
        if t.dtype != ref.dtype:
            raise ctx.fail(f"{what} operand is {t.dtype} but the target is {ref.dtype}; insert a cast")
        if not t.is_scalar:
            if shape:
                ctx.same_shape(t.shape, shape, f"{what} operand and indices")
            shape = t.shape
    return ref, shape


@op("atomic", READS | WRITES | ATOMIC)
class Atomic(Op):
    kind: AtomicKind
    dst: Value
    indices: tuple[Value, ...]
    value: Value
    order: MemOrder = MemOrder.acq_rel

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        ref, shape = _check(ctx, self.dst, self.indices, (self.value,), f"atomic_{self.kind}")
        if self.kind in (AtomicKind.and_, AtomicKind.or_, AtomicKind.xor) and \
                not (isinstance(ref.dtype, DType) and (ref.dtype.is_int or ref.dtype.is_pred)):
            raise ctx.fail(f"atomic_{self.kind} needs an integer target, got {ref.dtype}")
        return (TensorType(ref.dtype, shape),)


@op("atomic_cas", READS | WRITES | ATOMIC)
class AtomicCAS(Op):
    """Compare-and-swap; returns the old value (success is old == expected)."""

    dst: Value
    indices: tuple[Value, ...]
    expected: Value
    value: Value
    order: MemOrder = MemOrder.acq_rel

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        ref, shape = _check(ctx, self.dst, self.indices, (self.expected, self.value), "atomic_cas")
        return (TensorType(ref.dtype, shape),)
