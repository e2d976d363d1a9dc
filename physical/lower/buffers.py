"""Local buffers: program- or iteration-private copies backed by a hidden invocation workspace."""

from __future__ import annotations

from kir import buffers as KB
from kir.dtypes import DType

from .. import ops as P
from ..launch_expr import ldim, lmul, lprod
from ..model import Access, Buffer, BufferInit, BufferScope, Lifetime, Workspace
from . import rule
from .context import Lowerer


@rule(KB.Alloc)
def lower_alloc(lw: Lowerer, op: KB.Alloc) -> None:
    if not isinstance(op.dtype, DType):
        raise lw.fail(f"dtype variable {op.dtype} reached physical construction; specialise the kernel first")
    st = lw.state
    bid = st.fresh()
    name = op.result.name or f"buf{bid}"
    storage = f"ws_{name}_{bid}"
    copies = ldim(lw.instance_count)
    count = lmul(copies, lprod(tuple(ldim(d) for d in op.shape)))
    in_loop = lw.loop_depth > 0
    init = BufferInit.FULL if op.init is KB.InitMode.full else BufferInit.UNINITIALISED
    buf = Buffer(bid, name, op.dtype, op.shape,
                 BufferScope.ITERATION_PRIVATE if in_loop else BufferScope.PROGRAM_PRIVATE, init,
                 Lifetime.ITERATION if in_loop else Lifetime.INSTANCE, Access.READ_WRITE,
                 fill=op.fill if init is BufferInit.FULL else None, storage=storage, copies=copies,
                 owner_group=lw.group_id, origin=lw.origin(op))
    st.buffers[bid] = buf
    st.ref_buffer[op.result.id] = bid
    st.workspaces.append(Workspace(storage, op.dtype, count, None, bid))
    copy = lw.copy_index(buf, lw.lane_valid is not None)
    lw.emit(P.AllocBuffer, (), buffer=bid, copy=copy, active=lw.and_(lw.lane_valid, lw.active))
    if init is BufferInit.FULL:
        lw.written.add(bid)
