"""Printing KIR as `.kir` text, driven by the op syntax table in `syntax.py`."""

from __future__ import annotations

import json

from ..core import Kernel, Op, RefType, Region, TensorType, Type, Value
from ..dims import Dim, PAnd, PCmp, PNot, POr, Pred
from ..errors import Loc
from .lexer import TextLoc, is_identifier
from .syntax import LiteralCodec, Piece, syntax_of

INDENT = "  "


class Printer:
    """Prints one kernel. Value names are unique across the kernel: a value named `row` prints as
    `%row`, the next one as `%row_1` (then the next unused suffix); unnamed values as `%0`, `%1`, ...
    Names are given in text order, at a value's first appearance."""

    def __init__(self, generic: bool = False) -> None:
        self.generic = generic
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.counter = 0
        self.depth = 0  # regions open around the op being printed

    # --- names
    def _fresh(self, hint: str | None) -> str:
        if hint is not None and not is_identifier(hint):
            hint = hint + "_" if is_identifier(hint + "_") else None
        if hint is None:
            while str(self.counter) in self.used:
                self.counter += 1
            name = str(self.counter)
            self.counter += 1
        elif hint not in self.used:
            name = hint
        else:
            n = 1
            while f"{hint}_{n}" in self.used:
                n += 1
            name = f"{hint}_{n}"
        self.used.add(name)
        return name

    def use(self, v: Value) -> str:
        if v.id not in self.names:
            self.names[v.id] = self._fresh(v.name)
        return "%" + self.names[v.id]

    def define(self, v: Value) -> str:
        return f"{self.use(v)}: {type_text(v.type)}"

    # --- pieces the codecs ask for
    def dim(self, d: Dim) -> str:
        return str(d)

    def region_args(self, r: Region) -> str:
        return "(" + ", ".join(self.define(a) for a in r.args) + ")"

    def region_block(self, r: Region) -> str:
        """`{`, one op per line, `}`; nested regions come back already indented for their depth."""
        self.depth += 1
        try:
            inner = [self.op(o) for o in r.ops]
        finally:
            self.depth -= 1
        pad = INDENT * self.depth
        body = "".join(f"{pad}{INDENT}{line}\n" for line in inner)
        return "{\n" + body + pad + "}"

    # --- ops
    def op(self, o: Op) -> str:
        syn = syntax_of(type(o))
        head = ", ".join(self.define(v) for v in o.results)
        parts = [f"{head} = " if o.results else ""]
        if self.generic:
            parts.append(json.dumps(syn.name))
        else:
            parts.append(syn.name)
            template = "".join(self._piece(o, p) for p in syn.pieces)
            if template:
                parts.append(" " + template)
        written = frozenset() if self.generic else syn.in_template
        for f in syn.fields:
            if f.name in written:
                continue
            value = getattr(o, f.name)
            if not f.is_default(value):
                parts.append(f" {f.name}={f.codec.emit(value, self)}")
        parts.append(loc_text(o.loc))
        return "".join(parts)

    def _piece(self, o: Op, p: Piece) -> str:
        if p.field is None:
            return p.text
        value = getattr(o, p.field)
        if p.part == "args":
            return self.region_args(value)
        if p.part == "block":
            return self.region_block(value)
        codec = syntax_of(type(o)).field(p.field).codec  # type: ignore[union-attr]
        return codec.emit(value, self, p.bare)

    # --- kernels
    def kernel(self, k: Kernel) -> str:
        for p in k.params:
            self.names[p.value.id] = p.name
            self.used.add(p.name)
        params = ", ".join(f"{p.name}: {type_text(p.value.type)}" for p in k.params)
        head = [f"kernel {k.name}({params})"]
        if k.symbols:
            head.append(f"symbols({', '.join(k.symbols)})")
        if k.dtype_vars:
            head.append("dtypes(" + ", ".join(f"{v.name} in {{{', '.join(str(c) for c in v.choices)}}}"
                                              for v in k.dtype_vars) + ")")
        if k.consts:
            head.append("consts(" + ", ".join(f"{n} = {const_text(v)}" for n, v in k.consts) + ")")
        if k.requires:
            head.append(f"requires({', '.join(pred_text(p) for p in k.requires)})")
        if k.axioms:
            head.append(f"axioms({', '.join(pred_text(p) for p in k.axioms)})")
        if k.checks:
            head.append("checks")
        return " ".join(head) + loc_text(k.loc) + " " + self.region_block(k.body) + "\n"


def type_text(t: Type) -> str:
    """`f32[M, N]`; a scalar is the bare dtype `f32`; memory has its role: `in f32[M, N]`."""
    shape = "[" + ", ".join(str(d) for d in t.shape) + "]"
    if isinstance(t, RefType):
        return f"{t.role} {t.dtype}{shape}"
    if isinstance(t, TensorType) and not t.shape:
        return str(t.dtype)
    return f"{t.dtype}{shape}"


def pred_text(p: Pred) -> str:
    """`str(pred)`, except `and`/`or` of fewer than two items, written as calls `and(...)`/`or(...)`."""
    if _all_well_formed(p):
        return str(p)
    return _pred_fallback(p)


def _all_well_formed(p: Pred) -> bool:
    if isinstance(p, PAnd | POr):
        return len(p.items) >= 2 and all(_all_well_formed(q) for q in p.items)
    if isinstance(p, PNot):
        return _all_well_formed(p.item)
    return isinstance(p, PCmp)


def _pred_fallback(p: Pred) -> str:
    if isinstance(p, PCmp):
        return str(p)
    if isinstance(p, PNot):
        return f"not ({_pred_fallback(p.item)})"
    word = "and" if isinstance(p, PAnd) else "or"
    return f"{word}(" + ", ".join(_pred_fallback(q) for q in p.items) + ")"  # type: ignore[attr-defined]


def const_text(v: int | float | bool | str) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    return LiteralCodec().emit(v, None)  # type: ignore[arg-type]


def loc_text(loc: Loc | None) -> str:
    if loc is None or isinstance(loc, TextLoc):
        return ""
    return f" loc({json.dumps(loc.file)}:{loc.line}:{loc.col})"


def print_kernel(k: Kernel, generic: bool = False) -> str:
    """The `.kir` text of a kernel; `generic=True` writes every op in the generic `"name" field=value` form."""
    return Printer(generic).kernel(k)


def print_module(kernels: list[Kernel] | tuple[Kernel, ...], generic: bool = False) -> str:
    return "\n".join(print_kernel(k, generic) for k in kernels)


__all__ = ["print_kernel", "print_module", "type_text", "pred_text"]
