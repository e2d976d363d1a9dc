"""Structured ops and control are complete and executable (seed 001 sections 7 and 9).

* structured-complete: reduce, scan, contract and histogram have complete operands, results,
  identities, accumulators and a closed, typed combine region; for/while/if carry consistent
  values; the forms of a group's body (`looped_rows`) are the body's only op, selected by constexprs;
  every nested region ends with its one terminator.
* region-op-complete: region folds and scans hold the slicing relation and summariser (a source
  region that loads the chunk and yields components plus their membership), identity, combine and,
  for scans, the emit region that writes each scanned chunk; the chunk's identity (its start) and
  extent (its block) never leak into a KIR-observable value.
"""

from __future__ import annotations

from collections.abc import Callable

from kir.core import Kernel
from kir.dtypes import DType
from kir.pointwise import BinaryFn, literal_fits

from .. import ops as P
from ..analysis import captures
from ..launch_expr import LConstexpr
from ..model import AccessRelation, Fragment, Literal, POp, PRegion, Program, PValue
from ..ops._base import ints_agree
from .base import Reporter, describe, rule
from .index import ProgramIndex, index_of

Check = Callable[[ProgramIndex, POp], list[str]]
STRUCTURED: dict[type[POp], Check] = {}


def structured(*classes: type[POp]) -> Callable[[Check], Check]:
    def deco(fn: Check) -> Check:
        for c in classes:
            STRUCTURED[c] = fn
        return fn

    return deco


def types_of(vals: tuple[PValue, ...]) -> tuple[Fragment, ...]:
    return tuple(v.type for v in vals)


def show(ts: tuple[Fragment, ...]) -> str:
    return "(" + ", ".join(str(t) for t in ts) + ")"


def identity_problems(identity: tuple[Literal, ...], accs: tuple[DType, ...], what: str) -> list[str]:
    out = []
    if len(identity) != len(accs):
        out.append(f"{what} has {len(identity)} identity components for {len(accs)} accumulators")
    for lit, dt in zip(identity, accs):
        if not isinstance(dt, DType):
            out.append(f"{what} accumulator {dt!r} is not a dtype")
        elif not literal_fits(lit, dt):
            out.append(f"{what} identity {lit!r} does not fit accumulator {dt}")
    return out


def combine_problems(ix: ProgramIndex, combine: object, accs: tuple[DType, ...], what: str) -> list[str]:
    if not isinstance(combine, PRegion):
        return [f"{what} has no combine region"]
    want = tuple(Fragment(d) for d in accs)
    out = []
    if types_of(combine.args) != want * 2:
        out.append(f"{what} combine takes {show(types_of(combine.args))}; the accumulators need "
                   f"{show(want * 2)}")
    if types_of(combine.yielded) != want:
        out.append(f"{what} combine yields {show(types_of(combine.yielded))}, expected {show(want)}")
    for v in captures(combine):
        if not isinstance(ix.producer(v), P.Const):  # a literal is the same value wherever it is read
            out.append(f"{what} combine region uses %{v.name or 'p'}{v.id} from outside; a combine is a closed "
                       f"function of its arguments and literals")
    return out


def drop_axes(tile: tuple, axes: tuple[int, ...]) -> tuple:
    return tuple(t for k, t in enumerate(tile) if k not in axes)


def axes_problem(axes: tuple[int, ...], rank: int, what: str) -> list[str]:
    if not axes or len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        return [f"{what} axes {list(axes)} are not distinct tile axes of a rank-{rank} tile"]
    return []


def mask_problem(v: PValue | None, what: str) -> list[str]:
    if v is not None and not v.type.dtype.is_pred:
        return [f"{what} is {v.type}, not a pred mask"]
    return []


