"""`explain`: the physical plan of a kernel in words (worksets, groups, segments, buffers, bounds, notes)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kir.core import Kernel
from kir.dtypes import DType
from kir.solver import with_names

from . import ops as P
from .counts import operation_counts
from .launch_expr import DEVICE_SMS, LaunchExpr, LBin, LConst, ldim, lprod, lsum
from .launch_text import in_terms_of, named_formulas, simplify, text
from .model import Access, AssumeInBounds, BufferScope, Group, Guard, POp, PRegion, Program, Proven
from .printer import guards_of

DEFAULT_SMS = 132  # an H100 SXM (sm_90): the multiprocessors `explain` sizes a launch for unless told


def _where(program: Program, op: POp) -> str:
    info = program.op_info(op.origin)
    if info is None:
        return ""
    at = info.where()
    return f" ({info.name} at {at})" if at else f" ({info.name})"


def _axes(tile: tuple, axes: tuple[int, ...]) -> str:
    return ", ".join(str(tile[a].extent) for a in axes if 0 <= a < len(tile))


def _inside(op: POp) -> str | None:
    """What one instance runs in order or as a tile for this op (None for plain element work)."""
    if isinstance(op, P.Reduce) and op.inputs:
        return f"reduce {op.kind} over {_axes(op.inputs[0].type.tile, op.axes)} (tile)"
    if isinstance(op, P.Scan) and op.inputs:
        mode = ("reverse " if op.reverse else "") + ("exclusive " if op.exclusive else "")
        return f"{mode}scan {op.kind} along {_axes(op.inputs[0].type.tile, (op.axis,))} (tile)"
    if isinstance(op, P.Contract):
        return f"contraction over {_axes(op.lhs.type.tile, op.axes)} (tile, {op.acc_dtype} accumulator)"
    if isinstance(op, P.RegionFold):
        return f"region fold {op.kind} over a data-dependent subregion [begin, end), in chunks of {op.block}"
    if isinstance(op, P.RegionScan):
        return f"region scan {op.kind} over a data-dependent subregion [begin, end), in chunks of {op.block}"
    if isinstance(op, P.For):
        if any(isinstance(o, P.ChunkLanes) for o in op.body.ops):
            return "a workset run chunk by chunk, in order"
        carried = f", carrying {len(op.inits)} value{'s' * (len(op.inits) != 1)}" if op.inits else ""
        return f"ordered for loop{carried}"
    if isinstance(op, P.While):
        return f"ordered while loop, carrying {len(op.inits)} value{'s' * (len(op.inits) != 1)}"
    if isinstance(op, P.Histogram):
        return "histogram (tile)"
    if isinstance(op, P.BinCount):
        return "bin counts of the owned values, a tile of bins at a time"
    if isinstance(op, P.MatMul):
        return f"tile matrix multiply (tl.dot), accumulating in {op.acc.type.dtype}"
    if isinstance(op, P.If) and op.cond.type.is_scalar:
        return "a uniform branch between two forms of the work"
    if isinstance(op, P.AtomicRMW | P.AtomicCAS):
        kind = f"atomic {op.kind}" if isinstance(op, P.AtomicRMW) else "atomic compare-and-swap"
        return f"{kind} ({op.order}, shared by the {op.sharing}, {op.scope} scope)"
    return None


def _contiguous_walks(p: Program, g: Group) -> list[str]:
    """For each access of a tile group, the tiled domain axis its last (unit-stride) coordinate follows:
    loads and stores of a permute each name theirs, so the reader sees both sides walk memory in order."""
    if any(isinstance(op, P.MatMul) for op in g.body.walk()):
        return []  # a contraction's operands also walk its reduced axis, which is no tile of the domain
    tiled = g.ownership.axes(g.domain)[1]
    follows: dict[int, frozenset[int]] = {}
    out: list[str] = []
    for op in g.body.walk():
        if isinstance(op, P.OwnedTile):
            lead = len(op.results) - len(op.blocks)
            for k, r in enumerate(op.results):
                follows[r.id] = frozenset({k - lead}) if k >= lead else frozenset()
            continue
        if isinstance(op, P.Load | P.Store) and op.access.coords:
            last = follows.get(op.access.coords[-1].id, frozenset())
            if len(last) == 1:
                out.append(f"{op.NAME} {p.buffer(op.access.buffer).name} along {tiled[next(iter(last))]}")
        axes = frozenset().union(*(follows.get(v.id, frozenset()) for v in op.operands()))
        for r in op.results:
            follows[r.id] = axes
    return out


def _group_lines(p: Program, g: Group, consts: dict, f: _Formulas) -> list[str]:
    seg = next((s for s in p.segments if s.group == g.id), None)
    where = f" at {g.loc.file.rsplit('/', 1)[-1]}:{g.loc.line}" if g.loc else ""
    if g.domain and g.ownership.tiled:
        dom = ", ".join(str(d) for d in g.domain)
        lead, tiled = g.ownership.axes(g.domain)
        shape = " x ".join(f"{b}" for b in g.ownership.tiles)
        lines = [f"group {g.id} ({g.name}{where}): workset over ({dom})",
                 f"  each program owns one tile {shape} of ({', '.join(map(str, tiled))})"
                 + (f" and one coordinate of each of ({', '.join(map(str, lead))})" if lead else "")]
        walks = _contiguous_walks(p, g)
        if walks:
            lines.append("  contiguous along a tile axis: " + ", ".join(walks))
    elif g.domain:
        dom = ", ".join(str(d) for d in g.domain)
        lines = [f"group {g.id} ({g.name}{where}): workset over ({dom}), flattened row-major",
                 f"  each program owns {g.block} consecutive instances"]
    else:
        why = "independence could not be proven; everything runs in order" if g.serial else "nothing to map"
        lines = [f"group {g.id} ({g.name}{where}): a single instance ({why})"]
    if seg is not None:
        lines.append(f"  segment: programs {f.span(seg.offset, seg.length)}")
    inside: list[str] = []
    for op in P.whole_form(g.body).walk():  # the looped form, below, does the same work in chunks
        what = _inside(op)
        if what is not None and what not in inside:
            inside.append(what)
    lines.append("  inside each instance: " + ("; ".join(inside) if inside else "element-wise work only"))
    choice, whole = P.looped_rows(g.body), P.whole_form(g.body)
    loop = P.block_loop(whole.ops)
    if loop is not None:
        loads = sorted({p.buffer(op.access.buffer).name for op in P.once_ops(whole) if isinstance(op, P.Load)})
        lines.append(f"  persistent when {loop.flag} is 1: the programs "
                     f"walk the {f(loop.blocks)} blocks of instances, as many programs "
                     f"as keep the device busy (resident_programs(num_warps)); each reads "
                     f"{', '.join(loads) or 'nothing'} "
                     f"once, before its loop")
    lines += _lookback_lines(p, g, f)
    if choice is None:
        lines += _split_segments(p, g)
    else:
        passes = f"{choice.loops} pass{'es' if choice.loops > 1 else ''}"
        lines.append(f"  looped when {choice.flag} is 1: {choice.axis.extent} in chunks of "
                     f"{choice.chunk.block}, {passes} over the row")
        lines += _cross_program(p, g, choice.looped)
        if choice.split is not None:
            lines.append(f"  split when {choice.split_flag} is 1 (the row is looped and the rows are fewer than the "
                         f"resident programs: decided at launch): {g.block} = 1 row a program, "
                         f"{_split_count(choice)} programs a row")
            lines += _lookback_lines(p, g, f, choice.split)
    return lines


def _cross_program(p: Program, g: Group, body: PRegion) -> list[str]:
    """The cooperation of the programs that share a block (physical/workspace.py), as a plan."""
    split = next((op for op in body.ops if isinstance(op, P.SplitIndex)), None)
    if split is None:
        return []
    tickets = [op for op in body.walk() if isinstance(op, P.Ticket)]
    slots = sorted({p.buffer(op.access.buffer).name for op in body.walk() if isinstance(op, P.Store)
                    and p.buffer(op.access.buffer).scope is BufferScope.INVOCATION_WORKSPACE
                    and op.access.copy is not None})
    counters = sorted({p.buffer(t.access.buffer).name for t in tickets})
    per = "each row" if g.domain else "the reduction"
    return [f"  split across programs: {split.splits} programs share {per} (1 where there are instances enough to "
            f"fill the device); program s folds the s-th run of chunks and writes its partial into its own slot of "
            f"{', '.join(slots)} (one slot per program, invocation workspace)",
            f"  combine: each program draws a ticket from {', '.join(counters)} (acq_rel atomic, device scope); the "
            f"one that draws the last combines the {split.splits} slots in slot order (the same order every run: "
            f"bitwise reproducible, no float atomics), stores the result and resets the counter (self-resetting: "
            f"nothing is filled before a launch)",
            f"  where {split.splits} = 1 (constexpr SPLIT_{g.id} = 0) the kernel holds only the direct form: each "
            f"program stores its own result, with no workspace traffic"]


def _split_segments(p: Program, g: Group) -> list[str]:
    """The cooperation of the programs that share a block of region folds (passes/split_segments.py)."""
    split = next((op for op in g.body.ops if isinstance(op, P.SplitIndex)), None)
    if split is None or any(isinstance(op, P.PublishSlot) for op in g.body.ops):  # look-back: _lookback_lines
        return []
    slots = sorted({p.buffer(op.access.buffer).name for op in g.body.walk() if isinstance(op, P.Store)
                    and p.buffer(op.access.buffer).scope is BufferScope.INVOCATION_WORKSPACE
                    and op.access.copy is not None})
    counters = sorted({p.buffer(t.access.buffer).name for t in g.body.walk() if isinstance(t, P.Ticket)})
    helper = next((op for op in g.body.ops if isinstance(op, P.HelperIndex)), None)
    return [f"  split across programs: {split.splits} programs share each block of instances (1 where there are "
            f"instances enough to fill the device); program s folds the s-th piece of every subregion (whole "
            f"chunks, cdiv(end - begin, {split.splits} * chunk) chunks each) and writes its partials into its own "
            f"slot of {', '.join(slots)} (one slot per program, invocation workspace)",
            f"  combine: each program draws a ticket from {', '.join(counters)} (acq_rel atomic, device scope); the "
            f"one that draws the last folds the {split.splits} slots in slot order with each fold's combine (the "
            f"same order every run: bitwise reproducible, no float atomics), stores the results and resets the "
            f"counter (self-resetting: nothing is filled before a launch)",
            f"  where {split.splits} = 1 (constexpr SPLIT_{g.id} = 0) the kernel holds only the direct form: each "
            f"program stores its own folds, with no workspace traffic"] if helper is None else _helper_lines(
        p, g, split, helper, slots, counters)


def _helpers_of(g: Group) -> str:
    """The constexpr naming the group's helper programs."""
    return next(op.helpers for op in g.body.ops if isinstance(op, P.HelperIndex))


