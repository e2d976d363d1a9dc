"""The token cursor and the expression grammar of `.kir` text: names, numbers, dims, predicates, types."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

from ..core import RefType, Role, TensorType, Type
from ..dims import CMP_OPS, DBin, DConst, Dim, DSym, PAnd, PCmp, PNot, POr, Pred
from ..dtypes import DType, DTypeVar
from ..errors import DiagnosticError
from .lexer import TextLoc, Tok, Token, identifier_problem

# Nesting limits keep every recursive consumer of the parsed IR (printer, verifier, Z3 translation)
# far from Python's recursion limit; deeper input is a located error.
MAX_NESTING = 100
MAX_DIM_OPERATORS = 200

_ROLES = {r.value: r for r in Role}
_DIM_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}

R = TypeVar("R")


class Cursor:
    def __init__(self, tokens: list[Token], filename: str) -> None:
        self.tokens = tokens
        self.pos = 0
        self.filename = filename
        self.nesting = 0
        # The kernel's shape symbols and dtype variables (read first from the header).
        self.symbols: set[str] | None = None
        self.declared_symbols: tuple[str, ...] = ()
        self.dtype_vars: dict[str, DTypeVar] = {}

    # --- tokens
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.peek()
        if tok.kind is not Tok.EOF:
            self.pos += 1
        return tok

    @property
    def prev(self) -> Token:
        return self.tokens[self.pos - 1] if self.pos else self.tokens[0]

    def at(self, text: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.text == text and tok.kind in (Tok.PUNCT, Tok.IDENT)

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.pos += 1
            return True
        return False

    def expect(self, text: str, context: str = "", within_line: bool = True) -> Token:
        tok = self.peek()
        if not self.at(text):
            where = f" {context}" if context else ""
            if not within_line:
                raise self.error(f"expected '{text}'{where}, found {tok.describe()}", tok)
            raise self.error_found(f"expected '{text}'{where}", tok)
        return self.next()

    def error_found(self, message: str, tok: Token) -> DiagnosticError:
        """`message, found X`; a token on a later line is reported as the end of the current line."""
        i = self.pos - 1 if self.pos and self.tokens[self.pos - 1] is tok else self.pos
        prev = self.tokens[i - 1] if i > 0 else tok
        if tok.line > prev.line and tok.kind is not Tok.EOF:
            return DiagnosticError(f"{message}, found the end of the line",
                                   TextLoc(self.filename, prev.line, prev.col + len(prev.text)))
        return self.error(f"{message}, found {tok.describe()}", tok)

    def same_line(self) -> bool:
        return self.peek().line == self.prev.line

    def after_opener(self) -> bool:
        return self.pos > 0 and self.prev.kind is Tok.PUNCT and self.prev.text in ("(", "[")

    def loc(self, tok: Token) -> TextLoc:
        return TextLoc(self.filename, tok.line, tok.col)

    def error(self, message: str, tok: Token | None = None) -> DiagnosticError:
        return DiagnosticError(message, self.loc(tok or self.peek()))

    def nest(self, tok: Token, what: str) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(f"{what} nested more than {MAX_NESTING} levels deep", tok)

    def unnest(self) -> None:
        self.nesting -= 1

    def attempt(self, *alternatives: Callable[[], R]) -> R:
        """The first alternative that parses; if none does, the error that got furthest."""
        start, nesting, best = self.pos, self.nesting, None
        for alt in alternatives:
            try:
                return alt()
            except DiagnosticError as exc:
                key = (exc.line or 0, exc.col or 0)
                if best is None or key > best[0]:
                    best = (key, exc)
                self.pos, self.nesting = start, nesting
        assert best is not None
        raise best[1]

    # --- names and numbers
    def parse_name(self, what: str) -> Token:
        tok = self.next()
        if tok.kind is not Tok.IDENT:
            raise self.error_found(f"expected {what}", tok)
        follow = self.peek()
        if follow.text == "-" and follow.line == tok.line and follow.col == tok.col + len(tok.text):
            after = self.peek(1)
            raise self.error(f"{what} '{tok.text}-{after.text}' is not an identifier "
                             f"([A-Za-z_][A-Za-z0-9_]*)", tok)
        problem = identifier_problem(tok.text)
        if problem is not None:
            raise self.error(f"bad {what}: {problem}", tok)
        return tok

    def parse_int(self) -> int:
        neg = self.accept("-")
        tok = self.next()
        if tok.kind is not Tok.INT:
            raise self.error_found("expected an integer", tok)
        return -self._int(tok) if neg else self._int(tok)

    def _int(self, tok: Token) -> int:
        try:
            return int(tok.text)
        except ValueError:
            raise self.error(f"integer literal with {len(tok.text)} digits is too long", tok) from None

    def parse_number(self, allow_bool: bool) -> int | float | bool:
        tok = self.peek()
        if allow_bool and tok.kind is Tok.IDENT and tok.text in ("true", "false"):
            self.next()
            return tok.text == "true"
        neg = self.accept("-")
        tok = self.next()
        if tok.kind is Tok.INT:
            v: int | float = self._int(tok)
        elif tok.kind is Tok.FLOAT:
            v = float(tok.text)
        elif tok.kind is Tok.IDENT and tok.text in ("inf", "nan"):
            v = math.inf if tok.text == "inf" else math.nan
        else:
            what = "a literal (integer, float, inf, nan, true or false)" if allow_bool else "a number"
            raise self.error_found(f"expected {what}", tok)
        if neg and isinstance(v, float) and math.isnan(v):
            raise self.error("nan has no sign in .kir text", tok)
        return -v if neg else v

    # --- dims: Presburger expressions, kept exactly as written (no folding) so that they round-trip
    def dim_can_start(self) -> bool:
        tok = self.peek()
        return tok.kind in (Tok.INT, Tok.IDENT) or self.at("(") or self.at("-")

    def parse_dim(self) -> Dim:
        budget = [MAX_DIM_OPERATORS]
        return self._dim(1, budget)

    def _dim(self, min_prec: int, budget: list[int]) -> Dim:
        lhs = self._dim_atom(budget)
        while True:
            tok = self.peek()
            prec = _DIM_PREC.get(tok.text) if tok.kind is Tok.PUNCT else None
            if prec is None or prec < min_prec:
                if tok.kind is Tok.VALUE and tok.text[1:].isdigit() and tok.line == self.prev.line:
                    raise self.error(f"'{tok.text}' reads as a value; write the modulo with spaces: "
                                     f"'% {tok.text[1:]}'", tok)
                return lhs
            self.next()
            budget[0] -= 1
            if budget[0] < 0:
                raise self.error(f"dim expression has more than {MAX_DIM_OPERATORS} operators", tok)
            rhs = self._dim(prec + 1, budget)
            lhs = DBin(tok.text, lhs, rhs)

    def _dim_atom(self, budget: list[int]) -> Dim:
        tok = self.next()
        if tok.kind is Tok.INT:
            return DConst(self._int(tok))
        if tok.text == "-" and tok.kind is Tok.PUNCT:
            if self.peek().kind is not Tok.INT:
                raise self.error("a minus sign in a dim applies to an integer literal only; write 0 - x",
                                 tok)
            return DConst(-self._int(self.next()))
        if tok.text == "(" and tok.kind is Tok.PUNCT:
            self.nest(tok, "parentheses")
            inner = self._dim(1, budget)
            self.expect(")", "to close the parenthesis")
            self.unnest()
            return inner
        if tok.kind is Tok.IDENT:
            problem = identifier_problem(tok.text)
            if problem is not None:
                raise self.error(f"expected a dim, found '{tok.text}'", tok)
            self.use_symbol(tok)
            return DSym(tok.text)
        if tok.kind is Tok.VALUE:
            raise self.error(f"expected a dim (shape symbols and integers), found the value {tok.text}", tok)
        raise self.error_found("expected a dim", tok)

    def use_symbol(self, tok: Token) -> None:
        if self.symbols is not None and tok.text not in self.symbols:
            raise self.unknown_symbol(tok)

    def unknown_symbol(self, tok: Token) -> DiagnosticError:
        known = ", ".join(sorted(self.symbols or ())) or "none"
        return self.error(f"unknown shape symbol '{tok.text}' (declared symbols: {known})", tok)

    # --- predicates
    def parse_pred(self) -> Pred:
        items = [self._pred_and()]
        while self.accept("or"):
            items.append(self._pred_and())
        return items[0] if len(items) == 1 else POr(tuple(items))

    def _pred_and(self) -> Pred:
        items = [self._pred_not()]
        while self.accept("and"):
            items.append(self._pred_not())
        return items[0] if len(items) == 1 else PAnd(tuple(items))

    def _pred_not(self) -> Pred:
        tok = self.peek()
        if self.accept("not"):
            self.nest(tok, "predicates")
            inner = self._pred_not()
            self.unnest()
            return PNot(inner)
        if (tok.text in ("and", "or")) and self.at("(", 1):
            return self._pred_call()
        if self.at("("):
            return self.attempt(self._pred_cmp, self._pred_group)
        return self._pred_cmp()

    def _pred_call(self) -> Pred:
        word = self.next()
        self.expect("(")
        items: list[Pred] = []
        if not self.at(")"):
            items.append(self.parse_pred())
            while self.accept(","):
                items.append(self.parse_pred())
        self.expect(")", f"to close {word.text}(...)")
        return PAnd(tuple(items)) if word.text == "and" else POr(tuple(items))

    def _pred_group(self) -> Pred:
        tok = self.expect("(")
        self.nest(tok, "parentheses")
        inner = self.parse_pred()
        self.expect(")", "to close the parenthesis")
        self.unnest()
        return inner

    def _pred_cmp(self) -> Pred:
        lhs = self.parse_dim()
        tok = self.next()
        if tok.kind is not Tok.PUNCT or tok.text not in CMP_OPS:
            raise self.error_found(f"expected a comparison ({' '.join(CMP_OPS)})", tok)
        return PCmp(tok.text, lhs, self.parse_dim())

    # --- types
    def parse_elem_type(self) -> DType | DTypeVar:
        tok = self.next()
        if tok.kind is Tok.IDENT:
            if tok.text in self.dtype_vars:
                return self.dtype_vars[tok.text]
            try:
                return DType(tok.text)
            except ValueError:
                pass
        names = ", ".join(d.value for d in DType)
        extra = f" or a dtype variable ({', '.join(self.dtype_vars)})" if self.dtype_vars else ""
        if tok.kind is not Tok.IDENT:
            raise self.error_found(f"expected a dtype ({names}{extra})", tok)
        raise self.error(f"unknown dtype {tok.describe()} (expected one of {names}{extra})", tok)

    def parse_shape(self) -> tuple[Dim, ...]:
        self.expect("[", "to open the shape")
        dims: list[Dim] = []
        if not self.at("]"):
            dims.append(self.parse_dim())
            while self.accept(","):
                dims.append(self.parse_dim())
        self.expect("]", "to close the shape")
        return tuple(dims)

    def parse_type(self) -> Type:
        """`f32`, `f32[M, N]`, or memory with a role: `in f32[M, N]`, `local i32[B]`."""
        tok = self.peek()
        role = _ROLES.get(tok.text) if tok.kind is Tok.IDENT else None
        if role is not None:
            self.next()
        dtype = self.parse_elem_type()
        shape = self.parse_shape() if self.at("[") else ()
        return RefType(dtype, shape, role) if role is not None else TensorType(dtype, shape)
