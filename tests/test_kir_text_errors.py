"""Malformed `.kir` text: every error is a located DiagnosticError with the exact message."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kir
from kir.errors import DiagnosticError, IntentError
from kir.text import decode_source, parse_kernel, parse_module, print_kernel
from kir.text.cursor import MAX_DIM_OPERATORS, MAX_NESTING
from tests import kirgen

DTYPES = "(expected one of pred, i4, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3, f8e5m2)"
HEAD = "kernel f(x: in f32[N], out: out f32[N]) symbols(N) {\n"


def error_of(text: str, filename: str = "bad.kir") -> DiagnosticError:
    with pytest.raises(DiagnosticError) as info:
        parse_module(text, filename)
    return info.value


CASES = [
    # name, text, (line, col), message
    ("truncated body", HEAD + "  %a: f32[N] = load %x[0:N]\n", (2, 28),
     "unexpected end of file: the region opened at line 1, column 52 is not closed with '}'"),
    ("truncated header", "kernel f(x: in f32[N]", (1, 22),
     "unexpected end of file in the kernel header: expected '{' to open the body"),
    ("truncated op", HEAD + "  %a: f32[N] = load %x[0:", (2, 26), "expected a dim, found end of file"),
    ("unknown op", HEAD + "  %a: f32[N] = lod %x[0:N]\n}\n", (2, 16), "unknown op 'lod'; did you mean 'load'?"),
    ("unknown generic op", HEAD + '  "frobnicate" x=%x\n}\n', (2, 3),
     "unknown op 'frobnicate'; did you mean 'concat'?"),
    ("bad dtype", "kernel f(x: in f33[N]) symbols(N) {\n}\n", (1, 16),
     "unknown dtype 'f33' " + DTYPES),
    ("bad result dtype", HEAD + "  %a: float[N] = load %x[0:N]\n}\n", (2, 7),
     "unknown dtype 'float' " + DTYPES),
    ("unknown symbol", "kernel f(x: in f32[K]) symbols(N) {\n}\n", (1, 20),
     "unknown shape symbol 'K' (declared symbols: N)"),
    ("undefined value", HEAD + "  %a: f32[N] = load %y[0:N]\n}\n", (2, 21), "undefined value %y"),
    ("use before definition", HEAD + "  %a: f32[N] = binary add %b, %b\n  %b: f32[N] = load %x[0:N]\n}\n", (2, 27),
     "undefined value %b"),
    ("redefinition", HEAD + "  %a: f32[N] = load %x[0:N]\n  %a: f32[N] = load %x[0:N]\n}\n", (3, 3),
     "value %a is already defined at line 2"),
    ("shadowing a parameter", HEAD + "  %x: f32[N] = load %x[0:N]\n}\n", (2, 3),
     "value %x is already defined at line 1"),
    ("missing operand", HEAD + "  %a: f32[N] = load %x[0:N]\n  %b: f32[N] = binary add %a\n}\n", (3, 29),
     "expected ',' in binary, found the end of the line"),
    ("extra operand", HEAD + "  %a: f32[N] = load %x[0:N]\n  %b: f32[N] = unary exp %a, %a\n}\n", (3, 28),
     "unexpected ',' after the unary op (one op per line)"),
    ("missing attribute", HEAD + "  %a: f32[N] = load %x[0:N]\n  %s: f32 = reduce sum(%a)\n}\n", (3, 13),
     "reduce needs axes="),
    ("unknown attribute", HEAD + "  %a: f32[N] = load %x[0:N] foo=1\n}\n", (2, 29),
     "load has no attribute 'foo' (attributes: none)"),
    ("template field as attribute", HEAD + "  %a: f32[N] = load %x[0:N]\n  %s: f32 = reduce sum(%a) kind=max\n}\n",
     (3, 28), "reduce has no attribute 'kind' (attributes: axes, keepdims, acc_dtype, identity, combine)"),
    ("repeated attribute", HEAD + "  %a: f32[N] = load %x[0:N]\n  %s: f32 = reduce sum(%a) axes=(0) axes=(0)\n}\n",
     (3, 37), "attribute 'axes' is given twice"),
    ("bad enum", HEAD + "  %a: f32[N] = load %x[0:N]\n  %b: f32[N] = unary expo %a\n}\n", (3, 22),
     "expected one of neg, abs, exp, exp2, log, log2, log1p, sqrt, rsqrt, sin, cos, tanh, sigmoid, erf, floor, ceil, "
     "round, not, isnan, isinf, found 'expo'"),
    ("bad literal", HEAD + "  %c: f32 = constant one : f32\n}\n", (2, 22),
     "expected a literal (integer, float, inf, nan, true or false), found 'one'"),
    ("signed nan", HEAD + "  %c: f32 = constant -nan : f32\n}\n", (2, 23), "nan has no sign in .kir text"),
    ("two ops on a line", HEAD + "  %a: f32[N] = load %x[0:N] %b: f32 = constant 1.0 : f32\n}\n", (2, 29),
     "unexpected '%b' after the load op (one op per line)"),
    ("dashed parameter name", "kernel f(x-y: in f32[N]) symbols(N) {\n}\n", (1, 10),
     "parameter name 'x-y' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)"),
    ("keyword kernel name", "kernel class(x: in f32[N]) symbols(N) {\n}\n", (1, 8),
     "bad kernel name: 'class' is a Python keyword and cannot be used as a name"),
    ("keyword symbol", "kernel f() symbols(lambda) {\n}\n", (1, 20),
     "bad shape symbol: 'lambda' is a Python keyword and cannot be used as a name"),
    ("keyword value name", HEAD + "  %import: f32[N] = load %x[0:N]\n}\n", (2, 3),
     "bad value name %import: 'import' is a Python keyword and cannot be used as a name"),
    ("digit-led value name", HEAD + "  %1a: f32[N] = load %x[0:N]\n}\n", (2, 3),
     "bad value name %1a: '1a' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)"),
    ("unicode name", "kernel f(xé: in f32[N]) symbols(N) {\n}\n", (1, 11),
     "unexpected character 'é' (U+00E9); names are ASCII [A-Za-z_][A-Za-z0-9_]*"),
    ("unicode kernel name", "kernel σ() {\n}\n", (1, 8),
     "unexpected character 'σ' (U+03C3); names are ASCII [A-Za-z_][A-Za-z0-9_]*"),
    ("control character", "kernel f() {\x00\n}\n", (1, 13), "unexpected control character U+0000"),
    ("unterminated string", 'kernel f() consts(s = "abc) {\n}\n', (1, 23), "unterminated string"),
    ("modulo without space", "kernel f(x: in f32[N %4]) symbols(N) {\n}\n", (1, 22),
     "'%4' reads as a value; write the modulo with spaces: '% 4'"),
    ("value in a dim", HEAD + "  %n: i64 = iota %x : i64\n}\n", (2, 18),
     "expected a dim (shape symbols and integers), found the value %x"),
    ("negated symbol", "kernel f(x: in f32[-N]) symbols(N) {\n}\n", (1, 20),
     "a minus sign in a dim applies to an integer literal only; write 0 - x"),
    ("duplicate symbol", "kernel f() symbols(N, N) {\n}\n", (1, 23), "shape symbol N is declared twice"),
    ("duplicate parameter", "kernel f(x: in f32[], x: in f32[]) {\n}\n", (1, 23), "parameter x is declared twice"),
    ("duplicate clause", "kernel f() symbols(N) symbols(M) {\n}\n", (1, 23),
     "the kernel header has two symbols clauses"),
    ("dtype variable named like a dtype", "kernel f() dtypes(f32 in {f16}) {\n}\n", (1, 19),
     "dtype variable f32 has the name of a dtype or a role"),
    ("bad dtype choice", "kernel f() dtypes(T in {f16, f16}) {\n}\n", (1, 30), "bad choice 'f16' for dtype variable T"),
    ("bad comparison", "kernel f() symbols(N) requires(N = 4) {\n}\n", (1, 34),
     "expected a comparison (== != < <= > >=), found '='"),
    ("bad header clause", "kernel f() wants(N) {\n}\n", (1, 12),
     "expected a header clause (symbols, dtypes, consts, requires, axioms, checks, loc) or '{', found 'wants'"),
    ("duplicate kernel", "kernel f() {\n}\nkernel f() {\n}\n", (3, 1), "kernel f is already defined at line 1"),
    ("stray token", "kernel f() {\n}\n}\n", (3, 1), "expected 'kernel' to begin a kernel, found '}'"),
    ("bad loc", HEAD + '  %a: f32[N] = load %x[0:N] loc(file:1:2)\n}\n', (2, 33),
     'expected the file name string of loc("file":line:col), found \'file\''),
    ("huge integer", HEAD + "  %c: i64 = constant " + "9" * 5000 + " : i64\n}\n", (2, 22),
     "integer literal with 5000 digits is too long"),
]


@pytest.mark.parametrize("name,text,where,message", CASES, ids=[c[0] for c in CASES])
def test_malformed_text_gives_a_located_error(name: str, text: str, where: tuple[int, int], message: str) -> None:
    err = error_of(text)
    assert err.message == message
    assert (err.file, err.line, err.col) == ("bad.kir", *where)
    rendered = str(err)
    assert rendered.startswith(f"bad.kir:{where[0]}:{where[1]}: error: {message}")
    if where[0] <= len(text.splitlines()):
        assert rendered.splitlines()[1] == "    " + text.splitlines()[where[0] - 1]
        assert rendered.splitlines()[2] == "    " + " " * (where[1] - 1) + "^"


def test_regions_nested_too_deep() -> None:
    depth = MAX_NESTING + 1
    text = "kernel f() {\n  %c: pred = constant true : pred\n" + "if %c {\n" * depth + "}\n" * (depth + 1)
    err = error_of(text)
    assert err.message == f"regions nested more than {MAX_NESTING} levels deep"
    assert (err.line, err.col) == (2 + MAX_NESTING, 7)  # the kernel body is level 1


def test_regions_nested_to_the_limit_parse_and_verify() -> None:
    import kir

    depth = MAX_NESTING - 1  # the kernel body is one level
    text = "kernel f() {\n  %c: pred = constant true : pred\n" + "if %c {\n" * depth + \
        "yield\n} else {\nyield\n}\n" * depth + "yield\n}\n"
    k = parse_kernel(text)
    kir.verify(k)
    assert parse_kernel(str(k)) == k


def test_parentheses_nested_too_deep() -> None:
    n = MAX_NESTING + 1
    err = error_of("kernel f(x: in f32[" + "(" * n + "N" + ")" * n + "]) symbols(N) {\n}\n")
    assert err.message == f"parentheses nested more than {MAX_NESTING} levels deep"
    assert (err.line, err.col) == (1, 20 + MAX_NESTING)


def test_not_chain_too_deep() -> None:
    err = error_of("kernel f() symbols(N) requires(" + "not " * (MAX_NESTING + 1) + "N == 1) {\n}\n")
    assert err.message == f"predicates nested more than {MAX_NESTING} levels deep"


def test_dim_with_too_many_operators() -> None:
    err = error_of("kernel f(x: in f32[" + " + ".join(["N"] * (MAX_DIM_OPERATORS + 2)) + "]) symbols(N) {\n}\n")
    assert err.message == f"dim expression has more than {MAX_DIM_OPERATORS} operators"


def test_non_utf8_bytes() -> None:
    data = b"kernel f() {\n  # caf\xe9\n}\n"
    with pytest.raises(DiagnosticError) as info:
        decode_source(data, "latin.kir")
    err = info.value
    assert err.message == "the file is not valid UTF-8 (byte 0xe9)"
    assert (err.file, err.line, err.col) == ("latin.kir", 2, 8)
    assert str(err).splitlines()[1] == "      # caf\ufffd"


def test_byte_order_mark_is_skipped() -> None:
    assert parse_module(decode_source(b"\xef\xbb\xbfkernel f() {\n}\n", "bom.kir"), "bom.kir")[0].name == "f"


def test_parse_kernel_needs_exactly_one_kernel() -> None:
    with pytest.raises(DiagnosticError) as info:
        parse_kernel("", "empty.kir")
    assert info.value.message == "expected a kernel, found an empty text"
    with pytest.raises(DiagnosticError) as info:
        parse_kernel("kernel f() {\n}\nkernel g() {\n}\n", "two.kir")
    assert info.value.message == "expected one kernel; found more after kernel f (use parse_module)"
    assert (info.value.line, info.value.col) == (3, 1)
    assert parse_module("  # only a comment\n", "c.kir") == []


def test_errors_show_the_source_line_of_a_string() -> None:
    err = error_of(HEAD + "  %a: f32[N] = load %q[0:N]\n}\n", "<memory>")
    assert str(err) == "<memory>:2:21: error: undefined value %q\n      %a: f32[N] = load %q[0:N]\n" \
                       "                        ^"


MUTATION_ALPHABET = "%(){}[],:=<>+-*/ \n#\"abcxyzNM019._é"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kirgen.kernels(max_blocks=1), st.data())
def test_mutated_text_gives_diagnostics_never_crashes(k, data: st.DataObject) -> None:
    """Edited, truncated and garbled text parses and verifies, or fails with an IntentError (no traceback)."""
    text = print_kernel(k, generic=data.draw(st.booleans()))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        kind = data.draw(st.sampled_from(["delete", "insert", "truncate", "repeat"]))
        if kind == "delete":
            text = text[:i] + text[data.draw(st.integers(i, min(len(text), i + 8))):]
        elif kind == "insert":
            text = text[:i] + data.draw(st.text(MUTATION_ALPHABET, min_size=1, max_size=4)) + text[i:]
        elif kind == "repeat":
            j = data.draw(st.integers(i, min(len(text), i + 30)))
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i]
    try:
        kernels = parse_module(text, "mutated.kir")
    except DiagnosticError as exc:
        assert exc.loc is not None and exc.file == "mutated.kir"
        return
    for parsed in kernels:
        try:
            kir.verify(parsed)
        except IntentError:
            pass
        assert parse_module(print_kernel(parsed)) == [parsed]
