"""Folding and scanning tiles with any combine region, in whole-tile steps and in element order.

Triton's `tl.reduce` / `tl.associative_scan` with a user combine run one element at a time under the
interpreter, and a native reduction over a blocked layout meets elements out of their order, which a
combine that does not commute cannot allow. What is generated here uses whole-tile steps only:

* `fold_inline`: adjacent pairs level by level along one axis (`tl.reshape` + `tl.split`), so every
  combine sees a left operand that precedes its right operand: the in-order fold, grouped as a balanced
  tree (the oracle folds the same way);
* `scan_inline`: the exclusive scan of the last axis by even/odd halving (pairs are combined level by
  level, then each level's prefixes are interleaved back with `tl.join`);
* `take_edge_inline`: the last (or first) element along the last axis, without arithmetic.

Levels unroll over `tl.static_range` with a compile-time test on the tile's shape, so one text serves
every block size (blocks are powers of two: halving always ends at one element). The combine region is
written out in place rather than called: under the interpreter every call of a `@triton.jit` function
costs milliseconds, which a combine inside a loop would pay on every level.
"""

from __future__ import annotations

from physical.model import PRegion

from .emit import Emitter

MAX_LEVELS = 20  # log2 of Triton's largest block (2**20 elements)


def _halved(x: str, rank: int) -> str:
    """The shape of `x` with its last axis cut into (half, 2)."""
    dims = [f"{x}.shape[{d}]" for d in range(rank - 1)] + [f"{x}.shape[{rank - 1}] // 2", "2"]
    return "(" + ", ".join(dims) + ")"


def _dropped(x: str, rank: int) -> str:
    """The shape of `x` without its last axis (of extent 1)."""
    dims = [f"{x}.shape[{d}]" for d in range(rank - 1)]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def unpack(names: list[str]) -> str:
    """Assignment targets for several results (a single result is not a tuple)."""
    return ", ".join(names)


def combine_inline(em: Emitter, combine: PRegion, lhs: list[str], rhs: list[str], like: list[str]) -> list[str]:
    """Write `combine(lhs..., rhs...)` in place; results are new names broadcast to the shapes of `like`."""
    ys = em.inline(combine, tuple(lhs + rhs))
    out = []
    for y, v, w in zip(ys, combine.yielded, like):
        n = em.fresh("combined")
        value = em.full(v, v.type) if v.id in em.literals else y
        em.line(f"{n} = tl.broadcast_to({value}, {w}.shape)")
        out.append(n)
    return out


def permute(em: Emitter, names: list[str], perm: list[int], suffix: str) -> list[str]:
    """Each value permuted by `perm` (the names as they are for the identity permutation)."""
    if perm == list(range(len(perm))):
        return list(names)
    out = []
    for n in names:
        p = em.fresh(f"{n}_{suffix}")
        em.line(f"{p} = tl.permute({n}, ({', '.join(map(str, perm))},))")
        out.append(p)
    return out


def to_last(em: Emitter, names: list[str], axis: int, rank: int) -> list[str]:
    """Move `axis` of each value to the end (a permutation); returns the permuted names."""
    return permute(em, names, [d for d in range(rank) if d != axis] + [axis], "t")


def from_last(em: Emitter, names: list[str], axis: int, rank: int) -> list[str]:
    """Undo `to_last` (the last axis goes back to `axis`)."""
    perm = list(range(rank - 1))
    perm.insert(axis, rank - 1)
    return permute(em, names, perm, "b")


def fold_inline(em: Emitter, combine: PRegion, cur: list[str], axis: int, rank: int, valid: str | None = None
                ) -> str | None:
    """Fold `axis` of the rank-`rank` values named `cur` with `combine`, in element order (names rebound).

    `valid` (a pred tile of the same shape, or None when every position is a member) marks the members:
    a pair combines only when both sides are members and otherwise keeps the member side, so padding
    never meets the combine (an identity need not be exactly neutral under IEEE arithmetic: inf and
    NaN). Returns the name of the folded validity (whether any member was folded), if `valid` was given.
    """
    moved = to_last(em, cur + ([valid] if valid else []), axis, rank)
    flag = None
    if valid is not None:
        flag = em.fresh("members")
        em.line(f"{flag} = {moved.pop()}")
    for c, m in zip(cur, moved):
        if c != m:
            em.line(f"{c} = {m}")
    em.line("# adjacent pairs level by level: each combine keeps its operands in element order")
    with em.block(f"for _ in tl.static_range({MAX_LEVELS})"), em.block(f"if {cur[0]}.shape[{rank - 1}] > 1"):
        lo, hi = [em.fresh("left") for _ in cur], [em.fresh("right") for _ in cur]
        for c, left, right in zip(cur, lo, hi):
            em.line(f"{left}, {right} = tl.split(tl.reshape({c}, {_halved(c, rank)}))")
        ys = combine_inline(em, combine, lo, hi, lo)
        if flag is None:
            for c, y in zip(cur, ys):
                em.line(f"{c} = {y}")
        else:
            fl, fr = em.fresh("left_member"), em.fresh("right_member")
            em.line(f"{fl}, {fr} = tl.split(tl.reshape({flag}, {_halved(flag, rank)}))")
            for c, y, left, right in zip(cur, ys, lo, hi):
                em.line(f"{c} = tl.where({fl} & {fr}, {y}, tl.where({fl}, {left}, {right}))")
            em.line(f"{flag} = {fl} | {fr}")
    for c in cur + ([flag] if flag else []):
        em.line(f"{c} = tl.reshape({c}, {_dropped(c, rank)})")
    return flag


