"""Operators, comparisons, `and/or/not`, conditional expressions, casts and the pointwise spellings
(`intent.exp`, `intent.maximum`, `intent.where`, ...) -> KIR unary/binary/compare/select/cast ops."""

from __future__ import annotations

import ast
import math
from typing import TYPE_CHECKING

from .. import float_rules
from ..affine import binary_form, neg_form, nonnegative_by
from ..dims import DConst, Dim, dim_bin
from ..dtypes import DType, DTypeVar, ElemType
from ..layout import Transpose
from ..pointwise import FLOAT_ONLY_UNARY, Binary, BinaryFn, Bitcast, CmpFn, Compare, Select, Unary, UnaryFn
from ..pointwise import is_float_like as _float_like
from .calls import CallArgs, spelling
from .coerce import (
    WEAK_FLOAT,
    broadcast_all,
    cast,
    dim_value,
    is_int_like,
    is_pred,
    is_weak,
    to_tval,
    unify,
    weak_to,
)
from .suggest import dtype_name_equivalent, method_equivalent
from .values import BuiltinRef, DimExpr, DTypeLit, FValue, NoneLit, Num, RefV, StrLit, TupleV, TVal, a_type, describe

if TYPE_CHECKING:
    from .lower import Lowerer

INT_LIMIT = 1 << 64

BINOPS: dict[type, tuple[str, BinaryFn | None]] = {
    ast.Add: ("+", BinaryFn.add), ast.Sub: ("-", BinaryFn.sub), ast.Mult: ("*", BinaryFn.mul),
    ast.Div: ("/", BinaryFn.div), ast.FloorDiv: ("//", BinaryFn.floordiv), ast.Mod: ("%", BinaryFn.mod),
    ast.Pow: ("**", BinaryFn.pow), ast.BitAnd: ("&", BinaryFn.and_), ast.BitOr: ("|", BinaryFn.or_),
    ast.BitXor: ("^", BinaryFn.xor), ast.LShift: ("<<", BinaryFn.shl), ast.RShift: (">>", BinaryFn.shr),
    ast.MatMult: ("@", None),
}
CMPOPS: dict[type, tuple[str, CmpFn]] = {
    ast.Eq: ("==", CmpFn.eq), ast.NotEq: ("!=", CmpFn.ne), ast.Lt: ("<", CmpFn.lt), ast.LtE: ("<=", CmpFn.le),
    ast.Gt: (">", CmpFn.gt), ast.GtE: (">=", CmpFn.ge),
}
BITWISE = {BinaryFn.and_, BinaryFn.or_, BinaryFn.xor, BinaryFn.shl, BinaryFn.shr}


def is_float_like(dt: ElemType) -> bool:
    return _float_like(dt)


# ---------------------------------------------------------------------------------------------- static folding


def _check_int(lw: Lowerer, value: int | float | bool, node: ast.AST) -> Num:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= INT_LIMIT:
        raise lw.error(node, f"the integer constant {value} does not fit in 64 bits")
    return Num(value)


def c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as KIR (and C) define it."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def fold_binary(lw: Lowerer, sym: str, a: int | float | bool, b: int | float | bool, node: ast.AST) -> Num:
    ints = isinstance(a, int) and isinstance(b, int)
    try:
        if sym == "+":
            return _check_int(lw, a + b, node)
        if sym == "-":
            return _check_int(lw, a - b, node)
        if sym == "*":
            return _check_int(lw, a * b, node)
        if sym == "/":
            if ints:
                raise lw.error(node, f"`/` is true division and both operands are integers; write `//` for integer "
                                     f"division (truncating toward zero) or use a float such as {a}.0")
            return Num(a / b)
        if sym in ("//", "%"):
            if b == 0:
                raise lw.error(node, f"division by zero in `{sym}`")
            if ints:
                q = c_div(int(a), int(b))
                return Num(q if sym == "//" else int(a) - int(b) * q)
            rule = float_rules.floordiv if sym == "//" else float_rules.mod  # torch's and Python's
            return Num(rule(float_rules.PythonOps(), float(a), float(b)))
        if sym == "**":
            if ints and (b < 0 or b > 64 or abs(a) > INT_LIMIT):
                if b < 0:
                    return Num(float(a) ** b)
                raise lw.error(node, "the integer power is too large for a 64-bit constant")
            return _check_int(lw, a ** b, node)
        if not ints:
            raise lw.error(node, f"`{sym}` needs integer or bool operands, got {a!r} and {b!r}")
        if sym in ("<<", ">>") and not 0 <= b < 64:
            raise lw.error(node, f"shift amount {b} is outside [0, 64)")
        r = {"&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b, "<<": lambda: a << b,
             ">>": lambda: a >> b}[sym]()
        return _check_int(lw, r, node)
    except (OverflowError, ZeroDivisionError, ValueError) as exc:
        raise lw.error(node, f"cannot compute the constant expression: {exc}") from None