def _chunks_of(p: Program, g: Group) -> str:
    """The constexpr naming the chunks of a group balanced over a (segments, columns) workset (a helper per block
    of a segment for each chunk): CHUNKS_g where the program has it, else the group's helpers."""
    return f"CHUNKS_{g.id}" if f"CHUNKS_{g.id}" in dict(p.constexprs) else _helpers_of(g)


def _helper_lines(p: Program, g: Group, split: P.SplitIndex, helper: P.HelperIndex, slots: list[str],
                  counters: list[str]) -> list[str]:
    """Balanced segments by the data (passes/balance_segments.py): helpers past the blocks."""
    fold = next((op for op in g.body.walk() if isinstance(op, P.RegionFold)), None)
    block = fold.block if fold is not None else "the fold's chunk"
    chunk_slots = sorted({p.buffer(op.access.buffer).name for op in g.body.walk() if isinstance(op, P.Store)
                          and op.access.copy is not None and op.access.copy.id == helper.results[0].id})
    heads = [s for s in slots if s not in chunk_slots]
    h, sp = helper.helpers, split.splits
    consts = dict(p.constexprs)
    span, chunks = f"HELPER_SPAN_{g.id}", f"CHUNKS_{g.id}"
    if span in consts:  # (segments, columns): a helper per chunk and block the segment's columns may span
        who = (f"the folded rows are cut into {chunks} chunks of C = cdiv(rows, {chunks} * {block}) * {block} rows; "
               f"a chunk has {span} helpers (the most blocks of instances a segment's columns lie in), helper h "
               f"takes chunk k = h // {span} for the (h % {span})-th block of the segment holding row k * C, found "
               f"by binary search over the offsets (a while loop, about log2(segments) probes), and, if that "
               f"segment hands its whole chunks to helpers and has such a block, folds chunk k for the segment's "
               f"columns in that block into its slot of {', '.join(chunk_slots)} (an element per column)")
    else:
        who = (f"the folded tensor is cut into {h} chunks of C = cdiv(size, {h} * {block}) * {block} positions; "
               f"helper k finds the subregion holding position k * C by binary search over the offsets (a while "
               f"loop, about log2(instances) probes) and, if that subregion hands its whole chunks to helpers, folds "
               f"chunk k into its slot of {', '.join(chunk_slots)}")
    return [f"  split across programs: {sp} programs share each block of instances (1 wherever there are helpers: "
            f"the data decides; where the shapes split, there are none); program s folds the s-th piece of each "
            f"subregion's head (whole chunks) and program {sp} - 1 its tail, into its own slots of "
            f"{', '.join(heads)} (one slot per program, invocation workspace)",
            f"  balanced by the data: {h} helper programs past the blocks, as many as fill the device where the "
            f"folded tensor gives them chunks (0 under the interpreter); {who}; a subregion hands its chunks over "
            f"when it owns the first and the last of them (always for sorted offsets; otherwise its block folds it "
            f"whole), and keeps its head [begin, first chunk) and tail [last chunk end, end)",
            f"  combine: a subregion with one participant stores its result at once (no workspace traffic); the "
            f"others' participants ({sp} + its whole chunks) draw a ticket from {', '.join(counters)} (acq_rel "
            f"atomic, device scope); the one that draws the last folds head, chunk slots in chunk order, tail with "
            f"each fold's combine (the same order every run: bitwise reproducible, no float atomics), stores the "
            f"results and resets the counter (self-resetting: nothing is filled before a launch; nobody waits)",
            f"  where {sp} = 1 and {h} = 0 (constexpr SPLIT_{g.id} = 0) the kernel holds only the direct form: each "
            f"program folds its subregions whole and stores them, with no search and no workspace traffic"]


