"""Shape dims (Presburger expressions over shape symbols) and refinement predicates.

Dims compare structurally (`==` is dataclass equality); the user-facing `intent.Dim`
wraps them to give `N == 4` its predicate meaning.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from intent.runtime.checks import settle, solve_affine

DIM_OPS = ("+", "-", "*", "//", "%")
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")
_RING = {"+": operator.add, "-": operator.sub, "*": operator.mul}  # the operators other than // and %, on ints or Z3

R = TypeVar("R")
S = TypeVar("S")


class _OverSymbols(Generic[R, S]):
    """What dims and predicates answer alike: the shape symbols they read, their value (`R`) under a binding of
    those symbols, and themselves (`S`) with symbols replaced by dims."""

    def symbols(self) -> frozenset[str]:
        raise NotImplementedError

    def evaluate(self, env: Mapping[str, int]) -> R:
        raise NotImplementedError

    def substitute(self, env: Mapping[str, Dim]) -> S:
        raise NotImplementedError


class Dim(_OverSymbols[int, "Dim"]):
    """A dim: `DConst`, `DSym` or `DBin`. Immutable and hashable."""

    @property
    def is_const(self) -> bool:
        return isinstance(self, DConst)

    def __str__(self) -> str:
        return _fmt(self, 0)


@dataclass(frozen=True, repr=False)
class DConst(Dim):
    value: int

    def symbols(self) -> frozenset[str]:
        return frozenset()

    def evaluate(self, env: Mapping[str, int]) -> int:
        return self.value

    def substitute(self, env: Mapping[str, Dim]) -> Dim:
        return self

    def __repr__(self) -> str:
        return f"DConst({self.value})"


@dataclass(frozen=True, repr=False)
class DSym(Dim):
    name: str

    def symbols(self) -> frozenset[str]:
        return frozenset([self.name])

    def evaluate(self, env: Mapping[str, int]) -> int:
        try:
            return int(env[self.name])
        except KeyError:
            raise KeyError(f"shape symbol {self.name} is not bound") from None

    def substitute(self, env: Mapping[str, Dim]) -> Dim:
        return env.get(self.name, self)

    def __repr__(self) -> str:
        return f"DSym({self.name!r})"


@dataclass(frozen=True, repr=False)
class _OnTwoDims:
    """The structure `DBin` and `PCmp` share: an operator (one of `OPERATORS`) over two dims."""

    op: str
    lhs: Dim
    rhs: Dim

    OPERATORS: ClassVar[tuple[str, ...]]
    KIND: ClassVar[str]  # what an operator is called, for the error about an unknown one

    def __post_init__(self) -> None:
        if self.op not in self.OPERATORS:
            raise ValueError(f"unknown {self.KIND} {self.op!r}")

    def symbols(self) -> frozenset[str]:
        return self.lhs.symbols() | self.rhs.symbols()

    def evaluate(self, env: Mapping[str, int]) -> Any:
        return self.apply(self.lhs.evaluate(env), self.rhs.evaluate(env))

    def apply(self, a: int, b: int) -> Any:
        """The operator on the values of the two sides."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.op!r}, {self.lhs!r}, {self.rhs!r})"


@dataclass(frozen=True, repr=False)
class DBin(_OnTwoDims, Dim):
    OPERATORS = DIM_OPS
    KIND = "dim operator"

    def apply(self, a: int, b: int) -> int:
        ring = _RING.get(self.op)
        if ring is not None:
            return ring(a, b)
        if b == 0:
            raise ZeroDivisionError(f"{self} divides by zero")
        return a // b if self.op == "//" else a % b

    def substitute(self, env: Mapping[str, Dim]) -> Dim:
        return dim_bin(self.op, self.lhs.substitute(env), self.rhs.substitute(env))


_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


