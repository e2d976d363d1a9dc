"""Program-space ops: owned instances, lane chunks, shape values, tile positions, barriers, buffers."""

from __future__ import annotations

from kir.dtypes import DType
from physical import ops as P
from physical.model import BufferInit

from .emit import REGISTER_DTYPE, TL_DTYPE, Emitter, choose, emits, literal
from .emit_lookback import draw_ticket, emit_ticket
from .names import comment_text, mangle
from .numerics import fp8_bits, narrow_result


@emits(P.OwnedInstances)
def emit_owned(em: Emitter, op: P.OwnedInstances) -> None:
    if op.ticket is not None:
        emit_ticket(em, op)
        return
    n = em.define(op.result, "flat")
    block = em.block_index or em.program_index
    if op.splits is not None:  # `splits` consecutive programs share each block (see split_index)
        block = f"({block} // {op.splits})"
    if op.helper_block is not None:  # a helper program (past the blocks) joins the block the data gave it
        helper = em.name(op.helper_block)
        block = f"tl.where({helper} >= 0, {helper}, {block})"
    em.line(f"{n} = {block} * {op.block} + tl.arange(0, {op.block}).to(pid.dtype)")


@emits(P.BlockLoop)
def emit_block_loop(em: Emitter, op: P.BlockLoop) -> None:
    """While the flag is set, the programs walk the blocks with a stride of their segment's program count;
    otherwise the body runs once, for the program's own block."""
    def walk() -> None:
        block, blocks = em.fresh("block"), em.fresh("blocks")
        stride = "tl.num_programs(0)" if len(em.p.segments) == 1 else f"seg{op.group}_length"
        what = f"programs walk the blocks of {em.lanes_block} instances; the lines above ran once"
        em.line(f"# {comment_text(what)}")
        em.line(f"{blocks} = tl.cast({em.launch(op.blocks)}, pid.dtype)")
        with em.block(f"for {block} in range({em.program_index}, {blocks}, tl.cast({stride}, pid.dtype))"):
            em.block_index = f"tl.cast({block}, pid.dtype)"
            em.restart_comments()
            em.ops(op.body.ops)
        em.block_index = None

    choose(em, op.flag, walk, lambda: em.ops(op.body.ops))


@emits(P.LoopedRows)
def emit_looped_rows(em: Emitter, op: P.LoopedRows) -> None:
    """`if FLAG: <looped form> else: <whole form>`, or only the form a flag fixed for every launch selects; with a
    split form, `if SPLIT_FLAG: <split form> else: ...` around it."""
    def rows() -> None:
        choose(em, op.flag, lambda: em.ops(op.looped.ops), lambda: em.ops(op.whole.ops))

    if op.split is None or op.split_flag is None:
        rows()
        return
    split = op.split
    choose(em, op.split_flag, lambda: em.ops(split.ops), rows)


@emits(P.SplitIndex)
def emit_split_index(em: Emitter, op: P.SplitIndex) -> None:
    n = em.define(op.result, "split")
    em.line(f"{n} = {em.ticket or em.program_index} % {op.splits}")  # a ticket group's position is its ticket


@emits(P.HelperIndex)
def emit_helper_index(em: Emitter, op: P.HelperIndex) -> None:
    position = em.program_index if op.ticket is None else draw_ticket(em, op.ticket)
    n = em.define(op.result, "helper")
    em.line(f"{n} = {position} - tl.cast({em.launch(op.blocks)}, pid.dtype)")


@emits(P.ChunkLanes)
def emit_chunk_lanes(em: Emitter, op: P.ChunkLanes) -> None:
    n = em.define(op.result, "flat")
    em.line(f"{n} = {em.name(op.base)} + tl.arange(0, {op.block}).to(pid.dtype)")


@emits(P.ShapeValue)
def emit_shape_value(em: Emitter, op: P.ShapeValue) -> None:
    n = em.define(op.result, "n")
    em.line(f"{n} = tl.cast({em.launch(op.expr)}, pid.dtype)")


@emits(P.TileIndex)
def emit_tile_index(em: Emitter, op: P.TileIndex) -> None:
    t = op.result.type
    n = em.define(op.result, "pos")
    ar = f"tl.arange(0, {t.tile[op.axis].block}).to(pid.dtype)"
    if len(t.tile) == 1:
        em.line(f"{n} = {ar}")
        return
    idx = ", ".join(":" if k == op.axis else "None" for k in range(len(t.tile)))
    em.line(f"{n} = tl.broadcast_to({ar}[{idx}], {em.shape(t)})")


@emits(P.Barrier)
def emit_barrier(em: Emitter, op: P.Barrier) -> None:
    em.line("tl.debug_barrier()")


