"""Who takes part in a block of a group with helper programs past its blocks (balanced segments).

A lane's participants are the S = `splits` programs that share its block and the helpers that join it. A helper
(`helper_index` >= 0) draws the lane's ticket only under its *join test*: the ticket's mask holds
`helper < 0 or J`, and J states the lane's delegation test D and `lo <= k < hi` for the helper's chunk k (its
`helper_index`, clamped at 0). So exactly `hi - lo` helpers join a lane that delegates (k ranges over the helpers
0 .. H - 1, and `0 <= lo`, `hi <= H`), none otherwise, and the last participant draws ticket
`S - 1 + select(D, maximum(hi - lo, 0), 0)`: the rule workspace-protocol takes nothing else for the last
holder's test (`exact_last_count`).

Where P helpers share a chunk (a jagged fold whose segments' columns span several blocks: a helper per block),
k is `maximum(helper, 0) // P` and J must hold the part test `E == maximum(helper, 0) - k * P` with E a function of
the lane's instance alone: of the P helpers of chunk k (parts 0 .. P - 1) at most one joins a lane, and `hi` must
be at most H // P on every sample launch. Such a join test also holds `flat // BLOCK == helper_block`: the lanes it
takes lie in the block the helper decodes by the test itself (`joins_outside_its_block`).
"""

from __future__ import annotations

from kir.dims import DConst, Dim, PAnd, PCmp, dim_bin

from .. import ops as P
from ..launch_expr import LaunchExpr, LConst, LConstexpr
from ..model import POp, PValue
from .index import ProgramIndex


def strip_casts(ix: ProgramIndex, v: PValue) -> tuple[PValue, POp | None]:
    """`v` with the casts that produce it removed, and the op that produces what is left."""
    op = ix.producer(v)
    while isinstance(op, P.Cast):
        v = op.x
        op = ix.producer(v)
    return v, op


def helper_values(ix: ProgramIndex, gid: int) -> tuple[set[int], str | None]:
    """The ids of the group's `helper_index` results and its helpers constexpr H."""
    found = [pl.op for pl in ix.group_ops(gid) if isinstance(pl.op, P.HelperIndex) and pl.op.results]
    return {op.results[0].id for op in found}, found[0].helpers if found else None  # type: ignore[attr-defined]


def _is_const(ix: ProgramIndex, v: PValue, value: object) -> bool:
    op = strip_casts(ix, v)[1]
    return isinstance(op, P.Const) and op.value == value and type(op.value) is type(value)


def is_helper_test(ix: ProgramIndex, v: PValue, helpers: set[int]) -> bool:
    """Whether `v` is `helper >= 0` (the program is a helper)."""
    op = ix.producer(v)
    return isinstance(op, P.Compare) and op.fn.value == "ge" and strip_casts(ix, op.lhs)[0].id in helpers \
        and _is_const(ix, op.rhs, 0)


def _is_block_program_test(ix: ProgramIndex, v: PValue, helpers: set[int]) -> bool:
    """Whether `v` is `not (helper >= 0)`: `(helper >= 0) == False`, `not`, or `helper < 0`."""
    op = ix.producer(v)
    if isinstance(op, P.Compare) and op.fn.value == "eq" and _is_const(ix, op.rhs, False):
        return is_helper_test(ix, op.lhs, helpers)
    if isinstance(op, P.Unary) and op.fn.value == "not":
        return is_helper_test(ix, op.x, helpers)
    return isinstance(op, P.Compare) and op.fn.value == "lt" and strip_casts(ix, op.lhs)[0].id in helpers \
        and _is_const(ix, op.rhs, 0)


def join_test(ix: ProgramIndex, mask: PValue | None, helpers: set[int]) -> PValue | None:
    """J of a ticket mask with the conjunct `helper < 0 or J` (who of the helpers draws the lane's ticket)."""
    for c in ix.conjuncts(mask):
        op = ix.producer(c)
        if isinstance(op, P.Binary) and op.fn.value == "or":
            for a, b in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
                if _is_block_program_test(ix, a, helpers):
                    return b
    return None


def _helper_chunk(ix: ProgramIndex, v: PValue, helpers: set[int]) -> bool:
    """Whether `v` is the helper's chunk k: its `helper_index`, or that clamped at 0 (`maximum(helper, 0)`)."""
    v, op = strip_casts(ix, v)
    if v.id in helpers:
        return True
    return isinstance(op, P.Binary) and op.fn.value == "maximum" and any(
        strip_casts(ix, a)[0].id in helpers and _is_const(ix, b, 0) for a, b in ((op.lhs, op.rhs), (op.rhs, op.lhs)))


