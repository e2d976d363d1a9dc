"""Persistent programs: a group whose every instance reads the same data loads it once per program.

A layernorm's weight and bias, a matrix-vector product's vector: with one block of instances per
program, every program reads them again, and the launch moves them once per block. Here the group's
programs instead walk its blocks (a `block_loop` op): the segment launches as many programs as keep the
device busy (`resident_programs`: the multiprocessors' warp slots over the program's warps; one under
Triton's interpreter, which runs programs one at a time), each computes the block-invariant part of
the body once (loads of read-only tensors whose addresses do not depend on the instances, and what
follows from them alone), then runs the rest for blocks q, q + L, q + 2L, ...

    q = pid - O_g                            (L_g = min(blocks, resident_programs(warps)))
    w = load(w[0:BLOCK_N])                   (hoisted, once)
    for block in range(q, blocks, L_g):
        flat = block * BLOCK_I + arange(BLOCK_I)
        ...                                  (the body, unchanged)

Legality: the group maps instances to programs (`owned_instances`, no tiles, not serial); its
instances are independent, as construction proved, so one program may run several in any order.
The hoisted ops keep the `loop-invariant` rule (pure ops over invariant values; loads only of
read-only tensor parameters). Profitability: the hoisted ops load a tile (a row's worth of data per
block); a scalar or nothing is not worth the loop. Instances are not reordered within a block and no
arithmetic changes, so results are bit for bit those of one block per program.

What the loop holds across its iterations stays in registers: the launch turns the loop on (the
constexpr `<BLOCK_I>_PERSISTENT`) only while those values fit `HOISTED_VALUES` four-byte values
(layernorm: rows up to 4096 wide) and the group's looped body is not the one running. Otherwise the
body runs as it stands, one block per program; both forms are in the one source. Calibrated with
`ptxas -v` on sm_90: layernorm takes 71 registers per thread at 4096 (54 without the loop), 130 at
8192 (one 8-warp program per multiprocessor instead of three) and spills at 16384.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import ops as P
from ..analysis import free_values, not_invariant, written_buffers
from ..launch_expr import (
    LaunchExpr,
    LBin,
    LConst,
    LConstexpr,
    LResidentPrograms,
    lcdiv,
    ldim,
    lmin,
    lprod,
    lselect,
    lsum,
)
from ..model import Group, POp, PRegion, Program, Trait
from . import Pass, PassContext

HOISTED_VALUES = 8192  # four-byte values a program may hold across its loop over blocks


def _kept_anyway(op: POp) -> bool:
    """Values the body keeps live whether or not they are hoisted (launch values, positions and masks of the row)."""
    return op.has(Trait.UNIFORM) or isinstance(op, P.TileIndex | P.Compare)


def hoisted_positions(program: Program, ops: tuple[POp, ...]) -> tuple[int, ...]:
    """Positions of the block-invariant ops of `ops`: pure, reading only invariant values, loading only
    tensors nobody writes. Running them first keeps every definition before its uses (an invariant op
    reads only invariant values), and no effect they move ahead of was their input (they read no memory
    the kernel writes). The body itself keeps its order: the one-block-per-program form runs it as is."""
    written = written_buffers(program)
    invariant: set[int] = set()
    out = []
    for k, op in enumerate(ops):
        if not isinstance(op, P.OwnedInstances) and not_invariant(program, op, invariant, written) is None:
            out.append(k)
            invariant.update(r.id for r in op.results)
    return tuple(out)


def _loads_tile(ops: tuple[POp, ...]) -> bool:
    return any(isinstance(op, P.Load) and op.result.type.tile for op in ops)


def held_values(program: Program, group: Group, once: tuple[POp, ...], each: tuple[POp, ...]) -> LaunchExpr:
    """Four-byte values the loop holds across its iterations: the hoisted tiles its body reads (not the
    positions and masks, which the body keeps live either way)."""
    consts = dict(program.constexprs)
    used = {v.id for op in each for v in free_values(op)}
    total: list[LaunchExpr] = []
    for op in once:
        if _kept_anyway(op):
            continue
        for r in op.results:
            if r.id in used and (r.type.tile or r.type.lanes):
                blocks = tuple(consts[t.block] for t in r.type.tile)
                lanes = (consts[group.block],) if r.type.lanes else ()
                words = max(1, r.type.dtype.bits // 32)
                total.append(lprod(blocks + lanes + (LConst(words),)))
    return lsum(tuple(total))


def eligible(group: Group) -> str | None:
    """Why the group's programs may not walk its blocks (None when they may). A group with a looped form walks
    its blocks only in the form that holds its row whole (the looped form streams its rows)."""
    body = P.whole_form(group.body)
    if group.single_instance or group.ownership.tiled or group.serial or \
            any(P.block_loop(f.ops) is not None for f in P.forms(group.body)):
        return "it does not own blocks of instances one per program"
    if sum(isinstance(op, P.OwnedInstances) for op in body.ops) != 1:
        return "it does not decode its instances once at its top"
    if any(isinstance(op, P.OwnedInstances) and op.ticket is not None for op in body.ops):
        return "its programs take their instances from a ticket (one instance each)"
    return None


def worth(program: Program, group: Group, hoisted: tuple[int, ...]) -> bool:
    """The hoisted ops load a tile (in the persistent body; the looped body streams its rows)."""
    return _loads_tile(tuple(P.whole_form(group.body).ops[k] for k in hoisted))


@dataclass(frozen=True)
class Plan:
    """What the pass does to one program: the groups whose programs walk their blocks, each with the
    positions of its body's ops that run once per program (computed once, by `plan`)."""

    reasons: tuple[str | None, ...]                # per group: why it is not eligible (None: it is)
    chosen: tuple[tuple[Group, tuple[int, ...]], ...]

    @property
    def legal(self) -> bool | str:
        if any(r is None for r in self.reasons):
            return True
        return "; ".join(r for r in self.reasons if r) or "no groups"


