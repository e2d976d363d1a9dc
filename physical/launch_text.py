"""Launch expressions for people: simplified, with repeated parts named, printed with few parentheses.

The planner builds launch expressions by composition, so one formula may hold another several times
over (a block size inside the grid, a looped-form flag inside the block size), with constant parts
left unfolded (`4096 // 4096`). `explain` prints each constexpr once, by name, and every other formula
in terms of those names: `simplify` folds constants and identities, `name_parts` replaces each part
equal to a named formula by that name, `text` prints with the usual precedence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from .launch_expr import (
    LaunchExpr,
    LBin,
    LConst,
    LConstexpr,
    LDim,
    LMinMax,
    LNextPow2,
    LResidentPrograms,
    LSelect,
    LSum,
    LTileBlock,
    LWarps,
)


def _rebuild(e: LaunchExpr, f) -> LaunchExpr:
    """`e` with `f` applied to each child expression."""
    changes = {}
    for fld in dataclasses.fields(e):
        v = getattr(e, fld.name)
        if isinstance(v, LaunchExpr):
            changes[fld.name] = f(v)
        elif isinstance(v, tuple) and v and all(isinstance(x, LaunchExpr) for x in v):
            changes[fld.name] = tuple(f(x) for x in v)
    return dataclasses.replace(e, **changes) if changes else e


_AT_LEAST_ONE = (LNextPow2, LTileBlock, LWarps, LResidentPrograms)


def simplify(e: LaunchExpr) -> LaunchExpr:
    """Fold constant parts and the identities x*1, x*0, x+0, x-0, x//1, cdiv(x, 1); flatten min/max."""
    e = _rebuild(e, simplify)
    if not isinstance(e, LConst | LTileBlock) and not e.names():
        try:
            return LConst(e.evaluate({}))
        except (ArithmeticError, ValueError, KeyError):
            return e
    if isinstance(e, LBin):
        a, b = e.lhs, e.rhs
        one = LConst(1)
        zero = LConst(0)
        if e.op == "*":
            if a == one:
                return b
            if b == one:
                return a
            if zero in (a, b):
                return zero
        if e.op == "+" and zero in (a, b):
            return b if a == zero else a
        if e.op == "-" and b == zero:
            return a
        if e.op in ("//", "cdiv") and b == one:
            return a
        return e
    if isinstance(e, LMinMax):
        items: list[LaunchExpr] = []
        for x in e.items:
            for y in (x.items if isinstance(x, LMinMax) and x.op == e.op else (x,)):
                if y not in items:
                    items.append(y)
        # next_pow2, tile blocks and resident programs are at least 1: min(c, them) is c and max(c, them)
        # is them for a constant c <= 1.
        small = [x for x in items if isinstance(x, LConst) and x.value <= 1]
        if small and any(isinstance(x, _AT_LEAST_ONE) for x in items):
            if e.op == "min":
                items = [x for x in items if not isinstance(x, _AT_LEAST_ONE)]
            else:
                items = [x for x in items if x not in small]
        consts = [x for x in items if isinstance(x, LConst)]
        if len(consts) > 1:
            pick = min if e.op == "min" else max
            folded = LConst(pick(c.value for c in consts))
            items = [folded] + [x for x in items if not isinstance(x, LConst)]
        return items[0] if len(items) == 1 else LMinMax(e.op, tuple(items))
    if isinstance(e, LSum):
        items = [x for x in e.items if x != LConst(0)]
        return LConst(0) if not items else items[0] if len(items) == 1 else LSum(tuple(items))
    if isinstance(e, LSelect):
        if isinstance(e.cond, LConst):
            return e.when_set if e.cond.value else e.otherwise
        return e.when_set if e.when_set == e.otherwise else e
    return e


def _size(e: LaunchExpr) -> int:
    return 1 + sum(_size(c) for c in e.children())


def name_parts(e: LaunchExpr, named: Mapping[str, LaunchExpr], own: str | None = None) -> LaunchExpr:
    """Replace every part of `e` equal to a named formula (other than `own`, and smaller than `e` when `e`
    is itself the formula `own`) by its name; the largest parts are replaced first."""
    by_expr = {x: n for n, x in named.items() if n != own and not isinstance(x, LConst)}

    def go(x: LaunchExpr, top: bool) -> LaunchExpr:
        name = by_expr.get(x)
        if name is not None and not (top and own is not None):
            return LConstexpr(name)
        return _rebuild(x, lambda c: go(c, False))

    return go(e, True)


