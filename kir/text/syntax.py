"""The one table that drives both the printer and the parser.

Every op's syntax is derived from its dataclass fields: the resolved annotation of each field picks a
codec (how a value of that type is written and read back). An op is written as

    results = NAME <custom format> <remaining fields as name=value> <loc(...)>

The custom format (`FORMATS`) is an optional template over the op's fields (`$field`, and
`$field.args` / `$field.block` to split a region around other text); every field it does not mention
is written as `name=value`, omitted while it holds its default. An op without a template is written
entirely as `name=value` attributes, which is also the generic form `"NAME" name=value ...` accepted
for every op.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import re
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Union

from ..core import OP_CLASSES, DynSlice, Op, Region, Slice, Value
from ..dims import Dim
from ..dtypes import DType, DTypeVar
from .lexer import Tok

if TYPE_CHECKING:
    from .parser import Parser
    from .printer import Printer


# ---------------------------------------------------------------------------------------------- codecs


class Codec:
    """How one field type is written (`emit`) and read (`read`). `bare` drops a tuple's parentheses."""

    grammar = "?"  # the name of this syntax in docs/kir.md

    def emit(self, value: Any, pr: Printer, bare: bool = False) -> str:
        raise NotImplementedError

    def read(self, ps: Parser, bare: bool = False) -> Any:
        raise NotImplementedError

    def can_start(self, ps: Parser) -> bool:
        """Whether the next token can begin a value of this codec (ends bare lists)."""
        return True

    def describe(self) -> str:
        raise NotImplementedError


class ValueCodec(Codec):
    grammar = "%v"

    def emit(self, value: Value, pr: Printer, bare: bool = False) -> str:
        return pr.use(value)

    def read(self, ps: Parser, bare: bool = False) -> Value:
        return ps.use_value()

    def can_start(self, ps: Parser) -> bool:
        return ps.peek().kind is Tok.VALUE

    def describe(self) -> str:
        return "a value (%name)"


class IndexItemCodec(Codec):
    """`%i` (a point), `lo:hi` (a static slice of dims) or `%b:%e` (a data-dependent subregion)."""

    grammar = "index"

    def emit(self, value: Value | Slice | DynSlice, pr: Printer, bare: bool = False) -> str:
        if isinstance(value, Value):
            return pr.use(value)
        if isinstance(value, DynSlice):
            return f"{pr.use(value.begin)}:{pr.use(value.end)}"
        return f"{pr.dim(value.start)}:{pr.dim(value.stop)}"

    def read(self, ps: Parser, bare: bool = False) -> Value | Slice | DynSlice:
        if ps.peek().kind is Tok.VALUE:
            begin = ps.use_value()
            if ps.accept(":"):
                return DynSlice(begin, ps.use_value())
            return begin
        start = ps.parse_dim()
        ps.expect(":", "in a slice start:stop")
        return Slice(start, ps.parse_dim())

    def can_start(self, ps: Parser) -> bool:
        return ps.peek().kind is Tok.VALUE or ps.dim_can_start()

    def describe(self) -> str:
        return "an index item (%i, lo:hi or %b:%e)"


class TupleCodec(Codec):
    def __init__(self, item: Codec) -> None:
        self.item = item
        self.grammar = f"({item.grammar}, ...)"

    def emit(self, value: tuple, pr: Printer, bare: bool = False) -> str:
        text = ", ".join(self.item.emit(v, pr) for v in value)
        return text if bare else f"({text})"

    def read(self, ps: Parser, bare: bool = False) -> tuple:
        if not bare:
            ps.expect("(", f"to open {self.describe()}")
        items: list[Any] = []
        # A bare list outside brackets (`yield %a, %b`) ends with its line.
        if self.item.can_start(ps) and (not bare or ps.after_opener() or ps.same_line()):
            items.append(self.item.read(ps))
            while ps.accept(","):
                items.append(self.item.read(ps))
        if not bare:
            ps.expect(")", f"to close {self.describe()}")
        return tuple(items)

    def can_start(self, ps: Parser) -> bool:
        return ps.at("(")

    def describe(self) -> str:
        return f"a list of {self.item.describe()}"


