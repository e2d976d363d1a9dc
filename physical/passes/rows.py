"""Recomputing a row chunk by chunk: the builder the looped form (passes/looped.py), split scans
(passes/split_scan.py) and split region scans (passes/split_region_scan.py) write their bodies with.

The passes rewrite values that share one tile axis, the row, so that a step (a loop iteration of the looped
form, a program of a split scan, the tile a region scan's piece holds) holds one chunk of it: every value on
the row gets the chunk's tile axis instead, positions along the row become the chunk's start plus the
position in the chunk, and other ops are copied with their operands renamed. `RowBuilder.copy_op` is that
copy; `chunk_scan` scans a chunk and folds its total, which the passes then combine with what came before.
"""

from __future__ import annotations

from kir.dims import DSym
from kir.dtypes import DType
from kir.pointwise import BinaryFn, CmpFn
from kir.reduce import ReduceKind
from kir.scan import ScanKind

from .. import ops as P
from ..builder import Builder
from ..launch_expr import LaunchExpr, LConstexpr, ldim
from ..model import Fragment, Origin, POp, PValue, TileAxis
from ..rewrite import map_values


def on_row(t: Fragment, axis: TileAxis) -> bool:
    """Whether a value of type `t` lies along the row `axis`."""
    return axis in t.tile


def values_of(op: POp) -> list[PValue]:
    """The values `op` reads and defines, its nested regions' included."""
    out = list(op.operands()) + list(op.results)
    for r in op.regions():
        out += list(r.args)
        for inner in r.walk():
            out += list(inner.operands()) + list(inner.results)
    return out


class RowBuilder(Builder):
    """Writes ops over one chunk of the row `axis` (tile axis `chunk`), numbering new values from `first_id`.

    `row` maps a row value of the original body to its value for the current chunk. With `lanes`, every
    row value varies across the program's lanes (a split scan's chunk belongs to the program's instance).
    With `relative`, the row is itself one chunk step of a region op (its source or emit region, whose
    `start` argument places the chunk): positions along it stay relative to that start, and its padding
    test (the position against the row's extent) tests the new chunk's positions against the new extent."""

    def __init__(self, axis: TileAxis, chunk: TileAxis, first_id: int, lanes: bool = False,
                 relative: bool = False) -> None:
        super().__init__(first_id)
        self.axis, self.chunk, self.lanes, self.relative = axis, chunk, lanes, relative
        self.row: dict[int, PValue] = {}  # original row value id -> its value in the current chunk
        self.positions: set[int] = set()  # original positions along the row (tile indices)
        self.extents: set[int] = set()  # original values that are the row's extent

    def retile(self, t: Fragment) -> Fragment:
        """The type of a value of type `t` for one chunk."""
        if not on_row(t, self.axis):
            return t
        return Fragment(t.dtype, t.lanes or self.lanes, (self.chunk,), t.index)

    def get(self, v: PValue) -> PValue:
        return self.row.get(v.id, v)

    def index(self, e: LaunchExpr, origin: Origin | None, name: str | None = None) -> PValue:
        return self.add(P.ShapeValue, Fragment(DType.i64, index=True), origin, name, expr=e)

    def cast(self, v: PValue, dtype: DType, origin: Origin | None) -> PValue:
        if v.type.dtype == dtype and not v.type.index:
            return v
        return self.add(P.Cast, Fragment(dtype, v.type.lanes, v.type.tile), origin, x=v, dtype=dtype)

    def row_op(self, op: POp, start: PValue) -> None:
        """A copy of a row op for the chunk that begins at `start` (a position along the row becomes `start`
        plus the position in the chunk)."""
        if isinstance(op, P.TileIndex):  # positions are uniform; the chunk's start may vary by lane
            pos = self.add(P.TileIndex, op.result.type.with_tile((self.chunk,)), op.origin, "chunk_pos", axis=0)
            self.positions.add(op.result.id)
            self.row[op.result.id] = pos if self.relative else \
                self.add(P.Binary, self.retile(op.result.type), op.origin, op.result.name, fn=BinaryFn.add,
                         lhs=start, rhs=pos)
            return
        if self.relative and isinstance(op, P.Compare) and op.fn is CmpFn.lt and op.lhs.id in self.positions \
                and op.rhs.id in self.extents:  # the chunk's padding: positions past the new chunk's extent
            held = self.chunk.extent == DSym(self.chunk.block)  # a launch-sized chunk: its extent is its block
            extent = self.index(LConstexpr(self.chunk.block) if held else ldim(self.chunk.extent), op.origin)
            self.row[op.result.id] = self.add(P.Compare, self.retile(op.result.type), op.origin, op.result.name,
                                              fn=CmpFn.lt, lhs=self.get(op.lhs), rhs=extent)
            return
        fields = {f.name: map_values(getattr(op, f.name), self.get) for f in op.fields()}
        results = tuple(self.fresh(self.retile(v.type), v.name) for v in op.results)
        self.put(type(op)(results=results, origin=op.origin, **fields))
        for old, new in zip(op.results, results):
            self.row[old.id] = new

    def copy_op(self, op: POp, start: PValue) -> None:
        """`op` for the chunk that begins at `start`: recomputed over the chunk when it touches the row, else
        itself with the chunk's values for its operands."""
        if isinstance(op, P.ShapeValue) and op.expr == ldim(self.axis.extent):
            self.extents.add(op.result.id)
        if any(on_row(v.type, self.axis) for v in values_of(op)):
            self.row_op(op, start)
        elif any(v.id in self.row for v in op.operands()):
            self.put(type(op)(results=op.results, origin=op.origin,
                              **{f.name: map_values(getattr(op, f.name), self.get) for f in op.fields()}))
        else:
            self.put(op)


def chunk_scan(b: RowBuilder, op: P.Scan) -> tuple[list[PValue], list[PValue]]:
    """The scan of the current chunk of `op`'s inputs (in its accumulator dtypes) and the chunk's total, each
    still to be combined with what precedes the chunk."""
    xs = [b.cast(b.get(x), dt, op.origin) for x, dt in zip(op.inputs, op.acc_dtypes)]
    member = None if op.member is None else b.get(op.member)
    lanes = any(x.type.lanes for x in xs)
    local = [b.fresh(Fragment(dt, lanes, (b.chunk,)), r.name) for dt, r in zip(op.acc_dtypes, op.results)]
    b.put(P.Scan(results=tuple(local), origin=op.origin, inputs=tuple(xs), axis=0, kind=op.kind, reverse=op.reverse,
                 exclusive=op.exclusive, identity=op.identity, acc_dtypes=op.acc_dtypes, member=member,
                 combine=b.copy_region(op.combine)))
    kind = ReduceKind.custom if op.kind is ScanKind.custom else op.kind.as_reduce
    total = [b.fresh(Fragment(dt, lanes), "chunk_total") for dt in op.acc_dtypes]
    b.put(P.Reduce(results=tuple(total), origin=op.origin, inputs=tuple(xs), axes=(0,), kind=kind,
                   identity=op.identity, acc_dtypes=op.acc_dtypes, member=member, combine=b.copy_region(op.combine)))
    return local, total


__all__ = ["RowBuilder", "chunk_scan", "on_row", "values_of"]