def _split_count(choice: P.LoopedRows) -> str:
    """The constexpr that counts the programs of a row in a looped_rows op's split form."""
    split = next((op for op in (choice.split.ops if choice.split else ()) if isinstance(op, P.SplitIndex)), None)
    return split.splits if split is not None else "?"


def _lookback_lines(p: Program, g: Group, f: _Formulas, body: PRegion | None = None) -> list[str]:
    """The cross-program plan of a group whose programs pass values through the workspace (`body`: the form that
    does, the group's body by default)."""
    form = body is not None  # the split form of a looped_rows body: a row's chunks, one program each
    body = g.body if body is None else body
    ticket = next((op for op in body.ops if isinstance(op, P.OwnedInstances) and op.ticket is not None), None)
    if ticket is None:
        return []
    seg = next((s for s in p.segments if s.group == g.id), None)
    sync = p.buffer(ticket.ticket)  # type: ignore[arg-type]
    # a split scan's chunk (a split region scan's held tile is said with its pieces)
    chunk = None if ticket.splits is not None and not form else \
        next((op.inputs[0].type.tile[op.axis] for op in body.ops if isinstance(op, P.Scan) and op.inputs), None)
    each = f", each one chunk of {chunk.extent} elements" if chunk is not None else ""
    rows = len(g.domain) > 1 or form
    if form:  # the chunks of a row hold consecutive tickets
        per = ticket.splits
        each += (f" ({' * '.join(map(str, g.domain))} rows x {per} programs a row: ticket t runs chunk "
                 f"t % {per} of row t // {per})")
    elif rows:  # a group of rows: the tickets of a row are consecutive
        per = g.domain[-1]
        each += (f" ({' * '.join(map(str, g.domain[:-1]))} rows x {per} programs a row: ticket t runs chunk "
                 f"t % ({per}) of row t // ({per}))")
    owned = "one instance each"
    # a balanced scan over a (segments, columns) workset: each joined lane scans its own column (no lane scan)
    columns = not any(isinstance(op, P.LaneScan) for op in g.body.walk())
    held = next((t for op in g.body.ops for v in op.results for t in v.type.tile if P.is_held(t.block)), None)
    keeps = (f", at least {held.block} long; it holds the first {held.block} elements of its piece on chip from "
             f"their load to their write, so only the rest of a longer piece is read twice") if held else ""
    if form:
        pass
    elif ticket.splits is not None and g.single_instance:  # a top-level region scan: ticket t scans piece t
        each += (" (ticket t scans piece t of the one subregion, the t-th run of whole chunks in traversal "
                 f"order{keeps})")
        owned = "one piece each"
    elif ticket.helper_block is not None:  # balanced region scans: helpers past the blocks, by the data
        helper = next(op for op in g.body.ops if isinstance(op, P.HelperIndex))
        reverse = any(op.reverse for op in g.body.ops if isinstance(op, P.FoldSlots))
        backwards = " (a reverse scan: the helpers take the chunks from the last one down)" if reverse else ""
        each += (f" (ticket t below the blocks scans the subregions of block t that keep their whole chunks, "
                 f"holding the first {held.block if held else 'tile'} elements of each on chip; the tickets after "
                 f"them are {helper.helpers} helpers: the scanned tensor is cut into {_chunks_of(p, g)} chunks, a "
                 f"helper finds the subregion holding its chunk by binary search over the offsets and, if that "
                 f"subregion hands its whole chunks over (always for sorted offsets), scans that chunk of it, the "
                 f"first one from the subregion's begin and the last one up to its end{backwards}, " + (
                     f"holding it across the lanes of the block it joins: lane l takes the l-th run of max("
                     f"{held.block if held else 'tile'}, cdiv(length, valid lanes)) positions, so a range of up to "
                     f"{ticket.block} * {held.block if held else 'tile'} elements is read once)" if not columns else
                     "in each of the segment's columns (a lane a column: where a segment's columns may span "
                     "several blocks, a chunk has a helper per block, each taking the lanes of its block that "
                     "hold the segment)"))
        owned = f"one block of {ticket.block} instances each (several short segments a program)"
    elif ticket.splits is not None:  # split-region-scans: the pieces of a block hold consecutive tickets
        each += (f" ({ticket.splits} programs a block: ticket t scans piece t % {ticket.splits} of the subregion "
                 f"of each instance of block t // {ticket.splits}, the s-th run of whole chunks in traversal order"
                 f"{keeps})")
        owned = f"one block of {ticket.block} instances each (several short segments a program)"
    lines = [f"  across programs: {f(seg.length) if seg else '?'} programs{each}, {owned}, in the order "
             f"of an acq_rel ticket on {sync.name}[{P.SYNC_TICKET}] (no launch order assumed; a program waits only "
             f"for lower tickets)"]
    for op in body.ops:
        if ticket.helper_block is not None and isinstance(op, P.PublishSlot):
            names = ", ".join(p.buffer(b).name for b in op.slots if not _fold_slots(p, b))
            folds = [p.buffer(b).name for b in op.slots if _fold_slots(p, b)]
            if folds:  # region folds beside the scans, balanced with them (passes/balance_scan_folds.py)
                names += (f", and beside it its partial of each region fold beside the scans (its lanes' partials, "
                          f"each of the range the lane scans, folded across the lanes in lane order) in the same "
                          f"slot of {', '.join(folds)}")
            where = (f"(its lanes' runs folded across the lanes in lane order, each run its held tile, then its "
                     f"rest) in slot = blocks * {ticket.block} + its position among the helpers" if not columns else
                     f"per column (its held tile, then its rest) in slot = blocks * {ticket.block} + column * "
                     f"{_chunks_of(p, g)} + its position among the helpers of its part")
            lines.append(f"  each helper publishes its chunk's aggregate {where} of {names}, then raises the flag "
                         f"of its ticket, {sync.name}[{P.SYNC_FLAGS} + ticket] (release); the blocks need no "
                         f"aggregate (a subregion they scan is theirs alone) and write no slot, only their flag")
            continue
        if ticket.helper_block is not None and isinstance(op, P.FoldSlots) and all(
                _fold_slots(p, b) for b in op.slots):
            names = ", ".join(p.buffer(b).name for b in op.slots)
            lines.append(f"  then the last helper of each subregion handed over (the highest ticket among its "
                         f"helpers) waits for the same flags and folds the slots of {names} of its subregion's "
                         f"earlier helpers in index order, {op.block} slots a step, and joins its own partial in "
                         f"position order (a fixed combine order: the same bits every run): the fold's result, "
                         f"which that helper stores with the work that needs it; a block folds and stores a "
                         f"subregion it keeps whole itself" + (
                             " (a fold that is a scan's total takes that scan's aggregate of each range as its "
                             "partial: the subregion is read once, by the scan)" if _totals_taken(g) else ""))
            continue
        if ticket.helper_block is not None and isinstance(op, P.FoldSlots):
            lines.append(f"  then every lane of a helper waits for the flags of the lower tickets of its subregion's "
                         f"earlier helpers (acquire) and folds their slots in index order, {op.block} slots a step (a "
                         f"fixed combine order: the same bits every run), and writes its run after that prefix" + (
                             " and the runs of the lanes before it in traversal order (a scan across the lanes)"
                             if not columns else " (in its own column's slots)") + "; the "
                         "subregion's first helper and the blocks write their own scans")
            continue
        if isinstance(op, P.PublishSlot) and form:
            names = ", ".join(p.buffer(b).name for b in op.slots)
            lines.append(f"  each program publishes its chunk's aggregate in slot = row * {ticket.splits} + chunk of "
                         f"{names}, then raises flag {sync.name}[{P.SYNC_FLAGS} + ticket] (release)")
        elif isinstance(op, P.PublishSlot) and ticket.splits is not None and g.single_instance:
            names = ", ".join(p.buffer(b).name for b in op.slots)
            lines.append(f"  each program publishes its piece's aggregate in slot = its ticket of {names}, then "
                         f"raises flag {sync.name}[{P.SYNC_FLAGS} + slot] (release)")
        elif isinstance(op, P.PublishSlot) and ticket.splits is not None:
            names = ", ".join(p.buffer(b).name for b in op.slots)
            lines.append(f"  each program publishes each instance's piece aggregate in slot = instance * "
                         f"{ticket.splits} + piece of {names}, then raises one flag, "
                         f"{sync.name}[{P.SYNC_FLAGS} + ticket] (release)")
            lines += _folds_beside_scans(p, g, ticket.splits)
        elif isinstance(op, P.PublishSlot):
            names = ", ".join(p.buffer(b).name for b in op.slots)
            lines.append(f"  each program publishes its aggregate in slot = its ticket of {names}, then raises "
                         f"flag {sync.name}[{P.SYNC_FLAGS} + slot] (release)")
        elif isinstance(op, P.FoldSlots):
            packed = ticket.splits is not None and not g.single_instance and not form
            piece = "piece (its held tile, then its rest; its aggregate first)"
            base = "its row's first ticket" if rows else "its instance's first piece" if packed else "0"
            own = "its own piece" if packed else "its own ticket"
            order = f"from the nearest lower piece down to {base}" if op.reverse and packed else \
                f"from the nearest lower ticket down to {base}" if op.reverse else f"from {base} up to {own}"
            mine = " of its row" if rows else " of its block" if packed else ""
            folds = "each lane folds its instance's slots" if packed else "folds their slots"
            lines.append(f"  then waits for the flags of every lower ticket{mine} (acquire) and {folds} "
                         f"{order}, in index order, {op.block} slots a step (a fixed combine order: the same "
                         f"bits every run), and combines the result with its own "
                         f"{piece if ticket.splits and not form else 'chunk'}")
        elif isinstance(op, P.RetireTicket):
            lines.append(f"  the last program to finish ({sync.name}[{P.SYNC_DONE}], acq_rel) restores the ticket, "
                         f"the counter and the flags to zero: the workspace is self-resetting, no launch clears it")
    return lines


