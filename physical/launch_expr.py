"""Launch expressions: typed integer expressions the launcher and the kernel body evaluate alike.

Only constants, shape symbols (kir dims) and ABI scalars may appear; each node has `evaluate(env)`
(env maps symbol and ABI-scalar names to ints) and a readable `__str__`. The same objects sit in the
physical program (segment lengths and offsets, constexpr blocks) and in the emitted ABI.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from kir.dims import DConst, Dim, DSym
from kir.errors import LaunchError


class LaunchExpr:
    """Base of every launch-expression node."""

    def evaluate(self, env: Mapping[str, int]) -> int:
        raise NotImplementedError

    def names(self) -> frozenset[str]:
        """The symbol and ABI-scalar names the expression reads (a leaf says; other nodes: their children's)."""
        return frozenset().union(*(c.names() for c in self.children()))

    def children(self) -> tuple[LaunchExpr, ...]:
        """The launch expressions among the node's fields, in field order (a tuple field gives each of its items)."""
        out: list[LaunchExpr] = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  (every node is a dataclass)
            v = getattr(self, f.name)
            if isinstance(v, LaunchExpr):
                out.append(v)
            elif isinstance(v, tuple):
                out.extend(x for x in v if isinstance(x, LaunchExpr))
        return tuple(out)


@dataclass(frozen=True)
class LConst(LaunchExpr):
    value: int

    def evaluate(self, env: Mapping[str, int]) -> int:
        return self.value

    def names(self) -> frozenset[str]:
        return frozenset()

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class LDim(LaunchExpr):
    """A shape expression (a kir dim over shape symbols)."""

    dim: Dim

    def evaluate(self, env: Mapping[str, int]) -> int:
        return self.dim.evaluate(env)

    def names(self) -> frozenset[str]:
        return self.dim.symbols()

    def __str__(self) -> str:
        return str(self.dim)


@dataclass(frozen=True)
class LScalar(LaunchExpr):
    """The launch value of an integer runtime scalar parameter of the kernel ABI."""

    name: str

    def evaluate(self, env: Mapping[str, int]) -> int:
        try:
            return int(env[self.name])
        except KeyError:
            raise KeyError(f"ABI scalar {self.name} is not bound") from None

    def names(self) -> frozenset[str]:
        return frozenset([self.name])

    def __str__(self) -> str:
        return self.name


_BIN = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
        "//": lambda a, b: a // b, "cdiv": lambda a, b: -(-a // b)}


@dataclass(frozen=True)
class LBin(LaunchExpr):
    op: str  # + - * // cdiv
    lhs: LaunchExpr
    rhs: LaunchExpr

    def __post_init__(self) -> None:
        if self.op not in _BIN:
            raise ValueError(f"unknown launch operator {self.op!r}")

    def evaluate(self, env: Mapping[str, int]) -> int:
        a, b = self.lhs.evaluate(env), self.rhs.evaluate(env)
        if self.op in ("//", "cdiv") and b == 0:
            raise ZeroDivisionError(f"{self} divides by zero")
        return _BIN[self.op](a, b)

    def __str__(self) -> str:
        if self.op == "cdiv":
            return f"cdiv({self.lhs}, {self.rhs})"
        return f"({self.lhs} {self.op} {self.rhs})"


@dataclass(frozen=True)
class LMinMax(LaunchExpr):
    op: str  # min | max
    items: tuple[LaunchExpr, ...]

    def evaluate(self, env: Mapping[str, int]) -> int:
        vals = [x.evaluate(env) for x in self.items]
        return min(vals) if self.op == "min" else max(vals)

    def __str__(self) -> str:
        return f"{self.op}({', '.join(str(x) for x in self.items)})"


@dataclass(frozen=True)
class LSum(LaunchExpr):
    items: tuple[LaunchExpr, ...]

    def evaluate(self, env: Mapping[str, int]) -> int:
        return sum(x.evaluate(env) for x in self.items)

    def __str__(self) -> str:
        return "0" if not self.items else " + ".join(str(x) for x in self.items)


@dataclass(frozen=True)
class LSelect(LaunchExpr):
    """`when_set` where `cond` is non-zero, else `otherwise`: a launch-time choice between two forms (a flag
    selects the looped form's block, a split count, a segment length). Only the chosen side is evaluated,
    so the other may be one the launch could not evaluate (a tile too large to hold)."""

    cond: LaunchExpr
    when_set: LaunchExpr
    otherwise: LaunchExpr

    def evaluate(self, env: Mapping[str, int]) -> int:
        return (self.when_set if self.cond.evaluate(env) else self.otherwise).evaluate(env)

    def __str__(self) -> str:
        return f"({self.when_set} if {self.cond} else {self.otherwise})"


def next_pow2_int(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class LNextPow2(LaunchExpr):
    """The smallest power of two >= x (1 for x <= 1)."""

    x: LaunchExpr

    def evaluate(self, env: Mapping[str, int]) -> int:
        return next_pow2_int(self.x.evaluate(env))

    def __str__(self) -> str:
        return f"next_pow2({self.x})"


MAX_TILE_ELEMENTS = 1 << 20  # Triton's largest block (TRITON_MAX_TENSOR_NUMEL)


@dataclass(frozen=True)
class LTileBlock(LaunchExpr):
    """`next_pow2(extent)` for a persistent tile axis, refusing blocks beyond `limit` at launch."""

    extent: LaunchExpr
    limit: int = MAX_TILE_ELEMENTS
    what: str = ""

    def evaluate(self, env: Mapping[str, int]) -> int:
        n = self.extent.evaluate(env)
        b = next_pow2_int(n)
        if b > self.limit:
            where = f" ({self.what})" if self.what else ""
            raise LaunchError(f"{self.extent} = {n} needs a tile of {b} elements{where}, more than the "
                              f"{self.limit} one program instance can hold; this kernel keeps that axis "
                              f"in one tile (a looped form is not available for it yet)")
        return b

    def __str__(self) -> str:
        return f"next_pow2({self.extent})"


@dataclass(frozen=True)
class LWarps(LaunchExpr):
    """num_warps from the largest tile: 4, 8 from 4096 elements, 16 from 16384."""

    elements: LaunchExpr

    def evaluate(self, env: Mapping[str, int]) -> int:
        n = self.elements.evaluate(env)
        return 16 if n >= 16384 else 8 if n >= 4096 else 4

    def __str__(self) -> str:
        return f"warps_for({self.elements})"


@dataclass(frozen=True)
class LConstexpr(LaunchExpr):
    """The value of one of the program's constexprs (usable in kernel bodies, not in segment lengths)."""

    name: str

    def evaluate(self, env: Mapping[str, int]) -> int:
        return int(env[self.name])

    def names(self) -> frozenset[str]:
        return frozenset([self.name])

    def __str__(self) -> str:
        return self.name


DEVICE_SMS = "@sms"  # launch-environment name of the device's multiprocessor count (0: programs run one at a time)
WARP_SLOTS = 64  # warps one sm_80/sm_90 multiprocessor keeps resident


@dataclass(frozen=True)
class LResidentPrograms(LaunchExpr):
    """How many programs of `warps` warps keep the launch's device busy: half the multiprocessors' warp
    slots (registers usually bind first), `multiprocessors * max(1, 64 // (2 * warps))`. Triton's
    interpreter runs one program at a time (the launcher binds `DEVICE_SMS` to 0): one program."""

    warps: LaunchExpr

    def evaluate(self, env: Mapping[str, int]) -> int:
        sms = int(env.get(DEVICE_SMS, 0))  # unbound: a binding for no device (programs one at a time)
        if sms <= 0:
            return 1
        return sms * max(1, WARP_SLOTS // (2 * max(1, self.warps.evaluate(env))))

    def names(self) -> frozenset[str]:
        return frozenset([DEVICE_SMS]) | self.warps.names()

    def __str__(self) -> str:
        return f"resident_programs({self.warps})"


# ---------------------------------------------------------------------------------------------- builders


def lmultiprocessors() -> LaunchExpr:
    """The launch device's multiprocessors (1 under the interpreter): the programs of WARP_SLOTS // 2 warps each
    that it keeps resident, one a multiprocessor."""
    return LResidentPrograms(LConst(WARP_SLOTS // 2))


def lconst(v: int) -> LConst:
    return LConst(int(v))


def ldim(d: Dim | int) -> LaunchExpr:
    if isinstance(d, int):
        return LConst(d)
    if isinstance(d, DConst):
        return LConst(d.value)
    return LDim(d)


def lmul(a: LaunchExpr, b: LaunchExpr) -> LaunchExpr:
    if a == LConst(1):
        return b
    if b == LConst(1):
        return a
    if isinstance(a, LConst) and isinstance(b, LConst):
        return LConst(a.value * b.value)
    return LBin("*", a, b)


def ladd(a: LaunchExpr, b: LaunchExpr) -> LaunchExpr:
    if a == LConst(0):
        return b
    if b == LConst(0):
        return a
    if isinstance(a, LConst) and isinstance(b, LConst):
        return LConst(a.value + b.value)
    return LBin("+", a, b)


def as_launch(e: LaunchExpr | int) -> LaunchExpr:
    """`e` as a launch expression (an int becomes its constant)."""
    return LConst(e) if isinstance(e, int) else e


def lcdiv(a: LaunchExpr, b: LaunchExpr) -> LaunchExpr:
    if b == LConst(1):
        return a
    return LBin("cdiv", a, b)


def lprod(items: tuple[LaunchExpr, ...]) -> LaunchExpr:
    out: LaunchExpr = LConst(1)
    for x in items:
        out = lmul(out, x)
    return out


def lsum(items: tuple[LaunchExpr, ...]) -> LaunchExpr:
    items = tuple(x for x in items if x != LConst(0))
    if not items:
        return LConst(0)
    if len(items) == 1:
        return items[0]
    return LSum(items)


def lmin(*items: LaunchExpr) -> LaunchExpr:
    return items[0] if len(items) == 1 else LMinMax("min", tuple(items))


def lmax(*items: LaunchExpr) -> LaunchExpr:
    return items[0] if len(items) == 1 else LMinMax("max", tuple(items))


def lselect(cond: LaunchExpr, when_set: LaunchExpr, otherwise: LaunchExpr) -> LaunchExpr:
    """`when_set` if `cond` is non-zero at launch, else `otherwise` (a constant condition or two equal sides
    need no choice)."""
    if when_set == otherwise:
        return when_set
    if isinstance(cond, LConst):
        return when_set if cond.value else otherwise
    return LSelect(cond, when_set, otherwise)


def walk(e: LaunchExpr):
    yield e
    for c in e.children():
        yield from walk(c)


def symbol_names(e: LaunchExpr) -> frozenset[str]:
    return frozenset(n for x in walk(e) if isinstance(x, LDim) for n in x.dim.symbols())


__all__ = ["LaunchExpr", "LConst", "LDim", "LScalar", "LBin", "LMinMax", "LSum", "LSelect", "LNextPow2", "LTileBlock",
           "LWarps", "LConstexpr", "LResidentPrograms", "DEVICE_SMS", "WARP_SLOTS", "lmultiprocessors",
           "MAX_TILE_ELEMENTS", "lconst", "ldim", "lmul", "ladd", "lcdiv", "lprod", "lselect",
           "lsum", "lmin", "lmax", "next_pow2_int", "walk", "symbol_names", "DSym"]
