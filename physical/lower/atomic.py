"""Atomics keep their memory order and old-value semantics; the scope follows the sharing domain."""

from __future__ import annotations

from kir import atomic as KT

from .. import ops as P
from ..model import BufferScope
from ..ops.atomic import SCOPE_FOR_SHARING, Sharing
from . import rule
from .access import check_indices, note_write
from .context import Lowerer


def _sharing(lw: Lowerer, scope: BufferScope) -> Sharing:
    # Only a program-private copy is touched by the lanes of one program alone.
    return Sharing.PROGRAM if scope is BufferScope.PROGRAM_PRIVATE else Sharing.INVOCATION


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
    value = lw.get(op.value)
    buf, acc, lanes = _access(lw, op, (value,))
    sharing = _sharing(lw, buf.scope)
    r = lw.add(P.AtomicRMW, lw.natural(op.result.type, lanes), name=op.result.name, kind=op.kind, access=acc,
               value=value, order=op.order, sharing=sharing, scope=SCOPE_FOR_SHARING[sharing])
    lw.bind(op.result, r)
    note_write(lw, buf)


@rule(KT.AtomicCAS)
def lower_atomic_cas(lw: Lowerer, op: KT.AtomicCAS) -> None:
    expected, value = lw.get(op.expected), lw.get(op.value)
    buf, acc, lanes = _access(lw, op, (expected, value))
    sharing = _sharing(lw, buf.scope)
    r = lw.add(P.AtomicCAS, lw.natural(op.result.type, lanes), name=op.result.name, access=acc,
               expected=expected, value=value, order=op.order, sharing=sharing,
               scope=SCOPE_FOR_SHARING[sharing])
    lw.bind(op.result, r)
    note_write(lw, buf)