def _fold_slots(p: Program, buffer: int) -> bool:
    """Whether look-back slot buffer `buffer` holds a region fold's partials (passes/balance_scan_folds.py)."""
    return p.buffer(buffer).name.startswith("fold")


def _totals_taken(g: Group) -> bool:
    """Whether a fold of the group takes a scan's aggregate as its partial (an `if` on the split flag whose
    partial comes from its then-branch as it is)."""
    return any(isinstance(op, P.If) and op.flag and op.results and op.results[0].name == "partial"
               and len(op.then_.ops) == 1 for op in g.body.walk())


def _folds_beside_scans(p: Program, g: Group, splits: str) -> list[str]:
    """Region folds split on the pieces of a region scan's group (passes/scan_folds.py)."""
    counters = sorted({p.buffer(t.access.buffer).name for t in g.body.walk() if isinstance(t, P.Ticket)})
    if not counters:
        return []
    slots = sorted({p.buffer(op.access.buffer).name for op in g.body.walk() if isinstance(op, P.Store)
                    and p.buffer(op.access.buffer).scope is BufferScope.INVOCATION_WORKSPACE
                    and op.access.copy is not None})
    return [f"  the region folds beside the scans: the program of piece s folds piece s of each fold's subregion "
            f"(whole chunks) into its own slot of {', '.join(slots)} (one slot per piece) while the predecessors' "
            f"aggregates arrive, and draws a ticket from {', '.join(counters)} (acq_rel atomic, device scope); the "
            f"one that draws the last folds the {splits} slots in slot order with each fold's combine (the same "
            f"order every run: bitwise reproducible, no float atomics), stores the results and resets the counter "
            f"(nobody waits for it)"] + ([
                f"  a fold that is a scan's total takes that scan's piece aggregate as its partial where {splits} > 1 "
                f"(its subregion is read once, by the scan)"] if any(
                    isinstance(op, P.If) and op.flag and op.results and op.results[0].name == "partial"
                    and len(op.then_.ops) == 1 for op in g.body.ops) else [])


