"""Layout ops: broadcast, reshape, transpose, slice, concat, expand_dims, squeeze."""

from __future__ import annotations

from .core import NO_OP_TRAITS, Op, TensorType, Type, TypeContext, Value, op, shape_str
from .dims import DConst, Dim, PCmp, dim_bin


@op("broadcast", NO_OP_TRAITS)
class Broadcast(Op):
    """broadcast_in_dim: operand axis k becomes result axis `dims[k]` (its extent equal, or 1)."""

    x: Value
    shape: tuple[Dim, ...]
    dims: tuple[int, ...]

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.x, "broadcast operand")
        if len(self.dims) != t.rank:
            raise ctx.fail(f"broadcast maps {len(self.dims)} axes but the operand has rank {t.rank}")
        if list(self.dims) != sorted(set(self.dims)) or any(not 0 <= d < len(self.shape) for d in self.dims):
            raise ctx.fail(f"broadcast dims {list(self.dims)} must be increasing and within rank "
                           f"{len(self.shape)}")
        for k, d in enumerate(self.dims):
            if t.shape[k] != DConst(1):
                ctx.same_dim(t.shape[k], self.shape[d], f"broadcast of axis {k}")
        return (TensorType(t.dtype, self.shape),)


def product(dims: tuple[Dim, ...]) -> Dim:
    out: Dim = DConst(1)
    for d in dims:
        out = dim_bin("*", out, d)
    return out


@op("reshape", NO_OP_TRAITS)
class Reshape(Op):
    x: Value
    shape: tuple[Dim, ...]

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.x, "reshape operand")
        a = [d for d in t.shape if d != DConst(1)]
        b = [d for d in self.shape if d != DConst(1)]
        if a != b:  # products of symbols go through the axiom escape hatch (kernel axioms)
            ctx.same_dim(product(t.shape), product(self.shape), f"reshape {shape_str(t.shape)} to "
                         f"{shape_str(self.shape)} element count")
        return (TensorType(t.dtype, self.shape),)


@op("transpose", NO_OP_TRAITS)
class Transpose(Op):
    x: Value
    perm: tuple[int, ...]

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.x, "transpose operand")
        if sorted(self.perm) != list(range(t.rank)):
            raise ctx.fail(f"transpose permutation {list(self.perm)} is not a permutation of rank {t.rank}")
        return (TensorType(t.dtype, tuple(t.shape[p] for p in self.perm)),)


@op("slice", NO_OP_TRAITS)
class SliceOp(Op):
    """Static slice of a value: per axis `start:stop:step` (dims; step a positive constant)."""

    x: Value
    starts: tuple[Dim, ...]
    stops: tuple[Dim, ...]
    steps: tuple[int, ...]

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.x, "slice operand")
        if not (len(self.starts) == len(self.stops) == len(self.steps) == t.rank):
            raise ctx.fail(f"slice needs start/stop/step for each of {t.rank} axes")
        shape = []
        for ax, (a, b, s) in enumerate(zip(self.starts, self.stops, self.steps)):
            if s < 1:
                raise ctx.fail(f"slice step must be a positive constant, got {s} on axis {ax}")
            ctx.prove(PCmp("<=", DConst(0), a), f"slice start on axis {ax}")
            ctx.prove(PCmp("<=", a, b), f"slice start <= stop on axis {ax}")
            ctx.prove(PCmp("<=", b, t.shape[ax]), f"slice stop within extent {t.shape[ax]} on axis {ax}")
            ext = dim_bin("-", b, a)
            shape.append(ext if s == 1 else dim_bin("//", dim_bin("+", ext, s - 1), s))
        return (TensorType(t.dtype, tuple(shape)),)


@op("concat", NO_OP_TRAITS)
class Concat(Op):
    inputs: tuple[Value, ...]
    axis: int

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        if not self.inputs:
            raise ctx.fail("concat needs at least one input")
        ts = [ctx.tensor(v, "concat input") for v in self.inputs]
        t0 = ts[0]
        if not 0 <= self.axis < t0.rank:
            raise ctx.fail(f"concat axis {self.axis} out of range for rank {t0.rank}")
        total: Dim = DConst(0)
        for t in ts:
            if t.dtype != t0.dtype or t.rank != t0.rank:
                raise ctx.fail(f"concat inputs differ: {t0} vs {t}")
            for ax in range(t0.rank):
                if ax != self.axis:
                    ctx.same_dim(t.shape[ax], t0.shape[ax], f"concat axis {ax}")
            total = dim_bin("+", total, t.shape[self.axis])
        shape = list(t0.shape)
        shape[self.axis] = total
        return (TensorType(t0.dtype, tuple(shape)),)


@op("expand_dims", NO_OP_TRAITS)
class ExpandDims(Op):
    x: Value
    axis: int

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.x, "expand_dims operand")
        if not 0 <= self.axis <= t.rank:
            raise ctx.fail(f"expand_dims axis {self.axis} out of range for rank {t.rank}")
        shape = list(t.shape)
        shape.insert(self.axis, DConst(1))
        return (TensorType(t.dtype, tuple(shape)),)


@op("squeeze", NO_OP_TRAITS)
class Squeeze(Op):
    x: Value
    axis: int

    def infer(self, ctx: TypeContext) -> tuple[Type, ...]:
        t = ctx.tensor(self.x, "squeeze operand")
        if not 0 <= self.axis < t.rank:
            raise ctx.fail(f"squeeze axis {self.axis} out of range for rank {t.rank}")
        ctx.same_dim(t.shape[self.axis], DConst(1), f"squeezed axis {self.axis}")
        return (TensorType(t.dtype, t.shape[:self.axis] + t.shape[self.axis + 1:]),)