def static_dim(fv: FValue) -> Dim | None:
    if isinstance(fv, DimExpr):
        return fv.dim
    if isinstance(fv, Num) and isinstance(fv.value, int) and not isinstance(fv.value, bool):
        return DConst(fv.value)
    return None


def _fold_dims(lw: Lowerer, sym: str, a: Dim, b: Dim, node: ast.AST) -> DimExpr:
    if sym in ("//", "%") and b == DConst(0):
        raise lw.error(node, f"division by zero in `{sym}`")
    d = dim_bin(sym, a, b)
    if isinstance(d, DConst) and abs(d.value) >= INT_LIMIT:
        raise lw.error(node, f"the integer constant {d.value} does not fit in 64 bits")
    return DimExpr(d)


# ---------------------------------------------------------------------------------------------- binary


def binop(lw: Lowerer, node: ast.BinOp) -> FValue:
    sym, fn = BINOPS[type(node.op)]
    if fn is None:
        raise lw.error(node, "the `@` operator is not supported; write intent.dot(a, b) for matrix products")
    return binary(lw, sym, fn, lw.expr(node.left), lw.expr(node.right), node, node.left, node.right)


def _operand_check(lw: Lowerer, sym: str, fv: FValue, node: ast.AST) -> None:
    if not isinstance(fv, TVal | RefV | Num | DimExpr):
        raise lw.error(node, f"`{sym}` needs numbers or tensors, got {describe(fv)}")


def binary(lw: Lowerer, sym: str, fn: BinaryFn, a: FValue, b: FValue, node: ast.AST, na: ast.AST,
           nb: ast.AST) -> FValue:
    _operand_check(lw, sym, a, na)
    _operand_check(lw, sym, b, nb)
    if isinstance(a, Num) and isinstance(b, Num):
        return fold_binary(lw, sym, a.value, b.value, node)
    da, db = static_dim(a), static_dim(b)
    if da is not None and db is not None and sym in ("+", "-", "*", "//", "%"):
        return _fold_dims(lw, sym, da, db, node)
    if sym == "/" and da is not None and db is not None:
        raise lw.error(node, "`/` is true division and both operands are integers; write `//` for integer division "
                             "(truncating toward zero), or convert with `.to(f32)`")
    if fn is BinaryFn.pow and isinstance(a, RefV) and isinstance(b, Num):
        a = to_tval(lw, a, na, f"`{sym}`")  # a whole tensor (`x ** 3` at top level) powers as its loaded value
    if fn is BinaryFn.pow and isinstance(a, TVal) and is_float_like(a.dtype) and isinstance(b, Num) \
            and not isinstance(b.value, bool) and math.isfinite(b.value) and float(b.value).is_integer() \
            and 1 <= abs(b.value) <= MULTIPLIED_POWER:
        return _power_by_multiplication(lw, a, int(b.value), node, na, nb)
    (x, y), weak = unify(lw, [a, b], [na, nb], node, f"`{sym}`")
    dt = x.dtype
    if fn is BinaryFn.div and not is_float_like(dt):
        raise lw.error(node, f"`/` is true division but the operands are {dt}; write `//` for integer division "
                             f"(truncating toward zero), or convert with `.to(f32)`")
    if fn in BITWISE and is_float_like(dt):
        raise lw.error(node, f"`{sym}` needs integer or pred operands, got {dt}; for conditions compare first, "
                             f"e.g. `(a > 0) & (b > 0)`")
    if is_pred(dt) and fn not in BITWISE | {BinaryFn.maximum, BinaryFn.minimum}:
        raise lw.error(node, f"`{sym}` is not defined on pred values; convert with `.to(i32)` first")
    x, y = broadcast_all(lw, [x, y], node, f"`{sym}`")
    v = lw.add(Binary, node, fn=fn, lhs=x.value, rhs=y.value)
    return TVal(v, weak=weak, affine=binary_affine(lw, fn, x, y))