class OptionalCodec(Codec):
    def __init__(self, inner: Codec) -> None:
        self.inner = inner
        self.grammar = f"{inner.grammar} | none"

    def emit(self, value: Any, pr: Printer, bare: bool = False) -> str:
        return "none" if value is None else self.inner.emit(value, pr, bare)

    def read(self, ps: Parser, bare: bool = False) -> Any:
        if ps.at("none"):
            ps.next()
            return None
        return self.inner.read(ps, bare)

    def can_start(self, ps: Parser) -> bool:
        return ps.at("none") or self.inner.can_start(ps)

    def describe(self) -> str:
        return f"{self.inner.describe()} or none"


class EnumCodec(Codec):
    def __init__(self, cls: type[Enum]) -> None:
        self.cls = cls
        self.grammar = " | ".join(str(m.value) for m in cls)

    def emit(self, value: Enum, pr: Printer, bare: bool = False) -> str:
        return str(value.value)

    def read(self, ps: Parser, bare: bool = False) -> Enum:
        tok = ps.peek()
        choices = [str(m.value) for m in self.cls]
        if tok.kind is Tok.IDENT and tok.text in choices:
            ps.next()
            return self.cls(tok.text)
        raise ps.error_found(f"expected {self.describe()}", tok)

    def can_start(self, ps: Parser) -> bool:
        return ps.peek().kind is Tok.IDENT

    def describe(self) -> str:
        return "one of " + ", ".join(str(m.value) for m in self.cls)


class BoolCodec(Codec):
    grammar = "bool"

    def emit(self, value: bool, pr: Printer, bare: bool = False) -> str:
        return "true" if value else "false"

    def read(self, ps: Parser, bare: bool = False) -> bool:
        tok = ps.peek()
        if tok.kind is Tok.IDENT and tok.text in ("true", "false"):
            ps.next()
            return tok.text == "true"
        raise ps.error_found("expected true or false", tok)

    def describe(self) -> str:
        return "true or false"


class IntCodec(Codec):
    grammar = "int"

    def emit(self, value: int, pr: Printer, bare: bool = False) -> str:
        return str(int(value))

    def read(self, ps: Parser, bare: bool = False) -> int:
        return ps.parse_int()

    def can_start(self, ps: Parser) -> bool:
        return ps.peek().kind is Tok.INT or ps.at("-")

    def describe(self) -> str:
        return "an integer"


def format_float(x: float) -> str:
    """`repr` round-trips every float exactly (inf, -inf, nan and -0.0 included)."""
    return repr(float(x))


class FloatCodec(Codec):
    grammar = "float"

    def emit(self, value: float, pr: Printer, bare: bool = False) -> str:
        return format_float(value)

    def read(self, ps: Parser, bare: bool = False) -> float:
        return float(ps.parse_number(allow_bool=False))

    def can_start(self, ps: Parser) -> bool:
        return ps.peek().kind in (Tok.INT, Tok.FLOAT) or ps.at("-") or ps.at("inf") or ps.at("nan")

    def describe(self) -> str:
        return "a number"


class LiteralCodec(Codec):
    """`int | float | bool`: `3`, `-0.0`, `inf`, `nan`, `1e-05`, `true`."""

    grammar = "literal"

    def emit(self, value: int | float | bool, pr: Printer, bare: bool = False) -> str:
        np = sys.modules.get("numpy")  # a NumPy scalar exists only once NumPy is imported
        if isinstance(value, bool) or (np is not None and isinstance(value, np.bool_)):
            return "true" if value else "false"
        if isinstance(value, int) or (np is not None and isinstance(value, np.integer)):
            return str(int(value))
        return format_float(value)

    def read(self, ps: Parser, bare: bool = False) -> int | float | bool:
        return ps.parse_number(allow_bool=True)

    def can_start(self, ps: Parser) -> bool:
        return FloatCodec().can_start(ps) or ps.at("true") or ps.at("false")

    def describe(self) -> str:
        return "a literal (integer, float, true or false)"


class DimCodec(Codec):
    grammar = "dim"

    def emit(self, value: Dim, pr: Printer, bare: bool = False) -> str:
        return pr.dim(value)

    def read(self, ps: Parser, bare: bool = False) -> Dim:
        return ps.parse_dim()

    def can_start(self, ps: Parser) -> bool:
        return ps.dim_can_start()

    def describe(self) -> str:
        return "a dim"


