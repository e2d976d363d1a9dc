"""Programs of one launch cooperating through an invocation workspace (`physical.ops.lookback`).

The sync buffer (int32) holds the ticket counter, the finished-program counter and one flag per slot. A
slot's values are written before its flag: a barrier orders every thread's writes of the program before the
release exchange of the flag. A reader spins on acquire loads of the flags it needs (one coalesced vector
per step, so the wait costs one round trip when the values are there), passes a barrier, and only then
loads the values: no value is read before the flag that publishes it is seen.
"""

from __future__ import annotations

from intent.runtime.safety import INLINE_ASM
from kir.dtypes import DType
from physical import ops as P
from physical.launch_expr import LConst
from physical.model import PValue

from .emit import DEVICE_FLAG, REGISTER_DTYPE, TL_DTYPE, Emitter, emits, literal
from .emit_combine import combine_inline, fold_inline

# a GPU-scope acquire load of one i32 per lane (the generated-module check admits exactly these strings)
ACQUIRE_LOAD = ("ld.acquire.gpu.global.b32 $0, [$1];", "=r,l")
assert set(ACQUIRE_LOAD) <= INLINE_ASM


def _uniform(em: Emitter, v: PValue) -> str:
    """`v` as a scalar: a lanes value of a ticket group has one lane (the group's block is 1)."""
    return f"tl.sum({em.name(v)}, axis=0)" if v.type.lanes else em.name(v)


def _packed(em: Emitter, v: PValue) -> bool:
    """Whether `v` is a slot per lane of a ticket group whose programs own blocks of several instances (the
    block is not 1): each lane then has its own slot, and the program's one flag is its ticket."""
    if not v.type.lanes:
        return False
    try:
        return em.p.constexpr(em.lanes_block) != LConst(1)
    except KeyError:
        return False


def _slot_ptr(em: Emitter, bid: int) -> tuple[str, DType]:
    buf = em.buffers[bid]
    return em.workspace_names[buf.storage], buf.dtype  # type: ignore[index]


def _to_slot(value: str, dtype: DType) -> str:
    return f"{value}.to({TL_DTYPE[dtype]})" if dtype.is_int or dtype.is_float else value


def draw_ticket(em: Emitter, sync_buffer: int) -> str:
    """The program's ticket: its position in the order programs start (acq_rel, device scope), drawn once by
    the first op of the group that needs it (a helper's index, or the owned instances)."""
    if em.ticket is None:
        sync, _ = _slot_ptr(em, sync_buffer)
        t = em.fresh("ticket")
        em.line(f"{t} = tl.atomic_add({sync} + {P.SYNC_TICKET}, 1, sem=\"acq_rel\", scope=\"gpu\").to(pid.dtype)")
        em.ticket = t
    return em.ticket


def emit_ticket(em: Emitter, op: P.OwnedInstances) -> None:
    """The block of a ticket group: its position in the order programs start (acq_rel, device scope)."""
    t = draw_ticket(em, op.ticket)  # type: ignore[arg-type]
    n = em.define(op.result, "flat")
    block = t if op.splits is None else f"({t} // {op.splits})"  # `splits` consecutive tickets share a block
    if op.helper_block is not None:  # a helper (a ticket past the blocks) joins the block the data gave it
        helper = em.name(op.helper_block)
        block = f"tl.where({helper} >= 0, {helper}, {block})"
    em.line(f"{n} = {block} * {op.block} + tl.arange(0, {op.block}).to(pid.dtype)")


@emits(P.PublishSlot)
def emit_publish(em: Emitter, op: P.PublishSlot) -> None:
    sync, _ = _slot_ptr(em, op.sync)
    slot = em.name(op.slot)
    mask = "" if op.active is None else f", mask={em.arg(op.active, op.slot.type.with_dtype(DType.pred))}"
    for bid, v in zip(op.slots, op.values):
        ptr, dt = _slot_ptr(em, bid)
        em.line(f"tl.store({ptr} + {slot}, {_to_slot(em.full(v, op.slot.type.with_dtype(v.type.dtype)), dt)}{mask})")
    em.line("tl.debug_barrier()  # every thread's slot writes precede the flag")
    # a block of several instances raises one flag for all its lanes' slots: its ticket's
    flag = em.ticket if _packed(em, op.slot) else slot
    em.line(f"tl.atomic_xchg({sync} + {P.SYNC_FLAGS} + {flag}, 1, sem=\"release\", scope=\"gpu\")")


