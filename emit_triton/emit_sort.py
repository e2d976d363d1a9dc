"""Sorts along one tile axis (`P.Sort`): a bitonic sort of (key, position, value bits) triples in registers.

The key is an integer whose order is the sort's: a float's bit pattern with the magnitude bits flipped for
negative values (so that signed integer order is float order), NaN mapped above every number and `-0.0` to
`0.0`; an integer is its own key. A descending sort complements the key (`~key` reverses every integer
order); positions break ties either way, so the sort is stable. Padding positions get the largest key and
come last. The helpers mirror Triton's `tl.sort`/`tl.topk` (the bitonic network on a `[2, ..., 2]`
hypercube, and the bitonic top-k that keeps the better half of each pair of sorted blocks), carrying the
three components through every compare-and-swap; `tl.sort` itself sorts one tensor by value only.
"""

from __future__ import annotations

from kir.dtypes import DType
from physical import ops as P

from .emit import REGISTER_DTYPE, Emitter, emits
from .emit_combine import from_last, to_last

SORT_HELPERS = '''@triton.jit
def _intent_sort_pairs(k, i, v, SPLIT: tl.constexpr):
    # the two halves of axis 2 of [rows, pairs, 2, width] views of the components: (first halves, second halves)
    k0, k1 = tl.split(tl.permute(tl.reshape(k, SPLIT), (0, 1, 3, 2)))
    i0, i1 = tl.split(tl.permute(tl.reshape(i, SPLIT), (0, 1, 3, 2)))
    v0, v1 = tl.split(tl.permute(tl.reshape(v, SPLIT), (0, 1, 3, 2)))
    # whether the second comes first: by key, then by position
    second = (k1 < k0) | ((k1 == k0) & (i1 < i0))
    return k0, k1, i0, i1, v0, v1, second


@triton.jit
def _intent_sort_swap(k, i, v, J: tl.constexpr, B: tl.constexpr, ALTERNATE: tl.constexpr):
    # compare-and-swap of the elements 2**J apart along the rows of [rows, N] components (positions that
    # differ in bit J only); with ALTERNATE, every other block of B (the odd ones) is ordered in reverse
    ROWS: tl.constexpr = k.shape[0]
    N: tl.constexpr = k.shape[1]
    k0, k1, i0, i1, v0, v1, swap = _intent_sort_pairs(k, i, v, [ROWS, N >> (J + 1), 2, 1 << J])
    if ALTERNATE:
        swap = swap != ((((tl.arange(0, N >> (J + 1)) << (J + 1)) // B) & 1) != 0)[:, None]
    k = tl.reshape(tl.permute(tl.join(tl.where(swap, k1, k0), tl.where(swap, k0, k1)), (0, 1, 3, 2)), [ROWS, N])
    i = tl.reshape(tl.permute(tl.join(tl.where(swap, i1, i0), tl.where(swap, i0, i1)), (0, 1, 3, 2)), [ROWS, N])
    v = tl.reshape(tl.permute(tl.join(tl.where(swap, v1, v0), tl.where(swap, v0, v1)), (0, 1, 3, 2)), [ROWS, N])
    return k, i, v


@triton.jit
def _intent_sort_merge(k, i, v, B: tl.constexpr, ALTERNATE: tl.constexpr):
    # the bitonic merge of the blocks of B (a power of two) along the rows: ascending, or alternating between
    # neighbours; compare-and-swap at distances B / 2, ..., 2, 1
    for jj in tl.static_range(31):
        if (1 << (30 - jj)) < B:
            k, i, v = _intent_sort_swap(k, i, v, 30 - jj, B, ALTERNATE)
    return k, i, v


@triton.jit
def _intent_sort(k, i, v, K: tl.constexpr):
    # the first K (a power of two) of the last axis in (key, position) order: the bitonic sort, or the
    # bitonic top-k (sort blocks of K, keep the earlier half of each pair of blocks, merge) for a smaller K
    shape: tl.constexpr = k.shape
    N: tl.constexpr = k.shape[len(k.shape) - 1]
    ROWS: tl.constexpr = k.numel // N
    k = tl.reshape(k, [ROWS, N])
    i = tl.reshape(i, [ROWS, N])
    v = tl.reshape(v, [ROWS, N])
    for s in tl.static_range(1, 31):
        if (1 << s) <= K:
            k, i, v = _intent_sort_merge(k, i, v, 1 << s, (1 << s) < N)
    for s in tl.static_range(1, 31):
        if (K << s) <= N:
            # blocks sorted in alternating order: the earlier of the elements at one offset of two neighbouring
            # blocks are the earlier half of the two, in bitonic order
            k0, k1, i0, i1, v0, v1, second = _intent_sort_pairs(k, i, v, [ROWS, N // (K << s), 2, K])
            k = tl.reshape(tl.where(second, k1, k0), [ROWS, N >> s])
            i = tl.reshape(tl.where(second, i1, i0), [ROWS, N >> s])
            v = tl.reshape(tl.where(second, v1, v0), [ROWS, N >> s])
            k, i, v = _intent_sort_merge(k, i, v, K, (K << s) < N)
    return tl.reshape(k, shape[:-1] + [K]), tl.reshape(i, shape[:-1] + [K]), tl.reshape(v, shape[:-1] + [K])
'''