class ElemTypeCodec(Codec):
    grammar = "dtype"

    def emit(self, value: DType | DTypeVar, pr: Printer, bare: bool = False) -> str:
        return str(value)

    def read(self, ps: Parser, bare: bool = False) -> DType | DTypeVar:
        return ps.parse_elem_type()

    def can_start(self, ps: Parser) -> bool:
        return ps.peek().kind is Tok.IDENT

    def describe(self) -> str:
        return "a dtype"


class RegionCodec(Codec):
    """`(%a: T, ...) { ops }`; the argument list is left out when empty."""

    grammar = "region"

    def emit(self, value: Region, pr: Printer, bare: bool = False) -> str:
        args = pr.region_args(value) + " " if value.args else ""
        return args + pr.region_block(value)

    def read(self, ps: Parser, bare: bool = False) -> Region:
        args = ps.parse_region_args() if ps.at("(") else ()
        return ps.parse_region_block(args)

    def can_start(self, ps: Parser) -> bool:
        return ps.at("(") or ps.at("{")

    def describe(self) -> str:
        return "a region"


def _union(items: list[Any]) -> Any:
    return items[0] if len(items) == 1 else functools.reduce(operator.or_, items)


def codec_for(tp: Any) -> Codec:
    """The codec of a resolved field annotation; unsupported annotations fail loudly at table build."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        if len(present) < len(args):
            return OptionalCodec(codec_for(_union(present)))
        kinds = set(present)
        if kinds == {DType, DTypeVar}:
            return ElemTypeCodec()
        if kinds == {int, float, bool}:
            return LiteralCodec()
        if kinds == {Value, Slice, DynSlice}:
            return IndexItemCodec()
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return TupleCodec(codec_for(args[0]))
    elif tp is Value:
        return ValueCodec()
    elif tp is Region:
        return RegionCodec()
    elif isinstance(tp, type) and issubclass(tp, Dim):
        return DimCodec()
    elif isinstance(tp, type) and issubclass(tp, Enum):
        return EnumCodec(tp)
    elif tp is bool:
        return BoolCodec()
    elif tp is int:
        return IntCodec()
    elif tp is float:
        return FloatCodec()
    raise TypeError(f"the .kir format has no syntax for field type {tp!r}")


# ---------------------------------------------------------------------------------------------- op syntax

# Custom formats of the common ops. Fields left out are written as `name=value` after the template.
FORMATS: dict[str, str] = {
    "constant": "$value : $dtype",
    "iota": "$extent : $dtype",
    "dim": "$dim : $dtype",
    "unary": "$fn $x",
    "binary": "$fn $lhs, $rhs",
    "compare": "$fn $lhs, $rhs",
    "select": "$cond, $on_true, $on_false",
    "cast": "$x to $dtype",
    "bitcast": "$x to $dtype",
    "load": "$src[$index]",
    "gather": "$src[$indices]",
    "store": "$dst[$index] = $value",
    "scatter": "$dst[$indices] = $value",
    "atomic": "$kind $dst[$indices], $value",
    "atomic_cas": "$dst[$indices], $expected, $value",
    "alloc": "$init $dtype[$shape]",
    "dot": "$lhs, $rhs",
    "yield": "$values",
    "parallel": "$body.args in ($domain) $body.block",
    "for": "$body.args in range($start, $stop, $step) init($inits) $body.block",
    "while": "init($inits) cond $cond do $body",
    "if": "$cond $then_ else $else_",
    "histogram": "$values",
    "reduce": "$kind($inputs)",
    "scan": "$kind($inputs)",
    "sort": "$x",
    "region_fold": "$kind $src[$index]",
    "region_scan": "$kind $dst[$dst_index] = $src[$src_index]",
    "random": "$kind $seed, $offset",
    "broadcast": "$x",
    "reshape": "$x",
    "transpose": "$x",
    "slice": "$x",
    "concat": "($inputs)",
    "expand_dims": "$x",
    "squeeze": "$x",
}

_PIECE_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)(?:\.(args|block))?")


@dataclass(frozen=True)
class FieldSyntax:
    name: str
    codec: Codec
    default: Any  # dataclasses.MISSING when the field is required

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING

    def is_default(self, value: Any) -> bool:
        # Types must match too: `fill=0.0` stays distinct from the default `0`.
        if self.required or type(value) is not type(self.default):
            return False
        if isinstance(value, float) and math.isnan(value):
            return math.isnan(self.default)
        return bool(value == self.default)


@dataclass(frozen=True)
class Piece:
    """Literal template text, or a field directive (`part` is None, "args" or "block")."""

    text: str = ""
    field: str | None = None
    part: str | None = None
    bare: bool = False  # a tuple written inside the template's own brackets


@dataclass(frozen=True)
class OpSyntax:
    cls: type[Op]
    name: str
    fields: tuple[FieldSyntax, ...]
    pieces: tuple[Piece, ...]

    def field(self, name: str) -> FieldSyntax | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    @property
    def in_template(self) -> frozenset[str]:
        return frozenset(p.field for p in self.pieces if p.field is not None)

    def attributes(self) -> Iterator[FieldSyntax]:
        """Fields written as `name=value`, in field order."""
        used = self.in_template
        return (f for f in self.fields if f.name not in used)


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _pieces(name: str, template: str, fields: dict[str, FieldSyntax]) -> tuple[Piece, ...]:
    out: list[Piece] = []
    pos = 0
    seen: dict[str, set[str | None]] = {}
    for m in _PIECE_RE.finditer(template):
        if m.start() > pos:
            out.append(Piece(text=template[pos:m.start()]))
        fname, part = m.group(1), m.group(2)
        if fname not in fields:
            raise TypeError(f"format of {name} names unknown field {fname}")
        fs = fields[fname]
        if part is not None and not isinstance(fs.codec, RegionCodec):
            raise TypeError(f"format of {name}: ${fname}.{part} applies to regions only")
        parts = seen.setdefault(fname, set())
        if part in parts or (part is None and parts) or (part is not None and None in parts):
            raise TypeError(f"format of {name} uses field {fname} twice")
        if part == "block" and "args" not in parts:
            raise TypeError(f"format of {name}: ${fname}.block needs ${fname}.args before it")
        parts.add(part)
        before = template[:m.start()].rstrip()
        bare = isinstance(fs.codec, TupleCodec) and (not before or before.endswith(("(", "[")))
        out.append(Piece(field=fname, part=part, bare=bare))
        pos = m.end()
    if pos < len(template):
        out.append(Piece(text=template[pos:]))
    for fname, parts in seen.items():
        if "args" in parts and "block" not in parts:
            raise TypeError(f"format of {name}: ${fname}.args needs ${fname}.block")
    return tuple(out)


@functools.cache
def syntax_of(cls: type[Op]) -> OpSyntax:
    hints = typing.get_type_hints(cls)
    fields = {f.name: FieldSyntax(f.name, codec_for(hints[f.name]), _field_default(f))
              for f in dataclasses.fields(cls) if f.name not in ("results", "loc")}
    pieces = _pieces(cls.NAME, FORMATS.get(cls.NAME, ""), fields)
    return OpSyntax(cls, cls.NAME, tuple(fields.values()), pieces)


def all_syntaxes() -> dict[str, OpSyntax]:
    return {name: syntax_of(cls) for name, cls in OP_CLASSES.items()}


def _cell(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


def markdown_table() -> str:
    """The op reference of docs/kir.md, generated from the table (a test keeps the two equal)."""
    rows = ["| op | written as | attributes (`[...]`: optional, default omitted) | fields in the template |",
            "|---|---|---|---|"]
    for name, syn in all_syntaxes().items():
        template = "".join(p.text if p.field is None else f"${p.field}" + (f".{p.part}" if p.part else "")
                           for p in syn.pieces)
        attrs = " ".join(f"{f.name}={f.codec.grammar}" if f.required else f"[{f.name}={f.codec.grammar}]"
                         for f in syn.attributes())
        fields = "; ".join(f"{f.name}: {f.codec.grammar}" for f in syn.fields if f.name in syn.in_template)
        rows.append(f"| `{name}` | {_cell(name + (' ' + template if template else ''))} | "
                    f"{_cell(attrs) if attrs else ''} | {_cell(fields) if fields else ''} |")
    return "\n".join(rows) + "\n"
