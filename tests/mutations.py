"""What the mutation tests of the construction verifier share: small hand-built KIR kernels, ways to edit
a lowered program, and the registry each rule family's file (`tests/test_physical_mutation_*.py`) fills.

A mutation takes a program built by `physical.construct`/`physical.lower` from a KIR kernel, changes it with
`dataclasses.replace`, and returns (kernel, broken program, the exact message `physical.verifier.verify` must
report, at the KIR source of the broken item).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

import physical
from kir import (
    INDEX_DTYPE,
    Alloc,
    Atomic,
    AtomicKind,
    Binary,
    BinaryFn,
    Builder,
    Constant,
    InitMode,
    Load,
    Parallel,
    Param,
    Reduce,
    ReduceKind,
    RefType,
    Role,
    Slice,
    Store,
    Yield,
    build_kernel,
    scalar,
)
from kir.core import Kernel
from kir.dims import DConst, DSym
from kir.dtypes import DType
from kir.errors import DiagnosticError, Loc
from kir.solver import ShapeSolver
from physical import ops as P
from physical.model import AccessRelation, POp, PRegion, Program, PValue
from physical.passes import SplitReductions
from physical.verifier import PhysicalVerifyError, check, verify
from tests import samples

M, N, P_ = DSym("M"), DSym("N"), DSym("P")

f32 = DType.f32

HERE = "mutation.py"


# ---------------------------------------------------------------------------------------------- kernels


def _loc(line: int) -> Loc:
    return Loc(HERE, line, 5)


def _params(b: Builder, spec: list[tuple[str, object]]) -> tuple[Param, ...]:
    args = b.begin_region(tuple(t for _, t in spec), tuple(n for n, _ in spec))  # type: ignore[arg-type]
    return tuple(Param(n, a) for (n, _), a in zip(spec, args))


def two_groups() -> Kernel:
    """Row sums over (M) and a scaled copy over (P): two independent groups, two segments."""
    b = Builder(ShapeSolver(("M", "N", "P")))
    x, v, sums, scaled = _params(b, [("x", RefType(f32, (M, N), Role.IN)), ("v", RefType(f32, (P_,), Role.IN)),
                                     ("sums", RefType(f32, (M,), Role.OUT)),
                                     ("scaled", RefType(f32, (P_,), Role.OUT))])
    (i,) = b.begin_region((scalar(INDEX_DTYPE),), ("i",))
    row = b.add(Load, src=x.value, index=(i, Slice(DConst(0), N)), name="row", loc=_loc(10))
    s = b.add(Reduce, inputs=(row,), axes=(0,), kind=ReduceKind.sum, name="s", loc=_loc(10))
    b.make(Store, dst=sums.value, index=(i,), value=s, loc=_loc(10))
    b.make(Yield, values=())
    b.make(Parallel, domain=(M,), body=b.end_region(), loc=_loc(9))
    (p,) = b.begin_region((scalar(INDEX_DTYPE),), ("p",))
    vp = b.add(Load, src=v.value, index=(p,), loc=_loc(12))
    two = b.add(Constant, value=2.0, dtype=f32, loc=_loc(12))
    b.make(Store, dst=scaled.value, index=(p,), value=b.add(Binary, fn=BinaryFn.mul, lhs=vp, rhs=two, loc=_loc(12)),
           loc=_loc(12))
    b.make(Yield, values=())
    b.make(Parallel, domain=(P_,), body=b.end_region(), loc=_loc(11))
    b.make(Yield, values=())
    return build_kernel("two_groups", (x, v, sums, scaled), ("M", "N", "P"), b.end_region())


def staged_copy() -> Kernel:
    """A vector goes through an uninitialised local buffer: store it whole, then read it back whole."""
    b = Builder(ShapeSolver(("N",)))
    x, out = _params(b, [("x", RefType(f32, (N,), Role.IN)), ("out", RefType(f32, (N,), Role.OUT))])
    whole = (Slice(DConst(0), N),)
    buf = b.add(Alloc, dtype=f32, shape=(N,), init=InitMode.empty, name="buf", loc=_loc(20))
    row = b.add(Load, src=x.value, index=whole, name="row", loc=_loc(21))
    b.make(Store, dst=buf, index=whole, value=row, loc=_loc(21))
    back = b.add(Load, src=buf, index=whole, name="back", loc=_loc(22))
    b.make(Store, dst=out.value, index=whole, value=back, loc=_loc(23))
    b.make(Yield, values=())
    return build_kernel("staged_copy", (x, out), ("N",), b.end_region())


def scale_rows() -> Kernel:
    """Every row times one shared vector: its programs load the vector once, then walk their rows."""
    b = Builder(ShapeSolver(("M", "N")))
    x, w, out = _params(b, [("x", RefType(f32, (M, N), Role.IN)), ("w", RefType(f32, (N,), Role.IN)),
                            ("out", RefType(f32, (M, N), Role.OUT))])
    (i,) = b.begin_region((scalar(INDEX_DTYPE),), ("i",))
    row = b.add(Load, src=x.value, index=(i, Slice(DConst(0), N)), name="row", loc=_loc(31))
    vec = b.add(Load, src=w.value, index=(Slice(DConst(0), N),), name="vec", loc=_loc(32))
    b.make(Store, dst=out.value, index=(i, Slice(DConst(0), N)),
           value=b.add(Binary, fn=BinaryFn.mul, lhs=row, rhs=vec, loc=_loc(33)), loc=_loc(33))
    b.make(Yield, values=())
    b.make(Parallel, domain=(M,), body=b.end_region(), loc=_loc(30))
    b.make(Yield, values=())
    return build_kernel("scale_rows", (x, w, out), ("M", "N"), b.end_region())


def two_copies() -> Kernel:
    """a[n] = x[n] and b[n] = y[n] as two parallel loops: two independent groups over the same domain."""
    b = Builder(ShapeSolver(("N",)))
    x, y, a, bb = _params(b, [("x", RefType(f32, (N,), Role.IN)), ("y", RefType(f32, (N,), Role.IN)),
                              ("a", RefType(f32, (N,), Role.OUT)), ("b", RefType(f32, (N,), Role.OUT))])
    for line, src, dst in ((31, x, a), (33, y, bb)):
        (n,) = b.begin_region((scalar(INDEX_DTYPE),), ("n",))
        b.make(Store, dst=dst.value, index=(n,), value=b.add(Load, src=src.value, index=(n,), loc=_loc(line)),
               loc=_loc(line))
        b.make(Yield, values=())
        b.make(Parallel, domain=(N,), body=b.end_region(), loc=_loc(line - 1))
    b.make(Yield, values=())
    return build_kernel("two_copies", (x, y, a, bb), ("N",), b.end_region())


def tickets() -> Kernel:
    """Every element takes a ticket from its bin's counter: the atomic's old value is the result."""
    E, B = DSym("E"), DSym("B")
    b = Builder(ShapeSolver(("E", "B")))
    x, counts, out = _params(b, [("x", RefType(DType.i32, (E,), Role.IN)),
                                 ("counts", RefType(DType.i32, (B,), Role.INOUT)),
                                 ("out", RefType(DType.i32, (E,), Role.OUT))])
    (e,) = b.begin_region((scalar(INDEX_DTYPE),), ("e",))
    one = b.add(Constant, value=1, dtype=DType.i32)
    old = b.add(Atomic, kind=AtomicKind.add, dst=counts.value, indices=(b.add(Load, src=x.value, index=(e,)),),
                value=one, loc=_loc(41))
    b.make(Store, dst=out.value, index=(e,), value=old, loc=_loc(42))
    b.make(Yield, values=())
    b.make(Parallel, domain=(E,), body=b.end_region())
    b.make(Yield, values=())
    return build_kernel("tickets", (x, counts, out), ("E", "B"), b.end_region())


def balanced_segments() -> tuple[Kernel, Program]:
    """A segment sum with its segments balanced by the data: helper programs past the blocks fold equal chunks of
    the values for the segment that holds each (physical/passes/balance_segments.py)."""
    k = samples.segment_sum()
    p = physical.lower(k)
    assert any(isinstance(op, P.HelperIndex) for op in p.walk())
    return k, p


def split_rows() -> tuple[Kernel, Program]:
    """two_groups with its row sums split across programs: the looped form (slots, ticket, combine) as the body
    of its group (the program a launch that selects it runs)."""
    k = two_groups()
    lowered = physical.lower(k)
    if SplitReductions().legal(lowered) is True:  # where the pipeline has not split it already
        lowered = SplitReductions().run(lowered)
    g = lowered.groups[0]
    choice = P.looped_rows(g.body)
    assert choice is not None and P.block_loop(choice.whole.ops) is None
    p = lowered.replace(groups=(dataclasses.replace(g, body=choice.looped),) + lowered.groups[1:])
    assert any(isinstance(op, P.SplitIndex) for op in p.groups[0].body.ops)
    return k, p


KERNELS: dict[str, Callable[[], Kernel]] = {
    "softmax": samples.softmax, "vector_add": samples.vector_add, "segment_sum": samples.segment_sum,
    "recurrence": samples.recurrence, "histogram": samples.histogram, "two_groups": two_groups,
    "staged_copy": staged_copy, "two_copies": lambda: two_copies(), "tickets": lambda: tickets(),
    "scale_rows": scale_rows,
}


# ---------------------------------------------------------------------------------------------- editing programs


def rewrite(region: PRegion, fn: Callable[[POp], POp | list[POp] | None]) -> PRegion:
    """Apply `fn` to every op (innermost regions first): None keeps the op, a list replaces it."""
    ops: list[POp] = []
    for op in region.ops:
        changes = {f.name: rewrite(getattr(op, f.name), fn) for f in op.fields()
                   if isinstance(getattr(op, f.name), PRegion)}
        op = dataclasses.replace(op, **changes) if changes else op
        out = fn(op)
        ops.extend([op] if out is None else out if isinstance(out, list) else [out])
    return dataclasses.replace(region, ops=tuple(ops))


def edit(program: Program, fn: Callable[[POp], POp | list[POp] | None]) -> Program:
    return program.replace(groups=tuple(dataclasses.replace(g, body=rewrite(g.body, fn)) for g in program.groups))


def ops_of(program: Program, cls: type[POp]) -> list[POp]:
    """The ops of class `cls` a launch runs with every group's row held whole (a looped form recomputes the
    same work in chunks, with its own ops)."""
    return [op for g in program.groups for op in P.whole_form(g.body).walk() if isinstance(op, cls)]


def only(program: Program, cls: type[POp], pred: Callable[[POp], bool] = lambda op: True) -> POp:
    found = [op for op in ops_of(program, cls) if pred(op)]
    assert len(found) == 1, f"expected one {cls.NAME}, found {len(found)}"
    return found[0]


def named(program: Program, name: str) -> POp:
    """The one op whose first result is called `name`."""
    return only(program, POp, lambda op: bool(op.results) and op.results[0].name == name)


def value(program: Program, name: str) -> PValue:
    """The first result of the one op whose first result is called `name`."""
    return named(program, name).results[0]


def balanced(kernel) -> tuple[Kernel, Program]:
    """An `@intent.kernel`'s KIR and its lowering, which balances its segments by the data (one helper_index)."""
    k = kernel.kir
    p = physical.lower(k)
    assert sum(isinstance(op, P.HelperIndex) for op in p.walk()) == 1
    return k, p


