"""Atomics keep their memory order and old-value semantics; the scope follows the sharing domain."""

from __future__ import annotations

from kir import atomic as KT
from kir.dtypes import DType

from .. import ops as P
from ..model import BufferScope
from ..ops.atomic import SCOPE_FOR_SHARING, Sharing
from . import REFUSALS, rule
from .access import check_indices, note_write
from .context import Lowerer


def _sharing(lw: Lowerer, scope: BufferScope) -> Sharing:
    # Only a program-private copy is touched by the lanes of one program alone.
    return Sharing.PROGRAM if scope is BufferScope.PROGRAM_PRIVATE else Sharing.INVOCATION


REFUSALS[KT.Atomic] = "read-modify-write on elements under 32 bits (except f16/bf16 add): Triton has none"
REFUSALS[KT.AtomicCAS] = "compare-and-swap on elements under 16 bits: Triton's needs 16-, 32- or 64-bit elements"


def _check_width(lw: Lowerer, op: KT.Atomic | KT.AtomicCAS, dtype: DType) -> None:
    """Refuse, at the op, the atomics Triton (the only target) rejects on the GPU and in its
    interpreter alike: read-modify-write on elements under 32 bits except f16/bf16 add, and
    compare-and-swap on elements under 16 bits. Without this the launch fails inside Triton."""
    if isinstance(op, KT.AtomicCAS):
        if dtype.is_pred or dtype.bits < 16:
            raise lw.fail(f"atomic_cas on {dtype} is not supported by the Triton target (Triton's compare-and-swap "
                          f"needs 16-, 32- or 64-bit elements); use a 16- or 32-bit buffer")
        return
    if dtype in (DType.f16, DType.bf16):
        if op.kind is not KT.AtomicKind.add:
            raise lw.fail(f"atomic {op.kind} on {dtype} is not supported by the Triton target (its only 16-bit "
                          f"float atomic is add); use an f32 buffer")
    elif dtype.is_pred or dtype.bits < 32:
        raise lw.fail(f"atomic {op.kind} on {dtype} is not supported by the Triton target (Triton has no 8- or "
                      f"16-bit atomics); use a 32-bit buffer")


def _access(lw: Lowerer, op: KT.Atomic | KT.AtomicCAS, values: tuple):
    buf = lw.buffer_of(op.dst)
    coords = tuple(lw.get(v) for v in op.indices)
    tiles = [x.type.tile for x in coords + values if x.type.tile]
    tile = tiles[0] if tiles else ()
    lanes = any(x.type.lanes for x in coords + values) or lw.lane_valid is not None
    acc = lw.access(buf, coords, tile, lanes, data_dependent=True, fill=0, effect=True,
                    copy=lw.copy_index(buf, lanes))
    check_indices(lw, op.NAME if isinstance(op, KT.AtomicCAS) else f"atomic_{op.kind}", buf, acc, tile, lanes,
                  effect=True)
    return buf, acc, lanes


@rule(KT.Atomic)
def lower_atomic(lw: Lowerer, op: KT.Atomic) -> None:
    _check_width(lw, op, lw.buffer_of(op.dst).dtype)
    value = lw.get(op.value)
    buf, acc, lanes = _access(lw, op, (value,))
    sharing = _sharing(lw, buf.scope)
    r = lw.add(P.AtomicRMW, lw.natural(op.result.type, lanes), name=op.result.name, kind=op.kind, access=acc,
               value=value, order=op.order, sharing=sharing, scope=SCOPE_FOR_SHARING[sharing])
    lw.bind(op.result, r)
    note_write(lw, buf)


@rule(KT.AtomicCAS)
def lower_atomic_cas(lw: Lowerer, op: KT.AtomicCAS) -> None:
    _check_width(lw, op, lw.buffer_of(op.dst).dtype)
    expected, value = lw.get(op.expected), lw.get(op.value)
    buf, acc, lanes = _access(lw, op, (expected, value))
    sharing = _sharing(lw, buf.scope)
    r = lw.add(P.AtomicCAS, lw.natural(op.result.type, lanes), name=op.result.name, access=acc,
               expected=expected, value=value, order=op.order, sharing=sharing,
               scope=SCOPE_FOR_SHARING[sharing])
    lw.bind(op.result, r)
    note_write(lw, buf)