@structured(P.Reduce, P.Scan)
def _reduce_scan(ix: ProgramIndex, op: P.Reduce | P.Scan) -> list[str]:  # type: ignore[override]
    what = op.NAME
    if not op.inputs:
        return [f"{what} has no inputs"]
    tile = op.inputs[0].type.tile
    out: list[str] = []
    if any(x.type.tile != tile for x in op.inputs):
        out.append(f"{what} inputs {show(types_of(op.inputs))} do not share one tile")
    k = len(op.inputs)
    if len(op.acc_dtypes) != k or len(op.results) != k:
        out.append(f"{what} has {k} inputs, {len(op.acc_dtypes)} accumulators and {len(op.results)} results")
    axes = op.axes if isinstance(op, P.Reduce) else (op.axis,)
    out += axes_problem(axes, len(tile), what)
    lanes = any(x.type.lanes for x in op.inputs)
    res_tile = drop_axes(tile, axes) if isinstance(op, P.Reduce) else tile
    for x, r in zip(op.inputs, op.results):
        if r.type != Fragment(x.type.dtype, lanes, res_tile, r.type.index):
            out.append(f"{what} result {r.type} does not follow from input {x.type} (expected "
                       f"{Fragment(x.type.dtype, lanes, res_tile)})")
    out += identity_problems(op.identity, op.acc_dtypes, what)
    out += combine_problems(ix, op.combine, op.acc_dtypes, what)
    return out + mask_problem(op.member, f"{what} member")


@structured(P.LaneFold, P.LaneScan)
def _lanes(ix: ProgramIndex, op: P.LaneFold | P.LaneScan) -> list[str]:  # type: ignore[override]
    what = op.NAME
    if not op.inputs:
        return [f"{what} has no inputs"]
    out: list[str] = []
    k = len(op.inputs)
    if len(op.acc_dtypes) != k or len(op.results) != k:
        out.append(f"{what} has {k} inputs, {len(op.acc_dtypes)} accumulators and {len(op.results)} results")
    for x, r in zip(op.inputs, op.results):
        if not x.type.lanes or x.type.tile:
            out.append(f"{what} input {x.type} is not a value per lane (lanes, no tile)")
        want = Fragment(x.type.dtype, isinstance(op, P.LaneScan))
        if r.type != want:
            out.append(f"{what} result {r.type} does not follow from input {x.type} (expected {want})")
    out += identity_problems(op.identity, op.acc_dtypes, what)
    return out + combine_problems(ix, op.combine, op.acc_dtypes, what)


@structured(P.Contract)
def _contract(ix: ProgramIndex, op: P.Contract) -> list[str]:  # type: ignore[override]
    a, b = op.lhs.type, op.rhs.type
    out: list[str] = []
    if a.tile != b.tile:
        out.append(f"contract operands {a} and {b} do not share one tile")
    if a.dtype != b.dtype:
        out.append(f"contract operands are {a.dtype} and {b.dtype}")
    out += axes_problem(op.axes, len(a.tile), "contract")
    want = Fragment(op.acc_dtype, a.lanes or b.lanes, drop_axes(a.tile, op.axes))
    if len(op.results) != 1 or op.results[0].type != want:
        out.append(f"contract result {show(types_of(op.results))} should be {want}")
    return out + mask_problem(op.member, "contract member")


@structured(P.Histogram)
def _histogram(ix: ProgramIndex, op: P.Histogram) -> list[str]:  # type: ignore[override]
    v = op.values.type
    out: list[str] = []
    if not v.dtype.is_int or not v.tile:
        out.append(f"histogram counts integer tiles, got {v}")
    if len(op.results) != 1:
        return out + [f"histogram has {len(op.results)} results"]
    r = op.results[0].type
    if r.dtype != DType.i32 or not r.tile or r.lanes != v.lanes:
        out.append(f"histogram result {r} should be i32 counts over a bins tile, with the lanes of {v}")
    return out + mask_problem(op.member, "histogram member")