def _shared_chunk(ix: ProgramIndex, v: PValue, helpers: set[int], join: PValue) -> LaunchExpr | None:
    """P where `v` is chunk k = m // P of the helpers m = maximum(helper, 0) (P a launch value: P helpers a chunk,
    one per block of a segment whose columns span several) and J holds the *part test* `E == m - k * P`, E a
    function of the lane's instance alone: of a chunk's P helpers (parts 0 .. P - 1) at most one joins a lane."""
    v, op = strip_casts(ix, v)
    if not (isinstance(op, P.Binary) and op.fn.value == "floordiv" and _helper_chunk(ix, op.lhs, helpers)):
        return None
    m, size = strip_casts(ix, op.lhs)[0], strip_casts(ix, op.rhs)[1]
    if not isinstance(size, P.ShapeValue):
        return None
    for c in ix.conjuncts(join):
        test = ix.producer(c)
        if not (isinstance(test, P.Compare) and test.fn.value == "eq"):
            continue
        for part, other in ((test.lhs, test.rhs), (test.rhs, test.lhs)):
            sub = strip_casts(ix, part)[1]
            if not (isinstance(sub, P.Binary) and sub.fn.value == "sub" and strip_casts(ix, sub.lhs)[0].id == m.id):
                continue
            mul = strip_casts(ix, sub.rhs)[1]
            if isinstance(mul, P.Binary) and mul.fn.value == "mul" and any(
                    strip_casts(ix, a)[0].id == v.id and isinstance(q := strip_casts(ix, b)[1], P.ShapeValue)
                    and q.expr == size.expr for a, b in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs))) \
                    and _per_instance(ix, other):
                return size.expr
    return None


def _per_instance(ix: ProgramIndex, v: PValue, depth: int = 0) -> bool:
    """Whether `v` is a function of the lane's instance (`owned_instances`), constants and launch values only."""
    v, op = strip_casts(ix, v)
    if depth > 12 or op is None:
        return False
    if isinstance(op, P.OwnedInstances | P.Const | P.ShapeValue):
        return True
    return isinstance(op, P.Binary) and _per_instance(ix, op.lhs, depth + 1) and _per_instance(ix, op.rhs, depth + 1)


def _chunk_bounds(ix: ProgramIndex, join: PValue, helpers: set[int]) -> list[tuple[PValue, PValue, LaunchExpr]]:
    """Each (lo, hi, P) with `lo <= k` and `k < hi` among the conjuncts of J, k the helper's chunk: its position
    among the helpers (P = 1), or that divided by the P helpers that share a chunk (`_shared_chunk`)."""
    lows, highs = [], []

    def chunk(v: PValue) -> LaunchExpr | None:
        return _ONE if _helper_chunk(ix, v, helpers) else _shared_chunk(ix, v, helpers, join)

    for c in ix.conjuncts(join):
        op = ix.producer(c)
        if not isinstance(op, P.Compare):
            continue
        fn = op.fn.value
        if fn in ("le", "ge") and (p := chunk(op.rhs if fn == "le" else op.lhs)) is not None:
            lows.append((op.lhs if fn == "le" else op.rhs, p))
        if fn in ("lt", "gt") and (p := chunk(op.lhs if fn == "lt" else op.rhs)) is not None:
            highs.append((op.rhs if fn == "lt" else op.lhs, p))
    return [(lo, hi, p) for lo, p in lows for hi, q in highs if p == q]


_ONE = LConst(1)


def _at_most_helpers(ix: ProgramIndex, v: PValue, h: str, per_chunk: LaunchExpr = _ONE) -> bool:
    """Whether `v` is at most the chunks H // `per_chunk` (H where each helper takes a chunk of its own): that count
    (H itself, or a launch value at most H // `per_chunk` on every sample launch), or a `minimum` with it."""
    v, op = strip_casts(ix, v)
    if isinstance(op, P.ShapeValue):
        if op.expr == LConstexpr(h) and per_chunk == _ONE:
            return True
        got, total, size = ix.values(op.expr), ix.values(LConstexpr(h)), ix.values(per_chunk)
        return bool(got) and all(x is not None and t is not None and p is not None and p > 0 and x <= t // p
                                 for x, t, p in zip(got, total, size))
    return isinstance(op, P.Binary) and op.fn.value == "minimum" and (
        _at_most_helpers(ix, op.lhs, h, per_chunk) or _at_most_helpers(ix, op.rhs, h, per_chunk))


