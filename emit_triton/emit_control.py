"""Ordered control: for (uniform or per-lane trip counts), while (any lane active), uniform if."""

from __future__ import annotations

from collections.abc import Callable

from physical import ops as P
from physical.model import Fragment

from .emit import Emitter, choose, emits


def _carry(em: Emitter, args, inits) -> list[str]:
    names = []
    for a, init in zip(args, inits):
        n = em.fresh(a.name or f"carry{a.id}")
        em.line(f"{n} = {em.full(init, a.type)}")
        em.alias(a, n)
        names.append(n)
    return names


def _assign(em: Emitter, names: list[str], values, types) -> None:
    for n, v, t in zip(names, values, types):
        em.line(f"{n} = {em.full(v, t)}")


@emits(P.For)
def emit_for(em: Emitter, op: P.For) -> None:
    body = op.body
    names = _carry(em, body.args[1:], op.inits)
    iv_t = body.args[0].type
    # The body sees the induction variable at its own dtype and shape: Triton gives range()'s variable
    # the bounds' promoted type (int32 for literal bounds of an i64 loop) and the interpreter a Python
    # int, so using it as is breaks bitcasts, methods and per-lane indexing.
    if not iv_t.lanes:
        k = em.fresh(body.args[0].name or "it")
        iv = em.define(body.args[0], "it")
        head = f"for {k} in range({em.name(op.start)}, {em.name(op.stop)}, {em.name(op.step)})"
        first = f"{iv} = tl.cast({k}, {em.dtype(iv_t)})"
    else:
        iv = em.define(body.args[0], "it")
        t = Fragment(op.start.type.dtype, True)
        s, e, st = (em.arg(v, t) for v in (op.start, op.stop, op.step))
        trips, k = em.fresh("trips"), em.fresh("k")
        em.line(f"{trips} = tl.where({st} > 0, tl.cdiv({e} - {s}, {st}), tl.cdiv({s} - {e}, -{st}))")
        em.line(f"{trips} = tl.max(tl.maximum({trips}, 0), axis=0)")
        head = f"for {k} in range(0, {trips})"
        first = f"{iv} = tl.broadcast_to(tl.cast({s} + {k} * {st}, {em.dtype(iv_t)}), {em.shape(iv_t)})"
    with em.block(head):
        em.line(first)
        em.ops(body.ops)
        _assign(em, names, body.yielded, [a.type for a in body.args[1:]])
    for r, n in zip(op.results, names):
        em.alias(r, n)


@emits(P.While)
def emit_while(em: Emitter, op: P.While) -> None:
    names = _carry(em, op.body.args[:-1], op.inits)
    (c,) = em.inline(op.cond, tuple(names))
    active = em.fresh("active")
    em.line(f"{active} = {c}")
    lanes = op.cond.yielded[0].type.lanes
    test = f"tl.max({active}.to(tl.int32), axis=0) > 0" if lanes else active
    with em.block(f"while {test}"):
        em.inline(op.body, (*names, active))
        _assign(em, names, op.body.yielded, [a.type for a in op.body.args[:-1]])
        for a, n in zip(op.cond.args, names):
            em.alias(a, n)
        (c2,) = em.inline(op.cond, tuple(names))
        em.line(f"{active} = {active} & {c2}" if lanes else f"{active} = {c2}")
    for r, n in zip(op.results, names):
        em.alias(r, n)


@emits(P.If)
def emit_if(em: Emitter, op: P.If) -> None:
    names = [em.fresh(r.name or f"r{r.id}") for r in op.results]

    def branch(region) -> Callable[[], None]:
        def write() -> None:
            em.ops(region.ops)
            _assign(em, names, region.yielded, [r.type for r in op.results])
        return write

    if op.flag is not None:  # a constexpr `if`: Triton compiles only the branch the launch takes
        choose(em, op.flag, branch(op.then_), branch(op.else_))
    else:
        node = em.branches(em.name(op.cond))
        for stmts, region in ((node.then, op.then_), (node.otherwise, op.else_)):
            with em.into(stmts):
                branch(region)()
    for r, n in zip(op.results, names):
        em.alias(r, n)
