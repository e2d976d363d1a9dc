"""Tokens of the `.kir` text format, and the decoding of source bytes.

Identifiers are restricted to `[A-Za-z_][A-Za-z0-9_]*`; anything else (unicode letters, `-`, control
bytes) is a located error here, so that no name read from a `.kir` file can carry code into generated
source.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from enum import Enum

from ..errors import DiagnosticError, Loc, register_source


@dataclass(frozen=True)
class TextLoc(Loc):
    """A position inside `.kir` text itself. The printer leaves these out: the text is the source."""


class Tok(Enum):
    IDENT = "identifier"
    VALUE = "value"
    INT = "integer"
    FLOAT = "number"
    STRING = "string"
    PUNCT = "punctuation"
    EOF = "end of file"


@dataclass(frozen=True)
class Token:
    kind: Tok
    text: str
    line: int
    col: int

    def describe(self) -> str:
        if self.kind is Tok.EOF:
            return "end of file"
        return f"'{self.text}'"


IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<comment>\#[^\n]*)
  | (?P<value>%[A-Za-z0-9_]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>\d+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<punct>==|!=|<=|>=|//|[()\[\]{},:=<>+\-*%])
""", re.VERBOSE)
_KIND = {"value": Tok.VALUE, "ident": Tok.IDENT, "float": Tok.FLOAT, "int": Tok.INT, "string": Tok.STRING,
         "punct": Tok.PUNCT}


def is_identifier(name: str) -> bool:
    """A name usable for kernels, parameters, symbols, dtype variables, consts and values."""
    return bool(IDENT_RE.match(name)) and not keyword.iskeyword(name)


def identifier_problem(name: str) -> str | None:
    if not IDENT_RE.match(name):
        return f"'{name}' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)"
    if keyword.iskeyword(name):
        return f"'{name}' is a Python keyword and cannot be used as a name"
    return None


def decode_source(data: bytes, filename: str) -> str:
    """UTF-8 text of a `.kir` file; a non-UTF-8 byte is a located error."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        shown = data.decode("utf-8", errors="replace")
        register_source(filename, shown)
        bad = data[exc.start:exc.start + 1].hex()
        raise DiagnosticError(f"the file is not valid UTF-8 (byte 0x{bad})", Loc(filename, line, col)) from None
    return text.removeprefix("\ufeff")


def tokenize(text: str, filename: str) -> list[Token]:
    register_source(filename, text)
    out: list[Token] = []
    pos, line, line_start = 0, 1, 0
    n = len(text)
    while pos < n:
        m = _TOKEN_RE.match(text, pos)
        col = pos - line_start + 1
        if m is None:
            raise DiagnosticError(_bad_char_message(text[pos]), TextLoc(filename, line, col))
        kind = m.lastgroup
        chunk = m.group()
        if kind == "value":
            name = chunk[1:]
            if not name.isdigit() and identifier_problem(name) is not None:
                raise DiagnosticError(f"bad value name %{name}: {identifier_problem(name)}",
                                      TextLoc(filename, line, col))
        if kind not in ("ws", "comment"):
            out.append(Token(_KIND[kind], chunk, line, col))
        newlines = chunk.count("\n")
        if newlines:
            line += newlines
            line_start = pos + chunk.rfind("\n") + 1
        pos = m.end()
    out.append(_eof(text))
    return out


def template_tokens(text: str) -> list[str]:
    """The tokens of literal text in an op template (`in range(`, `] = `)."""
    return [m.group() for m in _TOKEN_RE.finditer(text) if m.lastgroup not in ("ws", "comment")]


def _eof(text: str) -> Token:
    # Point at the end of the last non-blank line so that the error shows a source line with a caret.
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return Token(Tok.EOF, "", 1, 1)
    return Token(Tok.EOF, "", len(lines), len(lines[-1].rstrip()) + 1)


def _bad_char_message(ch: str) -> str:
    if ch == '"':
        return "unterminated string"
    if ch.isprintable() and not ch.isascii():
        return f"unexpected character '{ch}' (U+{ord(ch):04X}); names are ASCII [A-Za-z_][A-Za-z0-9_]*"
    if not ch.isprintable():
        return f"unexpected control character U+{ord(ch):04X}"
    return f"unexpected character '{ch}'"