def swap(program: Program, old: POp, new: POp | list[POp] | None) -> Program:
    """Replace the op equal to `old` (None removes it)."""
    return edit(program, lambda op: (new if new is not None else []) if op == old else None)


def fresh_id(program: Program) -> int:
    ids = [v.id for op in program.walk() for v in op.results]
    ids += [a.id for op in program.walk() for r in op.regions() for a in r.args]
    return max(ids) + 1


def buffer_named(program: Program, name: str):
    return next(b for b in program.buffers if b.name == name)


def kir_op(kernel: Kernel, cls: type) -> object:
    return next(op for op in kernel.walk() if isinstance(op, cls))


def retype(program: Program, old: PValue, new: PValue) -> Program:
    """Give one value a new type at its definition and at every use."""

    def sub(x: object) -> object:
        if isinstance(x, PValue):
            return new if x.id == old.id else x
        if isinstance(x, tuple):
            return tuple(sub(y) for y in x)
        if isinstance(x, PRegion):
            return PRegion(tuple(sub(a) for a in x.args), tuple(sub(o) for o in x.ops))  # type: ignore[misc]
        if isinstance(x, POp | AccessRelation) or dataclasses.is_dataclass(x) and type(x).__module__ == \
                "physical.model" and not isinstance(x, type):
            return dataclasses.replace(x, **{f.name: sub(getattr(x, f.name)) for f in dataclasses.fields(x)
                                             if f.name != "origin"})  # type: ignore[arg-type]
        return x

    return program.replace(groups=tuple(dataclasses.replace(g, body=sub(g.body)) for g in program.groups))


