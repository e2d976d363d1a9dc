"""Fragment types: every physical value has a legal scalar/fragment type, and each op's result type
follows from its operands (mechanical broadcasting of lanes and tile, no implicit promotion).

`TYPE_RULES` maps every physical op class to its typing check; structured ops and control are
typed by the structured rules (`structured.py`) and appear here with `_typed_elsewhere`.
"""

from __future__ import annotations

from collections.abc import Callable

from kir.core import Kernel
from kir.dims import DConst, Dim
from kir.dtypes import DType
from kir.pointwise import literal_fits
from kir.rng import RNG_DTYPE

from .. import ops as P
from ..model import Fragment, POp, Program, PValue, TileAxis
from .base import Reporter, Violation, describe, rule
from .index import ProgramIndex, index_of

TypeRule = Callable[[POp], list[str]]
TYPE_RULES: dict[type[POp], TypeRule] = {}


def types(*classes: type[POp]) -> Callable[[TypeRule], TypeRule]:
    def deco(fn: TypeRule) -> TypeRule:
        for c in classes:
            TYPE_RULES[c] = fn
        return fn

    return deco


def ints_agree(a: Fragment, b: Fragment) -> bool:
    """Operand dtypes agree: equal, or integers of which one is index arithmetic (computed at index width)."""
    return a.dtype == b.dtype or (a.dtype.is_int and b.dtype.is_int and (a.index or b.index))


def broadcast_problem(operands: tuple[PValue, ...], result: Fragment) -> str | None:
    tiles = {v.type.tile for v in operands if v.type.tile}
    if len(tiles) > 1:
        return f"operands have different tiles ({', '.join(str(v.type) for v in operands)})"
    tile = next(iter(tiles)) if tiles else ()
    if result.tile != tile:
        return f"result {result} does not have the operands' tile ({', '.join(str(v.type) for v in operands)})"
    lanes = any(v.type.lanes for v in operands)
    if result.lanes != lanes:
        return f"result {result} {'drops' if lanes else 'invents'} the lanes axis of its operands"
    return None


def _one_result(op: POp) -> Fragment | None:
    return op.results[0].type if len(op.results) == 1 else None


def _count(op: POp, n: int) -> list[str]:
    return [] if len(op.results) == n else [f"has {len(op.results)} results, expected {n}"]


@types(P.Const)
def _const(op: P.Const) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    out = []
    if not r.is_scalar:
        out.append(f"a constant is a uniform scalar, got {r}")
    if r.dtype != op.dtype:
        out.append(f"result is {r.dtype} but the constant is {op.dtype}")
    if not literal_fits(op.value, op.dtype):
        out.append(f"value {op.value!r} does not fit {op.dtype}")
    return out


@types(P.Unary)
def _unary(op: P.Unary) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    want = DType.pred if op.fn.value in ("isnan", "isinf") else op.x.type.dtype
    out = [] if r.dtype == want else [f"result is {r.dtype}, expected {want}"]
    p = broadcast_problem((op.x,), r)
    return out + ([p] if p else [])


@types(P.Binary)
def _binary(op: P.Binary) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    out = []
    if not ints_agree(op.lhs.type, op.rhs.type):
        out.append(f"operands are {op.lhs.type.dtype} and {op.rhs.type.dtype}; no implicit promotion")
    if r.dtype != op.lhs.type.dtype and not ints_agree(r, op.lhs.type):
        out.append(f"result is {r.dtype} but the operands are {op.lhs.type.dtype}")
    p = broadcast_problem((op.lhs, op.rhs), r)
    return out + ([p] if p else [])


@types(P.Compare)
def _compare(op: P.Compare) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    out = [] if r.dtype.is_pred else [f"a comparison gives pred, not {r.dtype}"]
    if not ints_agree(op.lhs.type, op.rhs.type):
        out.append(f"compares {op.lhs.type.dtype} with {op.rhs.type.dtype}")
    p = broadcast_problem((op.lhs, op.rhs), r)
    return out + ([p] if p else [])