def _fmt(d: Dim, outer: int) -> str:
    if isinstance(d, DConst):
        return str(d.value) if d.value >= 0 or outer == 0 else f"({d.value})"
    if isinstance(d, DSym):
        return d.name
    assert isinstance(d, DBin)
    p = _PREC[d.op]
    text = f"{_fmt(d.lhs, p)} {d.op} {_fmt(d.rhs, p + 1)}"
    return f"({text})" if p < outer else text


def as_dim(x: Dim | int | str) -> Dim:
    if isinstance(x, Dim):
        return x
    if isinstance(x, bool):
        raise TypeError("a bool is not a dim")
    if isinstance(x, int):
        return DConst(x)
    if isinstance(x, str):
        return DSym(x)
    raise TypeError(f"cannot use {type(x).__name__} as a dim")


def dim_bin(op: str, lhs: Dim | int, rhs: Dim | int) -> Dim:
    """Build `lhs op rhs`, folding constants and the identities that keep printed shapes tidy."""
    a, b = as_dim(lhs), as_dim(rhs)
    if isinstance(a, DConst) and isinstance(b, DConst) and not (op in ("//", "%") and b.value == 0):
        return DConst(DBin(op, a, b).evaluate({}))
    if op in ("+", "-") and b == DConst(0):
        return a
    if op == "+" and a == DConst(0):
        return b
    if op == "*" and (a == DConst(1) or b == DConst(1)):
        return b if a == DConst(1) else a
    if op == "//" and b == DConst(1):
        return a
    # (x + c1) - c2 and (x - c1) + c2 fold into one constant so that `S + 1 - 1` prints as `S`.
    if op in ("+", "-") and isinstance(b, DConst) and isinstance(a, DBin) and a.op in ("+", "-") \
            and isinstance(a.rhs, DConst):
        c = (a.rhs.value if a.op == "+" else -a.rhs.value) + (b.value if op == "+" else -b.value)
        if c == 0:
            return a.lhs
        return DBin("+", a.lhs, DConst(c)) if c > 0 else DBin("-", a.lhs, DConst(-c))
    return DBin(op, a, b)


def is_affine(d: Dim) -> bool:
    """Whether `d` is Presburger without the axiom escape hatch (products need a constant factor)."""
    if isinstance(d, DBin):
        if d.op == "*" and not (d.lhs.is_const or d.rhs.is_const):
            return False
        if d.op in ("//", "%") and not d.rhs.is_const:
            return False
        return is_affine(d.lhs) and is_affine(d.rhs)
    return True


# ---------------------------------------------------------------------------------------------- predicates


class Pred(_OverSymbols[bool, "Pred"]):
    """A quantifier-free Presburger predicate over shape symbols."""

    def __str__(self) -> str:
        return _fmt_pred(self, 0)


@dataclass(frozen=True, repr=False)
class PCmp(_OnTwoDims, Pred):
    OPERATORS = CMP_OPS
    KIND = "comparison"

    def apply(self, a: int, b: int) -> bool:
        return _COMPARE[self.op](a, b)

    def substitute(self, env: Mapping[str, Dim]) -> Pred:
        return PCmp(self.op, self.lhs.substitute(env), self.rhs.substitute(env))


@dataclass(frozen=True, repr=False)
class _Junction(Pred):
    """A predicate over several others: `PAnd` holds when all of them hold, `POr` when any does."""

    items: tuple[Pred, ...]

    holds: ClassVar[Callable[[Iterable[bool]], bool]]

    def symbols(self) -> frozenset[str]:
        return frozenset().union(*(p.symbols() for p in self.items))

    def evaluate(self, env: Mapping[str, int]) -> bool:
        return self.holds(p.evaluate(env) for p in self.items)

    def substitute(self, env: Mapping[str, Dim]) -> Pred:
        return type(self)(tuple(p.substitute(env) for p in self.items))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.items!r})"


@dataclass(frozen=True, repr=False)
class PAnd(_Junction):
    holds = staticmethod(all)


@dataclass(frozen=True, repr=False)
class POr(_Junction):
    holds = staticmethod(any)


