"""Parsing `.kir` text into KIR kernels, driven by the op syntax table in `syntax.py`.

Every error is a `DiagnosticError` at file:line:col with the source line and a caret: lexical errors,
unknown ops and dtypes, undefined or redefined values, missing operands, bad names, nesting too deep.
Typing is left to `kir.verify`, which reports at the same locations (each parsed op carries a
`TextLoc`).
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from ..core import OP_CLASSES, Kernel, Op, Param, Region, Type, Value, new_value
from ..dims import Pred
from ..dtypes import DType, DTypeVar
from ..errors import Loc
from ..renumber import renumber
from .cursor import Cursor
from .lexer import TextLoc, Tok, Token, decode_source, template_tokens, tokenize
from .syntax import OpSyntax, Piece, syntax_of

_RESERVED_TYPE_WORDS = frozenset(d.value for d in DType) | {"in", "out", "inout", "local"}
_CLAUSES = ("symbols", "dtypes", "consts", "requires", "axioms", "checks", "loc")


class Parser(Cursor):
    def __init__(self, tokens: list[Token], filename: str) -> None:
        super().__init__(tokens, filename)
        self.scopes: list[dict[str, Value]] = []
        self.defined_at: dict[int, Token] = {}
        self.pending_args: dict[str, tuple[Value, ...]] = {}

    # --- values
    def lookup(self, name: str) -> Value | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def use_value(self) -> Value:
        tok = self.next()
        if tok.kind is not Tok.VALUE:
            raise self.error_found("expected a value (%name)", tok)
        v = self.lookup(tok.text[1:])
        if v is None:
            raise self.error(f"undefined value {tok.text}", tok)
        return v

    def new_def(self, tok: Token, type_: Type) -> Value:
        name = tok.text[1:]
        return new_value(type_, None if name.isdigit() else name)

    def define(self, tok: Token, v: Value) -> None:
        name = tok.text[1:]
        prev = self.lookup(name)
        if prev is not None:
            first = self.defined_at[prev.id]
            raise self.error(f"value {tok.text} is already defined at line {first.line}", tok)
        self.scopes[-1][name] = v
        self.defined_at[v.id] = tok

    def parse_def(self) -> tuple[Token, Value]:
        tok = self.next()
        if tok.kind is not Tok.VALUE:
            raise self.error_found("expected a value name (%name)", tok)
        self.expect(":", f"and the type of {tok.text}")
        return tok, self.new_def(tok, self.parse_type())

    # --- regions
    def parse_region_args(self) -> tuple[Value, ...]:
        self.expect("(", "to open the region arguments")
        defs: list[tuple[Token, Value]] = []
        if not self.at(")"):
            defs.append(self.parse_def())
            while self.accept(","):
                defs.append(self.parse_def())
        self.expect(")", "to close the region arguments")
        for tok, v in defs:
            self.defined_at[v.id] = tok
        return tuple(v for _, v in defs)

    def parse_region_block(self, args: tuple[Value, ...]) -> Region:
        opener = self.expect("{", "to open a region")
        self.nest(opener, "regions")
        self.scopes.append({})
        for a in args:
            self.define(self.defined_at[a.id], a)
        ops: list[Op] = []
        while not self.at("}"):
            if self.peek().kind is Tok.EOF:
                raise self.error(f"unexpected end of file: the region opened at line {opener.line}, column "
                                 f"{opener.col} is not closed with '}}'")
            ops.append(self.parse_op())
        self.next()
        self.scopes.pop()
        self.unnest()
        return Region(args, tuple(ops))

    # --- ops
    def parse_op(self) -> Op:
        start = self.peek()
        results: list[tuple[Token, Value]] = []
        if start.kind is Tok.VALUE:
            results.append(self.parse_def())
            while self.accept(","):
                results.append(self.parse_def())
            self.expect("=", "after the results")
        name_tok = self.next()
        if name_tok.kind is Tok.STRING:
            syn, generic = self._op_syntax(json.loads(name_tok.text), name_tok), True
        elif name_tok.kind is Tok.IDENT:
            syn, generic = self._op_syntax(name_tok.text, name_tok), False
        else:
            raise self.error_found("expected an op", name_tok)
        values: dict[str, Any] = {}
        if not generic:
            for piece in syn.pieces:
                self._template_piece(syn, piece, values)
        self._attributes(syn, values, generic)
        loc: Loc = self.loc(start)
        if self.at("loc") and self.at("(", 1):
            loc = self.parse_loc()
        self._end_of_op(syn)
        missing = [f.name for f in syn.fields if f.required and f.name not in values]
        if missing:
            raise self.error(f"{syn.name} needs {', '.join(m + '=' for m in missing)}", name_tok)
        op = syn.cls(results=tuple(v for _, v in results), loc=loc, **values)
        for tok, v in results:
            self.define(tok, v)
        return op

    def _op_syntax(self, name: str, tok: Token) -> OpSyntax:
        cls = OP_CLASSES.get(name)
        if cls is None:
            close = difflib.get_close_matches(name, list(OP_CLASSES), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise self.error(f"unknown op '{name}'{hint}", tok)
        return syntax_of(cls)

    def _template_piece(self, syn: OpSyntax, piece: Piece, values: dict[str, Any]) -> None:
        if piece.field is None:
            for text in template_tokens(piece.text):
                self.expect(text, f"in {syn.name}")
            return
        fs = syn.field(piece.field)
        assert fs is not None
        if piece.part == "args":
            self.pending_args[piece.field] = self.parse_region_args()
        elif piece.part == "block":
            values[piece.field] = self.parse_region_block(self.pending_args.pop(piece.field))
        else:
            values[piece.field] = fs.codec.read(self, piece.bare)

    def _attributes(self, syn: OpSyntax, values: dict[str, Any], generic: bool) -> None:
        while self.peek().kind is Tok.IDENT and self.at("=", 1):
            tok = self.next()
            self.next()
            fs = syn.field(tok.text)
            if fs is None or (not generic and tok.text in syn.in_template):
                allowed = [f.name for f in syn.fields if generic or f.name not in syn.in_template]
                raise self.error(f"{syn.name} has no attribute '{tok.text}' (attributes: "
                                 f"{', '.join(allowed) or 'none'})", tok)
            if tok.text in values:
                raise self.error(f"attribute '{tok.text}' is given twice", tok)
            values[tok.text] = fs.codec.read(self)

    def _end_of_op(self, syn: OpSyntax) -> None:
        tok = self.peek()
        if tok.kind is Tok.EOF or self.at("}") or tok.line > self.prev.line:
            return
        raise self.error(f"unexpected {tok.describe()} after the {syn.name} op (one op per line)", tok)

    def parse_loc(self) -> Loc:
        self.expect("loc")
        self.expect("(", "after loc")
        tok = self.next()
        if tok.kind is not Tok.STRING:
            raise self.error(f"expected the file name string of loc(\"file\":line:col), found {tok.describe()}",
                             tok)
        file = self.string(tok)
        self.expect(":", "in loc(\"file\":line:col)")
        line = self.parse_int()
        self.expect(":", "in loc(\"file\":line:col)")
        col = self.parse_int()
        self.expect(")", "to close loc(...)")
        return Loc(file, line, col)

    def string(self, tok: Token) -> str:
        try:
            return json.loads(tok.text)
        except ValueError:
            raise self.error(f"bad string literal {tok.text}", tok) from None

    # --- kernels
    def parse_module(self) -> list[Kernel]:
        kernels: list[Kernel] = []
        names: dict[str, Token] = {}
        while self.peek().kind is not Tok.EOF:
            start = self.peek()
            k = self.parse_kernel()
            if k.name in names:
                raise self.error(f"kernel {k.name} is already defined at line {names[k.name].line}", start)
            names[k.name] = start
            kernels.append(k)
        return kernels

    def parse_kernel(self) -> Kernel:
        self.symbols, self.declared_symbols, self.dtype_vars = None, (), {}
        start = self.expect("kernel", "to begin a kernel", within_line=False)
        name = self.parse_name("kernel name").text
        self._prescan_header()
        self.expect("(", f"to open the parameters of kernel {name}")
        params: list[Param] = []
        if not self.at(")"):
            params.append(self._param(params))
            while self.accept(","):
                params.append(self._param(params))
        self.expect(")", "to close the parameters")
        clauses = self._clauses()
        body = self.parse_region_block(tuple(p.value for p in params))
        kernel = Kernel(name, tuple(params), clauses["symbols"], body, clauses["requires"], clauses["axioms"],
                        clauses["dtypes"], clauses["consts"], clauses["checks"], clauses["loc"] or self.loc(start))
        return renumber(kernel)

    def _prescan_header(self) -> None:
        """Read `symbols(...)` and `dtypes(...)` first: parameter types refer to them, and they are
        written after the parameters."""
        found: dict[str, tuple[int, Token]] = {}
        depth, i = 0, self.pos
        while True:
            tok = self.tokens[i]
            if tok.kind is Tok.EOF:
                raise self.error("unexpected end of file in the kernel header: expected '{' to open the body",
                                 tok)
            if depth == 0 and tok.text == "{" and tok.kind is Tok.PUNCT:
                break
            if tok.kind is Tok.PUNCT and tok.text in ("(", "["):
                depth += 1
            elif tok.kind is Tok.PUNCT and tok.text in (")", "]"):
                depth -= 1
            elif depth == 0 and tok.kind is Tok.IDENT and tok.text in _CLAUSES:
                if tok.text in found:
                    raise self.error(f"the kernel header has two {tok.text} clauses", tok)
                found[tok.text] = (i, tok)
            i += 1
        resume = self.pos
        for clause in ("symbols", "dtypes"):
            if clause in found:
                self.pos = found[clause][0]
                getattr(self, f"_clause_{clause}")()
        self.pos = resume
        if self.symbols is None:
            self.symbols = set()

    def _clauses(self) -> dict[str, Any]:
        out: dict[str, Any] = {"symbols": self.declared_symbols, "dtypes": tuple(self.dtype_vars.values()),
                               "consts": (), "requires": (), "axioms": (), "checks": False, "loc": None}
        while not self.at("{"):
            tok = self.peek()
            if tok.kind is Tok.EOF:
                raise self.error("unexpected end of file: expected '{' to open the kernel body", tok)
            if tok.kind is not Tok.IDENT or tok.text not in _CLAUSES:
                raise self.error(f"expected a header clause ({', '.join(_CLAUSES)}) or '{{', found "
                                 f"{tok.describe()}", tok)
            if tok.text in ("symbols", "dtypes"):
                self._skip_clause()
            elif tok.text == "checks":
                self.next()
                out["checks"] = True
            elif tok.text == "loc":
                out["loc"] = self.parse_loc()
            else:
                out[tok.text] = getattr(self, f"_clause_{tok.text}")()
        return out

    def _skip_clause(self) -> None:
        self.next()
        self.expect("(")
        depth = 1
        while depth:
            tok = self.next()
            if tok.kind is Tok.EOF:
                raise self.error("unexpected end of file in the kernel header", tok)
            if tok.kind is Tok.PUNCT and tok.text == "(":
                depth += 1
            elif tok.kind is Tok.PUNCT and tok.text == ")":
                depth -= 1

    def _name_list(self, what: str) -> list[Token]:
        out = [self.parse_name(what)]
        while self.accept(","):
            out.append(self.parse_name(what))
        return out

    def _clause_symbols(self) -> None:
        self.expect("symbols")
        self.expect("(", "after symbols")
        toks = [] if self.at(")") else self._name_list("shape symbol")
        self.expect(")", "to close symbols(...)")
        seen: set[str] = set()
        for tok in toks:
            if tok.text in seen:
                raise self.error(f"shape symbol {tok.text} is declared twice", tok)
            seen.add(tok.text)
        self.symbols = seen
        self.declared_symbols = tuple(t.text for t in toks)

    def _clause_dtypes(self) -> None:
        self.expect("dtypes")
        self.expect("(", "after dtypes")
        while not self.at(")"):
            tok = self.parse_name("dtype variable")
            if tok.text in self.dtype_vars:
                raise self.error(f"dtype variable {tok.text} is declared twice", tok)
            if tok.text in _RESERVED_TYPE_WORDS:
                raise self.error(f"dtype variable {tok.text} has the name of a dtype or a role", tok)
            self.expect("in", f"after dtype variable {tok.text}")
            self.expect("{", "to open the dtype choices")
            choices: list[DType] = []
            while True:
                ctok = self.peek()
                dt = self.parse_elem_type()
                if not isinstance(dt, DType) or dt in choices:
                    raise self.error(f"bad choice {ctok.describe()} for dtype variable {tok.text}", ctok)
                choices.append(dt)
                if not self.accept(","):
                    break
            self.expect("}", "to close the dtype choices")
            if self.symbols and tok.text in self.symbols:
                raise self.error(f"{tok.text} is both a shape symbol and a dtype variable", tok)
            self.dtype_vars[tok.text] = DTypeVar(tok.text, tuple(choices))
            if not self.accept(","):
                break
        self.expect(")", "to close dtypes(...)")

    def _clause_consts(self) -> tuple[tuple[str, int | float | bool | str], ...]:
        self.expect("consts")
        self.expect("(", "after consts")
        out: list[tuple[str, int | float | bool | str]] = []
        while not self.at(")"):
            tok = self.parse_name("const name")
            if any(n == tok.text for n, _ in out):
                raise self.error(f"const {tok.text} is given twice", tok)
            self.expect("=", f"after const {tok.text}")
            vtok = self.peek()
            value = self.string(self.next()) if vtok.kind is Tok.STRING else self.parse_number(allow_bool=True)
            out.append((tok.text, value))
            if not self.accept(","):
                break
        self.expect(")", "to close consts(...)")
        return tuple(out)

    def _pred_list(self, word: str) -> tuple[Pred, ...]:
        self.expect(word)
        self.expect("(", f"after {word}")
        out: list[Pred] = []
        while not self.at(")"):
            out.append(self.parse_pred())
            if not self.accept(","):
                break
        self.expect(")", f"to close {word}(...)")
        return tuple(out)

    def _clause_requires(self) -> tuple[Pred, ...]:
        return self._pred_list("requires")

    def _clause_axioms(self) -> tuple[Pred, ...]:
        return self._pred_list("axioms")

    def _param(self, earlier: list[Param]) -> Param:
        tok = self.parse_name("parameter name")
        if any(p.name == tok.text for p in earlier):
            raise self.error(f"parameter {tok.text} is declared twice", tok)
        self.expect(":", f"after parameter name {tok.text}")
        v = new_value(self.parse_type(), tok.text)
        self.defined_at[v.id] = Token(Tok.VALUE, "%" + tok.text, tok.line, tok.col)
        return Param(tok.text, v)


def _parser(text: str, filename: str) -> Parser:
    return Parser(tokenize(text, filename), filename)


def parse_module(text: str, filename: str = "<string>") -> list[Kernel]:
    """Every kernel of a `.kir` text, in order."""
    return _parser(text, filename).parse_module()


def parse_kernel(text: str, filename: str = "<string>") -> Kernel:
    """The one kernel of a `.kir` text."""
    ps = _parser(text, filename)
    if ps.peek().kind is Tok.EOF:
        raise ps.error("expected a kernel, found an empty text")
    kernel = ps.parse_kernel()
    if ps.peek().kind is not Tok.EOF:
        raise ps.error(f"expected one kernel; found more after kernel {kernel.name} (use parse_module)")
    return kernel


def parse_file(path: str) -> list[Kernel]:
    """Read and parse a `.kir` file (bytes are decoded as UTF-8; a bad byte is a located error)."""
    with open(path, "rb") as fh:
        data = fh.read()
    return parse_module(decode_source(data, path), path)


__all__ = ["Parser", "parse_kernel", "parse_module", "parse_file", "TextLoc"]
