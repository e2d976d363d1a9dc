"""Reductions: built-in kinds and custom combines over tuples, with identity, keepdims and accumulator."""

from __future__ import annotations

import math

from .core import STRUCTURED, Op, Region, TensorType, Type, TypeContext, Value, op, scalar
from .dims import DConst
from .dtypes import FP8, DType, ElemType, SpelledEnum
from .pointwise import BinaryFn, Literal, is_float_like, literal_fits


class ReduceKind(SpelledEnum):
    sum = "sum"
    prod = "prod"
    max = "max"        # NaN-propagating
    min = "min"        # NaN-propagating
    any = "any"
    all = "all"
    argmax = "argmax"  # first index of the extreme; NaN counts as the extreme
    argmin = "argmin"
    custom = "custom"  # a combine region with an identity


ARG_INDEX_DTYPE = DType.i64
EMPTY_ARG_INDEX = -1  # argmax/argmin over an empty extent

# The one table of built-in combines: the oracle, the physical lowering and the StableHLO exit all read it
# (argmax/argmin combine (value, index) pairs by their own rule; custom kinds carry a region).
COMBINE: dict[ReduceKind, BinaryFn] = {
    ReduceKind.sum: BinaryFn.add, ReduceKind.prod: BinaryFn.mul, ReduceKind.max: BinaryFn.maximum,
    ReduceKind.min: BinaryFn.minimum, ReduceKind.any: BinaryFn.or_, ReduceKind.all: BinaryFn.and_,
}


def combine_fn(kind: ReduceKind) -> BinaryFn:
    """The binary function a built-in elementwise fold combines with."""
    try:
        return COMBINE[kind]
    except KeyError:
        raise ValueError(f"reduce {kind} is not an elementwise fold") from None


def identity(kind: ReduceKind, dtype: DType) -> Literal:
    """The neutral element of a built-in kind in `dtype` (argmax/argmin: of their value component).

    It seeds accumulators, fills padding and masked lanes, and is an empty extent's result (every identity is a
    value of `dtype`: f8e4m3 has no infinities, so its max and min start from -448 and 448). The float
    sum's is -0.0, the one value with `x + -0.0 == x` bit for bit for every x (+0.0 + -0.0 is +0.0), so
    neither padding, block size nor tree shape can change a sum: a sum of negative zeros is -0.0, and so
    is an empty float sum (torch and NumPy start from +0.0 and give +0.0 for both; the values compare
    equal and differ only in the sign bit).
    """
    if kind is ReduceKind.sum:
        return False if dtype.is_pred else -0.0 if dtype.is_float else 0
    if kind is ReduceKind.prod:
        return True if dtype.is_pred else 1.0 if dtype.is_float else 1
    if kind is ReduceKind.any:
        return False
    if kind is ReduceKind.all:
        return True
    if kind in (ReduceKind.max, ReduceKind.argmax, ReduceKind.min, ReduceKind.argmin):
        lowest = kind in (ReduceKind.max, ReduceKind.argmax)
        if dtype is DType.f8e4m3:
            # no infinities (-inf would round to NaN, which wins every max and min): the extreme finite value,
            # exactly neutral over f8e4m3 values, also in the f32 registers that hold them
            return -FP8[dtype][0] if lowest else FP8[dtype][0]
        if dtype.is_float:
            return -math.inf if lowest else math.inf
        if dtype.is_pred:
            return not lowest
        lo, hi = dtype.int_range
        return lo if lowest else hi
    raise ValueError(f"reduce {kind} has no built-in identity")