def _nonneg(ix: ProgramIndex, v: PValue, depth: int = 0) -> bool:
    """Whether `v` is never negative by its construction: non-negative constants and launch values (on every sample
    launch), a launch value less a constant it exceeds, and sums, products, quotients and maxima of such."""
    v, op = strip_casts(ix, v)
    if depth > 8 or op is None:
        return False
    if isinstance(op, P.Const):
        return isinstance(op.value, int) and not isinstance(op.value, bool) and op.value >= 0
    if isinstance(op, P.ShapeValue):
        return _at_least(ix, op, 0)
    if not isinstance(op, P.Binary):
        return False
    fn = op.fn.value
    if fn == "maximum":
        return _nonneg(ix, op.lhs, depth + 1) or _nonneg(ix, op.rhs, depth + 1)
    if fn in ("add", "mul", "floordiv", "minimum"):
        return _nonneg(ix, op.lhs, depth + 1) and _nonneg(ix, op.rhs, depth + 1)
    if fn == "sub":
        lhs, rhs = strip_casts(ix, op.lhs)[1], strip_casts(ix, op.rhs)[1]
        return isinstance(lhs, P.ShapeValue) and isinstance(rhs, P.Const) and isinstance(rhs.value, int) and \
            _at_least(ix, lhs, rhs.value)
    return False


def _at_least(ix: ProgramIndex, op: P.ShapeValue, bound: int) -> bool:
    values = ix.values(op.expr)
    return bool(values) and all(x is not None and x >= bound for x in values)


def is_delegated_count(ix: ProgramIndex, term: PValue, join: PValue, helpers: set[int], h: str) -> bool:
    """Whether `term` is the number of helpers that J admits for the lane: `select(D, maximum(hi - lo, 0), 0)` with
    D, `lo <= k` and `k < hi` conjuncts of J, `lo` never negative and `hi` at most H."""
    op = strip_casts(ix, term)[1]
    if not isinstance(op, P.Select) or not _is_const(ix, op.on_false, 0) or not ix.is_conjunct(join, op.cond):
        return False
    count = strip_casts(ix, op.on_true)[1]
    if not (isinstance(count, P.Binary) and count.fn.value == "maximum"):
        return False
    diff = next((strip_casts(ix, a)[1] for a, b in ((count.lhs, count.rhs), (count.rhs, count.lhs))
                 if _is_const(ix, b, 0)), None)
    if not (isinstance(diff, P.Binary) and diff.fn.value == "sub"):
        return False
    return any(diff.lhs.id == hi.id and diff.rhs.id == lo.id and _nonneg(ix, lo)
               and _at_most_helpers(ix, hi, h, per_chunk) for lo, hi, per_chunk in _chunk_bounds(ix, join, helpers))


def exact_last_count(ix: ProgramIndex, other: PValue, ticket: P.Ticket, gid: int) -> PValue | None:
    """For the test `ticket == other` in a group with helpers: the launch value S - 1 that `other` adds the lane's
    delegated chunks to (None where `other` is anything else, or the ticket's mask has no join test)."""
    helpers, h = helper_values(ix, gid)
    if h is None:
        return None
    join = join_test(ix, ticket.access.mask, helpers)
    op = strip_casts(ix, other)[1]
    if join is None or not (isinstance(op, P.Binary) and op.fn.value == "add"):
        return None
    for a, b in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
        if isinstance(strip_casts(ix, a)[1], P.ShapeValue) and is_delegated_count(ix, b, join, helpers, h):
            return strip_casts(ix, a)[0]
    return None


