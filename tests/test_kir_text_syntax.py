"""The syntax table: every op class has a syntax derived from its fields, and docs/kir.md shows it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import kir
from kir.core import OP_CLASSES, Op, TensorType, Type, TypeContext, Value
from kir.dims import Dim
from kir.pointwise import Literal
from kir.text import parse_kernel, print_kernel
from kir.text.syntax import FORMATS, FieldSyntax, RegionCodec, TupleCodec, _pieces, codec_for, markdown_table, syntax_of

DOCS = Path(__file__).resolve().parent.parent / "docs" / "kir.md"


@pytest.mark.parametrize("name", sorted(OP_CLASSES))
def test_every_op_class_has_a_syntax(name: str) -> None:
    cls = OP_CLASSES[name]
    syn = syntax_of(cls)
    assert syn.name == name
    assert [f.name for f in syn.fields] == [f.name for f in dataclasses.fields(cls) if f.name not in ("results", "loc")]
    # Every field is written either by the template or as an attribute, exactly once.
    assert set(syn.in_template) | {f.name for f in syn.attributes()} == {f.name for f in syn.fields}


def test_every_format_names_a_registered_op() -> None:
    assert set(FORMATS) <= set(OP_CLASSES)


def test_unsupported_field_types_fail_when_the_table_is_built() -> None:
    with pytest.raises(TypeError) as info:
        codec_for(dict[str, int])
    assert str(info.value) == "the .kir format has no syntax for field type dict[str, int]"


def test_template_mistakes_are_caught() -> None:
    fields = {"x": FieldSyntax("x", codec_for(Value), dataclasses.MISSING),
              "body": FieldSyntax("body", RegionCodec(), dataclasses.MISSING),
              "xs": FieldSyntax("xs", TupleCodec(codec_for(Value)), dataclasses.MISSING)}
    for template, message in [("$y", "format of t names unknown field y"),
                              ("$x $x", "format of t uses field x twice"),
                              ("$x.args", "format of t: $x.args applies to regions only"),
                              ("$body.block", "format of t: $body.block needs $body.args before it"),
                              ("$body.args", "format of t: $body.args needs $body.block"),
                              ("$body $body.args", "format of t uses field body twice")]:
        with pytest.raises(TypeError) as info:
            _pieces("t", template, fields)
        assert str(info.value) == message
    pieces = _pieces("t", "$xs ($x)", fields)
    assert pieces[0].bare  # a tuple at the start of a template has no parentheses of its own


def test_docs_show_the_generated_op_table() -> None:
    assert markdown_table() in DOCS.read_text(encoding="utf-8")


def test_an_op_without_a_template_uses_the_generic_syntax(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new op class is printable and parseable with no change to the printer or the parser."""

    class Clamp(Op):
        x: Value
        lo: Literal
        hi: Literal = 1.0
        extents: tuple[Dim, ...] = ()

        def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
            return (ctx.tensor(self.x, "clamp operand"),)

    Clamp = dataclasses.dataclass(frozen=True, kw_only=True)(Clamp)  # noqa: N806
    Clamp.NAME = "test_clamp"
    monkeypatch.setitem(OP_CLASSES, "test_clamp", Clamp)
    text = """kernel f(x: in f32[N]) symbols(N) {
  %v: f32[N] = load %x[0:N]
  %c: f32[N] = test_clamp x=%v lo=-0.5 extents=(N, N + 1)
  yield
}
"""
    k = parse_kernel(text)
    op = k.body.ops[1]
    assert isinstance(op, Clamp) and op.lo == -0.5 and op.hi == 1.0
    assert op.results[0].type == TensorType(kir.DType.f32, (kir.DSym("N"),))
    assert print_kernel(k) == text
    assert parse_kernel(print_kernel(k, generic=True)) == k


def test_optional_attributes_accept_none() -> None:
    text = """kernel f(x: in f32[N]) symbols(N) {
  %v: f32[N] = load %x[0:N]
  %s: f32 = "reduce" inputs=(%v) axes=(0) kind=sum acc_dtype=none identity=none combine=none
  %t: f32 = reduce sum(%v) axes=(0) acc_dtype=f64 keepdims=false
  yield
}"""
    k = parse_kernel(text)
    s, t = k.body.ops[1], k.body.ops[2]
    assert (s.acc_dtype, s.identity, s.combine) == (None, None, None)
    assert t.acc_dtype == kir.DType.f64 and t.keepdims is False
    assert "%s: f32 = reduce sum(%v) axes=(0)\n  %t: f32 = reduce sum(%v) axes=(0) acc_dtype=f64\n" in print_kernel(k)
    reduce_syntax = syntax_of(kir.Reduce)
    acc = reduce_syntax.field("acc_dtype")
    assert acc is not None and acc.codec.emit(None, None) == "none"  # type: ignore[arg-type]
