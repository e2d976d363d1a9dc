"""Scans: inclusive/exclusive, forward/reverse, built-in kinds or a custom combine."""

from __future__ import annotations

from .core import STRUCTURED, Op, Region, Type, TypeContext, Value, op
from .dtypes import ElemType, SpelledEnum
from .pointwise import Literal, literal_fits
from .reduce import ReduceKind, check_builtin, check_combine


class ScanKind(SpelledEnum):
    sum = "sum"
    prod = "prod"
    max = "max"
    min = "min"
    custom = "custom"

    @property
    def as_reduce(self) -> ReduceKind:
        return ReduceKind(self.value)


@op("scan", STRUCTURED)
class Scan(Op):
    inputs: tuple[Value, ...]
    axis: int
    kind: ScanKind
    reverse: bool = False
    exclusive: bool = False
    acc_dtype: ElemType | None = None
    identity: tuple[Literal, ...] | None = None
    combine: Region | None = None

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        if not self.inputs:
            raise ctx.fail("scan needs at least one input")
        ts = [ctx.tensor(v, "scan input") for v in self.inputs]
        for t in ts[1:]:
            ctx.same_shape(ts[0].shape, t.shape, "scan inputs")
        if not 0 <= self.axis < ts[0].rank:
            raise ctx.fail(f"scan axis {self.axis} out of range for rank {ts[0].rank}")
        if self.kind is ScanKind.custom:
            check_combine(ctx, self.combine, self.identity, tuple(t.dtype for t in ts), "scan")
        else:
            if len(ts) != 1:
                raise ctx.fail(f"scan {self.kind} takes one input, got {len(ts)}")
            if self.combine is not None:
                raise ctx.fail(f"scan {self.kind} takes no combine region")
            check_builtin(ctx, self.kind.as_reduce, ts[0].dtype, "scan")
            if self.identity is not None and (len(self.identity) != 1 or
                                              not literal_fits(self.identity[0], ts[0].dtype)):
                raise ctx.fail(f"scan identity {self.identity!r} does not fit {ts[0].dtype}")
        return tuple(ts)
