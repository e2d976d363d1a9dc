"""Windows of symbolic, launch-known length: `x[b, s, h * (D // H):(h + 1) * (D // H)]`.

A slice whose bounds depend on runtime values (loop indices) but whose length does not is an *affine
window*, not a data-dependent subregion: its length is found by expanding both bounds as polynomials over
the runtime names and the dims (`(h + 1) * (D // H) - h * (D // H)` is `D // H`), and it reads (or writes)
the elements `begin + arange(length)`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..dims import DConst, Dim, dim_bin
from .values import DimExpr, Num, TVal

if TYPE_CHECKING:
    from .lower import Lowerer

Monomial = tuple[str, ...]  # sorted atom keys ("v:h" for a runtime name, "d:<dim>" for a dim atom)
Poly = dict[Monomial, int]


class _NotPolynomial(Exception):
    pass


def _add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for k, c in b.items():
        out[k] = out.get(k, 0) + sign * c
        if out[k] == 0:
            del out[k]
    return out


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ka, ca in a.items():
        for kb, cb in b.items():
            k = tuple(sorted(ka + kb))
            out[k] = out.get(k, 0) + ca * cb
            if out[k] == 0:
                del out[k]
    return out


class _Expander:
    def __init__(self, lw: Lowerer) -> None:
        self.lw = lw
        self.dims: dict[str, Dim] = {}

    def atom_dim(self, d: Dim) -> Poly:
        if isinstance(d, DConst):
            return {(): d.value} if d.value else {}
        key = f"d:{d}"
        self.dims[key] = d
        return {(key,): 1}

    def to_dim(self, p: Poly) -> Dim:
        total: Dim = DConst(0)
        for k, c in p.items():
            if any(a.startswith("v:") for a in k) or len(k) > 1:
                raise _NotPolynomial
            term: Dim = DConst(c) if not k else (self.dims[k[0]] if c == 1 else dim_bin("*", DConst(c),
                                                                                        self.dims[k[0]]))
            total = term if total == DConst(0) else dim_bin("+", total, term)
        return total

    def expand(self, node: ast.AST) -> Poly:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return {(): node.value} if node.value else {}
        if isinstance(node, ast.Name):
            fv = self.lw.expr(node)  # locals, loop indices, dims and constants of the enclosing module
            if isinstance(fv, DimExpr):
                return self.atom_dim(fv.dim)
            if isinstance(fv, Num) and isinstance(fv.value, int) and not isinstance(fv.value, bool):
                return {(): fv.value} if fv.value else {}
            if isinstance(fv, TVal) and not fv.shape:
                return {(f"v:{node.id}",): 1}
            raise _NotPolynomial
        if isinstance(node, ast.Subscript | ast.Attribute):  # a runtime value (`offsets[i]`): an opaque atom
            return {(f"v:{ast.dump(node)}",): 1}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return _add({}, self.expand(node.operand), -1)
        if isinstance(node, ast.BinOp):
            a, b = self.expand(node.left), self.expand(node.right)
            if isinstance(node.op, ast.Add):
                return _add(a, b)
            if isinstance(node.op, ast.Sub):
                return _add(a, b, -1)
            if isinstance(node.op, ast.Mult):
                return _mul(a, b)
            if isinstance(node.op, ast.FloorDiv):  # only between launch-known values: a dim atom
                return self.atom_dim(dim_bin("//", self.to_dim(a), self.to_dim(b)))
        raise _NotPolynomial


def window_length(lw: Lowerer, lower: ast.AST | None, upper: ast.AST | None) -> Dim | None:
    """The length `upper - lower` of a slice when it is launch-known (free of runtime values), else None."""
    if lower is None or upper is None:
        return None
    ex = _Expander(lw)
    try:
        diff = _add(ex.expand(upper), ex.expand(lower), -1)
        return ex.to_dim(diff)
    except (_NotPolynomial, KeyError):
        return None
