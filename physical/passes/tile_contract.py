"""Tiled contractions: a program owns a BLOCK_M x BLOCK_N tile of a contraction's free axes.

Construction maps a whole-tensor contraction `c[...] = dot(a, b)` per output element: the batch and
free axes (B.., M, N) are the workset and each lane sums its products over the whole K tile. This
pass gives such a group tile ownership instead (`Group.ownership`, tiles): every program owns one coordinate of
each batch axis and a BLOCK_M x BLOCK_N tile of (M, N), visited in bands of GROUP_M tile rows for
cache reuse, and walks K in BLOCK_K chunks:

    acc = 0
    for k0 in range(0, K, BLOCK_K):
        a_tile = <lhs at (m, k0 + tk)> (masked loads, zero past K)      [BLOCK_M, BLOCK_K]
        b_tile = <rhs at (k0 + tk, n)>                                   [BLOCK_K, BLOCK_N]
        acc = matmul(a_tile, b_tile, acc)                                 (tl.dot)
    <epilogue at (m, n)>; store masked by m < M, n < N

Legality: the group maps instances over at least two axes, holds no control, local buffers or
effects other than stores, its one contraction has one contracted axis, the lhs does not vary with
the last domain axis (n) nor the rhs with the one before (m), the stores cover both and do not
read back what they write, and the operand dtypes have a tensor-core (or FMA) dot: f16, bf16, f32
(IEEE or tf32) and i8. Profitability: always, once legal (the per-lane form re-reads both operands
for every output element).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kir.contract import Precision
from kir.dims import DConst
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn

from .. import ops as P
from ..builder import Builder
from ..construct import segments_for
from ..launch_expr import LaunchExpr, LConst, LConstexpr, LWarps, ldim, lmax, lmul, lprod
from ..model import (
    AccessRelation,
    Fragment,
    Group,
    Guard,
    Ownership,
    POp,
    PRegion,
    Program,
    Proven,
    PValue,
    TileAxis,
    Trait,
)
from ..rewrite import dead_code, rewrite_ops
from . import Pass, PassContext
from .enlarge import tile_elements

GROUP_M = 8

# (BLOCK_M, BLOCK_N, BLOCK_K, warp budget) per operand dtype and precision: tensor-core shapes for
# 16-bit, 8-bit and tf32 operands; IEEE f32 runs on FMA units, where smaller tiles keep registers.
TILE_SHAPES: dict[tuple[DType, Precision], tuple[int, int, int, int]] = {
    (DType.f16, Precision.ieee): (128, 128, 32, 8),
    (DType.bf16, Precision.ieee): (64, 64, 32, 4),  # multiplied in f32 (see emit_triton/emit_contract.py)
    (DType.i8, Precision.ieee): (128, 128, 64, 8),
    (DType.f8e4m3, Precision.ieee): (128, 128, 64, 8),  # fp8 tensor cores on a GPU (emit_triton/emit_contract.py)
    (DType.f8e5m2, Precision.ieee): (128, 128, 64, 8),
    (DType.f32, Precision.tf32): (128, 128, 32, 8),
    (DType.f32, Precision.ieee): (64, 64, 32, 4),
}
ACCUMULATOR = {DType.f16: DType.f32, DType.bf16: DType.f32, DType.f32: DType.f32, DType.i8: DType.i32,
               DType.f8e4m3: DType.f32, DType.f8e5m2: DType.f32}



# Ops a legal group may hold outside its decode (everything else keeps the per-lane form).
def uniform_op(op: POp) -> bool:
    """What a program computes once for all its instances: launch values, element-wise arithmetic on them,
    loads of external tensors at uniform coordinates."""
    if isinstance(op, P.Load):
        return op.access.copy is None
    return bool(op.TRAITS & (Trait.UNIFORM | Trait.ELEMENTWISE))


def elementwise_op(op: POp) -> bool:
    """Per-instance work that maps positions one to one: element-wise arithmetic, broadcasts, loads and
    stores of external tensors."""
    if isinstance(op, P.Load | P.Store):
        return op.access.copy is None
    return op.has(Trait.ELEMENTWISE) or isinstance(op, P.Broadcast)

M, N, K = "m", "n", "k"
VALID = "valid"  # the lane-validity test: on a tile, the validity of whichever of m and n the tile has
TILED = frozenset({M, N, K, VALID})


class NotTileable(Exception):
    """The group keeps its per-lane contraction; the message says why."""


# ---------------------------------------------------------------------------------------------- matching


@dataclass
class Match:
    """What a tileable contraction group is made of (ids of the lane program's values)."""

    group: Group
    flat: PValue
    coord_axis: dict[int, int]          # decoded coordinate -> domain axis
    decode_ops: set[int]                # id(op) of the decode and of the lane-validity test
    valid: int | None                   # the lane-validity test `flat < prod(domain)`
    contract: P.Contract
    k_axis: TileAxis
    deps: dict[int, frozenset[str]]     # value -> the axes it varies with: m, n, k, o<j> (leading)
    ops: list[POp] = field(default_factory=list)
    tiled: tuple[int, int] | None = None  # the domain axes named m and n; None: the two trailing ones

    @property
    def rank(self) -> int:
        return len(self.group.domain)

    def axis_name(self, axis: int) -> str:
        m, n = self.tiled if self.tiled is not None else (self.rank - 2, self.rank - 1)
        return M if axis == m else N if axis == n else f"o{axis}"

    def decode_deps(self, op: POp) -> bool:
        """Whether `op` is part of the instance decode; if so, its results' dependences are recorded: a decoded
        coordinate varies with its axis, the lane-validity test with `VALID`."""
        if id(op) not in self.decode_ops:
            return False
        for r in op.results:
            if r.id in self.coord_axis:
                self.deps[r.id] = frozenset({self.axis_name(self.coord_axis[r.id])})
            elif r.id == self.valid:
                self.deps[r.id] = frozenset({VALID})
        return True

    def uniform_deps(self, op: POp, uniform: bool, deps: frozenset[str], outside: str) -> bool:
        """Whether `op` computes values the same for every instance (`uniform`: no lanes, and no dependence);
        if so, its results depend on nothing. Such an op must be one the tiled form may compute once."""
        if not uniform or deps:
            return False
        if not uniform_op(op):
            raise NotTileable(f"the group computes {op.NAME} outside {outside}")
        for r in op.results:
            self.deps[r.id] = frozenset()
        return True


def _fail(message: str) -> NotTileable:
    return NotTileable(message)


def match(group: Group) -> Match:
    """The tileable structure of `group`, or NotTileable with the reason."""
    if len(group.domain) < 2 or group.ownership.tiled or group.serial:
        raise _fail("the group does not map two or more free axes to instances")
    ops = [op for op in group.body.ops if not isinstance(op, P.Yield)]
    if any(op.regions() for op in ops):
        raise _fail("the group holds control flow")
    owned = [op for op in ops if isinstance(op, P.OwnedInstances)]
    contracts = [op for op in ops if isinstance(op, P.Contract)]
    if len(owned) != 1 or len(contracts) != 1:
        raise _fail("the group holds no single contraction over owned instances")
    c = contracts[0]
    if len(c.axes) != 1 or len(c.lhs.type.tile) != 1 or c.rhs.type.tile != c.lhs.type.tile:
        raise _fail("the contraction does not sum over exactly one axis")
    m = Match(group, owned[0].result, {}, {id(owned[0])}, None, c, c.lhs.type.tile[0], {}, ops)
    _decode(m, ops)
    _dependences(m, ops)
    _operands(m)
    check_effects(m, ops, frozenset({K}))
    return m


def _shape_expr(ops: list[POp], v: PValue) -> LaunchExpr | None:
    for op in ops:
        if isinstance(op, P.ShapeValue) and op.results and op.result.id == v.id:
            return op.expr
    return None


def _decode(m: Match, ops: list[POp]) -> None:
    """Recognise the row-major decode of `flat` over the domain and the lane-validity test."""
    domain = m.group.domain
    rest = m.flat
    for k in range(len(domain) - 1, 0, -1):
        div = mod = None
        for op in ops:
            if isinstance(op, P.Binary) and op.lhs.id == rest.id and _shape_expr(ops, op.rhs) == ldim(domain[k]):
                if op.fn.value == "mod":
                    mod = op
                elif op.fn.value == "floordiv":
                    div = op
        if div is None or mod is None:
            raise _fail("the group does not decode its instances row-major")
        m.coord_axis[mod.result.id] = k
        m.decode_ops.update((id(div), id(mod)))
        rest = div.result
    m.coord_axis[rest.id] = 0
    total = lprod(tuple(ldim(d) for d in domain))
    for op in ops:
        if isinstance(op, P.Compare) and op.fn is CmpFn.lt and op.lhs.id == m.flat.id and \
                _shape_expr(ops, op.rhs) == total:
            m.valid = op.result.id
            m.decode_ops.add(id(op))
    inner = {id(op) for op in ops if id(op) in m.decode_ops}
    decode_values = {m.flat.id} | {op.result.id for op in ops if id(op) in inner and op.results}
    for op in ops:
        if id(op) in m.decode_ops:
            continue
        used = {v.id for v in op.operands()} & decode_values
        if used - set(m.coord_axis) - ({m.valid} if m.valid is not None else set()):
            raise _fail("the group uses its flattened instance index beyond the decode")


def _dependences(m: Match, ops: list[POp]) -> None:
    k_axis = m.k_axis
    for op in ops:
        if m.decode_deps(op):
            continue
        if isinstance(op, P.TileIndex):
            if op.result.type.tile != (k_axis,):
                raise _fail(f"the group holds a tile other than the contracted axis ({op.result.type})")
            m.deps[op.result.id] = frozenset({K})
            continue
        operand_deps = frozenset().union(*(m.deps.get(v.id, frozenset()) for v in op.operands()))
        if m.uniform_deps(op, not any(r.type.lanes or r.type.tile for r in op.results), operand_deps,
                          "the contraction"):
            continue
        if isinstance(op, P.Load | P.Store) and op.access.copy is not None:
            raise _fail("the group uses a local buffer")
        if not elementwise_op(op) and not isinstance(op, P.Contract):
            raise _fail(f"the group computes {op.NAME} per instance")
        for r in op.results:
            if r.type.tile not in ((), (k_axis,)):
                raise _fail(f"the group holds a tile other than the contracted axis ({r.type})")
            m.deps[r.id] = frozenset(operand_deps - {K}) if isinstance(op, P.Contract) else operand_deps


def _operands(m: Match) -> None:
    c = m.contract
    dtype = c.lhs.type.dtype
    same = c.rhs.type.dtype == dtype or dtype.is_fp8 and c.rhs.type.dtype.is_fp8  # fp8 formats mix (f32 acc)
    if (dtype, c.precision) not in TILE_SHAPES or ACCUMULATOR[dtype] != c.acc_dtype or not same:
        raise _fail(f"no tile dot for {dtype} operands accumulating in {c.acc_dtype} ({c.precision})")
    if N in m.deps[c.lhs.id] or M in m.deps[c.rhs.id]:
        raise _fail("the contraction's operands do not separate into rows (lhs) and columns (rhs)")


def check_effects(m: Match, ops: list[POp], reduced: frozenset[str] = frozenset()) -> None:
    """Every store writes one element per instance (its coordinates vary with every free axis, neither they nor
    its value with a `reduced` axis), and no load reads a buffer the group writes; shared by the tile passes."""
    written = {op.access.buffer for op in ops if isinstance(op, P.Store)}
    lead = {m.axis_name(j) for j in range(m.rank)}  # every free axis, the tiled ones (m, n) among them
    for op in ops:
        if isinstance(op, P.Load) and op.access.buffer in written:
            raise _fail("the group reads a buffer it writes")
        if isinstance(op, P.Store):
            coord_deps = frozenset().union(*(m.deps.get(v.id, frozenset()) for v in op.access.coords))
            if not {M, N} | lead <= coord_deps or reduced & (coord_deps | m.deps.get(op.value.id, frozenset())):
                raise _fail("a store does not write one element per instance")


# ---------------------------------------------------------------------------------------------- building


class Tiler:
    """Rebuilds one matched group with tile ownership."""

    def __init__(self, m: Match, b: Builder, blocks: tuple[str, str, str]) -> None:
        self.m = m
        self.b = b
        self.origin = m.contract.origin
        dtype = m.contract.lhs.type.dtype
        bm, bn, bk, _ = TILE_SHAPES[(dtype, m.contract.precision)]
        self.tm = TileAxis(DConst(bm), blocks[0])
        self.tn = TileAxis(DConst(bn), blocks[1])
        self.tk = TileAxis(DConst(bk), blocks[2])
        self.memo: dict[tuple[int, tuple[TileAxis, ...]], PValue] = {}
        self.ops = {v.id: op for op in m.ops for v in op.results}
        self.coords: dict[str, PValue] = {}
        self.valid: dict[str, PValue] = {}
        self.k0: PValue | None = None
        self.k_extent: PValue | None = None
        self.acc: PValue | None = None

    # ------------------------------------------------------------------ helpers
    def index(self, tile: tuple[TileAxis, ...] = ()) -> Fragment:
        return Fragment(DType.i64, False, tile, True)

    def shape(self, e: LaunchExpr, name: str | None = None) -> PValue:
        return self.b.add(P.ShapeValue, self.index(), self.origin, name, expr=e)

    def spread(self, v: PValue, tile: tuple[TileAxis, ...], axes: tuple[TileAxis, ...]) -> PValue:
        """`v` (tile `axes`, a subset of `tile` in order, or scalar) broadcast to `tile`."""
        if v.type.tile == tile:
            return v
        dims = tuple(tile.index(a) for a in axes)
        return self.b.add(P.Broadcast, Fragment(v.type.dtype, False, tile, v.type.index), self.origin, x=v, dims=dims)

    def and_(self, a: PValue | None, c: PValue) -> PValue:
        if a is None:
            return c
        return self.b.add(P.Binary, Fragment(DType.pred, False, c.type.tile), self.origin, fn=BinaryFn.and_, lhs=a,
                          rhs=c)

    def k_position(self, tile: tuple[TileAxis, ...]) -> PValue:
        assert self.k0 is not None
        pos = self.b.add(P.TileIndex, self.index(tile), self.origin, axis=tile.index(self.tk))
        return self.b.add(P.Binary, self.index(tile), self.origin, fn=BinaryFn.add, lhs=self.k0, rhs=pos)

    def k_member(self, tile: tuple[TileAxis, ...]) -> PValue:
        assert self.k_extent is not None
        return self.b.add(P.Compare, Fragment(DType.pred, False, tile), self.origin, fn=CmpFn.lt,
                          lhs=self.k_position(tile), rhs=self.k_extent)

    # ------------------------------------------------------------------ values on a tile
    def at(self, v: PValue, tile: tuple[TileAxis, ...]) -> PValue:
        """`v` of the lane program, rebuilt on `tile` (a uniform scalar when it varies with no tiled axis)."""
        deps = self.m.deps.get(v.id)
        if deps is None:
            raise AssertionError(f"no dependence recorded for {v!r}")
        if not deps:
            return v  # uniform: computed once at the top, unchanged
        key = (v.id, tile if deps & TILED else ())
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._build(v, key[1])
        return hit

    def _build(self, v: PValue, tile: tuple[TileAxis, ...]) -> PValue:  # noqa: C901 (one case per op kind)
        m = self.m
        if v.id in m.coord_axis:
            name = m.axis_name(m.coord_axis[v.id])
            base = self.coords[name]
            return base if not base.type.tile else self.spread(base, tile, base.type.tile)
        if v.id == m.valid:
            out: PValue | None = None
            for axis, name in ((self.tm, M), (self.tn, N)):
                if axis in tile:
                    out = self.and_(out, self.spread(self.valid[name], tile, (axis,)))
            assert out is not None
            return out
        op = self.ops[v.id]
        if isinstance(op, P.TileIndex):
            return self.k_position(tile)
        if isinstance(op, P.Contract):
            assert self.acc is not None and tile == (self.tm, self.tn)
            return self.acc
        t = Fragment(v.type.dtype, False, tile, v.type.index)
        if isinstance(op, P.Broadcast):
            x = self.at(op.x, tile)
            return x if x.type.tile == tile else self.spread(x, tile, x.type.tile)
        if isinstance(op, P.Load):
            acc = self.access(op.access, tile)
            return self.b.add(P.Load, t, op.origin, v.name, access=acc)
        fields = {f.name: getattr(op, f.name) for f in op.fields()}
        for name, x in fields.items():
            if isinstance(x, PValue):
                fields[name] = self.at(x, tile)
        return self.b.add(type(op), t, op.origin, v.name, **fields)

    def access(self, a: AccessRelation, tile: tuple[TileAxis, ...]) -> AccessRelation:
        coords = tuple(self.at(c, tile) for c in a.coords)
        mask = self.at(a.mask, tile) if a.mask is not None else None
        bounds = a.bounds
        if isinstance(bounds, Guard):
            bounds = Guard(self.at(bounds.mask, tile))
        elif isinstance(bounds, Proven):
            bounds = Proven("every coordinate within its extent for the tile's members (the mask bounds the tile "
                            "positions past the domain)")
        return AccessRelation(a.buffer, coords, mask, bounds, a.fill, None)

    # ------------------------------------------------------------------ the group
    def body(self, uniform_ops: list[POp]) -> PRegion:
        m, b = self.m, self.b
        b.begin()  # this group's own frame: the builder serves every tiled group of the program
        for op in uniform_ops:
            b.put(op)
        domain = m.group.domain
        lead = len(domain) - 2
        types = tuple(self.index() for _ in range(lead)) + (self.index((self.tm,)), self.index((self.tn,)))
        names = tuple(f"o{j}" for j in range(lead)) + ("rows", "cols")
        tile_op = P.OwnedTile(results=tuple(b.fresh(t, n) for t, n in zip(types, names)), origin=self.origin,
                              group=m.group.id, blocks=(self.tm.block, self.tn.block), group_m=GROUP_M)
        b.put(tile_op)
        for j, r in enumerate(tile_op.results):
            self.coords[m.axis_name(j)] = r
        for name, axis, extent in ((M, self.tm, domain[-2]), (N, self.tn, domain[-1])):
            self.valid[name] = b.add(P.Compare, Fragment(DType.pred, False, (axis,)), self.origin, f"in_{name}",
                                     fn=CmpFn.lt, lhs=self.coords[name], rhs=self.shape(ldim(extent)))
        self.k_extent = self.shape(ldim(m.k_axis.extent), "k_extent")
        self.acc = self.k_loop()
        for op in m.ops:
            if isinstance(op, P.Store):
                tile = (self.tm, self.tn)
                b.put(P.Store(origin=op.origin, access=self.access(op.access, tile), value=self.at(op.value, tile),
                              unique=op.unique))
        b.put(P.Yield(origin=None, values=()))
        return PRegion(m.group.body.args, tuple(prune(b.end(), {id(op) for op in uniform_ops})))

    def k_loop(self) -> PValue:
        m, b = self.m, self.b
        c = m.contract
        out = (self.tm, self.tn)
        acc_t = Fragment(c.acc_dtype, False, out)
        zero = b.add(P.Const, Fragment(c.acc_dtype), self.origin, value=0.0 if c.acc_dtype.is_float else 0,
                     dtype=c.acc_dtype)
        init = self.spread(zero, out, ())
        start = self.shape(ldim(DConst(0)))
        step = self.shape(LConstexpr(self.tk.block))
        outside = dict(self.memo)
        b.begin()
        self.k0 = b.fresh(self.index(), "k0")
        carried = b.fresh(acc_t, "acc")
        lhs = self.operand(c.lhs, (self.tm, self.tk))
        rhs = self.operand(c.rhs, (self.tk, self.tn))
        new = b.add(P.MatMul, acc_t, self.origin, "acc", lhs=lhs, rhs=rhs, acc=carried, precision=c.precision)
        b.put(P.Yield(origin=self.origin, values=(new,)))
        body = PRegion((self.k0, carried), tuple(b.end()))
        loop = P.For(results=(b.fresh(acc_t, "acc"),), origin=self.origin, start=start, stop=self.k_extent,
                     step=step, inits=(init,), body=body)
        b.put(loop)
        self.memo = outside  # values built inside the loop are not visible after it
        return loop.results[0]

    def operand(self, v: PValue, tile: tuple[TileAxis, ...]) -> PValue:
        """The operand chunk, zero at contracted positions past K (the loads' fill, else a select)."""
        x = self.at(v, tile)
        if x.type.tile != tile:
            x = self.spread(x, tile, x.type.tile)
        if self.zero_past_k(v):
            return x
        zero = self.b.add(P.Const, Fragment(x.type.dtype), self.origin, value=0.0 if x.type.dtype.is_float else 0,
                          dtype=x.type.dtype)
        return self.b.add(P.Select, x.type, self.origin, cond=self.k_member(tile), on_true=x, on_false=zero)

    def zero_past_k(self, v: PValue) -> bool:
        op = self.ops.get(v.id)
        if isinstance(op, P.Load):
            return op.access.fill in (0, 0.0) and op.access.mask is not None and \
                K in self.m.deps.get(op.access.mask.id, frozenset())
        if isinstance(op, P.Cast) and op.x.type.dtype != DType.pred:
            return self.zero_past_k(op.x)
        return False


def prune(ops: list[POp], pure: set[int]) -> list[POp]:
    """Drop the ops in `pure` (by id) whose results nothing uses any more."""
    return rewrite_ops(ops, dead_code(lambda op: id(op) in pure))


# ---------------------------------------------------------------------------------------------- the pass


class TileContraction(Pass):
    name = "tile-contraction"

    def make_plan(self, program: Program) -> tuple[Match | str, ...]:
        """Per group: its contraction match, or the reason it is not tileable."""
        out: list[Match | str] = []
        for g in program.groups:
            try:
                out.append(match(g))
            except NotTileable as exc:
                out.append(f"group {g.id}: {exc}")
        return tuple(out)

    def legal(self, program: Program, ctx: PassContext | None = None) -> bool | str:
        reasons = [r for r in self.plan(program, ctx) if isinstance(r, str)]  # type: ignore[attr-defined]
        if len(reasons) == len(program.groups):
            return "; ".join(reasons) or "the program has no groups"
        return True

    def profitable(self, program: Program, ctx: PassContext | None = None) -> bool:
        return True

    def run(self, program: Program, ctx: PassContext | None = None) -> Program:
        consts = dict(program.constexprs)
        builder = Builder.after(program)
        groups: list[Group] = []
        warps: list[LaunchExpr] = []
        for g, m in zip(program.groups, self.plan(program, ctx)):  # type: ignore[call-overload]
            if isinstance(m, str):
                groups.append(g)
                warps.append(lmul(consts[g.block], tile_elements(program, g)))
                continue
            blocks = _fresh_names(consts, g.id)
            tiler = Tiler(m, builder, blocks)
            for name, axis in zip(blocks, (tiler.tm, tiler.tn, tiler.tk)):
                consts[name] = LConst(axis.extent.value)  # type: ignore[attr-defined]
            consts[g.block] = LConst(1)
            uniform = [op for op in m.ops if id(op) not in m.decode_ops and not isinstance(op, P.OwnedInstances)
                       and all(not m.deps.get(r.id, frozenset()) for r in op.results) and op.results
                       and not any(r.type.lanes or r.type.tile for r in op.results)]
            body = tiler.body(uniform)
            groups.append(dataclasses.replace(g, body=body, ownership=Ownership(g.block, blocks[:2])))
            # LWarps gives 4 warps below 4096 elements and 8 from there: 512 per warp picks the tile's own.
            warps.append(LConst(512 * TILE_SHAPES[(m.contract.lhs.type.dtype, m.contract.precision)][3]))
        order = [n for n, _ in program.constexprs] + [n for n in consts if n not in dict(program.constexprs)]
        segments, grid = segments_for(groups, consts)
        return dataclasses.replace(program, groups=tuple(groups), constexprs=tuple((n, consts[n]) for n in order),
                                   segments=segments, grid=grid, num_warps=LWarps(lmax(*warps)))


def _fresh_names(consts: dict[str, LaunchExpr], gid: int) -> tuple[str, str, str]:
    out = []
    for base in ("BLOCK_TM", "BLOCK_TN", "BLOCK_TK"):
        name = f"{base}{gid}"
        while name in consts:
            name += "_"
        out.append(name)
    return out[0], out[1], out[2]


__all__ = ["TileContraction", "match", "NotTileable", "TILE_SHAPES", "GROUP_M"]
