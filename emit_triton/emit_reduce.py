"""Reductions and scans over tile axes (the lanes axis is axis 0).

Reductions and scans that physical marks native (`Reduce.native`, `Scan.native`: decided in
physical/ops/reduce.py and scan.py, which the register budgets read too) use Triton's reductions and
cumulative sums (fast on the device and under the interpreter); every other combine (prod, custom
tuples, argmax/argmin over several axes, cummax, exclusive float sums and products) goes through the
whole-tile helpers of `emit_combine`, which keep the element order and never run a combine one element
at a time.
"""

from __future__ import annotations

from kir.dtypes import DType
from kir.reduce import ReduceKind
from kir.scan import ScanKind
from physical import ops as P
from physical.model import Fragment, PRegion, PValue

from .emit import REGISTER_DTYPE, Emitter, emits, literal
from .emit_combine import combine_inline, fold_inline, from_last, scan_inline, to_last
from .numerics import convert


def masked(em: Emitter, x: PValue, member: PValue | None, acc: DType, identity: object, shape: Fragment) -> str:
    s = em.arg(x, shape, value_of=True)
    if x.id in em.literals:
        s = f"tl.full((), {s}, {em.dtype(x.type)})"
    if x.type.dtype != acc:
        s = convert(em, s, x.type.dtype, acc)
    if x.type.rank < shape.rank:
        s = f"tl.broadcast_to({s}, {em.shape(shape)})"
    if member is None:
        return s
    return f"tl.where({em.arg(member, shape)}, {s}, {literal(identity, acc)})"


def _shape_of(xs: tuple[PValue, ...]) -> Fragment:
    lanes = any(x.type.lanes for x in xs)
    tiles = [x.type.tile for x in xs if x.type.tile]
    return Fragment(xs[0].type.dtype, lanes, tiles[0] if tiles else ())


def reduce_axis(em: Emitter, cur: list[str], kind: ReduceKind, native: bool, accs: tuple[DType, ...], axis: int,
                combine: PRegion, rank: int, valid: str | None = None) -> str | None:
    """Fold `axis` of the (already masked) rank-`rank` components `cur` in place.

    Folds physical marks `native` (`Reduce.native`, `RegionFold.native`) use Triton's reductions for
    `kind` (also the interpreter's fast paths); float max/min then restore NaN propagation, and
    argmax/argmin pick the first NaN when there is one. Any other fold uses the combine region, in element
    order, only over the members marked by `valid` (returns the folded validity then; see `fold_inline`).
    """
    if not native:
        return fold_inline(em, combine, cur, axis, rank, valid)
    x = cur[0]
    if kind is ReduceKind.sum:
        # at the accumulator's width: Triton widens 8- and 16-bit integer sums to 32 bits, KIR wraps
        em.line(f"{x} = tl.sum({x}, axis={axis}, dtype={REGISTER_DTYPE[accs[0]]})")
    elif kind in (ReduceKind.max, ReduceKind.min):
        native = f"tl.{kind}({x}, axis={axis}){_narrowed(accs[0])}"
        em.line(f"{x} = {native}" if not accs[0].is_float else
                # a typed NaN: the interpreter widens a 0-d select with a Python float to f32
                f"{x} = tl.where(tl.max(({x} != {x}).to(tl.int8), axis={axis}) > 0, "
                f"tl.full((), float(\"nan\"), {REGISTER_DTYPE[accs[0]]}), {native})")
    elif kind in (ReduceKind.any, ReduceKind.all):
        red = "max" if kind is ReduceKind.any else "min"
        em.line(f"{x} = tl.{red}({x}.to(tl.int8), axis={axis}) != 0")
    else:
        assert kind in (ReduceKind.argmax, ReduceKind.argmin) and len(cur) == 2, f"no native {kind} of {len(cur)}"
        v, i = cur
        nan = em.fresh("nan_at")
        big = (1 << 63) - 1
        if accs[0].is_float:
            em.line(f"{nan} = tl.min(tl.where({v} != {v}, {i}, {big}), axis={axis})")
            # NaN is handled above: the native argmax sees none (the interpreter's fails on an all-NaN row)
            worst = "-inf" if kind is ReduceKind.argmax else "inf"
            em.line(f"{v} = tl.where({v} != {v}, float(\"{worst}\"), {v})")
        em.line(f"{i} = tl.{'argmax' if kind is ReduceKind.argmax else 'argmin'}({v}, axis={axis}, "
                f"tie_break_left=True).to(tl.int64)")
        em.line(f"{v} = tl.{'max' if kind is ReduceKind.argmax else 'min'}({v}, axis={axis}){_narrowed(accs[0])}")
        if accs[0].is_float:
            em.line(f"{i} = tl.where({nan} < {big}, {nan}, {i})")
            em.line(f"{v} = tl.where({nan} < {big}, float(\"nan\"), {v})")
    return None


def _narrowed(acc: DType) -> str:
    """The cast back to `acc` after Triton's `tl.max`/`tl.min`, which widen 8- and 16-bit operands to 32 bits
    (an f16 maximum would come back f32, a u16 one i32, and meet the next operation at the wrong type)."""
    return f".to({REGISTER_DTYPE[acc]})" if acc.bits < 32 and not acc.in_f32 and not acc.is_pred else ""