@structured(P.For)
def _for(ix: ProgramIndex, op: P.For) -> list[str]:  # type: ignore[override]
    out: list[str] = []
    for name, v in (("start", op.start), ("stop", op.stop), ("step", op.step)):
        if not v.type.dtype.is_int or v.type.tile:
            out.append(f"for {name} is {v.type}, not an integer scalar")
    args = op.body.args
    if not args or not args[0].type.dtype.is_int or args[0].type.tile:
        return out + ["for body's first argument must be the integer induction variable"]
    carried = types_of(op.inits)
    if types_of(args[1:]) != carried or types_of(op.body.yielded) != carried or types_of(op.results) != carried:
        out.append(f"for carries {show(carried)} but its body takes {show(types_of(args[1:]))}, yields "
                   f"{show(types_of(op.body.yielded))} and the loop gives {show(types_of(op.results))}")
    return out


@structured(P.While)
def _while(ix: ProgramIndex, op: P.While) -> list[str]:  # type: ignore[override]
    carried = types_of(op.inits)
    out: list[str] = []
    if types_of(op.cond.args) != carried:
        out.append(f"while condition takes {show(types_of(op.cond.args))}, expected {show(carried)}")
    ys = op.cond.yielded
    if len(ys) != 1 or not ys[0].type.dtype.is_pred or ys[0].type.tile:
        out.append(f"while condition yields {show(types_of(ys))}, expected one pred")
    body_args = types_of(op.body.args)
    if body_args[:len(carried)] != carried or len(body_args) != len(carried) + 1 or \
            not body_args[-1].dtype.is_pred:
        out.append(f"while body takes {show(body_args)}, expected the carried values and the active flag")
    if types_of(op.body.yielded) != carried or types_of(op.results) != carried:
        out.append(f"while carries {show(carried)} but its body yields {show(types_of(op.body.yielded))} and the "
                   f"loop gives {show(types_of(op.results))}")
    return out


@structured(P.If)
def _if(ix: ProgramIndex, op: P.If) -> list[str]:  # type: ignore[override]
    out: list[str] = []
    if not op.cond.type.dtype.is_pred or not op.cond.type.is_scalar:
        out.append(f"if condition is {op.cond.type}; a branch needs a uniform pred (lane-varying conditions are "
                   f"predicated)")
    if op.then_.args or op.else_.args:
        out.append("if regions take no arguments")
    if op.flag is not None and (op.flag not in ix.constexprs or any(v not in (0, 1, None)
                                                                       for v in ix.values(ix.constexprs[op.flag]))):
        out.append(f"if selects its branch by {op.flag}, which is no 0/1 constexpr of the program")
    res = types_of(op.results)
    if types_of(op.then_.yielded) != res or types_of(op.else_.yielded) != res:
        out.append(f"if gives {show(res)} but its branches yield {show(types_of(op.then_.yielded))} and "
                   f"{show(types_of(op.else_.yielded))}")
    return out


def _looped_rows(ix: ProgramIndex, op: P.LoopedRows) -> list[str]:
    """The forms of a group's body: the op is its body's only op (the terminator aside), so that each region is
    the whole body in its form, and the launch selects one with a constexpr flag."""
    out: list[str] = []
    pl = ix.place[id(op)]
    body = ix.groups[pl.group].body
    if pl.parents or any(o is not op and not o.TERMINATOR for o in body.ops):
        out.append(f"the forms of group {pl.group}'s body must be the only op at the top of its body")
    if (op.split is None) != (op.split_flag is None):
        out.append("a split form needs both its region and its flag")
    for name in (op.flag, op.axis.block, op.chunk.block) + ((op.split_flag,) if op.split_flag else ()):
        if name not in ix.constexprs:
            out.append(f"{name} is no constexpr; a launch selects a form and sizes its row with constexprs")
    return out


def terminator_problems(region: PRegion, nested: bool) -> list[str]:
    out = []
    for n, o in enumerate(region.ops):
        if o.TERMINATOR and n != len(region.ops) - 1:
            out.append(f"{o.NAME} in the middle of a region")
    if nested and region.terminator is None:
        out.append("a nested region does not end with yield")
    return out


