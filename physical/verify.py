"""Construction verifier (structural part): the rules every physical program must satisfy.

Checked here: SSA scoping and single definition, region terminators, fragment legality (blocks are
known constexprs; operands broadcast mechanically to results), complete access relations (one
coordinate per buffer axis, a known buffer, a mask that contains a guard justification), segment
offsets equal to the sum of earlier lengths, and launch extents that read only shape symbols, ABI
scalars and constants.
"""

from __future__ import annotations

from kir.errors import VerifyError

from . import ops as P
from .launch_expr import DEVICE_SMS, LConstexpr, LScalar, lsum, walk
from .model import AccessRelation, Guard, POp, PRegion, Program, PValue


class PhysicalVerifyError(VerifyError):
    """A physical program broke a construction rule; the message starts with the rule's name."""

    def __init__(self, rule: str, message: str, loc=None) -> None:
        self.rule = rule
        super().__init__(f"[{rule}] {message}", loc)


class _Verifier:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.blocks = {n for n, _ in program.constexprs}
        self.buffers = {b.id: b for b in program.buffers}
        self.scopes: list[set[int]] = []
        self.defined: set[int] = set()

    def fail(self, rule: str, message: str, op: POp | None = None) -> PhysicalVerifyError:
        info = self.p.op_info(op.origin) if op is not None else None
        return PhysicalVerifyError(rule, message, info.loc if info else None)

    def run(self) -> None:
        self.segments()
        for g in self.p.groups:
            if g.block not in self.blocks:
                raise self.fail("fragment", f"group {g.id} owns instances in unknown constexpr {g.block}")
            self.region(g.body, top=True)

    def segments(self) -> None:
        p = self.p
        if [s.group for s in p.segments] != [g.id for g in p.groups]:
            raise self.fail("segments", "there must be one segment per group, in group order")
        abi_scalars = {q.name for q in p.params}
        for s in p.segments:
            for e in (s.length, s.offset):
                for node in walk(e):
                    if isinstance(node, LConstexpr) and node.name not in self.blocks:
                        raise self.fail("launch-extent", f"segment {s.group} reads unknown constexpr {node.name}")
                    if isinstance(node, LScalar) and node.name not in abi_scalars:
                        raise self.fail("launch-extent", f"segment {s.group} reads {node.name}, not an ABI scalar")
                    for sym in node.names() if not isinstance(node, LConstexpr | LScalar) else ():
                        if sym not in p.symbols and sym != DEVICE_SMS:  # the launch device is launch-visible
                            raise self.fail("launch-extent", f"segment {s.group} reads {sym}, not a shape symbol")
        for k, s in enumerate(p.segments):
            if s.offset != lsum(tuple(x.length for x in p.segments[:k])):
                raise self.fail("segments", f"segment {s.group} offset {s.offset} is not the sum of earlier lengths")

    def region(self, r: PRegion, top: bool = False) -> None:
        self.scopes.append({a.id for a in r.args})
        for a in r.args:
            self.define(a, None)
        try:
            for n, o in enumerate(r.ops):
                if o.TERMINATOR and n != len(r.ops) - 1:
                    raise self.fail("structure", f"{o.NAME} must end its region", o)
                self.op(o)
        finally:
            self.scopes.pop()

    def define(self, v: PValue, op: POp | None) -> None:
        if v.id in self.defined:
            raise self.fail("ssa", f"{v!r} is defined twice", op)
        self.defined.add(v.id)
        self.scopes[-1].add(v.id)
        for t in v.type.tile:
            if t.block not in self.blocks:
                raise self.fail("fragment", f"{v!r} uses unknown block constexpr {t.block}", op)

    def visible(self, v: PValue) -> bool:
        return any(v.id in s for s in self.scopes)

    def op(self, o: POp) -> None:
        for v in o.operands():
            if not self.visible(v):
                raise self.fail("ssa", f"{o.NAME} uses {v!r} before it is defined", o)
        for f in o.fields():
            x = getattr(o, f.name)
            if isinstance(x, AccessRelation):
                self.access(o, x)
        for r in o.regions():
            self.region(r)
            if r.terminator is None:
                raise self.fail("structure", f"a region of {o.NAME} does not end with yield", o)
        for v in o.results:
            self.define(v, o)
        if isinstance(o, P.Binary | P.Compare | P.Select):
            tiles = {v.type.tile for v in o.operands() if v.type.tile}
            res = o.results[0].type
            if len(tiles) > 1 or (tiles and res.tile not in tiles):
                raise self.fail("fragment", f"{o.NAME} operands {[str(v.type) for v in o.operands()]} do not "
                                f"broadcast to {res}", o)
            if any(v.type.lanes for v in o.operands()) and not res.lanes:
                raise self.fail("fragment", f"{o.NAME} drops the lanes axis of its operands", o)

    def access(self, o: POp, a: AccessRelation) -> None:
        buf = self.buffers.get(a.buffer)
        if buf is None:
            raise self.fail("access", f"{o.NAME} accesses unknown buffer {a.buffer}", o)
        if len(a.coords) != buf.rank:
            raise self.fail("access", f"{o.NAME} gives {len(a.coords)} coordinates for rank-{buf.rank} buffer "
                            f"{buf.name}", o)
        if buf.storage is not None and buf.copies is not None and str(buf.copies) != "1" and a.copy is None:
            raise self.fail("access", f"{o.NAME} does not say which copy of {buf.name} it uses", o)
        if isinstance(a.bounds, Guard) and not _conjunct(a.mask, a.bounds.mask, self.p):
            raise self.fail("bounds", f"{o.NAME} on {buf.name}: the guard is not part of the access mask", o)
        if isinstance(o, P.Load) and a.mask is not None and a.fill is None:
            raise self.fail("access", f"masked load of {buf.name} has no fill value", o)


def _conjunct(mask: PValue | None, guard: PValue, program: Program) -> bool:
    if mask is None:
        return False
    if mask.id == guard.id:
        return True
    defs = {r.id: o for o in program.walk() for r in o.results}
    work = [mask]
    while work:
        v = work.pop()
        if v.id == guard.id:
            return True
        o = defs.get(v.id)
        if isinstance(o, P.Binary) and str(o.fn) == "and":
            work += [o.lhs, o.rhs]
    return False


def verify(program: Program, kernel=None) -> Program:
    """Check the construction rules; raises PhysicalVerifyError naming the broken rule.

    Every rule of seed 001 section 9 runs (physical.verifier); with `kernel`, the rules that check
    semantic preservation also compare the program with the KIR it came from. Groups with a looped
    body (`Group.looped`) are checked a second time with that body in place.
    """
    from .model import with_looped_bodies
    from .verifier import verify as verify_rules

    verify_rules(program, kernel)
    _Verifier(program).run()
    looped = with_looped_bodies(program)
    if looped is not None:  # the chunked alternative bodies are checked as the groups' bodies
        verify_rules(looped, kernel)
        _Verifier(looped).run()
    return program


__all__ = ["verify", "PhysicalVerifyError"]
