"""Program-space ops: which instances a program owns, shape values, tile coordinates, barriers."""

from __future__ import annotations

import dataclasses

from ..launch_expr import LaunchExpr
from ..model import Fragment, POp, PRegion, PValue, TileAxis
from ._base import (
    CONTROL,
    EFFECTS,
    INVARIANT,
    NO_TRAITS,
    POSITIONWISE,
    PURE,
    UNIFORM,
    effect_members,
    no_results,
    per_program,
    pop,
    typing_rule,
)


@pop("owned_instances", NO_TRAITS)
class OwnedInstances(POp):
    """The flattened instances this program owns: `(pid - O_g) * BLOCK + arange(BLOCK)` (lanes, index).

    With `splits` (a constexpr S), S consecutive programs own each block and split its work between them
    (`split_index` tells them apart): the block is `(pid - O_g) // S`.

    With `ticket` (the group's self-resetting sync buffer, see `physical.ops.lookback`) the block is the
    program's ticket instead of `pid - O_g`: an acq_rel atomic increment of the buffer's counter, so the
    block numbers follow the order in which programs start, whatever order the launch runs them in (a
    program may then wait for lower-numbered ones: they have started). With both, S consecutive tickets
    share each block: the block is `ticket // S` and `split_index` is `ticket % S`.

    With `helper_block` (a uniform index the body computes before, from data: see `helper_index`), the
    group's segment ends in helper programs past its blocks; a helper owns block `helper_block` (negative in
    the block programs, which own their own) and takes part in the work of its instances that the data hands
    it (balanced segments: physical/passes/balance_segments.py).
    """

    group: int
    block: str
    splits: str | None = None
    ticket: int | None = None
    helper_block: PValue | None = None


@pop("owned_tile", NO_TRAITS)
class OwnedTile(POp):
    """The instances a tile-owning program owns (groups with `tiles`): one result per domain axis.

    Leading axes give one coordinate each (uniform index scalars). Trailing axis k gives the block
    `tile_k * B_k + arange(B_k)` (a one-axis index tile of extent and block `blocks[k]`); positions
    past the domain extent are no instances, so effects are masked by `coordinate < extent`. Programs
    enumerate tiles row-major, except that with `group_m > 1` the two trailing axes are visited in
    bands of `group_m` tile rows (column by column inside a band), so that concurrent programs
    share operand rows and columns in cache.
    """

    group: int
    blocks: tuple[str, ...]
    group_m: int = 1


@pop("block_loop", EFFECTS)
class BlockLoop(POp):
    """A persistent traversal: the group's programs walk its blocks of instances.

    While the constexpr `flag` is 1, program `q = pid - O_g` of a segment of `L_g` programs runs `body` for
    the blocks `q, q + L_g, q + 2 L_g, ...` below `blocks` (cdiv(prod(domain), BLOCK_I), as the kernel
    evaluates it); the segment launches `min(blocks, resident)` programs. While it is 0 the body runs once,
    for the program's own block `q`, and the segment has one program per block. The body decodes its block's
    instances (`owned_instances`, which reads the loop's block); the ops before the loop in the group's body
    run once per program: they must be block-invariant (the verifier's rule loop-invariant), so that data
    every instance reads (a layernorm's weight and bias) is read once per program, not once per block.
    The loop sits at the top of its group's body (or of an alternative body) and is the last op there.
    """

    group: int
    flag: str
    blocks: LaunchExpr
    resident: LaunchExpr
    body: PRegion


@pop("looped_rows", EFFECTS | CONTROL)
class LoopedRows(POp):
    """A group's body in the two forms a launch selects with the constexpr `flag` (one specialisation compiles
    one): `whole` while it is 0, the row axis `axis` held whole in one tile; `looped` while it is 1, the row
    walked in chunks of tile axis `chunk`, in `loops` passes (one per reduction that later work depends on).
    Both perform the group's effects. The op is the only op at the top of its group's body (besides the
    terminator), so each region is the body of one form: it decodes the program's instances itself, and it
    may hold the group's loop over blocks of instances (`block_loop`). The regions are scopes like any
    other: each defines its own values (a value has one definition in the program).

    With `split_flag` (a constexpr) a third form, `split`, runs while it is 1, whatever `flag` says: the row
    spread over several programs that pass chunk aggregates on by look-back (physical/passes/split_rows.py,
    chosen at launch where the rows are too few to keep the device busy).
    """

    flag: str
    axis: TileAxis
    chunk: TileAxis
    loops: int
    whole: PRegion
    looped: PRegion
    split_flag: str | None = None
    split: PRegion | None = None


def looped_rows(body: PRegion) -> LoopedRows | None:
    """The choice between a group's row forms at the top of its body, if it has one."""
    return next((op for op in body.ops if isinstance(op, LoopedRows)), None)


def forms(body: PRegion) -> tuple[PRegion, ...]:
    """The bodies a group runs, one per form a launch may select: the regions of its `looped_rows` op, or the
    body itself. Rules about a group's top level (its instances decoded once, its loop over blocks) hold for
    each."""
    choice = looped_rows(body)
    return choice.regions() if choice is not None else (body,)


def whole_form(body: PRegion) -> PRegion:
    """The form of a group's body that holds its row whole (the body itself when it has one form)."""
    choice = looped_rows(body)
    return choice.whole if choice is not None else body


