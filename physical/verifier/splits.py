"""Groups whose programs share blocks of instances (`owned_instances` with splits, `split_index`).

* split-effects: S programs run the body of each block (in the form of the body that splits it), so every
  effect outside the group's invocation workspace (a store, a scatter, an atomic, a region scan's writes)
  happens once per instance only if it is made by one of them: the holder of the last ticket (drawn before
  the effect), which alone sees every program's partial. Any other program would write its own incomplete
  result (or apply an atomic S times). A region scan's writes over the program's own piece are its own: the
  scan's bounds, or for the tile of its piece a program holds, the store's positions along the tile and a bound of
  its mask, are computed from the split index (its coordinates without a tile are the instance's point). A split
  row scan's store of its chunk (`split_rows`) writes its own chunk: a coordinate is `chunk * B + tile_index` with a
  tile of block B and `chunk` the split index (or the last chunk minus it), so the programs of a row write disjoint
  runs of B positions. Where the data balances a region scan, the helper index cuts the scanned tensor into the
  helpers' chunks as the split index cuts pieces. Where it also balances region folds beside the scans
  (passes/balance_scan_folds.py), a store of their results is made once per instance by its *completing* program:
  its mask holds `select(helper >= 0, L, K)` with K holding `not D` and L holding D and `k == c`, where D (the
  lane's delegation test) and c are values of the lane alone (no helper index in them) and k is the helper's chunk
  (`maximum(helper, 0)`, or `maximum((H - 1) - maximum(helper, 0), 0)` for a scan from the end: distinct helpers,
  distinct chunks). A block stores only a subregion it keeps (no helper joins it), a helper only one that is
  handed over, and of the helpers only the one whose chunk is c.
"""

from __future__ import annotations

from kir.core import Kernel
from kir.pointwise import BinaryFn

from .. import ops as P
from ..launch_expr import LConstexpr
from ..model import Access, BufferScope, Program, PValue
from .base import Reporter, describe, rule
from .helpers import helper_values, is_helper_test, strip_casts
from .index import AccessSite, ProgramIndex, index_of
from .workspace import _last_conjunct, _split_values