@emits(P.Reduce)
def emit_reduce(em: Emitter, op: P.Reduce) -> None:
    shape = _shape_of(op.inputs)
    lanes = int(shape.lanes)
    cur = []
    for x, acc, ident, r in zip(op.inputs, op.acc_dtypes, op.identity, op.results):
        # a component folded at its result's dtype is folded in the result's own name (no copy after); an i4
        # accumulator is wrapped after (numerics.convert)
        v = em.define(r) if acc == r.type.dtype and acc is not DType.i4 else em.fresh("acc_in")
        em.line(f"{v} = {masked(em, x, op.member, acc, ident, shape)}")
        cur.append(v)
    axes = sorted(op.axes, reverse=True)
    rank = shape.rank
    valid = None
    if not op.native and op.member is not None:  # element-order folds skip padding instead of folding it
        valid = em.fresh("members")
        em.line(f"{valid} = tl.broadcast_to({em.arg(op.member, shape)}, {em.shape(shape)})")
    for ax in axes:  # innermost first: row-major positions meet in order
        valid = reduce_axis(em, cur, op.kind, op.native, op.acc_dtypes, ax + lanes, op.combine, rank, valid)
        rank -= 1
    for r, c, acc in zip(op.results, cur, op.acc_dtypes):
        if acc != r.type.dtype or acc is DType.i4:
            em.line(f"{em.define(r)} = {convert(em, c, acc, r.type.dtype)}")


def scan_axis(em: Emitter, xs: list[str], combine: PRegion, identity: tuple[object, ...],
              accs: tuple[DType, ...], axis: int, rank: int, reverse: bool, exclusive: bool) -> list[str]:
    """The scan of `axis` of rank-`rank` components `xs` with `combine` (new names)."""
    moved = to_last(em, xs, axis, rank)
    # a reverse scan keeps index order: the suffix is the combine's right operand (as in the oracle)
    ids = [literal(i, a) for i, a in zip(identity, accs)]
    out = scan_inline(em, combine, moved, ids, rank, reverse, reverse)
    if not exclusive:
        out = combine_inline(em, combine, moved, out, moved) if reverse else \
            combine_inline(em, combine, out, moved, moved)
    return from_last(em, out, axis, rank)


_SCAN_FN = {ScanKind.sum: "tl.cumsum", ScanKind.prod: "tl.cumprod"}


@emits(P.Scan)
def emit_scan(em: Emitter, op: P.Scan) -> None:
    shape = _shape_of(op.inputs)
    axis = op.axis + int(shape.lanes)
    xs = []
    for x, acc, ident in zip(op.inputs, op.acc_dtypes, op.identity):
        v = em.fresh("scan_in")
        em.line(f"{v} = {masked(em, x, op.member, acc, ident, shape)}")
        xs.append(v)
    if op.native:
        native = _SCAN_FN[op.kind]
        out = em.fresh("scanned")
        rev = ", reverse=True" if op.reverse else ""
        width = f", dtype={REGISTER_DTYPE[op.acc_dtypes[0]]}" if op.kind is ScanKind.sum else ""  # as tl.sum
        em.line(f"{out} = {native}({xs[0]}, axis={axis}{rev}{width})")
        if op.kind is ScanKind.prod and op.acc_dtypes[0].is_int:
            # tl.cumprod widens narrow integers; the low bits of a product are those of the narrow one
            em.line(f"{out} = {out}.to({REGISTER_DTYPE[op.acc_dtypes[0]]})")
        if op.exclusive:  # integer sums wrap exactly: the exclusive prefix is inclusive minus own
            em.line(f"{out} = {out} - {xs[0]}")
        outs = [out]
    else:
        outs = scan_axis(em, xs, op.combine, op.identity, op.acc_dtypes, axis, shape.rank, op.reverse,
                         op.exclusive)
    for r, o, acc in zip(op.results, outs, op.acc_dtypes):
        n = em.define(r)
        em.line(f"{n} = {convert(em, o, acc, r.type.dtype)}")


def _lanes_in(em: Emitter, op: P.LaneFold | P.LaneScan) -> list[str]:
    """The inputs of a lane fold or scan, each as its accumulator type."""
    shape = Fragment(op.inputs[0].type.dtype, True)
    out = []
    for x, acc, ident in zip(op.inputs, op.acc_dtypes, op.identity):
        v = em.fresh("lanes_in")
        em.line(f"{v} = {masked(em, x, None, acc, ident, shape)}")
        out.append(v)
    return out


@emits(P.LaneFold)
def emit_lane_fold(em: Emitter, op: P.LaneFold) -> None:
    """The lanes axis (axis 0 of a lane value) folded in lane order: uniform scalars."""
    cur = _lanes_in(em, op)
    reduce_axis(em, cur, op.kind, op.native, op.acc_dtypes, 0, op.combine, 1)
    for r, c, acc in zip(op.results, cur, op.acc_dtypes):
        em.line(f"{em.define(r)} = {convert(em, c, acc, r.type.dtype)}")


@emits(P.LaneScan)
def emit_lane_scan(em: Emitter, op: P.LaneScan) -> None:
    """The lanes axis scanned in lane order (inclusive or exclusive, forward or reverse)."""
    xs = _lanes_in(em, op)
    if op.native:
        out = em.fresh("lanes_scanned")
        rev = ", reverse=True" if op.reverse else ""
        width = f", dtype={REGISTER_DTYPE[op.acc_dtypes[0]]}" if op.kind is ScanKind.sum else ""
        em.line(f"{out} = {_SCAN_FN[op.kind]}({xs[0]}, axis=0{rev}{width})")
        if op.kind is ScanKind.prod and op.acc_dtypes[0].is_int:
            em.line(f"{out} = {out}.to({REGISTER_DTYPE[op.acc_dtypes[0]]})")
        if op.exclusive:  # an exact integer sum only (native_scan)
            em.line(f"{out} = {out} - {xs[0]}")
        outs = [out]
    else:
        outs = scan_axis(em, xs, op.combine, op.identity, op.acc_dtypes, 0, 1, op.reverse, op.exclusive)
    for r, o, acc in zip(op.results, outs, op.acc_dtypes):
        em.line(f"{em.define(r)} = {convert(em, o, acc, r.type.dtype)}")