MULTIPLIED_POWER = 4  # float `x ** n` for a constant integer 1 <= |n| <= 4 is written as multiplications


def _power_by_multiplication(lw: Lowerer, x: TVal, n: int, node: ast.AST, na: ast.AST, nb: ast.AST) -> TVal:
    """Float `x ** n` for a small constant integer `n` as IEEE multiplications, exact wherever they are
    (`5.0 ** 2 == 25.0`, `3.0 ** 3 == 27.0`, negative bases alike): `x * x`, `(x * x) * x`,
    `(x * x) * (x * x)`; a negative `n` is `1 / x ** -n`. Every backend then computes the same bits."""

    def mul(p: TVal, q: TVal) -> TVal:
        return TVal(lw.add(Binary, node, fn=BinaryFn.mul, lhs=p.value, rhs=q.value))

    power = x
    if abs(n) >= 2:
        square = mul(x, x)
        power = square if abs(n) == 2 else mul(square, x) if abs(n) == 3 else mul(square, square)
    if n < 0:
        (one, _), _ = unify(lw, [Num(1.0), x], [nb, na], node, "`**`")
        one, power = broadcast_all(lw, [one, power], node, "`**`")
        power = TVal(lw.add(Binary, node, fn=BinaryFn.div, lhs=one.value, rhs=power.value))
    return TVal(power.value, weak=x.weak)


def binary_affine(lw: Lowerer, fn: BinaryFn, x: TVal, y: TVal) -> Dim | None:
    """The form of a scalar integer `x fn y` by the rules the KIR verifier applies (`kir.affine`): it decides
    point load (proven) versus gather (data)."""
    if x.shape or not is_int_like(x.dtype):
        return None
    return binary_form(fn, x.affine, y.affine, nonnegative_by(lw.proves_in_loops))


# ---------------------------------------------------------------------------------------------- compare, logic


def compare(lw: Lowerer, node: ast.Compare) -> FValue:
    left, left_node = lw.expr(node.left), node.left
    result: FValue | None = None
    for op, right_node in zip(node.ops, node.comparators):
        if isinstance(op, ast.Is | ast.IsNot) and len(node.ops) == 1:
            return _is_none(lw, left, lw.expr(right_node), isinstance(op, ast.IsNot), node)
        if type(op) not in CMPOPS:
            word = {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}.get(type(op), "?")
            raise lw.error(node, f"`{word}` is not supported in kernel bodies; compare values with == != < <= > >=")
        right = lw.expr(right_node)
        r = compare_pair(lw, type(op), left, right, node, left_node, right_node)
        result = r if result is None else logical(lw, "and", result, r, node)
        left, left_node = right, right_node
    assert result is not None
    return result


def _is_none(lw: Lowerer, a: FValue, b: FValue, negated: bool, node: ast.AST) -> Num:
    """`w is None` / `w is not None`, decided at compile time: an optional tensor parameter passed as None is
    None in the body; every tensor and number is not."""
    if not (isinstance(a, NoneLit) or isinstance(b, NoneLit)):
        raise lw.error(node, f"`{'is not' if negated else 'is'}` compares with None only (`w is None` for an "
                             f"optional tensor parameter); compare values with == != < <= > >=")
    same = isinstance(a, NoneLit) and isinstance(b, NoneLit)
    return Num(same != negated)