def _bounds(a, names: Mapping[str, str], taken: Iterable[str]) -> str:
    if isinstance(a.bounds, Proven):
        return f"proven {_named(a.bounds.predicate, names, taken)}"
    if isinstance(a.bounds, Guard):
        return f"guarded by an explicit in-range mask (%{a.bounds.mask.name or 'p'}{a.bounds.mask.id})"
    if isinstance(a.bounds, AssumeInBounds):
        return f"assumed in bounds ({a.bounds.reason})"
    return "not justified"


class _Formulas:
    """Launch formulas of one program in terms of its named constexprs (see `launch_text`)."""

    def __init__(self, program: Program) -> None:
        self.raw = tuple(program.constexprs)
        self.named = named_formulas(self.raw)

    def __call__(self, e: LaunchExpr | int) -> str:
        return str(e) if isinstance(e, int) else text(in_terms_of(e, self.raw))

    def span(self, offset: LaunchExpr, length: LaunchExpr) -> str:
        start = simplify(offset)
        if start == LConst(0):
            return f"[0, {self(length)})"
        return f"[{self(start)}, {self(start)} + {self(length)})"


def _named(pred: object, names: Mapping[str, str], taken: Iterable[str]) -> str:
    """A predicate with the author's names for its proof symbols; a name two of its symbols share (two
    loops both called `i`), or a shape symbol's name, keeps the symbol's number so it stays unambiguous."""
    text_ = str(pred)
    used = {s: n for s, n in names.items() if re.search(rf"\b{re.escape(s)}\b", text_)}
    shown = list(used.values())
    taken = set(taken)
    return with_names(text_, {s: n if shown.count(n) == 1 and n not in taken else f"{n}#{s[2:]}"
                                  for s, n in used.items()})