@emits(P.AllocBuffer)
def emit_alloc(em: Emitter, op: P.AllocBuffer) -> None:
    buf = em.buffers[op.buffer]
    if buf.init is not BufferInit.FULL:
        em.line(f"# {comment_text(buf.name)}: uninitialised; the kernel writes it before reading")
        return
    numel = " * ".join(em.dim(d) for d in buf.shape) or "1"
    ws = em.workspace_names[buf.storage]  # type: ignore[index]
    if buf.dtype.is_fp8:  # written as its bits, as every fp8 access (emit_access): the fill is a uint8 literal
        ws = f"{ws}.to(tl.pointer_type(tl.uint8))"
    base = f"{ws} + {em.name(op.copy)}.to(pid.dtype) * ({numel})" if op.copy is not None else ws
    e = em.fresh("e")
    offs = em.fresh("offs")
    lanes = op.copy is not None and op.copy.type.lanes
    # A lanes x chunk tile stays within Triton's largest tensor (2**20 elements) whatever the lanes
    # block: 1024 columns up to 1024 lanes, then 2**20 // lanes (block sizes are powers of two).
    chunk = f"(1024 // (({em.lanes_block} + 1023) // 1024))" if lanes else "1024"
    fill = fp8_bits(buf.fill, buf.dtype) if buf.dtype.is_fp8 else literal(buf.fill, buf.dtype)
    with em.block(f"for {e} in range(0, {numel}, {chunk})"):
        em.line(f"{offs} = {e} + tl.arange(0, {chunk})")
        if lanes:
            mask = f"{offs}[None, :] < ({numel})"
            if op.active is not None:
                mask = f"({mask}) & {em.name(op.active)}[:, None]"
            em.line(f"tl.store(({base})[:, None] + {offs}[None, :], "
                    f"tl.full(({em.lanes_block}, {chunk}), {fill}, {TL_DTYPE[buf.dtype]}), "
                    f"mask={mask})")
        else:
            em.line(f"tl.store({base} + {offs}, tl.full((1024,), {fill}, "
                    f"{TL_DTYPE[buf.dtype]}), mask={offs} < ({numel}))")


@emits(P.ScalarParam)
def emit_scalar_param(em: Emitter, op: P.ScalarParam) -> None:
    n = em.define(op.result, mangle(op.param, "scalar"))
    dt = op.result.type.dtype
    if dt is DType.f64:  # passed as its bit pattern (`abi.scalar_argument`)
        em.line(f"{n} = tl.cast({em.param_names[op.param]}, tl.int64).to(tl.float64, bitcast=True)")
        return
    em.line(f"{n} = tl.cast({em.param_names[op.param]}, {REGISTER_DTYPE[dt]})")
    if dt.in_f32:  # the launcher passes an f32: the kernel sees the nearest bf16 / fp8 value
        em.line(f"{n} = {narrow_result(em, n, dt)}")


@emits(P.OwnedTile)
def emit_owned_tile(em: Emitter, op: P.OwnedTile) -> None:
    """Decode `pid - O_g` into leading coordinates and one tile per trailing axis (see P.OwnedTile)."""
    g = em.group
    assert g is not None
    nt = len(op.blocks)
    lead, tiled = g.domain[:len(g.domain) - nt], g.domain[len(g.domain) - nt:]
    rest = em.fresh("tile_id")
    em.line(f"{rest} = {em.program_index}")
    counts = []
    for d, b in zip(tiled, op.blocks):
        n = em.fresh("tiles")
        em.line(f"{n} = tl.cdiv(tl.cast({em.dim(d)}, pid.dtype), {b})")
        counts.append(n)
    per = " * ".join(counts)
    if lead:
        outer = em.fresh("outer")
        em.line(f"{outer} = {rest} // ({per})")
        em.line(f"{rest} = {rest} % ({per})")
    tile_ids = [""] * nt
    if op.group_m > 1 and nt >= 2:
        # bands of group_m tile rows, walked column by column: concurrent programs share operands
        band, first, rows = em.fresh("band"), em.fresh("first_row"), em.fresh("band_rows")
        em.line(f"{band} = {op.group_m} * {counts[-1]}")
        em.line(f"{first} = ({rest} // {band}) * {op.group_m}")
        em.line(f"{rows} = tl.minimum({counts[-2]} - {first}, {op.group_m})")
        tile_ids[-2], tile_ids[-1] = em.fresh("tile_row"), em.fresh("tile_col")
        em.line(f"{tile_ids[-2]} = {first} + ({rest} % {band}) % {rows}")
        em.line(f"{tile_ids[-1]} = ({rest} % {band}) // {rows}")
        if nt > 2:
            em.line(f"{rest} = {rest} // ({counts[-2]} * {counts[-1]})")
        upto = nt - 2
    else:
        upto = nt
    for k in range(upto - 1, -1, -1):
        tile_ids[k] = em.fresh("tile")
        em.line(f"{tile_ids[k]} = {rest} % {counts[k]}" if k else f"{tile_ids[k]} = {rest}")
        if k:
            em.line(f"{rest} = {rest} // {counts[k]}")
    names = [em.define(r, f"c{k}") for k, r in enumerate(op.results)]
    for k in range(len(lead) - 1, -1, -1):
        if k:
            em.line(f"{names[k]} = {outer} % tl.cast({em.dim(lead[k])}, pid.dtype)")
            em.line(f"{outer} = {outer} // tl.cast({em.dim(lead[k])}, pid.dtype)")
        else:
            em.line(f"{names[k]} = {outer}")
    for k, b in enumerate(op.blocks):
        em.line(f"{names[len(lead) + k]} = {tile_ids[k]} * {b} + tl.arange(0, {b}).to(pid.dtype)")
