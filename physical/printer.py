"""A readable text form of a physical program (header, ABI, segments, buffers, group bodies)."""

from __future__ import annotations

from .model import AccessRelation, Guard, POp, PRegion, Program, PValue


def _v(v: PValue) -> str:
    return f"%{v.name or 'p'}{v.id}"


def _attr(x: object) -> str:
    if isinstance(x, PValue):
        return _v(x)
    if isinstance(x, AccessRelation):
        return access_text(x)
    if isinstance(x, tuple):
        return "(" + ", ".join(_attr(y) for y in x) + ")"
    return str(x)


def access_text(a: AccessRelation, buffers: dict[int, str] | None = None) -> str:
    name = buffers.get(a.buffer, f"buf{a.buffer}") if buffers else f"buf{a.buffer}"
    copy = f"copy {_v(a.copy)} " if a.copy is not None else ""
    coords = ", ".join(_v(c) for c in a.coords)
    mask = f" mask {_v(a.mask)}" if a.mask is not None else ""
    fill = f" fill {a.fill}" if a.fill is not None else ""
    return f"{name}[{copy}{coords}]{mask}{fill} {{{a.bounds}}}"


class _Printer:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.lines: list[str] = []
        self.buffers = {b.id: b.name for b in program.buffers}

    def op(self, o: POp, depth: int) -> None:
        pad = "  " * depth
        res = ", ".join(f"{_v(r)}: {r.type}" for r in o.results)
        parts = []
        for f in o.fields():
            x = getattr(o, f.name)
            if isinstance(x, PRegion):
                continue
            if isinstance(x, AccessRelation):
                parts.append(access_text(x, self.buffers))
            elif x is not None:
                parts.append(f"{f.name}={_attr(x)}")
        info = self.p.op_info(o.origin)
        where = f"  # {info.name} {info.where()}".rstrip() if info else ""
        head = f"{res} = " if res else ""
        regions = o.regions()
        self.lines.append(f"{pad}{head}{o.NAME} {' '.join(parts)}{' {' if regions else ''}{where}")
        for k, r in enumerate(regions):
            if k:
                self.lines.append(f"{pad}}} {{")
            self.region(r, depth + 1)
        if regions:
            self.lines.append(f"{pad}}}")

    def region(self, r: PRegion, depth: int) -> None:
        if r.args:
            self.lines.append("  " * depth + "^(" + ", ".join(f"{_v(a)}: {a.type}" for a in r.args) + ")")
        for o in r.ops:
            self.op(o, depth)

    def run(self) -> str:
        p = self.p
        self.lines.append(f"program {p.name}")
        for q in p.params:
            shape = f"[{', '.join(str(d) for d in q.shape)}]" if q.shape or q.kind.value == "tensor" else ""
            self.lines.append(f"  param {q.name}: {q.role + ' ' if q.kind.value == 'tensor' else ''}{q.dtype}{shape}")
        for w in p.workspaces:
            self.lines.append(f"  workspace {w.name}: {w.dtype}[{w.count}]")
        if p.symbols:
            self.lines.append(f"  symbols {', '.join(p.symbols)}")
        for n, e in p.constexprs:
            self.lines.append(f"  constexpr {n} = {e}")
        self.lines.append(f"  grid = {p.grid}")
        self.lines.append(f"  num_warps = {p.num_warps}")
        for b in p.buffers:
            extra = f" storage {b.storage} x{b.copies}" if b.storage else ""
            self.lines.append(f"  buffer {b.name}#{b.id}: {b.dtype}[{', '.join(str(d) for d in b.shape)}] "
                              f"{b.scope} init {b.init} lifetime {b.lifetime} {b.access}{extra}")
        for s in p.segments:
            self.lines.append(f"  segment group {s.group}: programs [{s.offset}, {s.offset} + {s.length})")
        for g in p.groups:
            dom = f"({', '.join(str(d) for d in g.domain)})" if g.domain else "single instance"
            flags = " serial" if g.serial else ""
            owns = f"tiles {' x '.join(g.ownership.tiles)}" if g.ownership.tiled else g.ownership.block
            self.lines.append(f"group {g.id} {g.name} domain {dom} owns {owns}{flags} {{")
            self.region(g.body, 1)
            self.lines.append("}")
        for n in p.notes:
            self.lines.append(f"# note: {n}")
        return "\n".join(self.lines) + "\n"


def print_program(program: Program) -> str:
    return _Printer(program).run()


def guards_of(program: Program) -> list[tuple[POp, AccessRelation]]:
    out = []
    for o in program.walk():
        for f in o.fields():
            x = getattr(o, f.name)
            if isinstance(x, AccessRelation):
                out.append((o, x))
    return out


__all__ = ["print_program", "access_text", "guards_of", "Guard"]