def joins_outside_its_block(ix: ProgramIndex, gid: int) -> tuple[P.Ticket, PValue | None, PValue] | None:
    """A ticket whose join test takes the lane whose instance is u (`flat == u`, u once per program), or the lanes
    whose segment is u (`flat // D == u`: a (segments, columns) workset), where one of them may lie outside the
    block the helper decoded (`owned_instances` with `helper_block`), with u and that block; None where every
    helper with an owner (u >= 0) is proven to hold its lanes: `hb * BLOCK <= x < (hb + 1) * BLOCK` for every
    instance x the join test admits (for `flat // D == u`, an instance x of the segment with the join's other
    tests on x). A helper whose lane is not among its own would draw no ticket and write no slot, and the block's
    last participant would never come. A join test of neither form gives u = None: its lane is not proven."""
    from .affine import forms_of, proves

    helpers, h = helper_values(ix, gid)
    owned = next((pl.op for pl in ix.group_ops(gid) if isinstance(pl.op, P.OwnedInstances)
                  and pl.op.helper_block is not None and pl.op.results), None)
    if h is None or not isinstance(owned, P.OwnedInstances) or owned.helper_block is None:
        return None
    flat = owned.results[0]
    forms = forms_of(ix, ix.groups[gid])
    forms.form(flat)
    hb, size = forms.form(owned.helper_block), forms.launch_dim(LConstexpr(owned.block))
    for pl in ix.group_ops(gid):
        if not isinstance(pl.op, P.Ticket):
            continue
        join = join_test(ix, pl.op.access.mask, helpers)
        tests = [ix.producer(c) for c in ix.conjuncts(join)] if join is not None else []
        if any(_in_block_test(ix, t, flat.id, owned) for t in tests):
            continue  # the join test itself takes only lanes x with x // BLOCK == the helper's block
        placed = False
        for test in tests:
            if not (isinstance(test, P.Compare) and test.fn.value == "eq"):
                continue
            u, segment = None, False
            for a, b in ((test.lhs, test.rhs), (test.rhs, test.lhs)):
                if b.type.lanes:
                    continue
                if strip_casts(ix, a)[0].id == flat.id:
                    u = b
                elif _segment_of(ix, a, flat.id):
                    u, segment = b, True
                if u is not None:
                    break
            if u is None:
                continue
            placed = True
            fu = forms.form(u)
            if fu is None or hb is None or forms.program_atom is None:
                return pl.op, u, owned.helper_block
            first = dim_bin("*", hb, size)
            extra = [PCmp(">=", forms.program_atom, DConst(0)), PCmp(">=", fu, DConst(0))]
            x: Dim = fu
            if segment:
                # an instance x = u * D + c (0 <= c < D) of the segment, with the join's tests on values once per
                # program (such as: the segment lies in one block)
                width = forms.form(_divisor(ix, test.lhs if _segment_of(ix, test.lhs, flat.id) else test.rhs))
                if width is None:
                    return pl.op, u, owned.helper_block
                c = forms.atom("column")
                x = dim_bin("+", dim_bin("*", fu, width), c)
                extra += [PCmp(">=", c, DConst(0)), PCmp("<", c, width)]
                for other in tests:
                    if isinstance(other, P.Compare) and other.fn.value == "eq" and not other.lhs.type.lanes \
                            and not other.rhs.type.lanes:
                        lhs, rhs = forms.form(other.lhs), forms.form(other.rhs)
                        if lhs is not None and rhs is not None:
                            extra.append(PCmp("==", lhs, rhs))
            hyps = forms.base_facts() + extra  # after every form above: their facts with them
            if not proves(hyps, PAnd((PCmp("<=", first, x), PCmp("<", x, dim_bin("+", first, size))))):
                return pl.op, u, owned.helper_block
        if join is not None and not placed:  # a lane chosen otherwise is not proven to be in the helper's block
            return pl.op, None, owned.helper_block
    return None


def _in_block_test(ix: ProgramIndex, test: POp | None, flat: int, owned: P.OwnedInstances) -> bool:
    """Whether `test` is `flat // BLOCK == helper_block` (either way round; BLOCK the owned block's constexpr): a
    join test with it takes only the lanes of the block the helper decodes (a helper per block of a segment whose
    columns span several blocks)."""
    if not (isinstance(test, P.Compare) and test.fn.value == "eq") or owned.helper_block is None:
        return False
    for a, b in ((test.lhs, test.rhs), (test.rhs, test.lhs)):
        if strip_casts(ix, b)[0].id != owned.helper_block.id:
            continue
        op = strip_casts(ix, a)[1]
        if isinstance(op, P.Binary) and op.fn.value == "floordiv" and strip_casts(ix, op.lhs)[0].id == flat:
            size = strip_casts(ix, op.rhs)[1]
            if isinstance(size, P.ShapeValue) and size.expr == LConstexpr(owned.block):
                return True
    return False


def _divisor(ix: ProgramIndex, v: PValue) -> PValue:
    op = strip_casts(ix, v)[1]
    assert isinstance(op, P.Binary)
    return op.rhs


def _segment_of(ix: ProgramIndex, v: PValue, flat: int) -> bool:
    """Whether `v` is `flat // D` (the segment of a (segments, columns) workset's instance)."""
    op = strip_casts(ix, v)[1]
    return isinstance(op, P.Binary) and op.fn.value == "floordiv" and strip_casts(ix, op.lhs)[0].id == flat


__all__ = ["exact_last_count", "helper_values", "is_delegated_count", "is_helper_test", "join_test",
           "joins_outside_its_block", "strip_casts"]
