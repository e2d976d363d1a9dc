"""The lowering context: builds physical SSA for one group body while walking KIR ops in order.

Every KIR tensor value is lowered at its *natural* coordinates: a fragment whose tile holds the
value's whole logical shape (one power-of-two constexpr block per axis). Values that depend on the
instances a program owns carry the lanes axis. Index arithmetic is tracked as affine forms so that
affine accesses get a Z3-checked bounds proof.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kir import core as K
from kir.affine import binary_form, constant_form, nonnegative_by
from kir.dims import DConst, Dim, DSym, PCmp, as_dim
from kir.dtypes import DType
from kir.errors import DiagnosticError, Loc
from kir.pointwise import BinaryFn, CmpFn
from kir.solver import ShapeSolver

from .. import ops as P
from ..builder import Builder
from ..launch_expr import LaunchExpr, LTileBlock, ldim
from ..model import (
    AccessRelation,
    Buffer,
    Fragment,
    Guard,
    Justification,
    Literal,
    Note,
    Origin,
    POp,
    Proven,
    PValue,
    TileAxis,
)

GROUP_BLOCK = re.compile(r"BLOCK_I\d+")  # the constexpr of group g's instances per program is BLOCK_I<g>


def group_block(gid: int) -> str:
    """The constexpr naming how many instances a program of group `gid` owns."""
    return f"BLOCK_I{gid}"


class ProgramState:
    """What the whole program accumulates while its groups are lowered."""

    def __init__(self, kernel: K.Kernel, origins: dict[int, Origin]) -> None:
        self.kernel = kernel
        self.origins = origins  # id(kir op) -> Origin
        self.ids = Builder()  # value and buffer ids; group bodies are built by Lowerers sharing it
        self.blocks: dict[str, LaunchExpr] = {}   # tile block constexprs
        self.block_of: dict[Dim, str] = {}
        self.buffers: dict[int, Buffer] = {}       # buffer id -> Buffer
        self.ref_buffer: dict[int, int] = {}       # kir ref value id -> buffer id
        self.notes: list[Note] = []
        self.workspaces: list[Any] = []
        self.canonical: dict[Dim, Dim] = {}        # extent -> the first extent seen equal to it
        self.symbol_names: dict[str, str] = {}     # proof symbol -> what the author calls it (explain)
        self._extent_solver: ShapeSolver | None = None

    def canonical_extent(self, extent: Dim) -> Dim:
        """The first tile extent seen that the kernel's refinements prove equal to `extent` (`N // 2` for
        `N - N // 2` under `N % 2 == 0`), so that values of equal extent share one tile axis and one block."""
        extent = as_dim(extent)
        hit = self.canonical.get(extent)
        if hit is not None:
            return hit
        found = extent
        if not isinstance(extent, DConst):
            for seen in list(self.canonical.values()):
                if seen == extent or (isinstance(seen, DConst) and not self.kernel.requires):
                    continue
                if self._extent_solver is None:
                    self._extent_solver = self.kernel.solver()
                if self._extent_solver.proves(PCmp("==", extent, seen)):
                    found = seen
                    break
        self.canonical[extent] = found
        return found

    def fresh(self) -> int:
        return self.ids.fresh_id()

    def block_name(self, extent: Dim, what: str = "") -> str:
        extent = as_dim(extent)
        if extent in self.block_of:
            return self.block_of[extent]
        if isinstance(extent, DSym):
            base = f"BLOCK_{extent.name}"
        elif isinstance(extent, DConst):
            base = f"BLOCK_C{extent.value}"
        else:
            base = f"BLOCK_E{len(self.block_of)}"
        name = base
        # a group's own block (`BLOCK_I<g>`, named by construction) is no tile block: a shape symbol I0 is not it
        while name in self.blocks or GROUP_BLOCK.fullmatch(name):
            name = f"{base}_{len(self.blocks)}"
        self.block_of[extent] = name
        self.blocks[name] = LTileBlock(ldim(extent), what=what or f"axis of extent {extent}")
        return name

    def note(self, message: str, loc: Loc | None = None, origin: Origin | None = None) -> None:
        if not any(n.message == message for n in self.notes):
            self.notes.append(Note(message, loc, origin))


class Lowerer(Builder):
    """Builds one group body. `lanes_block` is the group's BLOCK_I constexpr name."""

    def __init__(self, state: ProgramState, group_id: int, lanes_block: str,
                 variant: frozenset[int] = frozenset()) -> None:
        super().__init__()
        self.state = state
        self.kernel = state.kernel
        self.group_id = group_id
        self.lanes_block = lanes_block
        self.variant = set(variant)     # kir value ids that vary across owned instances
        self.env: dict[int, PValue] = {}
        self.frames = []  # the group body is the first region begun
        self.lane_valid: PValue | None = None
        self.active: PValue | None = None   # predication of the enclosing per-lane if/for/while
        # the elements of the enclosing region fold's chunk that lie in its subregion: reads of the fold's map
        # at the chunk's positions (`indices[k]`, then `x[indices[k]]`) touch only those
        self.members: PValue | None = None
        self.affine: dict[int, Dim] = {}    # pvalue id -> affine form over range symbols
        self.facts: list[PCmp] = []
        self.solver: ShapeSolver = self.kernel.solver()
        self.current_op: K.Op | None = None
        self.written: set[int] = set()      # buffers written since the last barrier
        self.loop_depth = 0
        self.instance_count: Dim = DConst(1)  # logical instances whose private copies exist
        self.instance_flat: PValue | None = None
        self.buffer_copy: dict[int, PValue | None] = {}

    # ------------------------------------------------------------------ diagnostics and origins
    def origin(self, op: K.Op | None = None) -> Origin | None:
        op = op or self.current_op
        return self.state.origins.get(id(op)) if op is not None else None

    def loc(self, op: K.Op | None = None) -> Loc | None:
        op = op or self.current_op
        return op.loc if op is not None else None

    def fail(self, message: str, op: K.Op | None = None) -> DiagnosticError:
        return DiagnosticError(message, self.loc(op))

    # ------------------------------------------------------------------ regions and ops
    def fresh_id(self) -> int:
        return self.state.fresh()  # one numbering for the whole program

    @contextmanager
    def region(self, types: tuple[Fragment, ...] = (), names: tuple[str | None, ...] | None = None
               ) -> Iterator[tuple[PValue, ...]]:
        yield self.begin(types, names)

    def emit(self, cls: type[POp], types: tuple[Fragment, ...], names: tuple[str | None, ...] | None = None,
             origin: Origin | None = None, **fields: Any) -> POp:
        """As `Builder.emit`; the origin defaults to the KIR op being lowered."""
        return super().emit(cls, types, names, origin or self.origin(), **fields)


    def cached(self, key: Any) -> PValue | None:
        for f in reversed(self.frames):
            if key in f.cache:
                return f.cache[key]
            if f.isolated:
                break
        return None

    def remember(self, key: Any, v: PValue) -> PValue:
        self.frames[-1].cache[key] = v
        return v

    @contextmanager
    def scalar_context(self) -> Iterator[None]:
        """Lower a scalar region (a combine): no lanes, no predication."""
        saved = self.lane_valid, self.active, self.members
        self.lane_valid, self.active, self.members = None, None, None
        try:
            yield
        finally:
            self.lane_valid, self.active, self.members = saved

    @contextmanager
    def loop_body(self) -> Iterator[None]:
        """Lower the body of a loop (`loop_depth` counts the loops around what is being lowered)."""
        self.loop_depth += 1
        try:
            yield
        finally:
            self.loop_depth -= 1

    def add_barrier(self) -> None:
        self.emit(P.Barrier, ())
        self.written.clear()

    def copy_index(self, buffer: Buffer, lanes: bool) -> PValue | None:
        """Which private copy of a local buffer this instance uses (None for external views)."""
        if buffer.storage is None:
            return None
        if buffer.id not in self.buffer_copy:
            self.buffer_copy[buffer.id] = self.instance_flat
        return self.buffer_copy[buffer.id]

    def cast_like(self, v: PValue, t: Fragment) -> PValue:
        """Give `v` the dtype of `t` (a carried value keeps one type through a loop)."""
        if v.type.dtype == t.dtype and v.type.index == t.index:
            return v
        return self.add(P.Cast, v.type.with_dtype(t.dtype, t.index), x=v, dtype=t.dtype)

    # ------------------------------------------------------------------ kir values
    def get(self, v: K.Value) -> PValue:
        try:
            return self.env[v.id]
        except KeyError:
            raise self.fail(f"internal: KIR value {v!r} has no physical value") from None

    def bind(self, v: K.Value, p: PValue) -> None:
        self.env[v.id] = p

    def buffer_of(self, v: K.Value) -> Buffer:
        bid = self.state.ref_buffer.get(v.id)
        if bid is None:
            raise self.fail(f"internal: {v!r} is not a buffer")
        return self.state.buffers[bid]

    def is_variant(self, v: K.Value) -> bool:
        return v.id in self.variant

    # ------------------------------------------------------------------ types
    def tile(self, shape: tuple[Dim, ...]) -> tuple[TileAxis, ...]:
        canon = tuple(self.state.canonical_extent(d) for d in shape)
        return tuple(TileAxis(d, self.state.block_name(d)) for d in canon)

    def natural(self, t: K.TensorType, lanes: bool) -> Fragment:
        if not isinstance(t.dtype, DType):
            raise self.fail(f"dtype variable {t.dtype} reached physical construction; specialise the kernel first")
        return Fragment(t.dtype, lanes, self.tile(t.shape))

    # ------------------------------------------------------------------ small builders
    def const(self, value: Literal, dtype: DType) -> PValue:
        # -0.0 == 0.0 and NaN != NaN as Python values: a float constant is keyed by its representation
        key = ("const", repr(value) if isinstance(value, float) else value, dtype, type(value))
        hit = self.cached(key)
        if hit is not None:
            return hit
        v = self.add(P.Const, Fragment(dtype), value=value, dtype=dtype)
        if dtype.is_int:
            self.set_form(v, constant_form(value))
        return self.remember(key, v)

    def shape_value(self, d: Dim | LaunchExpr, name: str | None = None) -> PValue:
        expr = ldim(d) if isinstance(d, Dim | int) else d
        key = ("shape", expr)
        hit = self.cached(key)
        if hit is not None:
            return hit
        v = self.add(P.ShapeValue, Fragment(DType.i64, index=True), name=name, expr=expr)
        if isinstance(d, Dim):
            self.affine[v.id] = d
        return self.remember(key, v)

    def tile_index(self, tile: tuple[TileAxis, ...], axis: int) -> PValue:
        key = ("tile_index", tile, axis)
        hit = self.cached(key)
        if hit is not None:
            return hit
        v = self.add(P.TileIndex, Fragment(DType.i64, False, tile, index=True), axis=axis)
        sym = DSym(f"_t{v.id}")
        self.affine[v.id] = sym
        self.state.symbol_names[sym.name] = f"(each position along {tile[axis].extent})"
        self.facts += [PCmp(">=", sym, DConst(0)), PCmp("<", sym, tile[axis].extent)]
        return self.remember(key, v)

    def members_of(self, tile: tuple[TileAxis, ...], lanes: bool) -> PValue | None:
        """The enclosing region fold's members when an access covers its chunk (the same tile), else None."""
        m = self.members
        if m is None or m.type.tile != tile or (m.type.lanes and not lanes):
            return None
        return m

    def tile_member(self, tile: tuple[TileAxis, ...]) -> PValue | None:
        """Mask of the tile positions inside the logical extents (None for an empty tile)."""
        if not tile:
            return None
        key = ("member", tile)
        hit = self.cached(key)
        if hit is not None:
            return hit
        mask: PValue | None = None
        for ax, t in enumerate(tile):
            pos = self.tile_index(tile, ax)
            inside = self.compare(CmpFn.lt, pos, self.shape_value(t.extent))
            mask = self.and_(mask, inside)
        assert mask is not None
        return self.remember(key, mask)

    def compare(self, fn: CmpFn, a: PValue, b: PValue) -> PValue:
        return self.add(P.Compare, self.join(a, b).with_dtype(DType.pred), fn=fn, lhs=a, rhs=b)

    def binary(self, fn: BinaryFn, a: PValue, b: PValue, name: str | None = None, user: bool = False) -> PValue:
        """`a fn b`; index arithmetic (at the program's index width) only for the lowerer's own address
        computations: a `user` op (from KIR) computes at its KIR dtype, since the launch's choice of a
        32-bit index width bounds offsets and extents, not what a kernel computes from its indices."""
        t = self.join(a, b)
        index = not user and (a.type.index and (b.type.index or _is_int_const(self, b)) or
                              b.type.index and _is_int_const(self, a))
        v = self.add(P.Binary, t.with_dtype(t.dtype, index=index), name=name, fn=fn, lhs=a, rhs=b)
        self.track(fn, v, a, b)
        return v

    def and_(self, a: PValue | None, b: PValue | None) -> PValue | None:
        if a is None:
            return b
        if b is None or a.id == b.id:
            return a
        return self.add(P.Binary, self.join(a, b).with_dtype(DType.pred), fn=BinaryFn.and_, lhs=a, rhs=b)

    def join(self, *vals: PValue) -> Fragment:
        """The fragment that mechanical broadcasting of `vals` gives (their tiles agree or are empty)."""
        lanes = any(v.type.lanes for v in vals)
        tiles = {v.type.tile for v in vals if v.type.tile}
        if len(tiles) > 1:
            raise self.fail(f"internal: operands with different tiles {[str(v.type) for v in vals]}")
        tile = next(iter(tiles)) if tiles else ()
        return Fragment(vals[0].type.dtype, lanes, tile, vals[0].type.index)

    def broadcast_to(self, v: PValue, target: Fragment) -> PValue:
        """Explicitly widen `v` (same tile or scalar tile) to `target`'s lanes and tile."""
        if v.type.lanes == target.lanes and v.type.tile == target.tile:
            return v
        if v.type.tile and v.type.tile != target.tile:
            raise self.fail(f"internal: cannot broadcast {v.type} to {target}")
        dims = tuple(range(len(v.type.tile)))
        return self.add(P.Broadcast, Fragment(v.type.dtype, target.lanes, target.tile, v.type.index), x=v,
                        dims=dims)

    def cast(self, v: PValue, dtype: DType) -> PValue:
        if v.type.dtype == dtype and not v.type.index:
            return v
        return self.add(P.Cast, v.type.with_dtype(dtype), x=v, dtype=dtype)

    # ------------------------------------------------------------------ affine tracking and proofs
    def track(self, fn: BinaryFn, r: PValue, a: PValue, b: PValue) -> None:
        """Record the form of `r = a fn b` (`kir.affine`'s rules, as the KIR verifier applies them)."""
        self.set_form(r, binary_form(fn, self.affine_of(a), self.affine_of(b), nonnegative_by(self.prove)))

    def set_form(self, v: PValue, form: Dim | None) -> None:
        if form is not None:
            self.affine[v.id] = form

    def affine_of(self, v: PValue) -> Dim | None:
        if v.id in self.affine:
            return self.affine[v.id]
        return None

    def prove(self, goal: PCmp) -> bool:
        before = len(self.solver.facts)
        self.solver.facts += self.facts
        try:
            return self.solver.prove(goal) is None
        finally:
            del self.solver.facts[before:]

    def justify(self, coords: tuple[PValue, ...], shape: tuple[Dim, ...]) -> Justification | None:
        """A Z3 proof that affine coordinates lie in `shape` for active members, or None."""
        parts = []
        for c, extent in zip(coords, shape):
            e = self.affine_of(c)
            if e is None:
                return None
            lo, hi = PCmp(">=", e, DConst(0)), PCmp("<", e, extent)
            if not (self.prove(lo) and self.prove(hi)):
                return None
            parts.append(f"0 <= {_pretty(e)} < {extent}")
        return Proven(" and ".join(parts) if parts else "true")

    def guard(self, coords: tuple[PValue, ...], shape: tuple[Dim, ...]) -> PValue | None:
        """An explicit in-range mask `0 <= c < extent` for every coordinate."""
        mask: PValue | None = None
        for c, extent in zip(coords, shape):
            lo = self.compare(CmpFn.ge, c, self.const(0, c.type.dtype) if not c.type.index else
                              self.shape_value(DConst(0)))
            hi = self.compare(CmpFn.lt, c, self.shape_value(extent))
            mask = self.and_(mask, self.and_(lo, hi))
        return mask

    def access(self, buffer: Buffer, coords: tuple[PValue, ...], tile: tuple[TileAxis, ...], lanes: bool,
               data_dependent: bool, fill: Literal | None, effect: bool,
               copy: PValue | None = None) -> AccessRelation:
        """Build the access relation: coordinates, active members, fill and one bounds justification."""
        mask = None
        if lanes and self.lane_valid is not None:
            mask = self.lane_valid
        mask = self.and_(mask, self.tile_member(tile))
        if effect:
            mask = self.and_(mask, self.active)
        mask = self.and_(mask, self.members_of(tile, lanes))
        bounds: Justification | None = None if data_dependent else self.justify(coords, buffer.shape)
        if bounds is None:
            g = self.guard(coords, buffer.shape)
            assert g is not None
            mask = self.and_(mask, g)
            bounds = Guard(g)
        return AccessRelation(buffer.id, coords, mask, bounds, fill, copy)


def _is_int_const(lw: Lowerer, v: PValue) -> bool:
    return v.type.is_scalar and v.type.dtype.is_int and isinstance(lw.affine_of(v), DConst)


def _pretty(d: Dim) -> str:
    return str(d)


__all__ = ["Lowerer", "ProgramState"]
