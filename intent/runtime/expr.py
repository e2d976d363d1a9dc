"""The expression format of prebuilt kernels, and its evaluator.

Shapes, `requires` predicates, grids, constexprs and operation counts are expressions in shape
symbols (and integer scalars, constexpr names and the device's multiprocessor count). A registry
stores them as JSON data that this module evaluates without the compiler:

* an int is a constant, a string is a name looked up in the environment;
* a list `[op, *operands]` applies `op`: `+ - * // % cdiv` (integers; `//` and `%` floor, as
  Python), `min max sum` (any number of operands), `next_pow2 warps_for`,
  `["tile_block", extent, limit, what]`, `["resident_programs", warps]`, `["select", cond, a, b]`
  (a where cond is non-zero, else b; only the chosen side is evaluated), the comparisons
  `== != < <= > >=`, and `and or not` (predicates).

The compiler writes them (`emit_triton.aot.encode`) from kir dims and predicates and from the
physical program's launch expressions, with the same meaning as their own `evaluate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import LaunchError

Expr = Any  # int | str | list (JSON data)

DEVICE_SMS = "@sms"  # the launch environment's multiprocessor count (0: one program at a time)
WARP_SLOTS = 64  # warps one sm_80/sm_90 multiprocessor keeps resident


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _div(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("division by zero")
    return a // b


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("division by zero")
    return a % b


def _cdiv(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("division by zero")
    return -(-a // b)


def _tile_block(env: Mapping[str, int], extent: Expr, limit: Expr, what: Expr = "") -> int:
    n = evaluate(extent, env)
    b = next_pow2(n)
    if b > limit:
        where = f" ({what})" if what else ""
        raise LaunchError(f"{render(extent)} = {n} needs a tile of {b} elements{where}, more than the {limit} one "
                          f"program instance can hold; this kernel keeps that axis in one tile (a looped form is "
                          f"not available for it yet)")
    return b


def _resident(env: Mapping[str, int], warps: Expr) -> int:
    sms = int(env[DEVICE_SMS])
    if sms <= 0:
        return 1
    return sms * max(1, WARP_SLOTS // (2 * max(1, evaluate(warps, env))))


_BINARY: dict[str, Callable[[int, int], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": _div, "%": _mod, "cdiv": _cdiv,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
_NARY: dict[str, Callable[[list[Any]], Any]] = {"min": min, "max": max, "sum": sum, "and": all, "or": any}
_UNARY: dict[str, Callable[[Any], Any]] = {
    "next_pow2": next_pow2, "not": lambda a: not a,
    "warps_for": lambda n: 16 if n >= 16384 else 8 if n >= 4096 else 4}
def _select(env: Mapping[str, int], cond: Expr, when_set: Expr, otherwise: Expr) -> int:
    return evaluate(when_set if evaluate(cond, env) else otherwise, env)


_SPECIAL: dict[str, Callable[..., int]] = {"tile_block": _tile_block, "resident_programs": _resident,
                                           "select": _select}
OPERATORS = frozenset(_BINARY) | frozenset(_NARY) | frozenset(_UNARY) | frozenset(_SPECIAL)


def evaluate(e: Expr, env: Mapping[str, int]) -> Any:
    """The value of `e` where every name takes its value in `env` (KeyError for an unbound name)."""
    if isinstance(e, str):
        try:
            return env[e]
        except KeyError:
            raise KeyError(f"{e} is not bound") from None
    if not isinstance(e, list):
        return e
    op = e[0]
    fn2 = _BINARY.get(op)
    if fn2 is not None:
        return fn2(evaluate(e[1], env), evaluate(e[2], env))
    fnn = _NARY.get(op)
    if fnn is not None:
        return fnn([evaluate(x, env) for x in e[1:]])
    fn1 = _UNARY.get(op)
    if fn1 is not None:
        return fn1(evaluate(e[1], env))
    return _SPECIAL[op](env, *e[1:])


def validate(e: Expr, where: str) -> None:
    """Refuse data that is not an expression of this format (a damaged or foreign registry)."""
    if isinstance(e, bool) or isinstance(e, (int, str)):
        return
    if not isinstance(e, list) or not e or e[0] not in OPERATORS:
        raise ValueError(f"{where}: {e!r} is not an expression")
    operands = e[1:]
    if e[0] == "tile_block":
        if len(operands) != 3 or not isinstance(operands[1], int) or not isinstance(operands[2], str):
            raise ValueError(f"{where}: {e!r} is not an expression")
        operands = operands[:1]
    arity = 2 if e[0] in _BINARY else 1 if e[0] in _UNARY or e[0] == "resident_programs" else \
        3 if e[0] == "select" else None
    if arity is not None and len(operands) != arity:
        raise ValueError(f"{where}: {e[0]} takes {arity} operand(s), got {len(operands)}")
    for x in operands:
        validate(x, where)


def names(e: Expr) -> Iterator[str]:
    """The names `e` reads, in order of appearance."""
    if isinstance(e, str):
        yield e
    elif isinstance(e, list):
        if e[0] == "resident_programs":
            yield DEVICE_SMS
        for x in (e[1:2] if e[0] == "tile_block" else e[1:]):
            yield from names(x)


_PREC = {"or": 0, "and": 1, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "+": 4, "-": 4, "*": 5, "//": 5,
         "%": 5}


def render(e: Expr, outer: int = 0) -> str:
    """Readable text of `e`, as kir prints dims and predicates (`N <= 65536`, `M * N + 1`)."""
    if not isinstance(e, list):
        return str(e)
    op, operands = e[0], e[1:]
    if op in _PREC:
        p = _PREC[op]
        if op in ("and", "or"):
            text = f" {op} ".join(render(x, p + 1) for x in operands)
        else:
            text = f"{render(operands[0], p)} {op} {render(operands[1], p + 1)}"
        return f"({text})" if p < outer else text
    if op == "not":
        return f"not {render(operands[0], 6)}"
    if op == "select":
        text = f"{render(operands[1], 1)} if {render(operands[0], 1)} else {render(operands[2])}"
        return f"({text})" if outer > 0 else text
    shown = operands[:1] if op == "tile_block" else operands
    return f"{op}({', '.join(render(x) for x in shown)})"