def named_formulas(constexprs: Iterable[tuple[str, LaunchExpr]]) -> dict[str, LaunchExpr]:
    """Each constexpr's formula, simplified and written in terms of the others, in an order where each
    is defined after the names it uses (ties: the program's order)."""
    simple = {n: simplify(x) for n, x in constexprs}
    # Larger formulas may contain smaller ones; a formula is never rewritten in terms of a larger one.
    out: dict[str, LaunchExpr] = {}
    for n, x in simple.items():
        smaller = {m: y for m, y in simple.items() if m != n and _size(y) < _size(x)}
        out[n] = name_parts(x, smaller, own=n)
    ordered: dict[str, LaunchExpr] = {}
    pending = list(out)
    while pending:
        for n in pending:
            uses = _constexprs_in(out[n]) & set(out)
            if uses <= set(ordered) | {n}:
                ordered[n] = out[n]
                pending.remove(n)
                break
        else:  # a cycle cannot arise (names replace strictly smaller formulas); keep the rest as they are
            ordered.update((n, out[n]) for n in pending)
            break
    return ordered


def in_terms_of(e: LaunchExpr, constexprs: Iterable[tuple[str, LaunchExpr]]) -> LaunchExpr:
    """`e` simplified, with each part equal to a constexpr's (simplified) formula replaced by its name."""
    return name_parts(simplify(e), {n: simplify(x) for n, x in constexprs})


def _constexprs_in(e: LaunchExpr) -> set[str]:
    found = {e.name} if isinstance(e, LConstexpr) else set()
    for c in e.children():
        found |= _constexprs_in(c)
    return found


# ---------------------------------------------------------------------------------------------- printing

_PREC = {"+": 1, "-": 1, "*": 2, "//": 2}


def _prec(e: LaunchExpr) -> int:
    if isinstance(e, LSelect):
        return 0
    if isinstance(e, LBin) and e.op in _PREC:
        return _PREC[e.op]
    if isinstance(e, LSum) and len(e.items) > 1:
        return 1
    if isinstance(e, LDim) and " " in str(e.dim):
        return 1 if any(op in str(e.dim) for op in (" + ", " - ")) else 2
    if isinstance(e, LConst) and e.value < 0:
        return 1
    return 3


def text(e: LaunchExpr) -> str:
    """`e` with the usual precedence: `min(1, BLOCK_N // 65536)`, `cdiv(M, BLOCK_I0)`,
    `4096 if BLOCK_N_LOOPED else BLOCK_N`."""
    if isinstance(e, LBin):
        if e.op == "cdiv":
            return f"cdiv({text(e.lhs)}, {text(e.rhs)})"
        p = _PREC[e.op]
        left = text(e.lhs) if _prec(e.lhs) >= p else f"({text(e.lhs)})"
        right_ok = _prec(e.rhs) > p or (_prec(e.rhs) == p and e.op in ("+", "*"))
        right = text(e.rhs) if right_ok else f"({text(e.rhs)})"
        return f"{left} {e.op} {right}"
    if isinstance(e, LSum):
        return "0" if not e.items else " + ".join(text(x) if _prec(x) > 0 else f"({text(x)})" for x in e.items)
    if isinstance(e, LSelect):  # as Python writes it; inside another formula it is parenthesised (precedence 0)
        sides = [text(x) if _prec(x) > 1 else f"({text(x)})" for x in (e.when_set, e.cond, e.otherwise)]
        return f"{sides[0]} if {sides[1]} else {sides[2]}"
    if isinstance(e, LMinMax):
        return f"{e.op}({', '.join(text(x) for x in e.items)})"
    if isinstance(e, LNextPow2 | LTileBlock):
        return f"next_pow2({text(e.x if isinstance(e, LNextPow2) else e.extent)})"
    if isinstance(e, LWarps):
        return f"warps_for({text(e.elements)})"
    if isinstance(e, LResidentPrograms):
        return f"resident_programs({text(e.warps)})"
    return str(e)


__all__ = ["simplify", "name_parts", "named_formulas", "in_terms_of", "text"]