def with_ops(p: Program, ops: list[POp]) -> Program:
    g = p.groups[0]
    return p.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),)
                     + p.groups[1:])


def workspace_ops(p: Program, cls: type, name: str) -> list[POp]:
    buf = buffer_named(p, name)
    return [op for op in shared_branch(p)[2] if isinstance(op, cls) and op.access.buffer == buf.id]


def shared_branch(p: Program) -> tuple[list[POp], POp, list[POp]]:
    """The group's ops, the branch that shares blocks between programs (the `if` on SPLIT_0) and its ops."""
    ops = list(p.groups[0].body.ops)
    branch = next(op for op in ops if isinstance(op, P.If) and op.flag is not None)
    return ops, branch, list(branch.then_.ops)


def with_shared(p: Program, inner: list[POp]) -> Program:
    ops, branch, _ = shared_branch(p)
    ops[ops.index(branch)] = dataclasses.replace(branch, then_=dataclasses.replace(branch.then_, ops=tuple(inner)))
    return with_ops(p, ops)


# ---------------------------------------------------------------------------------------------- registry


Mutation = Callable[[], tuple[Kernel, Program, str]]


class Mutations:
    """One rule family's mutations: `first[rule]` is the mutation the rule is known by (every rule has one),
    `more[name]` = (rule, mutation) are other obligations the same rule owns."""

    def __init__(self) -> None:
        self.first: dict[str, Mutation] = {}
        self.more: dict[str, tuple[str, Mutation]] = {}

    def rule(self, rule: str) -> Callable[[Mutation], Mutation]:
        def deco(fn: Mutation) -> Mutation:
            assert rule not in self.first, f"two first mutations for {rule}"
            self.first[rule] = fn
            return fn

        return deco

    def also(self, name: str, rule: str) -> Callable[[Mutation], Mutation]:
        def deco(fn: Mutation) -> Mutation:
            assert name not in self.more, f"two mutations named {name}"
            self.more[name] = (rule, fn)
            return fn

        return deco


def assert_reported(rule: str, kernel: Kernel, broken: Program, message: str) -> None:
    """`verify` rejects `broken` under `rule` with exactly `message`, and `check` lists the rule."""
    with pytest.raises(PhysicalVerifyError) as info:
        verify(broken, kernel)
    err = info.value
    assert err.rule == rule
    assert err.message == message
    assert isinstance(err, DiagnosticError)
    assert rule in {v.rule for v in check(broken, kernel)}