_FLOAT_BITS = {"tl.float16": 16, "tl.float32": 32, "tl.float64": 64}


def _sort_helper(em: Emitter) -> str:
    if "library:sort" not in em.helper_keys:
        em.helper_keys["library:sort"] = "_intent_sort"
        em.helpers.append(SORT_HELPERS)
    return em.helper_keys["library:sort"]


@emits(P.Sort)
def emit_sort(em: Emitter, op: P.Sort) -> None:
    t = op.x.type
    lanes = int(t.lanes)
    axis, rank = op.axis + lanes, t.rank
    reg = REGISTER_DTYPE[t.dtype]
    x = em.fresh("sort_x")
    em.line(f"{x} = {em.full(op.x, t)}")
    key, bits = em.fresh("sort_key"), em.fresh("sort_bits")
    if t.dtype.is_float:
        w = _FLOAT_BITS[reg]
        top = (1 << (w - 1)) - 1
        em.line(f"{bits} = {x}.to(tl.int{w}, bitcast=True)")
        # negative floats: flip the magnitude bits, so that signed order is float order; NaN above everything
        em.line(f"{key} = {bits} ^ (({bits} >> {w - 1}) & {top})")
        em.line(f"{key} = tl.where({x} != {x}, {top}, tl.where({x} == 0, 0, {key}))")
    else:
        w = 8 if t.dtype is DType.i4 else t.dtype.bits
        top = (1 << (w - 1)) - 1 if t.dtype.is_signed else (1 << w) - 1
        em.line(f"{bits} = {x}")
        em.line(f"{key} = {x}")
    if op.descending:
        em.line(f"{key} = ~{key}")
    if op.member is not None:  # padding after every element
        em.line(f"{key} = tl.where({em.arg(op.member, t)}, {key}, {top})")
    block = t.tile[op.axis].block
    pos = em.fresh("sort_pos")
    index = ", ".join(":" if d == axis else "None" for d in range(rank))
    em.line(f"{pos} = tl.broadcast_to(tl.arange(0, {block})[{index}], {em.shape(t)}).to(tl.int32)")
    moved = to_last(em, [key, pos, bits], axis, rank)
    kept = op.results[0].type.tile[op.axis].block
    out = [em.fresh(n) for n in ("sorted_key", "sorted_pos", "sorted_bits")]
    em.line(f"{', '.join(out)} = {_sort_helper(em)}({', '.join(moved)}, {kept})")
    _, positions, values = from_last(em, out, axis, rank)
    v = em.define(op.results[0])
    em.line(f"{v} = {values}.to({reg}, bitcast=True)" if t.dtype.is_float else f"{v} = {values}")
    em.line(f"{em.define(op.results[1])} = {positions}.to(tl.int64)")
