"""Generated helpers that fold and scan tiles with any combine function, vectorised over the tile.

Triton's `tl.reduce` / `tl.associative_scan` with a user combine run one element at a time under the
interpreter, and a native reduction over a blocked layout combines elements out of their order, which a
combine that does not commute cannot allow. The helpers here use whole-tile steps only:

* `fold_last`: adjacent pairs level by level along the last axis (`tl.reshape` + `tl.split`), so every
  combine sees a left operand that precedes its right operand: the result is the in-order fold, grouped as
  a balanced tree (the oracle folds the same way);
* `scan_last`: the exclusive scan of the last axis by the even/odd recursion (pairs are combined, the
  pairs' exclusive scan is taken recursively, and the two halves are interleaved back with `tl.join`), for
  forward and reverse traversal; inclusive results combine the exclusive prefix with the element;
* `take_edge`: the last (or first) element of the last axis, without arithmetic.

Levels unroll over `tl.static_range` with a compile-time test on the tile's shape, so one helper serves
every block size; a block is a power of two, so halving always ends at one element.
"""

from __future__ import annotations

from .emit import Emitter

MAX_LEVELS = 20  # log2 of Triton's largest block (2**20 elements)


def _register(em: Emitter, key: str, name: str, text: str) -> str:
    if key in em.helper_keys:
        return em.helper_keys[key]
    em.helper_keys[key] = name
    em.helpers.append(text)
    return name


def _halved(x: str, rank: int) -> str:
    """The shape of `x` with its last axis cut into (half, 2)."""
    dims = [f"{x}.shape[{d}]" for d in range(rank - 1)] + [f"{x}.shape[{rank - 1}] // 2", "2"]
    return "(" + ", ".join(dims) + ")"


def _dropped(x: str, rank: int) -> str:
    """The shape of `x` without its last axis (of extent 1)."""
    dims = [f"{x}.shape[{d}]" for d in range(rank - 1)]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _call(fn: str, args: list[str], outs: list[str], like: list[str]) -> list[str]:
    """Lines calling combine `fn`; results broadcast to the operands' shape (a combine may yield a constant)."""
    if len(outs) == 1:
        return [f"{outs[0]} = tl.broadcast_to({fn}({', '.join(args)}), {like[0]}.shape)"]
    tmp = [f"{o}_c" for o in outs]
    return [f"{', '.join(tmp)} = {fn}({', '.join(args)})"] + \
        [f"{o} = tl.broadcast_to({t}, {w}.shape)" for o, t, w in zip(outs, tmp, like)]


def fold_last(em: Emitter, fn: str, k: int, rank: int) -> str:
    """A helper folding the last axis of `k` rank-`rank` tiles with `fn` in element order."""
    name = f"{fn}_fold{rank}"
    xs = [f"x{j}" for j in range(k)]
    ls, rs = [f"l{j}" for j in range(k)], [f"r{j}" for j in range(k)]
    body = [f"for _ in tl.static_range({MAX_LEVELS}):",
            f"    if x0.shape[{rank - 1}] > 1:"]
    for x, lo, hi in zip(xs, ls, rs):
        body.append(f"        {lo}, {hi} = tl.split(tl.reshape({x}, {_halved(x, rank)}))")
    body += ["        " + s for s in _call(fn, ls + rs, xs, ls)]
    outs = [f"tl.reshape({x}, {_dropped(x, rank)})" for x in xs]
    body.append(f"return {', '.join(outs)}")
    text = (f"@triton.jit\ndef {name}({', '.join(xs)}):\n"
            f"    # adjacent pairs level by level: each combine keeps its operands in element order\n"
            + "".join(f"    {line}\n" for line in body))
    return _register(em, f"fold:{fn}:{k}:{rank}", name, text)