@rule("split-effects")
def check_split_effects(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """a group split over several programs per block writes outside its workspace only as the holder of the last ticket:
    each instance's effects happen once"""
    ix = index_of(program)
    splits_of = _split_values(ix)
    # the form of a group's body that splits its blocks (the other form of a looped group runs unsplit)
    form_splits = {id(pl.form): pl.op.splits for pl in ix.placed if isinstance(pl.op, P.SplitIndex)}
    tickets: dict[int, list[tuple[int, P.Ticket]]] = {}
    for pl in ix.placed:
        if isinstance(pl.op, P.Ticket):
            tickets.setdefault(id(pl.form), []).append((pl.order, pl.op))
    for site in ix.accesses:
        gid, form = site.placed.group, id(site.placed.form)
        if form not in form_splits or site.kind is Access.READ:
            continue
        b = ix.buffers.get(site.access.buffer)
        if b is None or b.scope is BufferScope.INVOCATION_WORKSPACE:
            continue
        earlier = [t for order, t in tickets.get(form, []) if order < site.placed.order]
        if _scans_own_piece(ix, site, splits_of) or _writes_own_chunk(ix, site, splits_of) \
                or _completes_by_data(ix, site):
            continue
        if _last_conjunct(ix, site.access.mask, earlier, form_splits[form]) is None:
            report(f"{describe(program, site.op)} writes {b.name} in every program that shares its block: a group "
                   f"split over programs writes outside its workspace only as the holder of the last ticket",
                   site.op, gid)


def _scans_own_piece(ix: ProgramIndex, site: AccessSite, splits_of: dict[int, tuple[int, str]]) -> bool:
    """Whether the write is a region scan's, over a piece of its subregion cut by the program's split index (the
    pieces of the split programs partition the subregion: each writes its own), or the store of the tile of its
    piece a program holds (its positions and a bound of its mask come from the piece)."""
    scan = next((p for p in reversed(ix.place[id(site.op)].parents) if isinstance(p, P.RegionScan)), None)
    splits = {v for v, (g, _) in splits_of.items() if g == site.placed.group}
    # a helper's range is its chunk of the scanned tensor (balanced region scans): cut by its helper index
    splits |= helper_values(ix, site.placed.group)[0]
    if scan is not None:
        return all(_depends_on(ix, v, splits) for v in (scan.begin, scan.end))
    if not isinstance(site.op, P.Store):
        return False
    tests = [ix.producer(c) for c in ix.conjuncts(site.access.mask)]
    bounded = any(isinstance(t, P.Compare) and _depends_on(ix, t.rhs, splits) for t in tests)
    # the positions along the tile come from the piece; a coordinate without a tile is the instance's own point
    # (a column of a jagged tensor's segment), the same in every program of the block
    along = [c for c in site.access.coords if c.type.tile]
    return bounded and bool(along) and all(_depends_on(ix, c, splits) for c in along)


def _completes_by_data(ix: ProgramIndex, site: AccessSite) -> bool:
    """Whether the write's mask holds `select(helper >= 0, L, K)`: K holds `not D`, L holds D and `k == c` (k the
    helper's chunk; D and c free of the helper index), so one program per instance makes it (see the module)."""
    helpers, h = helper_values(ix, site.placed.group)
    if h is None:
        return False
    for c in ix.conjuncts(site.access.mask):
        sel = ix.producer(c)
        if not (isinstance(sel, P.Select) and is_helper_test(ix, sel.cond, helpers)):
            continue
        kept = [x for k in ix.conjuncts(sel.on_false) if (x := _negated(ix, k)) is not None
                and not _uses(ix, x, helpers)]
        handed = [x for x in kept if ix.is_conjunct(sel.on_true, x)]
        if handed and any(_one_chunk(ix, t, helpers, h) for t in ix.conjuncts(sel.on_true)):
            return True
    return False


def _negated(ix: ProgramIndex, v: PValue) -> PValue | None:
    """X where `v` is `X == False` or `not X`."""
    op = ix.producer(v)
    if isinstance(op, P.Compare) and op.fn.value == "eq":
        rhs = ix.producer(op.rhs)
        if isinstance(rhs, P.Const) and rhs.value is False:
            return op.lhs
    if isinstance(op, P.Unary) and op.fn.value == "not":
        return op.x
    return None


def _one_chunk(ix: ProgramIndex, test: PValue, helpers: set[int], h: str) -> bool:
    """Whether `test` is `k == c` (either way round): k the helper's chunk, c free of the helper index."""
    op = ix.producer(test)
    if not (isinstance(op, P.Compare) and op.fn.value == "eq"):
        return False
    return any(_helper_chunk(ix, k, helpers, h) and not _uses(ix, other, helpers)
               for k, other in ((op.lhs, op.rhs), (op.rhs, op.lhs)))


def _uses(ix: ProgramIndex, v: PValue, ids: set[int]) -> bool:
    """Whether `v` may be computed from one of `ids` other than through the lane's instance: through the operands
    of the ops that make it, an `if`'s result through its condition and the values both branches yield at its
    position, the result of any other op with regions through every value its regions use (no value of `ids`
    passes unseen). `owned_instances` gives the lane's instance, the same in every program that holds the lane
    (a helper decodes the block it joined): what is computed from it alone is a value of the lane. A program's
    split or helper index, a ticket, a look-back fold, an atomic or a workspace read is taken as using `ids`."""
    seen: set[int] = set()
    pending = [v]
    while pending:
        x = pending.pop()
        if x.id in ids:
            return True
        if x.id in seen:
            continue
        seen.add(x.id)
        op = ix.producer(x)
        if op is None or isinstance(op, P.OwnedInstances):
            continue
        if isinstance(op, P.SplitIndex | P.HelperIndex | P.Ticket | P.FoldSlots | P.AtomicRMW | P.AtomicCAS) or (
                isinstance(op, P.Load) and (b := ix.buffers.get(op.access.buffer)) is not None
                and b.scope is BufferScope.INVOCATION_WORKSPACE):
            return True  # a value of the program (or of timing), not of the lane
        if isinstance(op, P.If):
            at = [r.id for r in op.results].index(x.id)
            pending += [op.cond, op.then_.yielded[at], op.else_.yielded[at]]
            continue
        pending += list(op.operands())
        for region in op.regions():
            for inner in region.walk():
                pending += list(inner.operands())
    return False


def _helper_chunk(ix: ProgramIndex, v: PValue, helpers: set[int], h: str) -> bool:
    """`v` is `maximum(helper, 0)` (the helper's position) or `maximum((H - 1) - maximum(helper, 0), 0)` (the
    chunks from the last one down, H the helpers constexpr `h`): distinct helpers 0 .. H - 1 take distinct chunks."""
    v, op = strip_casts(ix, v)
    if not (isinstance(op, P.Binary) and op.fn.value == "maximum"):
        return False
    for a, b in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
        zero = strip_casts(ix, b)[1]
        if not (isinstance(zero, P.Const) and zero.value == 0):
            continue
        a, inner = strip_casts(ix, a)
        if a.id in helpers:
            return True
        if isinstance(inner, P.Binary) and inner.fn.value == "sub" and _helper_chunk(ix, inner.rhs, helpers, h) \
                and _last_helper(ix, inner.lhs, h):
            return True
    return False


def _last_helper(ix: ProgramIndex, v: PValue, h: str) -> bool:
    """`v` is `H - 1`, H the group's helpers constexpr `h` (as its `helper_index` names it)."""
    op = strip_casts(ix, v)[1]
    if not (isinstance(op, P.Binary) and op.fn.value == "sub"):
        return False
    count, one = strip_casts(ix, op.lhs)[1], strip_casts(ix, op.rhs)[1]
    return isinstance(count, P.ShapeValue) and isinstance(one, P.Const) and one.value == 1 and \
        count.expr == LConstexpr(h)


def _writes_own_chunk(ix: ProgramIndex, site: AccessSite, splits_of: dict[int, tuple[int, str]]) -> bool:
    """Whether a store's coordinate along some axis is `chunk * B + tile_index(B)` with `chunk` the program's split
    index `s` or `c - s` for a uniform `c`: the programs of a block write disjoint runs of B positions."""
    if not isinstance(site.op, P.Store):
        return False
    splits = {v for v, (g, _) in splits_of.items() if g == site.placed.group}
    for c in site.access.coords:
        add = ix.producer(c)
        if not isinstance(add, P.Binary) or add.fn is not BinaryFn.add:
            continue
        for start, pos in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
            index, mul = ix.producer(pos), ix.producer(start)
            if not isinstance(index, P.TileIndex) or not isinstance(mul, P.Binary) or mul.fn is not BinaryFn.mul \
                    or len(pos.type.tile) != 1:
                continue
            block = pos.type.tile[0].block
            for chunk, size in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
                b = ix.producer(size)
                if isinstance(b, P.ShapeValue) and b.expr == LConstexpr(block) and _split_chunk(ix, chunk, splits):
                    return True
    return False


def _split_chunk(ix: ProgramIndex, v: PValue, splits: set[int]) -> bool:
    """`v` is a split index, or a uniform value minus one (distinct split indices give distinct chunks)."""
    if v.id in splits:
        return True
    sub = ix.producer(v)
    return isinstance(sub, P.Binary) and sub.fn is BinaryFn.sub and sub.rhs.id in splits and \
        not sub.lhs.type.lanes and not sub.lhs.type.tile


def _depends_on(ix: ProgramIndex, v: PValue, ids: set[int]) -> bool:
    seen: set[int] = set()
    pending = [v]
    while pending:
        x = pending.pop()
        if x.id in ids:
            return True
        if x.id in seen:
            continue
        seen.add(x.id)
        op = ix.producer(x)
        if op is not None and not op.regions():
            pending += list(op.operands())
    return False


__all__ = ["check_split_effects"]