def _balanced_traffic(g: Group) -> list[str]:
    """What a group whose helpers scan by the data (balance_region_scan.py) moves, as physical/counts.py counts
    it: the passes over the values, then the workspace."""
    helper = next((op for op in g.body.ops if isinstance(op, P.HelperIndex)), None)
    held = next((t for op in g.body.ops for v in op.results for t in v.type.tile if P.is_held(t.block)), None)
    if helper is None or held is None:
        return []
    h = helper.helpers
    flag = next(op.flag for op in g.body.walk() if isinstance(op, P.If) and op.flag is not None)
    return [f"  group {g.id}, balanced by the data: every value is read once by the scan that writes it (the held "
            f"tile of its instance, {held.block} elements, or of its helper, {held.block} in each of the {g.block} "
            f"lanes of the block it joins, then the rest) and written once; where {flag} = 1 a helper's chunk past "
            f"its held tiles is read once more, by the fold of its aggregate (taken to be every value past the {h} "
            f"helpers' held tiles); the workspace: each program's ticket, flag and "
            f"retirement, each helper's slots (the blocks write none), and the slots of a subregion's earlier helpers "
            f"each helper folds (taken to be {h} * ({h} - 1) / 2, all helpers in one subregion); the offsets each "
            f"lane of every program reads (a helper's lanes are the block it joins) and the probes of the binary "
            f"searches"]