@rule("structured-complete")
def check_structured(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """every structured operation has complete operands, results, regions and accumulator; ordered control carries
    consistent values; regions end with their terminator"""
    ix = index_of(program)
    for g in program.groups:
        for problem in terminator_problems(g.body, False):
            report(f"group {g.id} body: {problem}", group=g.id)
        if g.body.yielded:
            report(f"group {g.id} body yields values; a group's results are its effects", group=g.id)
    for pl in ix.placed:
        for r in pl.op.regions():
            for problem in terminator_problems(r, True):
                report(f"{describe(program, pl.op)}: {problem}", pl.op, pl.group)
        check = _looped_rows if isinstance(pl.op, P.LoopedRows) else STRUCTURED.get(type(pl.op))
        if check is not None:
            for problem in check(ix, pl.op):
                report(f"{describe(program, pl.op)}: {problem}", pl.op, pl.group)


# ---------------------------------------------------------------------------------------------- region ops


def value_deps(ix: ProgramIndex, v: PValue, region: PRegion, stop: frozenset[int] = frozenset()) -> set[int]:
    """Values (inside `region`) that `v`'s value depends on, not counting addresses and membership.

    A load's coordinates and masks select which data it reads, not what the data is; pred values
    decide membership. Neither carries a chunk's identity into the result. The search does not pass
    through the values in `stop` (element positions: the same for an element whatever the chunking).
    """
    inside = {a.id for a in region.args}
    for o in region.walk():
        inside.update(r.id for r in o.results)
    seen: set[int] = set()
    work = [v]
    while work:
        x = work.pop()
        if x.id in seen or x.id not in inside or x.id in stop:
            continue
        seen.add(x.id)
        if x.type.dtype.is_pred:
            continue
        op = ix.producer(x)
        if op is None:
            continue
        for f in op.fields():
            val = getattr(op, f.name)
            if isinstance(val, AccessRelation | PRegion):
                continue
            if isinstance(val, PValue):
                work.append(val)
            elif isinstance(val, tuple):
                work.extend(y for y in val if isinstance(y, PValue))
    return seen


def _chunk_extent_values(ix: ProgramIndex, region: PRegion, block: str) -> set[int]:
    return {o.results[0].id for o in region.walk()
            if isinstance(o, P.ShapeValue) and o.expr == LConstexpr(block) and o.results}


def _element_positions(ix: ProgramIndex, src: PRegion) -> frozenset[int]:
    """`start + tile_index` in a source region: an element's position in the subregion, which does not
    depend on how the subregion is cut into chunks (an argmax component may carry it)."""
    if not src.args:
        return frozenset()
    start = src.args[0].id
    found = set()
    for o in src.walk():
        if isinstance(o, P.Binary) and o.fn is BinaryFn.add and o.results:
            ids = {o.lhs.id, o.rhs.id}
            others = [x for x in (o.lhs, o.rhs) if x.id != start]
            if start in ids and len(others) == 1 and isinstance(ix.producer(others[0]), P.TileIndex):
                found.add(o.results[0].id)
    return frozenset(found)


def source_problems(ix: ProgramIndex, op: P.RegionFold | P.RegionScan) -> tuple[list[str], int]:
    """Checks of the slicing relation + summariser region; returns (problems, component count)."""
    out: list[str] = []
    src = op.source
    if not isinstance(src, PRegion):
        return [f"{op.NAME} has no source region"], 0
    if len(src.args) != 1 or not src.args[0].type.dtype.is_int or not src.args[0].type.is_scalar:
        out.append(f"{op.NAME} source takes {show(types_of(src.args))}; it takes the chunk start (a uniform "
                   f"integer)")
    ys = src.yielded
    if len(ys) < 2 or not ys[-1].type.dtype.is_pred:
        return out + [f"{op.NAME} source yields {show(types_of(ys))}; it yields the components and their "
                      f"membership"], 0
    comps, member = ys[:-1], ys[-1]
    if any(c.type.tile != member.type.tile or len(c.type.tile) != 1 for c in comps):
        out.append(f"{op.NAME} source components {show(types_of(comps))} are not one chunk tile like the "
                   f"membership {member.type}")
    if not any(isinstance(o, P.Load) for o in src.walk()):
        out.append(f"{op.NAME} source reads nothing: it holds no slicing relation of the subregion")
    if op.block not in ix.constexprs:
        out.append(f"{op.NAME} walks chunks of {op.block}, which is no constexpr")
    leaks = {a.id for a in src.args[:1]} | _chunk_extent_values(ix, src, op.block)
    positions = _element_positions(ix, src)
    for c in comps:
        if value_deps(ix, c, src, positions) & leaks:
            out.append(f"{op.NAME} component %{c.id} depends on the chunk's start or extent: the chunking would "
                       f"change the result")
    for name, v in (("begin", op.begin), ("end", op.end)):
        if not v.type.dtype.is_int or v.type.tile:
            out.append(f"{op.NAME} {name} is {v.type}, not an integer per lane")
    return out + mask_problem(op.active, f"{op.NAME} active"), len(comps)


@rule("region-op-complete")
def check_region_ops(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """every region fold/scan has complete segment source relations, summariser, identity, combine and (scans)
    apply/emit, without chunk identity or extent leaking into observable values"""
    ix = index_of(program)
    for pl in ix.placed:
        op = pl.op
        if not isinstance(op, P.RegionFold | P.RegionScan):
            continue
        problems, k = source_problems(ix, op)
        comps = op.source.yielded[:-1] if isinstance(op.source, PRegion) else ()
        accs = op.acc_dtypes
        if k and len(accs) != k:
            problems.append(f"{op.NAME} has {k} components but {len(accs)} accumulators")
        problems += identity_problems(op.identity, accs, op.NAME)
        problems += combine_problems(ix, op.combine, accs, op.NAME)
        lanes = op.begin.type.lanes or op.end.type.lanes
        if isinstance(op, P.RegionFold):
            want = tuple(Fragment(c.type.dtype, lanes) for c in comps)
            # or its accumulators unconverted: a partial that a later fold combines (split-segments)
            acc = tuple(Fragment(d, lanes) for d in op.acc_dtypes) if len(op.acc_dtypes) == len(comps) else want
            if tuple(Fragment(r.type.dtype, r.type.lanes, r.type.tile) for r in op.results) not in (want, acc):
                problems.append(f"region_fold gives {show(types_of(op.results))}, expected {show(want)}")
        else:
            problems += _emit_problems(ix, op, comps)
        for problem in problems:
            report(f"{describe(program, op)}: {problem}", op, pl.group)


def _emit_problems(ix: ProgramIndex, op: P.RegionScan, comps: tuple[PValue, ...]) -> list[str]:
    emit = op.emit
    if not isinstance(emit, PRegion):
        return ["region_scan has no emit region"]
    out: list[str] = []
    args = emit.args
    # the scanned values arrive in the accumulator dtypes (an f16 sum or product scans in f32, as the oracle
    # does, and emit rounds each element once as it stores it)
    accs = tuple(Fragment(d, c.type.lanes, c.type.tile) for c, d in zip(comps, op.acc_dtypes))
    if len(args) != len(comps) + 2 or len(accs) != len(comps) or not args[0].type.dtype.is_int or \
            not args[-1].type.dtype.is_pred or any(not ints_agree(a.type, c) for a, c in zip(args[1:-1], accs)):
        out.append(f"region_scan emit takes {show(types_of(args))}; it takes the chunk start, the scanned "
                   f"components in their accumulator dtypes {show(accs)} and their membership")
    if emit.yielded:
        out.append("region_scan emit yields values; it writes the scanned chunk instead")
    stores = [o for o in emit.walk() if isinstance(o, P.Store)]
    if not stores:
        out.append("region_scan emit writes nothing: the scan's result would be lost")
    leaks = {args[0].id} if args else set()
    leaks |= _chunk_extent_values(ix, emit, op.block)
    for s in stores:
        if value_deps(ix, s.value, emit) & leaks:
            out.append("region_scan emits a value that depends on the chunk's start or extent")
    if op.results:
        out.append("region_scan gives results; its output is what emit writes")
    return out


__all__ = ["STRUCTURED", "check_structured", "check_region_ops", "value_deps"]