@dataclass(frozen=True, repr=False)
class PNot(Pred):
    item: Pred

    def symbols(self) -> frozenset[str]:
        return self.item.symbols()

    def evaluate(self, env: Mapping[str, int]) -> bool:
        return not self.item.evaluate(env)

    def substitute(self, env: Mapping[str, Dim]) -> Pred:
        return PNot(self.item.substitute(env))

    def __repr__(self) -> str:
        return f"PNot({self.item!r})"


def _fmt_pred(p: Pred, outer: int) -> str:
    if isinstance(p, PCmp):
        return f"{p.lhs} {p.op} {p.rhs}"
    if isinstance(p, PNot):
        return f"not {_fmt_pred(p.item, 3)}"
    prec, word = (1, " or ") if isinstance(p, POr) else (2, " and ")
    text = word.join(_fmt_pred(q, prec + 1) for q in p.items)  # type: ignore[attr-defined]
    return f"({text})" if prec < outer or outer == 3 else text


# ---------------------------------------------------------------------------------------------- Z3


def dim_to_z3(d: Dim, env: Mapping[str, object]):
    """Translate a dim into a Z3 integer term; `env` maps symbol names to Z3 Int variables."""
    import z3

    if isinstance(d, DConst):
        return z3.IntVal(d.value)
    if isinstance(d, DSym):
        return env[d.name]
    assert isinstance(d, DBin)
    a, b = dim_to_z3(d.lhs, env), dim_to_z3(d.rhs, env)
    ring = _RING.get(d.op)
    if ring is not None:
        return ring(a, b)
    return _floor_div_mod(d.op, a, b, d.rhs.value if isinstance(d.rhs, DConst) else None)


def _floor_div_mod(op: str, a, b, const: int | None):
    """Python's floor `//` and `%` (as `DBin.evaluate`) for divisors of either sign, the one meaning of a
    dim's division wherever it is proved. Z3's `/` and `%` are Euclidean: the floor for a positive divisor;
    a negative one divides the negated operands (floor(a / b) == floor(-a / -b))."""
    import z3

    if const is not None and const > 0:
        return a / b if op == "//" else a % b
    q = (-a) / (-b) if const is not None else z3.If(b >= 0, a / b, (-a) / (-b))
    return q if op == "//" else a - b * q


_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge}


def pred_to_z3(p: Pred, env: Mapping[str, object]):
    """Translate a predicate into a Z3 formula (the KIR solver and the physical verifier both use it)."""
    import z3

    if isinstance(p, PCmp):
        return _COMPARE[p.op](dim_to_z3(p.lhs, env), dim_to_z3(p.rhs, env))
    if isinstance(p, PAnd):
        return z3.And(*[pred_to_z3(q, env) for q in p.items]) if p.items else z3.BoolVal(True)
    if isinstance(p, POr):
        return z3.Or(*[pred_to_z3(q, env) for q in p.items]) if p.items else z3.BoolVal(False)
    assert isinstance(p, PNot)
    return z3.Not(pred_to_z3(p.item, env))


def solve_for(d: Dim, symbol: str, extent: int, env: Mapping[str, int]) -> int | None:
    """Solve `d == extent` for `symbol` (every other symbol of `d` bound in `env`) when `d` is affine in
    it (`S`, `S + c`, `2 * S - c`, `S + S`, ...); None when there is no such integer or `d` is not."""
    return solve_affine(lambda v: d.evaluate({**env, symbol: v}), extent)


def bind_extents(extents: Iterable[tuple[Dim, int]], env: dict[str, int]) -> None:
    """Bind in `env` the shape symbols that the extents `(dim, value)` determine: an extent affine in its one
    unbound symbol (`S`, `S + 1`, `B + B`) binds it, until none can (the caller checks the rest)."""

    def resolve(extent: tuple[Dim, int]) -> bool:
        d, n = extent
        free = d.symbols() - env.keys()
        if len(free) != 1:
            return not free
        (name,) = free
        value = solve_for(d, name, n, env)
        if value is not None:
            env[name] = value
        return value is not None

    settle(list(extents), resolve)
