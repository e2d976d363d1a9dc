"""Weak typing and NumPy broadcasting, made explicit as KIR `constant`, `dim`, `cast` and `broadcast` ops.

Python numbers, dims, loop indices and values computed only from them are *weak*: they take the dtype of
the strong operand they meet (`x * 2` with f16 `x` is a f16 multiply by `constant 2 : f16`). Two strong
operands of different dtypes are an error with a hint: KIR never promotes.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..affine import cast_form, constant_form
from ..core import shape_str
from ..dims import DConst, Dim
from ..dtypes import DType, DTypeVar, ElemType
from ..layout import Broadcast
from ..pointwise import Cast, Constant, DimValue, is_float_like
from ..solver import format_counterexample
from .values import DimExpr, FValue, Num, RefV, TVal, a_type, describe

if TYPE_CHECKING:
    from .lower import Lowerer

WEAK_INT = DType.i64
WEAK_FLOAT = DType.f32


def is_int_like(dt: ElemType) -> bool:
    if isinstance(dt, DTypeVar):
        return all(c.is_int for c in dt.choices)
    return dt.is_int


def is_pred(dt: ElemType) -> bool:
    return dt == DType.pred


def _weak_kind(fv: FValue) -> str:
    """'pred', 'int' or 'float': the kind of number a weak operand carries."""
    if isinstance(fv, Num):
        if isinstance(fv.value, bool):
            return "pred"
        return "int" if isinstance(fv.value, int) else "float"
    if isinstance(fv, DimExpr):
        return "int"
    assert isinstance(fv, TVal)
    return "pred" if is_pred(fv.dtype) else "float" if is_float_like(fv.dtype) else "int"


def is_weak(fv: FValue) -> bool:
    return isinstance(fv, Num | DimExpr) or isinstance(fv, TVal) and fv.weak


def default_dtype(kind: str) -> DType:
    return {"pred": DType.pred, "int": WEAK_INT, "float": WEAK_FLOAT}[kind]


# ---------------------------------------------------------------------------------------------- materialise


def constant(lw: Lowerer, value: int | float | bool, dtype: ElemType, node: ast.AST, weak: bool = False) -> TVal:
    v = lw.add(Constant, node, value=value, dtype=dtype)
    return TVal(v, weak=weak, affine=constant_form(value) if is_int_like(dtype) else None)


def dim_value(lw: Lowerer, dim: Dim, dtype: ElemType, node: ast.AST, weak: bool = True) -> TVal:
    if isinstance(dtype, DType) and dtype.is_int:
        return TVal(lw.add(DimValue, node, dim=dim, dtype=dtype), weak=weak, affine=dim)
    v = TVal(lw.add(DimValue, node, dim=dim, dtype=WEAK_INT), weak=True, affine=dim)
    return cast(lw, v, dtype, node, weak=weak)


def cast(lw: Lowerer, tv: TVal, dtype: ElemType, node: ast.AST, weak: bool = False) -> TVal:
    if tv.dtype == dtype:
        return TVal(tv.value, weak=weak, affine=tv.affine)
    v = lw.add(Cast, node, x=tv.value, dtype=dtype)
    return TVal(v, weak=weak, affine=cast_form(tv.affine, isinstance(dtype, DType) and dtype.is_int))


def load_all(lw: Lowerer, ref: RefV, node: ast.AST) -> TVal:
    from .access import load_full

    return load_full(lw, ref, node)


def to_tval(lw: Lowerer, fv: FValue, node: ast.AST, what: str) -> TVal:
    """A tensor operand: refs are read whole, weak numbers become weak scalars of their default dtype."""
    if isinstance(fv, TVal):
        return fv
    if isinstance(fv, RefV):
        return load_all(lw, fv, node)
    if isinstance(fv, Num | DimExpr):
        return weak_to(lw, fv, default_dtype(_weak_kind(fv)), node, what, keep_weak=True)
    raise lw.error(node, f"{what} needs a tensor or a number, got {describe(fv)}")


def weak_to(lw: Lowerer, fv: FValue, dtype: ElemType, node: ast.AST, what: str, keep_weak: bool = False) -> TVal:
    """Give a weak operand the dtype `dtype` (a float number never silently becomes an integer)."""
    if isinstance(fv, RefV):
        fv = load_all(lw, fv, node)
    kind = _weak_kind(fv) if is_weak(fv) else None
    if kind == "float" and (is_int_like(dtype) or is_pred(dtype)):
        raise lw.error(node, f"{what} combines {a_type(dtype)} with a floating-point {_show(fv)}; convert explicitly, "
                             f"e.g. `(...).to(f32)`, or use an integer")
    if kind == "int" and is_pred(dtype) and not (isinstance(fv, Num) and fv.value in (0, 1)):
        raise lw.error(node, f"{what} combines a pred value with the integer {_show(fv)}; compare first (`x != 0`) "
                             f"or convert the pred with `.to(i32)`")
    if isinstance(fv, Num):
        value = fv.value
        if isinstance(value, bool) and not is_pred(dtype):
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(dtype, DType) and dtype.is_int:
            lo, hi = dtype.int_range
            if not lo <= value <= hi:
                raise lw.error(node, f"the number {value} does not fit {dtype} ({what}); use a wider dtype")
        if is_pred(dtype):
            value = bool(value)
        elif is_float_like(dtype) and not isinstance(value, bool):
            value = float(value)
        return constant(lw, value, dtype, node, weak=keep_weak)
    if isinstance(fv, DimExpr):
        if is_pred(dtype):
            raise lw.error(node, f"{what} combines a pred value with the dim {fv.dim}; compare first")
        return dim_value(lw, fv.dim, dtype, node, weak=keep_weak)
    assert isinstance(fv, TVal)
    return cast(lw, fv, dtype, node, weak=keep_weak)


def _show(fv: FValue) -> str:
    if isinstance(fv, Num):
        return f"number {fv.value!r}"
    if isinstance(fv, DimExpr):
        return f"dim {fv.dim}"
    return f"{fv.dtype} value" if isinstance(fv, TVal) else describe(fv)


# ---------------------------------------------------------------------------------------------- unify dtypes


def strong_dtype(fv: FValue) -> ElemType | None:
    if isinstance(fv, RefV):
        return fv.type.dtype
    if isinstance(fv, TVal) and not fv.weak:
        return fv.dtype
    return None


def join_weak_kinds(kinds: list[str]) -> str:
    return "float" if "float" in kinds else "int" if "int" in kinds else "pred"


def unify(lw: Lowerer, operands: list[FValue], nodes: list[ast.AST], node: ast.AST, what: str
          ) -> tuple[list[TVal], bool]:
    """Give operands one dtype under the weak-typing rules; returns (values, result_is_weak)."""
    strong: list[tuple[ElemType, ast.AST]] = []
    for fv, n in zip(operands, nodes):
        dt = strong_dtype(fv)
        if dt is not None:
            strong.append((dt, n))
    if strong:
        target = strong[0][0]
        for dt, n in strong[1:]:
            if dt != target:
                raise lw.error(node, f"{what} mixes {target} and {dt} operands; KIR never promotes implicitly: convert "
                                     f"one side explicitly, e.g. `{_unparse(n)}.to({target})`")
        return [weak_to(lw, fv, target, n, what) if is_weak(fv) else to_tval(lw, fv, n, what)
                for fv, n in zip(operands, nodes)], False
    kinds = [_weak_kind(fv) for fv in operands]
    kind = join_weak_kinds(kinds)
    # a weak value that already has a dtype of this kind (f16 loop value cast weakly) keeps it
    target: ElemType = default_dtype(kind)
    for fv in operands:
        if isinstance(fv, TVal) and _weak_kind(fv) == kind:
            target = fv.dtype
            break
    return [weak_to(lw, fv, target, n, what, keep_weak=True) for fv, n in zip(operands, nodes)], True


def _unparse(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:
        return "x"
    return text if len(text) <= 40 and isinstance(node, ast.Name | ast.Attribute | ast.Subscript | ast.Call) \
        else f"({text})" if len(text) <= 40 else "x"


# ---------------------------------------------------------------------------------------------- broadcast


def same_dim(lw: Lowerer, a: Dim, b: Dim) -> dict[str, int] | None:
    """None when `a == b` is proven under the refinements, else a counterexample (maybe empty)."""
    if a == b:
        return None
    if lw.solver is None:
        return {}
    return lw.solver.equal(a, b)


def broadcast_shapes(lw: Lowerer, shapes: list[tuple[Dim, ...]], node: ast.AST, what: str) -> tuple[Dim, ...]:
    """NumPy broadcasting, right-aligned: axes of extent 1 stretch; other extents must be provably equal."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for k in range(rank):
        picked: Dim | None = None
        for s in shapes:
            j = len(s) - rank + k
            if j < 0 or s[j] == DConst(1):
                continue
            if picked is None:
                picked = s[j]
                continue
            cex = same_dim(lw, picked, s[j])
            if cex is not None:
                shown = " and ".join(shape_str(x) for x in shapes)
                detail = f": {format_counterexample(cex)}" if cex else ""
                raise lw.error(node, f"shape mismatch in {what}: {shown} do not broadcast (cannot prove "
                                     f"{picked} == {s[j]}{detail}); index or reshape the operands so their shapes "
                                     f"agree, or state the equality in requires=[...]")
        out.append(picked if picked is not None else DConst(1))
    return tuple(out)