def plan(program: Program) -> Plan:
    reasons = tuple(eligible(g) for g in program.groups)
    chosen = []
    for g, reason in zip(program.groups, reasons):
        if reason is None:
            hoisted = hoisted_positions(program, P.whole_form(g.body).ops)
            if worth(program, g, hoisted):
                chosen.append((g, hoisted))
    return Plan(tuple(f"group {g.id}: {r}" if r else None for g, r in zip(program.groups, reasons)), tuple(chosen))


def _persistent_body(group: Group, flag: str, blocks: LaunchExpr, resident: LaunchExpr,
                     hoisted: tuple[int, ...]) -> PRegion:
    """The group's body with its hoisted ops first (once per program) and the rest in a loop over blocks (in
    the form that holds the row whole, when the group has a looped form)."""
    once = set(hoisted)
    form = P.whole_form(group.body)
    ops = form.ops
    end = form.terminator
    each = tuple(op for k, op in enumerate(ops) if k not in once and op is not end)
    loop = P.BlockLoop(group=group.id, flag=flag, blocks=blocks, resident=resident,
                       body=PRegion((), each + (P.Yield(),)))
    new = PRegion(form.args, tuple(ops[k] for k in hoisted) + (loop,) + ((end,) if end is not None else ()))
    return P.with_form(group.body, form, new)


class PersistentPrograms(Pass):
    name = "persistent-programs"

    def make_plan(self, program: Program) -> Plan:
        return plan(program)

    def plan(self, program: Program, ctx: PassContext | None = None) -> Plan:
        return super().plan(program, ctx)  # type: ignore[return-value]

    def legal(self, program: Program, ctx: PassContext | None = None) -> bool | str:
        return self.plan(program, ctx).legal

    def profitable(self, program: Program, ctx: PassContext | None = None) -> bool:
        return bool(self.plan(program, ctx).chosen)

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        chosen = {g.id: hoisted for g, hoisted in self.plan(program, ctx).chosen}
        warps: LaunchExpr = program.num_warps if isinstance(program.num_warps, LaunchExpr) else \
            LConst(program.num_warps)
        consts = dict(program.constexprs)
        order = [n for n, _ in program.constexprs]
        groups, flags = [], {}
        for g in program.groups:
            if g.id not in chosen:
                groups.append(g)
                continue
            flag = f"{g.block}_PERSISTENT"
            blocks = lcdiv(lprod(tuple(ldim(d) for d in g.domain)), LConstexpr(g.block))
            body = _persistent_body(g, flag, blocks, LResidentPrograms(warps), chosen[g.id])
            form = P.whole_form(body)
            loop = P.block_loop(form.ops)
            assert loop is not None
            held = held_values(program, g, P.once_ops(form), loop.body.ops)
            fits = LBin("-", LConst(1), lmin(LConst(1), LBin("//", held, LConst(HOISTED_VALUES + 1))))
            choice = P.looped_rows(g.body)
            if choice is not None:  # the looped body streams its rows: one block per program
                fits = lselect(consts[choice.flag], LConst(0), fits)
            consts[flag], flags[g.id] = fits, fits
            order.append(flag)
            groups.append(dataclasses.replace(g, body=body))
        segments, lengths = [], []
        for seg in program.segments:
            length = seg.length
            if seg.group in flags:
                length = lselect(flags[seg.group], lmin(length, LResidentPrograms(warps)), length)
            segments.append(dataclasses.replace(seg, length=length, offset=lsum(tuple(lengths))))
            lengths.append(length)
        return dataclasses.replace(program, groups=tuple(groups), segments=tuple(segments),
                                   grid=lsum(tuple(lengths)), constexprs=tuple((n, consts[n]) for n in order))


__all__ = ["PersistentPrograms", "Plan", "plan", "hoisted_positions", "held_values", "eligible", "worth",
           "HOISTED_VALUES"]