def with_form(body: PRegion, old: PRegion, new: PRegion) -> PRegion:
    """`body` with its form `old` (one of `forms(body)`) replaced by `new`."""
    if old is body:
        return new
    choice = looped_rows(body)
    assert choice is not None, "not a form of this body"
    field = "whole" if old is choice.whole else "looped" if old is choice.looped else "split"
    assert getattr(choice, field) is old, "not a form of this body"
    changed = dataclasses.replace(choice, **{field: new})
    return PRegion(body.args, tuple(changed if op is choice else op for op in body.ops))


def block_loop(ops: tuple[POp, ...]) -> BlockLoop | None:
    """The loop over blocks of instances among `ops` (a body's top level), if any."""
    return next((op for op in ops if isinstance(op, BlockLoop)), None)


def once_ops(body: PRegion) -> tuple[POp, ...]:
    """The ops of a persistent group's body that run once per program: those before its loop over blocks."""
    out: list[POp] = []
    for op in body.ops:
        if isinstance(op, BlockLoop):
            return tuple(out)
        out.append(op)
    return ()


def instance_ops(body: PRegion) -> tuple[POp, ...]:
    """The top-level ops of a group's body as one block of instances runs them: a loop over blocks of
    instances stands for its body (the ops before it run once per program, then the body for the block)."""
    out: list[POp] = []
    for op in body.ops:
        out.extend((o for o in op.body.ops if not o.TERMINATOR) if isinstance(op, BlockLoop) else (op,))
    return tuple(out)


@pop("chunk_lanes", PURE)
class ChunkLanes(POp):
    """`base + arange(BLOCK)` (lanes, index): one chunk of a workset run in order inside an instance."""

    base: PValue
    block: str


@pop("shape_value", PURE | UNIFORM | INVARIANT)
class ShapeValue(POp):
    """The runtime value of a launch expression over shape symbols (a uniform scalar)."""

    expr: LaunchExpr


@pop("tile_index", PURE | POSITIONWISE | INVARIANT)
class TileIndex(POp):
    """Position along tile axis `axis` of the result's tile (`arange(BLOCK)` broadcast to the tile)."""

    axis: int


@pop("barrier", EFFECTS)
class Barrier(POp):
    """Orders this program's earlier memory effects before its later reads (intra-program only)."""


@pop("scalar_param", PURE | UNIFORM | INVARIANT)
class ScalarParam(POp):
    """The launch value of a runtime scalar parameter of the ABI (a uniform scalar of its dtype)."""

    param: str


# ---------------------------------------------------------------------------------------------- typing


@typing_rule(OwnedInstances, ChunkLanes, one_result=True)
def _lanes(op: OwnedInstances | ChunkLanes, r: Fragment) -> list[str]:
    helper = getattr(op, "helper_block", None)
    if helper is not None and not (helper.type.is_scalar and helper.type.dtype.is_int):
        return [f"a helper's block is a uniform integer scalar, got {helper.type}"]
    out = [] if r.lanes and not r.tile and r.dtype.is_int else [f"instance indices are an integer lanes vector, "
                                                                  f"got {r}"]
    if isinstance(op, ChunkLanes) and not (op.base.type.is_scalar and op.base.type.dtype.is_int):
        out.append(f"chunk base must be a uniform integer, got {op.base.type}")
    return out


@typing_rule(ShapeValue, one_result=True)
def _shape_value(op: ShapeValue, r: Fragment) -> list[str]:
    return [] if r.is_scalar and r.dtype.is_int else [f"a launch value is a uniform integer scalar, got {r}"]


@typing_rule(ScalarParam, one_result=True)
def _scalar_param(op: ScalarParam, r: Fragment) -> list[str]:
    return [] if r.is_scalar and not r.index else [f"a runtime scalar parameter is a uniform scalar, got {r}"]


@typing_rule(TileIndex, one_result=True)
def _tile_index(op: TileIndex, r: Fragment) -> list[str]:
    if not r.dtype.is_int or r.lanes or not 0 <= op.axis < len(r.tile):
        return [f"tile positions along axis {op.axis} need a uniform integer tile with that axis, got {r}"]
    return []


typing_rule(Barrier)(no_results)


@typing_rule(LoopedRows)
def _looped_rows(op: LoopedRows) -> list[str]:
    out = no_results(op)
    if op.whole.args or op.looped.args:
        out.append(f"the forms of a group's body bind no region arguments, got {len(op.whole.args)} and "
                   f"{len(op.looped.args)}")
    if op.loops < 1:
        out.append(f"a looped form walks its row at least once, got {op.loops} passes")
    return out


@typing_rule(BlockLoop)
def _block_loop(op: BlockLoop) -> list[str]:
    out = no_results(op)
    if op.body.args:
        out.append(f"a loop over blocks of instances binds no region arguments, got {len(op.body.args)}")
    return out


@typing_rule(OwnedTile)
def _owned_tile(op: OwnedTile) -> list[str]:
    out: list[str] = []
    nt = len(op.blocks)
    if nt == 0 or len(op.results) < nt:
        return [f"owns tiles of {nt} axes but has {len(op.results)} results"]
    if op.group_m < 1:
        out.append(f"group_m {op.group_m} must be at least 1")
    lead = op.results[:len(op.results) - nt]
    for r in lead:
        if not (r.type.is_scalar and r.type.dtype.is_int):
            out.append(f"a leading coordinate is a uniform integer scalar, got {r.type}")
    for r, b in zip(op.results[len(lead):], op.blocks):
        t = r.type
        if not t.dtype.is_int or t.lanes or len(t.tile) != 1 or t.tile[0].block != b:
            out.append(f"a tiled coordinate is an integer tile of one axis held in {b}, got {t}")
    return out


# ---------------------------------------------------------------------------------------------- members


effect_members(BlockLoop, Barrier)(per_program)