def ideal_bytes(program: Program) -> LaunchExpr:
    """Every input read once and every output written once (in-out: both), from the external buffers."""
    terms: list[LaunchExpr] = []
    for b in program.buffers:
        if b.scope is not BufferScope.EXTERNAL_VIEW:
            continue
        times = 2 if b.access is Access.READ_WRITE else 1
        if b.dtype is DType.i4:  # two elements a byte
            terms.append(LBin("cdiv", lprod((LConst(times), *(ldim(d) for d in b.shape))), LConst(2)))
            continue
        terms.append(lprod((LConst(max(1, b.dtype.bits // 8) * times), *(ldim(d) for d in b.shape))))
    return lsum(tuple(terms))


def explain_program(program: Program, shapes: Mapping[str, int] | None = None, sms: int = DEFAULT_SMS) -> str:
    """The plan in words, formulas in terms of the constexprs; with `shapes`, also its numbers there."""
    p = program
    f = _Formulas(p)
    consts = dict(p.constexprs)
    lines = [f"kernel {p.name}: one launch, grid = {f(p.grid)} programs, num_warps = {f(p.num_warps)}"]
    for g in p.groups:
        lines += _group_lines(p, g, consts, f)
    lines.append("constexprs:")
    lines += [f"  {n} = {text(e)}" for n, e in f.named.items()] or ["  none"]
    counts = operation_counts(p)
    exact = "" if counts.exact else " (an estimate: some trip counts depend on data)"
    lines.append("memory:")
    lines.append(f"  bytes moved = {f(counts.bytes)}{exact}")
    lines += [line for g in p.groups for line in _balanced_traffic(g)]
    lines.append(f"  ideal = {f(ideal_bytes(p))} (every input read once, every output written once)")
    lines.append("buffers:")
    for b in p.buffers:
        copies = f(b.copies) if b.copies is not None else "1"
        backing = f", backed by workspace {b.storage} ({copies} {'copy' if copies == '1' else 'copies'})" \
            if b.storage else ""
        lines.append(f"  {b.name}: {b.dtype}[{', '.join(str(d) for d in b.shape)}] {b.scope}, init {b.init}, "
                     f"lifetime {b.lifetime}, {b.access}{backing}")
    lines.append("accesses:")
    names = {b.id: b.name for b in p.buffers}
    symbols = dict(p.symbol_names)
    accesses = [f"  {op.NAME} {names.get(a.buffer, a.buffer)}{_where(p, op)}: {_bounds(a, symbols, p.symbols)}"
                for op, a in guards_of(p)]
    lines += list(dict.fromkeys(accesses))  # an access each form of a body makes, justified alike, once
    lines.append("performance notes:")
    lines += [f"  {n}" for n in p.notes] or ["  none"]
    if shapes is not None:
        lines += evaluated_lines(p, shapes, sms, counts)
    return "\n".join(lines) + "\n"


def launch_environment(program: Program, shapes: Mapping[str, int], sms: int) -> dict[str, int]:
    """The values a launch at `shapes` gives every constexpr (the launcher's evaluation, without tensors)."""
    env: dict[str, int] = {**shapes, DEVICE_SMS: sms}
    pending = list(program.constexprs)
    while pending:
        progressed = False
        for item in list(pending):
            name, e = item
            try:
                env[name] = e.evaluate(env) if isinstance(e, LaunchExpr) else int(e)
            except KeyError:
                continue
            pending.remove(item)
            progressed = True
        if not progressed:
            missing = sorted(set().union(*(e.names() for _, e in pending if isinstance(e, LaunchExpr))) - set(env))
            raise KeyError(", ".join(missing))
    return env


def _form(g: Group, env: Mapping[str, int]) -> str:
    if g.ownership.tiled:
        return "tiled: each program owns one tile " + " x ".join(f"{b} = {env.get(b, '?')}"
                                                                  for b in g.ownership.tiles)
    split = _split_at(g, env)
    if not g.domain:
        return "a single instance" + (f", {split}" if split else "")
    forms = []
    choice = P.looped_rows(g.body)
    if choice is not None and choice.split_flag is not None and env.get(choice.split_flag) == 1:
        n = _split_count(choice)
        return (f"split ({choice.split_flag} = 1: the rows are fewer than the resident programs; {n} = "
                f"{env.get(n, '?')} programs a row, one chunk each, passing chunk aggregates on by look-back in "
                f"index order)")
    if choice is not None and env.get(choice.flag) == 1:
        forms.append(f"looped ({choice.flag} = 1: the row in chunks of {choice.chunk.block} = "
                     f"{env.get(choice.chunk.block, '?')})")
        if split:
            forms.append(split)
    loop = P.block_loop(P.whole_form(g.body).ops)
    if loop is not None and env.get(loop.flag) == 1:
        forms.append(f"persistent ({loop.flag} = 1: programs walk the blocks of instances)")
    if choice is None and split:
        forms.append(f"one block of {g.block} = {env.get(g.block, '?')} instances per {split}")
    if not forms:
        other = [x for x, on in (("looped", choice), ("persistent", loop)) if on is not None]
        off = f" ({' and '.join(other)} form{'s' * (len(other) > 1)} off at these shapes)" if other else ""
        return f"one block of {g.block} = {env.get(g.block, '?')} instances per program{off}"
    return ", ".join(forms)


def _split_at(g: Group, env: Mapping[str, int]) -> str:
    """How many programs share each row (split-reductions) or block of subregions (split-segments) at these
    shapes, when more than one."""
    choice = P.looped_rows(g.body)
    if choice is None:
        split = next((op for op in g.body.ops if isinstance(op, P.SplitIndex)), None)
        n = env.get(split.splits) if split is not None else None
        lookback = any(isinstance(op, P.PublishSlot) for op in g.body.ops)
        how = "passing piece aggregates on by look-back in index order" if lookback else "combined in slot order"
        helper = next((op for op in g.body.ops if isinstance(op, P.HelperIndex)), None)
        h = env.get(helper.helpers) if helper is not None else None
        if h:
            chunk = next((op.expr.evaluate(env) for op in g.body.walk() if isinstance(op, P.ShapeValue)
                          and op.results[0].name == "chunk"), "?")
            chunks, span = f"CHUNKS_{g.id}", f"HELPER_SPAN_{g.id}"
            if lookback and env.get(chunks) is not None and env.get(span) is not None:  # jagged: rows, by block
                return f"program; balanced: {helper.helpers} = {h} helper programs, {chunks} = {env[chunks]} chunks " \
                    f"of {chunk} rows of the scanned tensor, a helper per chunk and block of the segment that holds " \
                    f"it ({span} = {env[span]} blocks at most); each helper folds the aggregates of its segment's " \
                    f"earlier helpers in its columns by look-back in index order"
            if lookback:
                return f"program; balanced: {helper.helpers} = {h} helper programs, one chunk of {chunk} positions " \
                    f"of the scanned tensor each, joining the subregion that holds it; each helper folds the " \
                    f"aggregates of its subregion's earlier helpers by look-back in index order"
            return f"program; balanced: {helper.helpers} = {h} helper programs, one chunk of {chunk} positions of " \
                f"the folded tensor each, joining the subregion that holds it; the last participant combines"
        return f"split: {split.splits} = {n} programs per block of subregions, {how}" \
            if split is not None and n and n > 1 else ""
    if env.get(choice.flag) != 1:
        return ""
    split = next((op for op in choice.looped.ops if isinstance(op, P.SplitIndex)), None)
    n = env.get(split.splits) if split is not None else None
    if not n or n < 2:
        return ""
    return f"split: {split.splits} = {n} programs per {'row' if g.domain else 'reduction'}, combined in slot order"


def _count(n: int) -> str:
    return f"{n:,}"


def _programs(n: int) -> str:
    return f"{n:,} program{'s' * (n != 1)}"


def _whole_subregions(g: Group, env: Mapping[str, int]) -> list[str]:
    """The cliff a split-segments group keeps where its split count comes out 1 on a device: the count follows
    the shapes (the average block), not the data, so each subregion runs whole in one program."""
    split = next((op for op in g.body.ops if isinstance(op, P.SplitIndex)), None) \
        if P.looped_rows(g.body) is None else None
    if split is None or env.get(split.splits) != 1 or env.get(DEVICE_SMS, 0) <= 0:
        return []
    helper = next((op for op in g.body.ops if isinstance(op, P.HelperIndex)), None)
    if helper is not None and env.get(helper.helpers):
        return []  # helpers balance the subregions by the data
    return [f"    performance: {split.splits} = 1 at these shapes (the blocks of subregions already fill the device, "
            f"or the average block holds too few values to split): each subregion runs whole in one program, so "
            f"one holding much of the values runs alone while the device idles"]


def evaluated_lines(p: Program, shapes: Mapping[str, int], sms: int, counts=None) -> list[str]:
    env = launch_environment(p, shapes, sms)
    bound = ", ".join(f"{k} = {v}" for k, v in shapes.items()) or "no symbols"
    device = f"a device of {sms} multiprocessors" if sms > 0 else "Triton's interpreter, one program at a time"
    lines = [f"at {bound}, on {device}:"]
    lines.append(f"  grid = {_programs(p.grid.evaluate(env))}, num_warps = "
                 f"{p.num_warps if isinstance(p.num_warps, int) else p.num_warps.evaluate(env)}")
    lines.append("  constexprs: " + (", ".join(f"{n} = {env[n]}" for n, _ in p.constexprs) or "none"))
    for g in p.groups:
        seg = next((s for s in p.segments if s.group == g.id), None)
        where = ""
        if seg is not None:
            start, length = seg.offset.evaluate(env), seg.length.evaluate(env)
            where = f"programs [{_count(start)}, {_count(start + length)}) ({_programs(length)})"
        lines.append(f"  group {g.id} ({g.name}): {where}; {_form(g, env)}")
        lines += _whole_subregions(g, env)
    counts = counts if counts is not None else operation_counts(p)
    moved, ideal = counts.bytes.evaluate(env), ideal_bytes(p).evaluate(env)
    ratio = f" ({moved / ideal:.2f}x the ideal)" if ideal else ""
    exact = "" if counts.exact else ", an estimate"
    lines.append(f"  memory: {_count(moved)} bytes moved{exact}, ideal {_count(ideal)}{ratio}")
    flops = counts.flops.evaluate(env)
    if flops:
        lines.append(f"  float operations: {_count(flops)}")
    return lines


def explain(kernel: Kernel, shapes: Mapping[str, int] | None = None, sms: int = DEFAULT_SMS) -> str:
    """Lower `kernel`, check it with the construction verifier, and explain the plan; with `shapes` (a value
    for every shape symbol), also the grid, block sizes, warps, active forms and bytes moved there, for a
    device of `sms` multiprocessors (0: Triton's interpreter)."""
    from . import lower
    from .verifier import RULES, verify

    program = lower(kernel)
    verify(program, kernel)
    text_ = explain_program(program) + f"construction verifier: all {len(RULES)} rules hold\n"
    if shapes is not None:
        text_ += "\n".join(evaluated_lines(program, shapes, sms)) + "\n"
    return text_


__all__ = ["explain", "explain_program", "evaluated_lines", "ideal_bytes", "launch_environment", "DEFAULT_SMS"]
