"""Atomics whose old value is unused are scatter-reduces (`stablehlo.scatter` with the combine).

An atomic's returned old value depends on the order in which instances happen to run, so any use
of it is refused; so are `xchg` (the surviving value is unspecified) and `cas` (whether it writes
depends on that order).
"""

from __future__ import annotations

from kir.atomic import Atomic, AtomicCAS, AtomicKind
from kir.core import Op

from .access import broadcast_to, check_indices, point_coords
from .context import Ctx
from .memory import lanes_mask, scatter_points
from .registry import emits, refuse
from .values import Val

_COMBINE = {AtomicKind.add: "add", AtomicKind.max: "maximum", AtomicKind.min: "minimum", AtomicKind.and_: "and",
            AtomicKind.or_: "or", AtomicKind.xor: "xor"}


@emits(Atomic)
def _atomic(ctx: Ctx, op: Op) -> None:
    assert isinstance(op, Atomic)
    if ctx.is_used(op.result):
        raise ctx.refuse(f"the old value returned by atomic_{op.kind} is used; it depends on the order in which "
                         "instances run")
    if op.kind is AtomicKind.xchg:
        raise ctx.refuse("atomic_xchg leaves an unspecified value when instances exchange into one element")
    ref = ctx.ref(op.dst)
    value = ctx.get(op.value)
    # Every instance performs its atomic: the lanes are the whole parallel domain.
    coords, shape, depth = point_coords(ctx, ref.val.depth, [ctx.get(v) for v in op.indices], [value], ctx.depth)
    check_indices(ctx, op, f"atomic_{op.kind}", ref, coords)
    updates = broadcast_to(ctx, value, shape, depth)
    name = _COMBINE[op.kind]
    if updates.dtype.is_pred and name in ("maximum", "minimum"):
        name = "or" if name == "maximum" else "and"

    def combine(a: Val, b: Val) -> Val:
        return ctx.ssa.binary(name, a, b)

    ref.val = scatter_points(ctx, ref.val, coords, updates, combine, lanes_mask(ctx, depth, shape))


refuse(AtomicCAS, "atomic_cas writes or not depending on the order in which instances run")
