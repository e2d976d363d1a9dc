"""The `.kir` text format: a printer and a parser driven by one syntax table (see docs/kir.md)."""

from .lexer import TextLoc, decode_source, is_identifier
from .parser import parse_file, parse_kernel, parse_module
from .printer import pred_text, print_kernel, print_module, type_text
from .syntax import FORMATS, OpSyntax, all_syntaxes, syntax_of

__all__ = ["print_kernel", "print_module", "parse_kernel", "parse_module", "parse_file", "decode_source",
           "TextLoc", "is_identifier", "type_text", "pred_text", "syntax_of", "all_syntaxes", "OpSyntax",
           "FORMATS"]