def same_literal(a: Literal, b: Literal) -> bool:
    """Whether two literals are one value: signed zeros differ, NaN is never the same."""
    if isinstance(a, float) or isinstance(b, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def identical_literal(a: Literal, b: Literal) -> bool:
    """Whether two literals are one literal as emitted: of one kind (bool, int or float) and one value, signed
    zeros apart, and every NaN the same (a literal NaN is emitted as the one quiet NaN). A fill identical to a
    fold's identity reads exactly what the fold starts from."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return same_literal(a, b)


def default_acc(kind: ReduceKind, dtype: ElemType) -> ElemType | None:
    """f16/bf16/fp8 sums and products accumulate in f32 unless the op says otherwise."""
    narrow = (DType.f16, DType.bf16, DType.f8e4m3, DType.f8e5m2)
    if kind in (ReduceKind.sum, ReduceKind.prod) and dtype in narrow:
        return DType.f32
    if kind in (ReduceKind.sum, ReduceKind.prod) and dtype is DType.i4:
        return DType.i32  # the same value modulo 16 as wrapping at every step; Triton has no 4-bit arithmetic
    if kind in (ReduceKind.sum, ReduceKind.prod) and not isinstance(dtype, DType) and \
            any(c in narrow for c in dtype.choices):
        return DType.f32
    return None


def check_combine(ctx: TypeContext, combine: Region | None, identity: tuple[Literal, ...] | None,
                  dtypes: tuple[ElemType, ...], what: str) -> None:
    """A combine region takes (a_1..a_k, b_1..b_k) scalars and yields k scalars of the same dtypes."""
    if combine is None:
        raise ctx.fail(f"{what} with a custom combine needs a combine region")
    k = len(dtypes)
    if identity is None or len(identity) != k:
        raise ctx.fail(f"{what}: the custom combine needs an identity with {k} component(s)")
    for lit, dt in zip(identity, dtypes):
        if not literal_fits(lit, dt):
            raise ctx.fail(f"{what}: identity {lit!r} does not fit {dt}")
    want = tuple(scalar(d) for d in dtypes) * 2
    got = tuple(a.type for a in combine.args)
    if got != want:
        raise ctx.fail(f"{what}: combine region takes ({', '.join(map(str, got))}) but the components need "
                       f"({', '.join(map(str, want))})")
    ys = tuple(v.type for v in combine.yielded)
    if ys != want[:k]:
        raise ctx.fail(f"{what}: combine region yields ({', '.join(map(str, ys))}), expected "
                       f"({', '.join(map(str, want[:k]))})")


def check_builtin(ctx: TypeContext, kind: ReduceKind, dtype: ElemType, what: str) -> None:
    if kind in (ReduceKind.any, ReduceKind.all) and dtype != DType.pred:
        raise ctx.fail(f"{what} {kind} needs pred values, got {dtype}")
    if kind in (ReduceKind.sum, ReduceKind.prod, ReduceKind.max, ReduceKind.min, ReduceKind.argmax,
                ReduceKind.argmin) and dtype == DType.pred:
        raise ctx.fail(f"{what} {kind} is not defined on pred; cast to an integer first")


@op("reduce", STRUCTURED)
class Reduce(Op):
    inputs: tuple[Value, ...]
    axes: tuple[int, ...]
    kind: ReduceKind
    keepdims: bool = False
    acc_dtype: ElemType | None = None
    identity: tuple[Literal, ...] | None = None
    combine: Region | None = None

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        if not self.inputs:
            raise ctx.fail("reduce needs at least one input")
        ts = [ctx.tensor(v, "reduce input") for v in self.inputs]
        t0 = ts[0]
        for t in ts[1:]:
            ctx.same_shape(t0.shape, t.shape, "reduce inputs")
        if len(set(self.axes)) != len(self.axes) or any(not 0 <= a < t0.rank for a in self.axes):
            raise ctx.fail(f"reduce axes {list(self.axes)} are not distinct axes of rank {t0.rank}")
        shape = tuple(DConst(1) if a in self.axes else d for a, d in enumerate(t0.shape)) if self.keepdims \
            else tuple(d for a, d in enumerate(t0.shape) if a not in self.axes)
        if self.kind is ReduceKind.custom:
            check_combine(ctx, self.combine, self.identity, tuple(t.dtype for t in ts), "reduce")
            return tuple(TensorType(t.dtype, shape) for t in ts)
        if len(ts) != 1:
            raise ctx.fail(f"reduce {self.kind} takes one input, got {len(ts)}")
        if self.combine is not None:
            raise ctx.fail(f"reduce {self.kind} takes no combine region")
        check_builtin(ctx, self.kind, t0.dtype, "reduce")
        if self.acc_dtype is not None and not (is_float_like(self.acc_dtype) or
                                               isinstance(self.acc_dtype, DType) and self.acc_dtype.is_int):
            raise ctx.fail(f"accumulator dtype {self.acc_dtype} is not numeric")
        if self.kind in (ReduceKind.argmax, ReduceKind.argmin):
            return (TensorType(ARG_INDEX_DTYPE, shape),)
        return (TensorType(t0.dtype, shape),)

    def effective_acc(self) -> ElemType:
        dt = self.inputs[0].type.dtype
        return self.acc_dtype or default_acc(self.kind, dt) or dt