def take_edge(em: Emitter, rank: int, last: bool) -> str:
    """A helper giving the last (or first) element along the last axis of one tile."""
    name = f"_take_{'last' if last else 'first'}{rank}"
    keep = "r" if last else "l"
    text = (f"@triton.jit\ndef {name}(x):\n"
            f"    for _ in tl.static_range({MAX_LEVELS}):\n"
            f"        if x.shape[{rank - 1}] > 1:\n"
            f"            l, r = tl.split(tl.reshape(x, {_halved('x', rank)}))\n"
            f"            x = {keep}\n"
            f"    return tl.reshape(x, {_dropped('x', rank)})\n")
    return _register(em, f"take:{rank}:{last}", name, text)


def scan_last(em: Emitter, fn: str, k: int, rank: int, reverse: bool) -> str:
    """A helper giving the exclusive scan of the last axis of `k` tiles (identities passed as scalars).

    Forward: out[j] = x[0] (+) ... (+) x[j-1]; reverse: out[j] = x[n-1] (+) ... (+) x[j+1] (the running
    prefix is always the combine's left operand)."""
    name = f"{fn}_{'r' if reverse else ''}scan{rank}"
    xs, ids = [f"x{j}" for j in range(k)], [f"i{j}" for j in range(k)]
    es, os_ = [f"e{j}" for j in range(k)], [f"o{j}" for j in range(k)]
    ps, ss, qs = [f"p{j}" for j in range(k)], [f"s{j}" for j in range(k)], [f"q{j}" for j in range(k)]
    body = [f"if x0.shape[{rank - 1}] == 1:",
            f"    return {', '.join(f'tl.full({x}.shape, {i}, {x}.dtype)' for x, i in zip(xs, ids))}"]
    for x, e, o in zip(xs, es, os_):
        body.append(f"{e}, {o} = tl.split(tl.reshape({x}, {_halved(x, rank)}))")
    # pairs in traversal order: (even, odd) forward, (odd, even) in reverse
    first, second = (os_, es) if reverse else (es, os_)
    body += _call(fn, first + second, ps, es)
    body.append(f"{', '.join(ss)} = {name}({', '.join(ps + ids)})")
    body += _call(fn, ss + first, qs, es)
    # the pair's first element takes the pairs' prefix, its second the prefix combined with the first
    for x, s, q in zip(xs, ss, qs):
        lo, hi = (q, s) if reverse else (s, q)
        body.append(f"{x} = tl.reshape(tl.join({lo}, {hi}), {x}.shape)")
    body.append(f"return {', '.join(xs)}")
    text = (f"@triton.jit\ndef {name}({', '.join(xs + ids)}):\n"
            f"    # even/odd recursion: whole-tile steps only, operands in traversal order\n"
            + "".join(f"    {line}\n" for line in body))
    return _register(em, f"scan:{fn}:{k}:{rank}:{reverse}", name, text)


def to_last(em: Emitter, names: list[str], axis: int, rank: int) -> list[str]:
    """Move `axis` of each value to the end (a permutation); returns the permuted names."""
    if axis == rank - 1:
        return names
    perm = [d for d in range(rank) if d != axis] + [axis]
    out = []
    for n in names:
        p = em.fresh(f"{n}_t")
        em.line(f"{p} = tl.permute({n}, ({', '.join(map(str, perm))},))")
        out.append(p)
    return out


def from_last(em: Emitter, names: list[str], axis: int, rank: int) -> list[str]:
    """Undo `to_last` (the last axis goes back to `axis`)."""
    if axis == rank - 1:
        return names
    perm = list(range(rank - 1))
    perm.insert(axis, rank - 1)
    out = []
    for n in names:
        p = em.fresh(f"{n}_b")
        em.line(f"{p} = tl.permute({n}, ({', '.join(map(str, perm))},))")
        out.append(p)
    return out


def unpack(names: list[str]) -> str:
    """Assignment targets for a helper's results (a single result is not a tuple)."""
    return ", ".join(names)


__all__ = ["fold_last", "take_edge", "scan_last", "to_last", "from_last", "unpack", "MAX_LEVELS"]