def compare_pair(lw: Lowerer, op: type, a: FValue, b: FValue, node: ast.AST, na: ast.AST, nb: ast.AST) -> FValue:
    sym, fn = CMPOPS[op]
    _operand_check(lw, sym, a, na)
    _operand_check(lw, sym, b, nb)
    if isinstance(a, Num) and isinstance(b, Num):
        x, y = a.value, b.value
        return Num({"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[sym])
    da, db = static_dim(a), static_dim(b)
    if da is not None and db is not None and isinstance(da, DConst) and isinstance(db, DConst):
        return compare_pair(lw, op, Num(da.value), Num(db.value), node, na, nb)
    (x, y), _ = unify(lw, [a, b], [na, nb], node, f"`{sym}`")
    x, y = broadcast_all(lw, [x, y], node, f"`{sym}`")
    return TVal(lw.add(Compare, node, fn=fn, lhs=x.value, rhs=y.value))


def static_truth(fv: FValue) -> bool | None:
    if isinstance(fv, Num):
        return bool(fv.value)
    return None


def condition(lw: Lowerer, fv: FValue, node: ast.AST, what: str) -> TVal:
    """A runtime scalar condition (pred); other values get a hint saying what to write."""
    if isinstance(fv, RefV):
        raise lw.error(node, f"{what} needs a scalar condition, got the tensor `{fv.name}`; use intent.any(...) or "
                             f"intent.all(...) to reduce it")
    if isinstance(fv, DimExpr):
        raise lw.error(node, f"{what} needs a condition, got the dim {fv.dim}; compare it, e.g. `{fv.dim} > 0`")
    if not isinstance(fv, TVal):
        raise lw.error(node, f"{what} needs a condition, got {describe(fv)}")
    if fv.shape:
        raise lw.error(node, f"{what} needs a scalar condition, got {a_type(fv.type)}; use intent.any(...) or "
                             f"intent.all(...), or intent.where(...) for elementwise choices")
    if not is_pred(fv.dtype):
        raise lw.error(node, f"{what} needs a condition (pred), got {a_type(fv.dtype)}; compare it, e.g. `x != 0`")
    return fv


def logical(lw: Lowerer, word: str, a: FValue, b: FValue, node: ast.AST) -> FValue:
    ta, tb = static_truth(a), static_truth(b)
    if ta is not None:
        return b if (ta if word == "and" else not ta) else a
    if tb is not None and isinstance(a, TVal):
        if word == "and":
            return a if tb else b
        return b if tb else a
    x = condition(lw, a, node, f"`{word}`") if not (isinstance(a, TVal) and a.shape and is_pred(a.dtype)) else a
    y = condition(lw, b, node, f"`{word}`") if not (isinstance(b, TVal) and b.shape and is_pred(b.dtype)) else b
    assert isinstance(x, TVal) and isinstance(y, TVal)
    x, y = broadcast_all(lw, [x, y], node, f"`{word}`")
    fn = BinaryFn.and_ if word == "and" else BinaryFn.or_
    return TVal(lw.add(Binary, node, fn=fn, lhs=x.value, rhs=y.value))


def boolop(lw: Lowerer, node: ast.BoolOp) -> FValue:
    word = "and" if isinstance(node.op, ast.And) else "or"
    result: FValue | None = None
    for operand in node.values:
        fv = lw.expr(operand)
        truth = static_truth(fv)
        if truth is None:
            condition(lw, fv, operand, f"`{word}`")
        if result is None:
            result = fv
        else:
            result = logical(lw, word, result, fv, node)
        t = static_truth(result)
        if t is not None and (not t if word == "and" else t):
            return result  # short-circuit, as Python does
    assert result is not None
    return result


def unaryop(lw: Lowerer, node: ast.UnaryOp) -> FValue:
    x = lw.expr(node.operand)
    if isinstance(node.op, ast.Not):
        truth = static_truth(x)
        if truth is not None:
            return Num(not truth)
        if isinstance(x, TVal) and x.shape and is_pred(x.dtype):
            raise lw.error(node, "`not` works on scalar conditions; for elementwise negation of a pred tensor write "
                                 "`~x`")
        c = condition(lw, x, node.operand, "`not`")
        return TVal(lw.add(Unary, node, fn=UnaryFn.not_, x=c.value))
    if isinstance(node.op, ast.UAdd):
        if isinstance(x, Num | DimExpr | TVal):
            return x
        return to_tval(lw, x, node, "unary `+`")
    if isinstance(node.op, ast.USub):
        if isinstance(x, Num):
            return fold_binary(lw, "-", 0, x.value, node) if not isinstance(x.value, float) else Num(-x.value)
        if isinstance(x, DimExpr):
            return _fold_dims(lw, "-", DConst(0), x.dim, node)
        return unary_fn(lw, UnaryFn.neg, x, node, node.operand)
    # ~x
    if isinstance(x, Num):
        if isinstance(x.value, bool):
            return Num(not x.value)
        if isinstance(x.value, int):
            return Num(~x.value)
        raise lw.error(node, "`~` needs an integer or pred operand, got a float number")
    return unary_fn(lw, UnaryFn.not_, x, node, node.operand)


def ifexp(lw: Lowerer, node: ast.IfExp) -> FValue:
    c = lw.expr(node.test)
    truth = static_truth(c)
    if truth is not None:
        return lw.expr(node.body if truth else node.orelse)
    cond = condition(lw, c, node.test, "a conditional expression")
    return select(lw, cond, lw.expr(node.body), lw.expr(node.orelse), node, node.body, node.orelse)


def select(lw: Lowerer, cond: TVal, a: FValue, b: FValue, node: ast.AST, na: ast.AST, nb: ast.AST) -> TVal:
    (x, y), weak = unify(lw, [a, b], [na, nb], node, "intent.where")
    c, x, y = broadcast_all(lw, [cond, x, y], node, "intent.where")
    return TVal(lw.add(Select, node, cond=c.value, on_true=x.value, on_false=y.value), weak=weak)


# ---------------------------------------------------------------------------------------------- unary


def unary_fn(lw: Lowerer, fn: UnaryFn, x: FValue, node: ast.AST, xnode: ast.AST) -> TVal:
    name = "not (~)" if fn is UnaryFn.not_ else fn.value
    if not isinstance(x, TVal | RefV | Num | DimExpr):
        raise lw.error(xnode, f"intent.{name}() needs a tensor or a number, got {describe(x)}")
    tv = to_tval(lw, x, xnode, f"intent.{name}")
    if fn in FLOAT_ONLY_UNARY and not is_float_like(tv.dtype):
        if not tv.weak:
            raise lw.error(node, f"intent.{name}() needs a floating-point operand, got {tv.dtype}; convert first, e.g. "
                                 f"`x.to(f32)`")
        tv = cast(lw, tv, WEAK_FLOAT, node, weak=True)
    if fn is UnaryFn.not_ and is_float_like(tv.dtype):
        raise lw.error(node, f"`~` needs an integer or pred operand, got {tv.dtype}; for conditions compare first")
    if fn in (UnaryFn.neg, UnaryFn.abs) and is_pred(tv.dtype):
        raise lw.error(node, f"{'unary `-`' if fn is UnaryFn.neg else 'intent.abs'} is not defined on pred; use `~` "
                             f"for negation of a condition or convert with `.to(i32)`")
    v = lw.add(Unary, node, fn=fn, x=tv.value)
    weak = tv.weak and fn not in (UnaryFn.isnan, UnaryFn.isinf)
    affine = neg_form(tv.affine) if fn is UnaryFn.neg else None
    return TVal(v, weak=weak, affine=affine)


def _unary_handler(fn: UnaryFn):
    def handler(lw: Lowerer, call: CallArgs) -> FValue:
        return unary_fn(lw, fn, call.value("x"), call.node, call.arg_node("x"))

    return handler


for _fn in UnaryFn:
    if _fn is not UnaryFn.not_:
        spelling(_fn.value)(_unary_handler(_fn))


def _binary_handler(fn: BinaryFn, sym: str):
    def handler(lw: Lowerer, call: CallArgs) -> FValue:
        a, b = call.value("a"), call.value("b")
        na, nb = call.arg_node("a"), call.arg_node("b")
        if isinstance(a, Num) and isinstance(b, Num):
            if fn is BinaryFn.pow:
                return fold_binary(lw, "**", a.value, b.value, call.node)
            return Num(max(a.value, b.value) if fn is BinaryFn.maximum else min(a.value, b.value))
        return binary(lw, sym, fn, a, b, call.node, na, nb)

    return handler


spelling("maximum")(_binary_handler(BinaryFn.maximum, "intent.maximum"))
spelling("minimum")(_binary_handler(BinaryFn.minimum, "intent.minimum"))
spelling("pow")(_binary_handler(BinaryFn.pow, "**"))


@spelling("where")
def _where(lw: Lowerer, call: CallArgs) -> FValue:
    c = call.value("cond")
    truth = static_truth(c)
    if truth is not None:
        return call.value("a" if truth else "b")
    if isinstance(c, RefV):
        c = to_tval(lw, c, call.arg_node("cond"), "intent.where")
    if not (isinstance(c, TVal) and is_pred(c.dtype)):
        raise lw.error(call.arg_node("cond"), f"intent.where needs a pred condition, got {describe(c)}; compare it, "
                                              f"e.g. `x != 0`")
    return select(lw, c, call.value("a"), call.value("b"), call.node, call.arg_node("a"), call.arg_node("b"))


# ---------------------------------------------------------------------------------------------- casts, attributes


def cast_value(lw: Lowerer, x: FValue, dtype: ElemType, node: ast.AST, xnode: ast.AST) -> TVal:
    """`x.to(dtype)` and `f32(x)`: a value conversion; the result is strongly typed."""
    if isinstance(x, Num):
        value = x.value
        if isinstance(dtype, DType) and dtype.is_int and isinstance(value, float):
            if not math.isfinite(value):
                raise lw.error(node, f"cannot convert {value} to {dtype}")
            value = int(value)
        if is_pred(dtype):
            value = bool(value)
        elif isinstance(value, bool):
            value = int(value)
        return weak_to(lw, Num(value), dtype, node, f"{dtype}(...)")
    if isinstance(x, DimExpr):
        if is_pred(dtype):
            raise lw.error(node, f"cannot convert the dim {x.dim} to pred; compare it instead")
        return dim_value(lw, x.dim, dtype, node, weak=False)
    if not isinstance(x, TVal | RefV):
        raise lw.error(xnode, f"cannot convert {describe(x)} to {dtype}")
    if isinstance(dtype, DType) and dtype.is_fp8:  # `f8e4m3(x)` converts as `x.to(f8e4m3)` does
        return to_fp8(lw, x, dtype, node, xnode, None)
    tv = to_tval(lw, x, xnode, ".to()")
    return cast(lw, tv, dtype, node, weak=False)


def dtype_arg(lw: Lowerer, fv: FValue, node: ast.AST, what: str) -> ElemType:
    if isinstance(fv, DTypeLit):
        return fv.dtype
    clause = dtype_name_equivalent(fv.name if isinstance(fv, BuiltinRef) else fv.value if isinstance(fv, StrLit)
                                   else None)
    raise lw.error(node, f"{what} needs a dtype such as f32 or i32, got {describe(fv)}"
                         f"{'; ' + clause if clause else ''}")


def tensor_attribute(lw: Lowerer, base: TVal | RefV, node: ast.Attribute) -> FValue:
    shape = base.type.shape
    if node.attr == "shape":
        return TupleV(tuple(DimExpr(d) for d in shape))
    if node.attr == "dtype":
        return DTypeLit(base.type.dtype)
    if node.attr == "ndim":
        return Num(len(shape))
    if node.attr == "T":
        tv = to_tval(lw, base, node, ".T")
        perm = tuple(range(tv.rank))[::-1]
        return TVal(lw.add(Transpose, node, x=tv.value, perm=perm), weak=tv.weak)
    if node.attr == "to":
        raise lw.error(node, "`.to` converts a value when called: write `x.to(f32)`")
    clause = method_equivalent(node.attr)
    hint = f"; {clause}" if clause is not None else ""
    raise lw.error(node, f"tensor values have no attribute `{node.attr}` (they have .shape, .dtype, .ndim, .T and "
                         f".to(dtype)){hint}")


def tensor_method(lw: Lowerer, base: TVal | RefV, node: ast.Call, attr: ast.Attribute) -> FValue:
    if attr.attr != "to":
        tensor_attribute(lw, base, attr)  # raises with a hint
    if len(node.args) != 1 or any(k.arg != "saturate" for k in node.keywords):
        raise lw.error(node, "`.to` takes one dtype (and, for fp8, `saturate=`): x.to(f32), "
                             "x.to(f8e4m3, saturate=False)")
    dtype = dtype_arg(lw, lw.expr(node.args[0]), node.args[0], ".to()")
    saturate: bool | None = None
    for k in node.keywords:
        fv = lw.expr(k.value)
        if not (isinstance(fv, Num) and isinstance(fv.value, bool)):
            raise lw.error(k.value, f"`.to(..., saturate=...)` must be True or False, got {describe(fv)}")
        if not (isinstance(dtype, DType) and dtype.is_fp8):
            raise lw.error(k.value, f"`saturate=` applies to conversions to fp8 (f8e4m3, f8e5m2), not to {dtype}")
        saturate = fv.value
    if isinstance(dtype, DType) and dtype.is_fp8:
        return to_fp8(lw, base, dtype, node, attr.value, saturate)
    return cast_value(lw, base, dtype, node, attr.value)


def to_fp8(lw: Lowerer, x: FValue, dtype: DType, node: ast.AST, xnode: ast.AST, saturate: bool | None) -> TVal:
    """`x.to(f8e4m3)`: torch's conversion, which saturates for f8e4m3 (beyond +-448, and +-inf, give +-448)
    and not for f8e5m2 (beyond +-57344 gives +-inf); `saturate=` chooses. KIR's `cast` to fp8 does not
    saturate (f8e4m3 gives NaN there): saturation clamps first (NaN stays NaN)."""
    from ..dtypes import FP8

    if saturate is None:
        saturate = dtype is DType.f8e4m3
    tv = to_tval(lw, x, xnode, ".to()")
    if saturate:
        if not (isinstance(tv.dtype, DType) and tv.dtype.is_float):
            tv = cast(lw, tv, DType.f32, node)
        top = FP8[dtype][0]
        hi = binary(lw, "intent.minimum", BinaryFn.minimum, tv, Num(top), node, xnode, node)
        tv = binary(lw, "intent.maximum", BinaryFn.maximum, hi, Num(-top), node, xnode, node)  # type: ignore
        assert isinstance(tv, TVal)
    return cast(lw, tv, dtype, node, weak=False)


def static_to(lw: Lowerer, x: FValue, dtype: ElemType, node: ast.AST) -> FValue:
    """`.to(dtype)` on a static number is a typed constant."""
    return cast_value(lw, x, dtype, node, node)


@spelling("bitcast")
def _bitcast(lw: Lowerer, call: CallArgs) -> FValue:
    dtype = dtype_arg(lw, call.value("dtype"), call.arg_node("dtype"), "intent.bitcast")
    x = call.value("x")
    if is_weak(x):
        raise lw.error(call.arg_node("x"), "intent.bitcast reinterprets the bits of a typed value; give it a dtype "
                                           "first, e.g. `f32(1.0)`")
    tv = to_tval(lw, x, call.arg_node("x"), "intent.bitcast")
    if isinstance(dtype, DTypeVar) or isinstance(tv.dtype, DTypeVar):
        raise lw.error(call.node, "intent.bitcast needs concrete dtypes, not dtype variables")
    return TVal(lw.add(Bitcast, call.node, x=tv.value, dtype=dtype))


# ---------------------------------------------------------------------------------------------- compositions


@spelling("clamp")
def _clamp(lw: Lowerer, call: CallArgs) -> FValue:
    """`intent.clamp(x, lo, hi)` is `minimum(maximum(x, lo), hi)` (torch.clamp: NaN in x stays NaN, and
    `hi` wins when `lo > hi`); either bound may be None."""
    if call.is_none("lo") and call.is_none("hi"):
        raise lw.error(call.node, "intent.clamp() needs at least one of `lo` and `hi`")
    x: FValue = call.value("x")
    for pname, fn, sym in (("lo", BinaryFn.maximum, "intent.clamp (lo)"), ("hi", BinaryFn.minimum,
                                                                          "intent.clamp (hi)")):
        if not call.is_none(pname):
            x = binary(lw, sym, fn, x, call.value(pname), call.node, call.arg_node("x"), call.arg_node(pname))
    return x


@spelling("lerp")
def _lerp(lw: Lowerer, call: CallArgs) -> FValue:
    """`intent.lerp(a, b, w)`: a + w * (b - a), computed as torch.lerp does (from `b` when w >= 0.5), so that
    w = 1 gives b exactly."""
    a, b, w = call.value("a"), call.value("b"), call.value("w")
    na, nb, nw = call.arg_node("a"), call.arg_node("b"), call.arg_node("w")
    node = call.node
    for fv, n in ((a, na), (b, nb), (w, nw)):
        if isinstance(fv, TVal | RefV) and not is_float_like(to_tval(lw, fv, n, "intent.lerp").dtype):
            raise lw.error(n, f"intent.lerp needs float operands, got {describe(fv)}")
    diff = binary(lw, "-", BinaryFn.sub, b, a, node, nb, na)
    low = binary(lw, "+", BinaryFn.add, a, binary(lw, "*", BinaryFn.mul, w, diff, node, nw, node), node, na, node)
    one_minus = binary(lw, "-", BinaryFn.sub, Num(1.0), w, node, node, nw)
    high = binary(lw, "-", BinaryFn.sub, b, binary(lw, "*", BinaryFn.mul, diff, one_minus, node, node, node),
                  node, nb, node)
    if isinstance(w, Num):
        return low if abs(w.value) < 0.5 else high
    cond = compare_pair(lw, ast.Lt, unary_fn(lw, UnaryFn.abs, w, node, nw), Num(0.5), node, nw, node)
    assert isinstance(cond, TVal)
    return select(lw, cond, low, high, node, node, node)
