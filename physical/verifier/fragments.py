"""Fragment types: every physical value has a legal scalar/fragment type, and each op's result type
follows from its operands (mechanical broadcasting of lanes and tile, no implicit promotion).

Each op's typing rule sits beside its class in `physical.ops` (`type_problems`); structured ops and
control are typed by the structured rules (`structured.py`) and declare `typed_elsewhere` there.
"""

from __future__ import annotations

from kir.core import Kernel
from kir.dims import Dim
from kir.dtypes import DType

from .. import ops as P
from ..model import Fragment, Program, PValue, TileAxis
from .base import Reporter, describe, rule
from .index import ProgramIndex, index_of


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


@rule("fragment-types")
def check_fragment_types(program: Program, kernel: Kernel | None, report: Reporter) -> None:
    """all physical values have legal scalar/fragment types, and every op's result type follows mechanically from its
    operands"""
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
        check = getattr(type(pl.op), "type_problems", None)
        if check is None:
            report(f"{pl.op.NAME} has no typing rule", pl.op, pl.group)
            continue
        for problem in check(pl.op):
            report(f"{describe(program, pl.op)}: {problem}", pl.op, pl.group)


__all__ = ["check_fragment_types", "value_problem"]
