"""Atomics keep their memory order, logical sharing domain and result semantics, and their provider
scope follows from the mapping: a buffer other programs can touch is shared by the invocation and
needs device ("gpu") scope; only a program's own private copy may use block ("cta") scope. With the
kernel at hand, the kind and order are compared with the KIR atomic the op comes from.
"""

from __future__ import annotations

from kir import atomic as KT
from kir.atomic import AtomicKind, MemOrder
from kir.core import Kernel, OpTrait

from .. import ops as P
from ..model import BufferScope, Program
from ..ops.atomic import SCOPE_FOR_SHARING, Sharing
from .base import Reporter, describe, rule
from .index import index_of

_BITWISE = (AtomicKind.and_, AtomicKind.or_, AtomicKind.xor)
_SCOPE_RANK = {"cta": 0, "gpu": 1}
_PRIVATE = (BufferScope.PROGRAM_PRIVATE, BufferScope.ITERATION_PRIVATE)


@rule("atomic-preserved")
def check_atomics(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """every atomic preserves its memory order, logical sharing domain and old-value/CAS semantics, and a legal provider
    scope follows from the physical mapping"""
    ix = index_of(program)
    kir_ops = list(kernel.walk()) if kernel is not None else []
    kir_used = {v.id for kop in kir_ops for v in kop.operands()}
    used = {v.id for pl in ix.placed for v in pl.op.operands()}
    for pl in ix.placed:
        op = pl.op
        if not isinstance(op, P.AtomicRMW | P.AtomicCAS):
            continue
        what = describe(program, op)
        buf = ix.buffers.get(op.access.buffer)
        if not isinstance(op.order, MemOrder):
            report(f"{what} has no memory order ({op.order!r})", op, pl.group)
        if not isinstance(op.sharing, Sharing):
            report(f"{what} has no sharing domain ({op.sharing!r})", op, pl.group)
            continue
        if op.scope not in _SCOPE_RANK:
            report(f"{what} has provider scope {op.scope!r}; the provider knows 'gpu' and 'cta'", op, pl.group)
        elif _SCOPE_RANK[op.scope] < _SCOPE_RANK[SCOPE_FOR_SHARING[op.sharing]]:
            report(f"{what} is shared by the {op.sharing} but uses {op.scope} scope, which does not reach every "
                   f"sharer", op, pl.group)
        if buf is not None and op.sharing is Sharing.PROGRAM and buf.scope not in _PRIVATE:
            report(f"{what} treats {buf.scope} buffer {buf.name} as private to one program; other programs touch "
                   f"it, so it is shared by the invocation", op, pl.group)
        if len(op.results) != 1:
            report(f"{what} gives {len(op.results)} results; an atomic returns the old value", op, pl.group)
        if buf is not None:
            operands = (op.value,) + ((op.expected,) if isinstance(op, P.AtomicCAS) else ())
            if any(v.type.dtype != buf.dtype for v in operands):
                report(f"{what} combines {', '.join(str(v.type.dtype) for v in operands)} into {buf.dtype} buffer "
                       f"{buf.name}", op, pl.group)
            if isinstance(op, P.AtomicRMW) and op.kind in _BITWISE and not (buf.dtype.is_int or buf.dtype.is_pred):
                report(f"{what}: atomic {op.kind} needs an integer buffer, not {buf.dtype}", op, pl.group)
        if kernel is not None and op.origin is not None and op.origin.op is not None:
            kop = kir_ops[op.origin.op] if op.origin.op < len(kir_ops) else None
            if isinstance(op, P.AtomicRMW):
                if not isinstance(kop, KT.Atomic) or kop.kind != op.kind:
                    report(f"{what} performs atomic {op.kind}, but its KIR op is "
                           f"{_kir_atomic(kop)}", op, pl.group)
            elif not isinstance(kop, KT.AtomicCAS):
                report(f"{what} performs compare-and-swap, but its KIR op is {_kir_atomic(kop)}", op, pl.group)
            atomic = kop is not None and kop.has(OpTrait.ATOMIC)
            if atomic and kop.order != op.order:  # type: ignore[union-attr]
                report(f"{what} uses memory order {op.order}, but KIR asks for {kop.order}", op, pl.group)
            if atomic and kop.results and kop.results[0].id in kir_used and \
                    not (op.results and op.results[0].id in used):
                report(f"{what} drops the old value its KIR op returns to later computation", op, pl.group)


def _kir_atomic(kop: object) -> str:
    if isinstance(kop, KT.Atomic):
        return f"atomic {kop.kind}"
    if isinstance(kop, KT.AtomicCAS):
        return "atomic_cas"
    return getattr(kop, "NAME", "missing")


__all__ = ["check_atomics"]