@emits(P.FoldSlots)
def emit_fold_slots(em: Emitter, op: P.FoldSlots) -> None:
    if _packed(em, op.upto):
        _fold_lane_slots(em, op)
        return
    sync, _ = _slot_ptr(em, op.sync)
    first, upto = em.fresh("fold_first"), em.fresh("fold_upto")
    em.line(f"{first} = {_uniform(em, op.first)}")
    em.line(f"{upto} = {_uniform(em, op.upto)}")
    if op.active is not None:  # an inactive program folds nothing: it neither waits nor reads
        a = em.name(op.active)
        on = f"tl.max({a}.to(tl.int32), axis=0) != 0" if op.active.type.lanes else a
        em.line(f"{upto} = tl.where({on}, {upto}, {first})")
    accs = [em.fresh("folded") for _ in op.results]
    for a, ident, dt in zip(accs, op.identity, op.acc_dtypes):
        em.line(f"{a} = tl.full((), {literal(ident, dt)}, {REGISTER_DTYPE[dt]})")
    step, k, m, slot, flags = (em.fresh(x) for x in ("fold_step", "fold_k", "fold_member", "fold_slot",
                                                     "fold_flags"))
    em.line(f"# the slots {'from upto - 1 down to first' if op.reverse else 'from first up to upto'}, "
            f"{op.block} a step: each step an element-order tree, steps in sequence (the order is fixed)")
    with em.block(f"for {step} in range(0, {upto} - {first}, {op.block})"):
        em.line(f"{k} = {step} + tl.arange(0, {op.block}).to(pid.dtype)")
        em.line(f"{m} = {k} < {upto} - {first}")
        em.line(f"{slot} = {upto} - 1 - {k}" if op.reverse else f"{slot} = {first} + {k}")
        em.line(f"{slot} = tl.where({m}, {slot}, {first})")
        _wait_for_flags(em, f"{sync} + {P.SYNC_FLAGS} + {slot}", m, flags)
        cur = _load_slots(em, op, slot, m)
        valid = em.fresh("fold_valid")
        em.line(f"{valid} = {m}")
        fold_inline(em, op.combine, cur, 0, 1, valid)
        joined = combine_inline(em, op.combine, accs, cur, accs)
        for a, c, j in zip(accs, cur, joined):
            em.line(f"{a} = tl.where({step} == 0, {c}, {j})")
    for r, a in zip(op.results, accs):
        n = em.define(r, "prefix")
        em.line(f"{n} = tl.broadcast_to({a}, {em.shape(r.type)})" if r.type.rank else f"{n} = {a}")


def _wait_for_flags(em: Emitter, flag_ptr: str, m: str, flags: str) -> None:
    """Spin until the flags at `flag_ptr` (members `m`) are set, then a barrier before any slot is read."""
    # On a GPU every lane reads its flag with an acquire load (coalesced, no atomics); Triton's interpreter
    # has no inline assembly, and runs the lower tickets before this one: a plain read sees their flags.
    em.uses_device_flag = True
    node = em.branches(DEVICE_FLAG)
    asm, constraints = ACQUIRE_LOAD
    for branch, read in ((node.then, f"tl.inline_asm_elementwise(\"{asm}\", \"{constraints}\", [{flag_ptr}], "
                                      f"dtype=tl.int32, is_pure=False, pack=1)"),
                         (node.otherwise, f"tl.load({flag_ptr}, mask={m}, other=1, volatile=True)")):
        with em.into(branch):
            em.line(f"{flags} = {read}")
            em.line("# only lower tickets: they have started")
            with em.block(f"while tl.min(tl.where({m}, {flags}, 1)) == 0"):
                em.line(f"{flags} = {read}")
    em.line("tl.debug_barrier()  # the flags seen by any thread precede every thread's reads of the slots")


def _load_slots(em: Emitter, op: P.FoldSlots, slot: str, mask: str) -> list[str]:
    """Each slot array's values at `slot` (members `mask`; the identity elsewhere), in the accumulator dtypes."""
    cur = []
    for bid, ident, dt in zip(op.slots, op.identity, op.acc_dtypes):
        ptr, sdt = _slot_ptr(em, bid)
        v = em.fresh("slot_value")
        fill = literal(ident, dt) if not dt.is_pred else "0"
        em.line(f"{v} = tl.load({ptr} + {slot}, mask={mask}, other={fill}, volatile=True)")
        if dt.is_pred:
            em.line(f"{v} = {v} != 0")
        elif sdt != dt:
            em.line(f"{v} = {v}.to({REGISTER_DTYPE[dt]})")
        cur.append(v)
    return cur


