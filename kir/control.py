"""Control: unordered `parallel`, ordered `for` with carries, `while`, `if` with results, `yield`."""

from __future__ import annotations

from .core import CONTROL, NO_OP_TRAITS, Op, Region, TensorType, Type, TypeContext, Value, op, scalar
from .dims import Dim
from .dtypes import DType

INDEX_DTYPE = DType.i64


@op("yield", NO_OP_TRAITS)
class Yield(Op):
    values: tuple[Value, ...] = ()
    TERMINATOR = True

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        return ()


def _yield_types(region: Region) -> tuple[Type, ...]:
    return tuple(v.type for v in region.yielded)


def _check_terminated(ctx: TypeContext, region: Region, what: str) -> None:
    if region.terminator is None:
        raise ctx.fail(f"{what} region does not end with yield")


@op("parallel", CONTROL)
class Parallel(Op):
    """Unordered iteration over `domain`; the body's args are the i64 indices."""

    domain: tuple[Dim, ...]
    body: Region

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        if not self.domain:
            raise ctx.fail("parallel needs at least one axis")
        _check_terminated(ctx, self.body, "parallel")
        if tuple(a.type for a in self.body.args) != (scalar(INDEX_DTYPE),) * len(self.domain):
            raise ctx.fail(f"parallel body takes {len(self.domain)} {INDEX_DTYPE} indices")
        if self.body.yielded:
            raise ctx.fail("parallel body yields no values; write results with stores")
        return ()


def _check_carried(ctx: TypeContext, inits: tuple[Value, ...], args: tuple[Value, ...],
                   body: Region, what: str) -> tuple[Type, ...]:
    types = tuple(ctx.tensor(v, f"{what} initial value").__class__ and v.type for v in inits)
    if tuple(a.type for a in args) != types:
        raise ctx.fail(f"{what} body carries ({', '.join(map(str, (a.type for a in args)))}) but the initial "
                       f"values are ({', '.join(map(str, types))})")
    if _yield_types(body) != types:
        raise ctx.fail(f"{what} body yields ({', '.join(map(str, _yield_types(body)))}), expected "
                       f"({', '.join(map(str, types))})")
    return types


@op("for", CONTROL)
class For(Op):
    """Ordered loop `for iv in range(start, stop, step)`; body args are (iv, *carried)."""

    start: Value
    stop: Value
    step: Value
    inits: tuple[Value, ...]
    body: Region

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        ts = [ctx.scalar_int(v, f"for {w}") for v, w in ((self.start, "start"), (self.stop, "stop"),
                                                          (self.step, "step"))]
        if len({t.dtype for t in ts}) != 1:
            raise ctx.fail("for start/stop/step must have one integer dtype")
        _check_terminated(ctx, self.body, "for")
        if not self.body.args or self.body.args[0].type != ts[0]:
            raise ctx.fail(f"for body's first argument is the {ts[0]} induction variable")
        return _check_carried(ctx, self.inits, self.body.args[1:], self.body, "for")


@op("while", CONTROL)
class While(Op):
    """`cond` takes the carried values and yields one pred; `body` takes and yields the carried values."""

    inits: tuple[Value, ...]
    cond: Region
    body: Region

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        _check_terminated(ctx, self.cond, "while condition")
        _check_terminated(ctx, self.body, "while")
        types = _check_carried(ctx, self.inits, self.body.args, self.body, "while")
        if tuple(a.type for a in self.cond.args) != types:
            raise ctx.fail("while condition takes the carried values")
        if _yield_types(self.cond) != (scalar(DType.pred),):
            raise ctx.fail("while condition must yield one scalar pred")
        return types


@op("if", CONTROL)
class If(Op):
    cond: Value
    then_: Region
    else_: Region

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.cond, "if condition")
        if t != TensorType(DType.pred, ()):
            raise ctx.fail(f"if condition must be a scalar pred, got {t}")
        _check_terminated(ctx, self.then_, "if then")
        _check_terminated(ctx, self.else_, "if else")
        if self.then_.args or self.else_.args:
            raise ctx.fail("if regions take no arguments")
        a, b = _yield_types(self.then_), _yield_types(self.else_)
        if a != b:
            raise ctx.fail(f"if branches yield different types: ({', '.join(map(str, a))}) vs "
                           f"({', '.join(map(str, b))})")
        return a