def take_edge_inline(em: Emitter, x: str, rank: int, last: bool) -> str:
    """The last (or first) element along the last axis of `x`, as a new name."""
    out = em.fresh("last" if last else "first")
    em.line(f"{out} = {x}")
    with em.block(f"for _ in tl.static_range({MAX_LEVELS})"), em.block(f"if {out}.shape[{rank - 1}] > 1"):
        lo, hi = em.fresh("left"), em.fresh("right")
        em.line(f"{lo}, {hi} = tl.split(tl.reshape({out}, {_halved(out, rank)}))")
        em.line(f"{out} = {hi if last else lo}")
    em.line(f"{out} = tl.reshape({out}, {_dropped(out, rank)})")
    return out


def scan_inline(em: Emitter, combine: PRegion, xs: list[str], ids: list[str], rank: int, from_end: bool,
                prefix_right: bool) -> list[str]:
    """The exclusive scan of the last axis of the rank-`rank` values `xs` (new names); `ids` are the identities.

    The traversal runs from the first element (or from the last, `from_end`); the running prefix is the
    combine's left operand, or its right one with `prefix_right` (a reverse scan in index order:
    out[j] = x[j+1] (+) ... (+) x[n-1] (+) identity). Even/odd halving: the way down combines each pair
    (in traversal order) and keeps the pair's first elements; the way up gives a pair's first element the
    pairs' prefix and its second that prefix combined with the first."""
    cur = [em.fresh("pairs") for _ in xs]
    saved = [em.fresh("firsts") for _ in xs]
    for c, x, t in zip(cur, xs, saved):
        em.line(f"{c} = {x}")
        em.line(f"{t} = ()")

    def ordered(prefix: list[str], elem: list[str], like: list[str]) -> list[str]:
        lhs, rhs = (elem, prefix) if prefix_right else (prefix, elem)
        return combine_inline(em, combine, lhs, rhs, like)

    em.line("# exclusive scan by even/odd halving: whole-tile steps, operands in traversal order")
    with em.block(f"for _ in tl.static_range({MAX_LEVELS})"), em.block(f"if {cur[0]}.shape[{rank - 1}] > 1"):
        es, os_ = [em.fresh("even") for _ in xs], [em.fresh("odd") for _ in xs]
        for c, e, o in zip(cur, es, os_):
            em.line(f"{e}, {o} = tl.split(tl.reshape({c}, {_halved(c, rank)}))")
        first, second = (os_, es) if from_end else (es, os_)  # a pair's elements in traversal order
        for t, f in zip(saved, first):
            em.line(f"{t} = {t} + ({f},)")
        em.line(f"{unpack(cur)} = {unpack(ordered(first, second, es))}")
    out = [em.fresh("prefix") for _ in xs]
    for o, c, i in zip(out, cur, ids):
        em.line(f"{o} = tl.full({c}.shape, {i}, {c}.dtype)")
    lvl = em.fresh("level")
    with em.block(f"for {lvl} in tl.static_range({MAX_LEVELS})"), em.block(f"if {lvl} < len({saved[0]})"):
        fs = [em.fresh("first") for _ in xs]
        for f, t in zip(fs, saved):
            em.line(f"{f} = {t}[len({t}) - 1 - {lvl}]")
        qs = ordered(out, fs, fs)
        for o, q, f in zip(out, qs, fs):
            lo, hi = (q, o) if from_end else (o, q)
            grown = [f"{f}.shape[{d}]" for d in range(rank - 1)] + [f"{f}.shape[{rank - 1}] * 2"]
            em.line(f"{o} = tl.reshape(tl.join({lo}, {hi}), ({', '.join(grown)},))")
    return out


__all__ = ["fold_inline", "take_edge_inline", "scan_inline", "combine_inline", "to_last", "from_last", "unpack",
           "MAX_LEVELS"]