@types(P.Select)
def _select(op: P.Select) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    out = [] if op.cond.type.dtype.is_pred else [f"condition is {op.cond.type.dtype}, not pred"]
    if not ints_agree(op.on_true.type, op.on_false.type):
        out.append(f"branches are {op.on_true.type.dtype} and {op.on_false.type.dtype}")
    if r.dtype != op.on_true.type.dtype and not ints_agree(r, op.on_true.type):
        out.append(f"result is {r.dtype} but the branches are {op.on_true.type.dtype}")
    p = broadcast_problem((op.cond, op.on_true, op.on_false), r)
    return out + ([p] if p else [])


@types(P.Cast, P.Bitcast)
def _cast(op: P.Cast | P.Bitcast) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    out = [] if r.dtype == op.dtype else [f"result is {r.dtype} but the op converts to {op.dtype}"]
    if isinstance(op, P.Bitcast) and op.x.type.dtype.bits != op.dtype.bits:
        out.append(f"bitcast from {op.x.type.dtype} to {op.dtype} changes the width")
    if (r.lanes, r.tile) != (op.x.type.lanes, op.x.type.tile):
        out.append(f"result {r} is not shaped like its operand {op.x.type}")
    return out


@types(P.Broadcast)
def _broadcast(op: P.Broadcast) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    x = op.x.type
    out = [] if r.dtype == x.dtype else [f"result is {r.dtype} but the operand is {x.dtype}"]
    if len(op.dims) != len(x.tile) or len(set(op.dims)) != len(op.dims) or \
            any(not 0 <= d < len(r.tile) for d in op.dims):
        return out + [f"dims {list(op.dims)} do not place the operand's {len(x.tile)} tile axes in {r}"]
    for k, d in enumerate(op.dims):
        if x.tile[k].extent != r.tile[d].extent and x.tile[k].extent != DConst(1):
            out.append(f"operand axis {k} ({x.tile[k]}) cannot broadcast to result axis {d} ({r.tile[d]})")
    if x.lanes and not r.lanes:
        out.append("drops the lanes axis")
    return out


@types(P.Permute)
def _permute(op: P.Permute) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    x = op.x.type
    if sorted(op.perm) != list(range(len(x.tile))) or len(r.tile) != len(x.tile):
        return [f"perm {list(op.perm)} is not a permutation of the operand's {len(x.tile)} tile axes"]
    if tuple(x.tile[p] for p in op.perm) != r.tile or r.lanes != x.lanes or r.dtype != x.dtype:
        return [f"result {r} is not {x} permuted by {list(op.perm)}"]
    return []


@types(P.ExpandDims, P.Squeeze)
def _expand_squeeze(op: P.ExpandDims | P.Squeeze) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    x = op.x.type
    small, big = (x, r) if isinstance(op, P.ExpandDims) else (r, x)
    if not 0 <= op.axis < len(big.tile) or big.tile[op.axis].extent != DConst(1) or \
            big.tile[:op.axis] + big.tile[op.axis + 1:] != small.tile:
        return [f"{x} -> {r} is not a {op.NAME} of an extent-1 axis at {op.axis}"]
    if r.lanes != x.lanes or r.dtype != x.dtype:
        return [f"result {r} changes the lanes or dtype of {x}"]
    return []


@types(P.OwnedInstances, P.ChunkLanes)
def _lanes(op: P.OwnedInstances | P.ChunkLanes) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    out = [] if r.lanes and not r.tile and r.dtype.is_int else [f"instance indices are an integer lanes vector, "
                                                                  f"got {r}"]
    if isinstance(op, P.ChunkLanes) and not (op.base.type.is_scalar and op.base.type.dtype.is_int):
        out.append(f"chunk base must be a uniform integer, got {op.base.type}")
    return out


@types(P.SplitIndex)
def _split_index(op: P.SplitIndex) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    return [] if r.is_scalar and r.dtype.is_int else [f"a split position is a uniform integer scalar, got {r}"]


@types(P.Ticket)
def _ticket(op: P.Ticket) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    lanes = any(v.type.lanes for v in op.access.operands())
    if r.tile or r.dtype is not DType.i32 or r.lanes != lanes:
        return [f"a ticket is an i32 per member of its access ({'lanes' if lanes else 'uniform'}), got {r}"]
    return []


@types(P.ShapeValue)
def _shape_value(op: P.ShapeValue) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    return [] if r.is_scalar and r.dtype.is_int else [f"a launch value is a uniform integer scalar, got {r}"]


