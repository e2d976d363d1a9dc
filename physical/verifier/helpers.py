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
be at most H // P on every sample launch. Such a join test also holds the block test `flat // BLOCK ==
helper_block`: the lanes it takes lie in the block the helper decodes by the test itself (`joins_outside_its_block`).
That it takes all of them (a balanced jagged scan's helpers join by the same tests, numbered part-major: part
`maximum(helper, 0) // C` for C chunks) is `unjoined_lanes`'s proof, on every sample launch with helpers and for every
instance of the domain: the rest of J implies the block test (the helper of a lane's part decodes the block that
holds the lane: `helper_block` is its owner's first block plus its part), and every instance's part is one of the
parts the helpers are numbered over (HELPER_SPAN covers the blocks a segment's columns span). So every chunk a lane
delegates is taken for it by exactly one helper.
"""

from __future__ import annotations

from dataclasses import dataclass

from kir.dims import DConst, Dim, PAnd, PCmp, Pred, dim_bin

from .. import ops as P
from ..launch_expr import DEVICE_SMS, LaunchExpr, LConst, LConstexpr
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
    """A ticket whose join test takes the lane whose instance is u (`flat == u`, u once per program) where that
    lane may lie outside the block the helper decoded (`owned_instances` with `helper_block`), with u and that
    block; None where every helper with an owner (u >= 0) is proven to hold its lane: `hb * BLOCK <= u <
    (hb + 1) * BLOCK`. A helper whose lane is not among its own would draw no ticket and write no slot, and the
    block's last participant would never come. A join test with the block test `flat // BLOCK == helper_block`
    (a helper per block of a segment whose columns span several) takes only lanes of its own block by the test
    itself; that it drops none of its part's is `unjoined_lanes`'s proof. A join test of neither form gives
    u = None: its lane is not proven."""
    from .affine import forms_of

    helpers, h = helper_values(ix, gid)
    owned = next((pl.op for pl in ix.group_ops(gid) if isinstance(pl.op, P.OwnedInstances)
                  and pl.op.helper_block is not None and pl.op.results), None)
    if h is None or not isinstance(owned, P.OwnedInstances) or owned.helper_block is None:
        return None
    flat = owned.results[0]
    forms = forms_of(ix, ix.groups[gid])
    hb, size = forms.form(owned.helper_block), forms.launch_dim(LConstexpr(owned.block))
    for pl in ix.group_ops(gid):
        if not isinstance(pl.op, P.Ticket):
            continue
        join = join_test(ix, pl.op.access.mask, helpers)
        if join is None:
            continue
        tests = [ix.producer(c) for c in ix.conjuncts(join)]
        if any(_in_block_test(ix, t, flat.id, owned) for t in tests):
            continue  # the join test itself takes only lanes x with x // BLOCK == the helper's block
        lanes = [b for t in tests if isinstance(t, P.Compare) and t.fn.value == "eq"
                 for a, b in ((t.lhs, t.rhs), (t.rhs, t.lhs))
                 if not b.type.lanes and strip_casts(ix, a)[0].id == flat.id]
        if not lanes:  # a lane chosen otherwise is not proven to be in the helper's block
            return pl.op, None, owned.helper_block
        for u in lanes:
            fu = forms.form(u)
            if fu is None or hb is None or forms.program_atom is None:
                return pl.op, u, owned.helper_block
            first = dim_bin("*", hb, size)
            hyps = forms.base_facts() + [PCmp(">=", forms.program_atom, DConst(0)), PCmp(">=", fu, DConst(0))]
            if not forms.prover.proves(hyps, PAnd((PCmp("<=", first, fu), PCmp("<", fu, dim_bin("+", first, size))))):
                return pl.op, u, owned.helper_block
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


# ---------------------------------------------------------------------------------------------- joins by part


@dataclass(frozen=True)
class PartJoin:
    """A join test J with the block test `flat // BLOCK == helper_block` and the part test `E == part` (E a
    function of the lane's instance: which block of its segment holds it; `part` which block of its chunk's
    owner the helper takes): a helper per chunk and block of a segment whose columns span several blocks."""

    join: PValue
    block_test: PValue
    lane_part: PValue
    helper_part: PValue
    # how the helpers m = maximum(helper, 0) are numbered: chunk-major (chunk m // P, part m - chunk * P: the
    # launch value P) or part-major (part m // C, chunk m - part * C: the launch value C)
    per_chunk: LaunchExpr | None
    chunks: LaunchExpr | None


def _helper_part(ix: ProgramIndex, v: PValue, helpers: set[int]) -> tuple[LaunchExpr | None, LaunchExpr | None]:
    """(P, None) where `v` is `m - (m // P) * P` (chunk-major), (None, C) where `v` is `m // C` (part-major), m
    the helper's position `maximum(helper, 0)` and P, C launch values; (None, None) where it is neither."""
    v, op = strip_casts(ix, v)
    if not isinstance(op, P.Binary):
        return None, None
    if op.fn.value == "floordiv" and _helper_chunk(ix, op.lhs, helpers) and \
            isinstance(size := strip_casts(ix, op.rhs)[1], P.ShapeValue):
        return None, size.expr
    if op.fn.value != "sub" or not _helper_chunk(ix, op.lhs, helpers):
        return None, None
    m = strip_casts(ix, op.lhs)[0]
    mul = strip_casts(ix, op.rhs)[1]
    if not (isinstance(mul, P.Binary) and mul.fn.value == "mul"):
        return None, None
    for a, b in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
        chunk, size = strip_casts(ix, a)[1], strip_casts(ix, b)[1]
        if isinstance(chunk, P.Binary) and chunk.fn.value == "floordiv" and isinstance(size, P.ShapeValue) and \
                strip_casts(ix, chunk.lhs)[0].id == m.id and \
                isinstance(q := strip_casts(ix, chunk.rhs)[1], P.ShapeValue) and q.expr == size.expr:
            return size.expr, None
    return None, None


def part_joins(ix: ProgramIndex, gid: int) -> list[PartJoin | PValue]:
    """The join tests of the group's helpers that take a lane in the block the helper decodes (an `and` with the
    block test as an operand): each with its part test, or the join test alone where it has no part test of a
    known form."""
    helpers, h = helper_values(ix, gid)
    owned = next((pl.op for pl in ix.group_ops(gid) if isinstance(pl.op, P.OwnedInstances)
                  and pl.op.helper_block is not None and pl.op.results), None)
    if h is None or not isinstance(owned, P.OwnedInstances):
        return []
    flat = owned.results[0].id
    out: list[PartJoin | PValue] = []
    for pl in ix.group_ops(gid):
        op = pl.op
        if not (isinstance(op, P.Binary) and op.fn.value == "and" and op.results):
            continue
        test = next((x for x in (op.lhs, op.rhs) if _in_block_test(ix, ix.producer(x), flat, owned)), None)
        if test is None:
            continue
        join = op.results[0]
        found: PartJoin | PValue = join
        for c in ix.conjuncts(join):
            cmp = ix.producer(c)
            if not (isinstance(cmp, P.Compare) and cmp.fn.value == "eq"):
                continue
            for lane, part in ((cmp.lhs, cmp.rhs), (cmp.rhs, cmp.lhs)):
                per_chunk, chunks = _helper_part(ix, part, helpers)
                if (per_chunk is not None or chunks is not None) and _per_instance(ix, lane):
                    found = PartJoin(join, test, lane, part, per_chunk, chunks)
                    break
            if isinstance(found, PartJoin):
                break
        out.append(found)
    return out


def unjoined_lanes(ix: ProgramIndex, gid: int) -> tuple[PartJoin | PValue, str] | None:
    """A join test by part whose lanes might be joined by no helper, with what is not proven; None where every one
    is proven to cover its lanes. On every sample launch with helpers (the launch values put in, so each query is
    linear), for every instance x of the domain (not only the lanes the helper holds):

    * the block test follows from the rest of J: a helper that takes a chunk for the lanes of its part in its
      owner's segment decodes the block that holds them (`helper_block` = the owner's first block + part), so the
      block test drops none of them;
    * x's part E lies in [0, parts), the parts the helpers are numbered over (P of the chunk-major numbering,
      H // C of the part-major one): each chunk has a helper for every block of its segment that holds a lane
      (HELPER_SPAN covers the blocks a segment's columns span).

    With the part test proving that at most one of a chunk's helpers joins a lane, each chunk a lane delegates is
    then taken for it by exactly one helper."""
    from .affine import forms_of

    found = part_joins(ix, gid)
    if not found:
        return None
    helpers, h = helper_values(ix, gid)
    assert h is not None
    forms = forms_of(ix, ix.groups[gid])
    owned = next(pl.op for pl in ix.group_ops(gid) if isinstance(pl.op, P.OwnedInstances)
                 and pl.op.helper_block is not None and pl.op.results)
    assert isinstance(owned, P.OwnedInstances) and owned.helper_block is not None
    # with the facts only such rules take: the lane's row-major decode, the quotients by launch values that may be 0
    facts = forms.instance_facts() + forms.function_facts()
    for join in found:
        if not isinstance(join, PartJoin):
            return join, "by no part test `E == part` of a known form"
        rest = [f for c in ix.conjuncts(join.join) if c.id != join.block_test.id
                and (f := forms.exact_fact(c)) is not None]
        block, part = forms.exact_fact(join.block_test), forms.form(join.lane_part)
        if block is None or part is None:
            return join, "by a block or part test with no affine form"
        seen: set[tuple] = set()
        for env in ix.envs:
            n = _part_count(join, env, h)
            if n is None:
                continue
            values = forms.on_launch(env)
            key = (n, tuple(sorted(values.items(), key=lambda x: x[0])))
            if key in seen:
                continue
            seen.add(key)
            where = launch_text(ix, env)
            if not forms.prover.proves(*_on_launch(facts + rest, block, values)):
                return join, (f"only in the block %{owned.helper_block.id} it decodes, which is not proven to hold the "
                              f"lanes of its part %{join.lane_part.id} in its owner's segment ({where})")
            inside = PAnd((PCmp(">=", part, DConst(0)), PCmp("<", part, DConst(n))))
            if not forms.prover.proves(*_on_launch(facts, inside, values)):
                return join, (f"as the helper of the lane's part %{join.lane_part.id}, which may lie outside [0, {n}), "
                              f"the parts a chunk has helpers for ({where})")
    return None


def _on_launch(facts: list[Pred], goal: Pred, values: dict[str, Dim]) -> tuple[list[Pred], Pred]:
    """The query of `goal` from `facts` on one launch: its launch values put in, with only the facts linked to the
    goal through symbols other than those (the launch values, constants there, no longer link facts)."""
    names = set(values)
    symbols = [f.symbols() - names for f in facts]
    near = set(goal.symbols()) - names
    taken = [False] * len(facts)
    grew = True
    while grew:
        grew = False
        for i, syms in enumerate(symbols):
            if not taken[i] and syms & near:
                taken[i], grew = True, True
                near |= syms
    return [f.substitute(values) for f, t in zip(facts, taken) if t], goal.substitute(values)


def _part_count(join: PartJoin, env: dict[str, int], h: str) -> int | None:
    """The parts a chunk's helpers take on the launch `env`: P (chunk-major), or H // C (part-major, H the
    helpers); None where the launch has no helpers or a count does not evaluate."""
    from .index import evaluate

    helpers = env.get(h)
    if not helpers:
        return None
    if join.per_chunk is not None:
        return evaluate(join.per_chunk, env)
    chunks = evaluate(join.chunks, env) if join.chunks is not None else None
    return helpers // chunks if chunks else None


def launch_text(ix: ProgramIndex, env: dict[str, int]) -> str:
    """A sample launch as a report names it: its shape symbols and the multiprocessors it is sized for."""
    bound = [f"{s}={env[s]}" for s in ix.program.symbols if s in env]
    return ", ".join(bound) + f" on {env.get(DEVICE_SMS, 0)} multiprocessors"


__all__ = ["PartJoin", "exact_last_count", "helper_values", "is_delegated_count", "is_helper_test", "join_test",
           "joins_outside_its_block", "launch_text", "part_joins", "strip_casts", "unjoined_lanes"]
