"""Contractions: `intent.dot(a, b)` with matmul semantics (leading batch dims) and two-operand
`intent.einsum("bmk,bnk->bmn", a, b)` -> KIR dot (plus transpose/reduce where the spelling needs them)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..contract import Dot, Precision, default_dot_acc, mixed_fp8
from ..layout import Transpose
from ..reduce import Reduce, ReduceKind
from .calls import CallArgs, spelling
from .coerce import is_pred, is_weak, strong_dtype, to_tval, unify
from .values import FValue, StrLit, TVal, describe

if TYPE_CHECKING:
    from .lower import Lowerer


def _operands(lw: Lowerer, call: CallArgs, what: str) -> tuple[TVal, TVal]:
    a, b = call.value("a"), call.value("b")
    for fv, p in ((a, "a"), (b, "b")):
        if is_weak(fv) and not isinstance(fv, TVal):
            raise lw.error(call.arg_node(p), f"{what} needs tensors, got {describe(fv)}; multiply scalars with `*`")
    if mixed_fp8(strong_dtype(a), strong_dtype(b)):  # f8e4m3 x f8e5m2: each in its own format, f32 accumulation
        return (to_tval(lw, a, call.arg_node("a"), what), to_tval(lw, b, call.arg_node("b"), what))
    (x, y), _ = unify(lw, [a, b], [call.arg_node("a"), call.arg_node("b")], call.node, what)
    if is_pred(x.dtype):
        raise lw.error(call.node, f"{what} is not defined on pred values; convert with `.to(f32)`")
    return x, y


def _precision(lw: Lowerer, call: CallArgs) -> Precision:
    if call.is_none("precision"):
        return Precision.ieee
    return Precision(call.choice("precision", ("ieee", "tf32")))


def _dot(lw: Lowerer, call: CallArgs, x: TVal, y: TVal, lb: tuple[int, ...], rb: tuple[int, ...],
         lc: tuple[int, ...], rc: tuple[int, ...]) -> TVal:
    acc = call.optional_dtype("acc") or default_dot_acc(x.dtype)
    v = lw.add(Dot, call.node, lhs=x.value, rhs=y.value, lhs_batch=lb, rhs_batch=rb, lhs_contract=lc,
               rhs_contract=rc, acc_dtype=acc, precision=_precision(lw, call))
    return TVal(v)


@spelling("dot")
def dot(lw: Lowerer, call: CallArgs) -> FValue:
    x, y = _operands(lw, call, "intent.dot")
    ra, rb = x.rank, y.rank
    if ra == 0 or rb == 0:
        raise lw.error(call.node, "intent.dot needs operands of rank >= 1; multiply scalars with `*`")
    if ra == 1 or rb == 1:
        if rb == 1:
            return _dot(lw, call, x, y, (), (), (ra - 1,), (0,))
        if rb != 2:
            raise lw.error(call.node, f"intent.dot of a vector and a rank-{rb} tensor: use intent.einsum to say which "
                                      f"axes to contract")
        return _dot(lw, call, x, y, (), (), (0,), (0,))
    if ra != rb:
        raise lw.error(call.node, f"intent.dot of rank-{ra} and rank-{rb} tensors: batch dims must match; "
                                  f"broadcast with intent.broadcast_to first, or use intent.einsum")
    batch = tuple(range(ra - 2))
    return _dot(lw, call, x, y, batch, batch, (ra - 1,), (rb - 2,))


def _parse_spec(lw: Lowerer, spec: str, node: ast.AST) -> tuple[str, str, str]:
    text = spec.replace(" ", "")
    if "..." in text:
        raise lw.error(node, "intent.einsum: `...` is not supported; name every axis")
    if "->" in text:
        ins, out = text.split("->", 1)
    else:
        ins = text
        letters = ins.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    parts = ins.split(",")
    if len(parts) != 2:
        raise lw.error(node, f"intent.einsum takes two operands; the spec {spec!r} names {len(parts)}")
    a, b = parts
    for s in (a, b, out):
        if not all(c.isalpha() for c in s):
            raise lw.error(node, f"intent.einsum: bad spec {spec!r}; axes are letters, e.g. 'bmk,bnk->bmn'")
        if len(set(s)) != len(s):
            raise lw.error(node, f"intent.einsum: the axis letters of {s!r} repeat (diagonals are not supported)")
    for c in out:
        if c not in a and c not in b:
            raise lw.error(node, f"intent.einsum: output axis {c!r} appears in neither operand")
    return a, b, out


def _sum_out(lw: Lowerer, call: CallArgs, t: TVal, spec: str, keep: set[str]) -> tuple[TVal, str]:
    """Axes that appear in one operand only and not in the output are summed first."""
    drop = tuple(k for k, c in enumerate(spec) if c not in keep)
    if not drop:
        return t, spec
    v = lw.add(Reduce, call.node, inputs=(t.value,), axes=drop, kind=ReduceKind.sum)
    return TVal(v), "".join(c for c in spec if c in keep)


@spelling("einsum")
def einsum(lw: Lowerer, call: CallArgs) -> FValue:
    spec_fv = call.value("spec")
    if not isinstance(spec_fv, StrLit):
        raise lw.error(call.arg_node("spec"), f"intent.einsum: the spec is a string like 'mk,kn->mn', got "
                                              f"{describe(spec_fv)}")
    sa, sb, out = _parse_spec(lw, spec_fv.value, call.arg_node("spec"))
    x, y = _operands(lw, call, "intent.einsum")
    for t, s, p in ((x, sa, "a"), (y, sb, "b")):
        if t.rank != len(s):
            raise lw.error(call.arg_node(p), f"intent.einsum: operand `{p}` has rank {t.rank} but the spec names "
                                             f"{len(s)} axes ({s!r})")
    x, sa = _sum_out(lw, call, x, sa, set(sb) | set(out))
    y, sb = _sum_out(lw, call, y, sb, set(sa) | set(out))
    batch = [c for c in sa if c in sb and c in out]
    contract = [c for c in sa if c in sb and c not in out]
    res = _dot(lw, call, x, y, tuple(sa.index(c) for c in batch), tuple(sb.index(c) for c in batch),
               tuple(sa.index(c) for c in contract), tuple(sb.index(c) for c in contract))
    order = batch + [c for c in sa if c not in sb] + [c for c in sb if c not in sa]
    if order != list(out):
        perm = tuple(order.index(c) for c in out)
        res = TVal(lw.add(Transpose, call.node, x=res.value, perm=perm))
    return res