@types(P.ScalarParam)
def _scalar_param(op: P.ScalarParam) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    return [] if r.is_scalar and not r.index else [f"a runtime scalar parameter is a uniform scalar, got {r}"]


@types(P.TileIndex)
def _tile_index(op: P.TileIndex) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    if not r.dtype.is_int or r.lanes or not 0 <= op.axis < len(r.tile):
        return [f"tile positions along axis {op.axis} need a uniform integer tile with that axis, got {r}"]
    return []


@types(P.Random)
def _random(op: P.Random) -> list[str]:  # type: ignore[override]
    r = _one_result(op)
    if r is None:
        return _count(op, 1)
    out = []
    if not op.seed.type.dtype.is_int or not op.offset.type.dtype.is_int:
        out.append("seed and offset must be integers")
    if r.dtype != RNG_DTYPE[op.kind]:
        out.append(f"{op.kind} gives {RNG_DTYPE[op.kind]}, not {r.dtype}")
    p = broadcast_problem((op.seed, op.offset), r)
    return out + ([p] if p else [])


@types(P.Store, P.Barrier, P.AllocBuffer, P.Yield)
def _no_results(op: POp) -> list[str]:
    return _count(op, 0)


@types(P.Load, P.AtomicRMW, P.AtomicCAS, P.Reduce, P.Scan, P.Contract, P.Histogram, P.RegionFold, P.RegionScan,
       P.For, P.While, P.If)
def _typed_elsewhere(op: POp) -> list[str]:
    """Accesses are typed against their buffers (access-complete, atomic-preserved); structured ops and
    control against their operands and regions (structured-complete, region-op-complete)."""
    return []


def value_problem(ix: ProgramIndex, v: PValue) -> str | None:
    t = v.type
    if not isinstance(t, Fragment):
        return f"type {t!r:.40} is not a fragment"
    if not isinstance(t.dtype, DType):
        return f"dtype {t.dtype} is not a concrete dtype"
    if t.index and not t.dtype.is_int:
        return f"{t} is index arithmetic of a non-integer dtype"
    for ax in t.tile:
        if not isinstance(ax, TileAxis) or not isinstance(ax.extent, Dim):
            return f"tile axis {ax!r:.40} is not a (extent, block) pair"
        if ax.block not in ix.constexprs:
            return f"tile axis {ax} is held in {ax.block}, which is no constexpr"
        unknown = ax.extent.symbols() - set(ix.program.symbols) - set(ix.constexprs)
        if unknown:
            return f"tile axis {ax} has an extent over {', '.join(sorted(unknown))}, not shape symbols or constexprs"
        blocks, extents = ix.values(ix.constexprs[ax.block]), ix.values(ax.extent)
        if any(b is not None and e is not None and (b < e or b & (b - 1)) for b, e in zip(blocks, extents)):
            return f"tile axis {ax}: {ax.block} must be a power of two at least the extent {ax.extent}"
    return None


@rule("fragment-types", "all physical values have legal scalar/fragment types, and every op's result type follows "
      "mechanically from its operands")
def check_fragment_types(program: Program, kernel: Kernel | None = None) -> list[Violation]:
    report = Reporter("fragment-types")
    ix = index_of(program)
    for d in ix.defs.values():
        problem = value_problem(ix, d.value)
        if problem is not None:
            report(f"%{d.value.name or 'p'}{d.value.id}: {problem}", d.op, d.group)
    scalars = {q.name: q.dtype for q in program.params if q.kind.value == "scalar"}
    for pl in ix.placed:
        if isinstance(pl.op, P.ScalarParam) and len(pl.op.results) == 1 and \
                scalars.get(pl.op.param) != pl.op.results[0].type.dtype:
            report(f"scalar_param reads {pl.op.param}, which is no {pl.op.results[0].type.dtype} scalar parameter of "
                   f"the ABI", pl.op, pl.group)
        check = TYPE_RULES.get(type(pl.op))
        if check is None:
            report(f"{pl.op.NAME} has no typing rule", pl.op, pl.group)
            continue
        for problem in check(pl.op):
            report(f"{describe(program, pl.op)}: {problem}", pl.op, pl.group)
    return report.found


__all__ = ["TYPE_RULES", "check_fragment_types", "broadcast_problem", "ints_agree", "value_problem"]