def _fold_lane_slots(em: Emitter, op: P.FoldSlots) -> None:
    """`fold_slots` of a program that owns a block of instances: lane l folds its own slots [first_l, upto_l)
    (the same count in every lane: the pieces of its instance before the program's), which the programs of
    the tickets just below the program's published under one flag each."""
    sync, _ = _slot_ptr(em, op.sync)
    lanes = em.lanes_block
    count, base = em.fresh("fold_count"), em.fresh("fold_base")
    em.line(f"{count} = tl.max({em.name(op.upto)} - {em.name(op.first)}, axis=0)")
    em.line(f"{base} = {em.ticket} - {count}  # the ticket that published each lane's slot `first`")
    accs = [em.fresh("folded") for _ in op.results]
    for a, ident, dt in zip(accs, op.identity, op.acc_dtypes):
        em.line(f"{a} = tl.full(({lanes},), {literal(ident, dt)}, {REGISTER_DTYPE[dt]})")
    step, k, m, slot, flags = (em.fresh(x) for x in ("fold_step", "fold_k", "fold_member", "fold_slot",
                                                     "fold_flags"))
    width = f"(({op.block} + {lanes} - 1) // {lanes})"  # slots a step: a lanes x width tile of at most `block`
    em.line(f"# each lane's slots {'from upto - 1 down to first' if op.reverse else 'from first up to upto'}, "
            f"{width} a step: each step an element-order tree, steps in sequence (the order is fixed)")
    with em.block(f"for {step} in range(0, {count}, {width})"):
        em.line(f"{k} = {step} + tl.arange(0, {width}).to(pid.dtype)")
        em.line(f"{m} = {k} < {count}")
        _wait_for_flags(em, f"{sync} + {P.SYNC_FLAGS} + {base} + tl.where({m}, {k}, 0)", m, flags)
        pick = f"{em.name(op.upto)}[:, None] - 1 - {k}[None, :]" if op.reverse else \
            f"{em.name(op.first)}[:, None] + {k}[None, :]"
        em.line(f"{slot} = tl.where({m}[None, :], {pick}, {em.name(op.first)}[:, None])")
        live = f"{m}[None, :]" if op.active is None else \
            f"{m}[None, :] & {em.arg(op.active, op.upto.type.with_dtype(DType.pred))}[:, None]"
        cur = _load_slots(em, op, slot, live)
        valid = em.fresh("fold_valid")
        em.line(f"{valid} = tl.broadcast_to({m}[None, :], {cur[0]}.shape)")
        fold_inline(em, op.combine, cur, 1, 2, valid)
        joined = combine_inline(em, op.combine, accs, cur, accs)
        for a, c, j in zip(accs, cur, joined):
            em.line(f"{a} = tl.where({step} == 0, {c}, {j})")
    for r, a in zip(op.results, accs):
        n = em.define(r, "prefix")
        em.line(f"{n} = {a}")


@emits(P.RetireTicket)
def emit_retire(em: Emitter, op: P.RetireTicket) -> None:
    sync, _ = _slot_ptr(em, op.sync)
    done, base, offs = em.fresh("finished"), em.fresh("base"), em.fresh("offs")
    count = em.fresh("programs")
    em.line("tl.debug_barrier()  # every thread of the program is done with the workspace")
    em.line(f"{count} = tl.cast({em.launch(op.programs)}, pid.dtype)")
    em.line(f"{done} = tl.atomic_add({sync} + {P.SYNC_DONE}, 1, sem=\"acq_rel\", scope=\"gpu\")")
    em.line("# the last program restores the workspace for the next launch")
    with em.block(f"if {done} == {count} - 1"):
        with em.block(f"for {base} in range(0, {count}, 1024)"):
            em.line(f"{offs} = {base} + tl.arange(0, 1024)")
            em.line(f"tl.store({sync} + {P.SYNC_FLAGS} + {offs}, tl.zeros((1024,), tl.int32), mask={offs} < {count})")
        em.line(f"tl.store({sync} + {P.SYNC_TICKET}, 0)")
        em.line(f"tl.store({sync} + {P.SYNC_DONE}, 0)")

__all__ = ["emit_ticket", "draw_ticket"]