def broadcast_to(lw: Lowerer, tv: TVal, shape: tuple[Dim, ...], node: ast.AST, what: str) -> TVal:
    if tv.shape == shape:
        return tv
    if tv.rank > len(shape):
        raise lw.error(node, f"cannot broadcast {shape_str(tv.shape)} to the lower-rank shape {shape_str(shape)} "
                             f"({what})")
    off = len(shape) - tv.rank
    for k, d in enumerate(tv.shape):
        if d != DConst(1):
            cex = same_dim(lw, d, shape[off + k])
            if cex is not None:
                detail = f": {format_counterexample(cex)}" if cex else ""
                raise lw.error(node, f"shape mismatch in {what}: cannot broadcast {shape_str(tv.shape)} to "
                                     f"{shape_str(shape)} (cannot prove {d} == {shape[off + k]}{detail})")
    v = lw.add(Broadcast, node, x=tv.value, shape=shape, dims=tuple(range(off, len(shape))))
    return TVal(v, weak=tv.weak)


def broadcast_all(lw: Lowerer, vals: list[TVal], node: ast.AST, what: str) -> list[TVal]:
    shape = broadcast_shapes(lw, [v.shape for v in vals], node, what)
    return [broadcast_to(lw, v, shape, node, what) for v in vals]


def coerce_to(lw: Lowerer, fv: FValue, dtype: ElemType, shape: tuple[Dim, ...] | None, node: ast.AST,
              what: str, hint_node: ast.AST | None = None) -> TVal:
    """A value for a typed slot (a store, a yield, an atomic operand): weak values are cast, strong values must
    already have `dtype`; the value is broadcast to `shape` when one is given."""
    if is_weak(fv):
        tv = weak_to(lw, fv, dtype, node, what)
    else:
        tv = to_tval(lw, fv, node, what)
        if tv.dtype != dtype:
            shown = _unparse(hint_node) if hint_node is not None else "value"
            raise lw.error(node, f"{what}: the value is {tv.dtype} but {dtype} is expected; KIR never converts "
                                 f"implicitly: write `{shown}.to({dtype})`")
    tv = TVal(tv.value, weak=False, affine=tv.affine)
    if shape is not None:
        tv = broadcast_to(lw, tv, shape, node, what)
    return tv

