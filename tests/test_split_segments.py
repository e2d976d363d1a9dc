"""Balanced segments (physical/passes/split_segments.py): a region fold's subregions split over several programs
of one launch, the pieces' partials combined through the invocation workspace in slot order by the last program
to arrive. Small sizes still split: the launches are sized as for a 132-multiprocessor device."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import intent
import physical
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f16, f32, i32, i64, parallel
from physical import ops as P
from physical.launch_expr import DEVICE_SMS
from physical.lowering import run_pipeline
from physical.passes.split_segments import plan_segments
from physical.verifier import check
from tests.breadth_support import three_ways

S, E, C = dims("S E C")

# one huge segment, empty ones, many short ones, boundaries at chunk edges (256) and just past them
LENGTHS = [0, 40000, 1, 255, 256, 257, 0, 3, 512, 2, 0, 1, 700, 5, 0, 256]


@intent.func
def add(p, q):
    return p + q


@intent.kernel
def folds(values: f32[E], offsets: i64[S + 1], total: Out[f32[S]], top: Out[f32[S]], low: Out[f32[S]]):
    for s in parallel(S):
        b = offsets[s]
        e = offsets[s + 1]
        total[s] = intent.sum(values[b:e]) * 2.0
        top[s] = intent.max(values[b:e])
        low[s] = intent.reduce(values[b:e] * values[b:e], add, identity=0.0)


@intent.kernel
def half_sums(values: f16[E], offsets: i32[S + 1], total: Out[f16[S]], count: Out[i32[S]]):
    for s in parallel(S):
        total[s] = intent.sum(values[offsets[s]:offsets[s + 1]])
        count[s] = intent.sum((values[offsets[s]:offsets[s + 1]] > 0.0).to(i32))


@intent.kernel
def spmv(data: f32[E], cols: i64[E], rowptr: i64[S + 1], x: f32[C], y: Out[f32[S]]):
    for r in parallel(S):
        y[r] = intent.sum(data[rowptr[r]:rowptr[r + 1]] * x[cols[rowptr[r]:rowptr[r + 1]]])


def offsets_of(lengths: list[int], dtype=torch.int64) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=dtype)


def fold_args(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    offsets = offsets_of(LENGTHS)
    n = len(LENGTHS)
    return {"values": torch.randn(int(offsets[-1]), generator=g), "offsets": offsets, "total": torch.empty(n),
            "top": torch.empty(n), "low": torch.empty(n)}


def splits(kernel, args) -> int:
    import re

    return int(re.findall(r"SPLITS_0 = (\d+)", kernel.explain(*args.values()))[-1])


def spread(kernel, args) -> bool:
    """Whether the launch spreads a block's work over several programs: pieces of the shapes' split, or helper
    programs (where the offsets are one tensor's, the data decides: SPLITS_0 = 1 and HELPERS_0 > 0)."""
    import re

    text = kernel.explain(*args.values())
    helpers = re.findall(r"HELPERS_0 = (\d+)", text)
    return splits(kernel, args) > 1 or bool(helpers) and int(helpers[-1]) > 1


def test_skewed_segments_split_and_agree_with_the_oracle() -> None:
    args = fold_args(1)
    with simulated_multiprocessors(132):
        assert spread(folds, args)
        got = three_ways(folds, args, ("total", "top", "low"), rtol=1e-5, atol=1e-4, stablehlo=False)
    offsets = args["offsets"].tolist()
    v = args["values"].double()
    for s, (b, e) in enumerate(zip(offsets, offsets[1:])):
        np.testing.assert_allclose(got["total"][s], 2 * v[b:e].sum().item(), rtol=1e-5, atol=1e-4)
        assert got["top"][s] == (v[b:e].max().item() if e > b else -np.inf)
        np.testing.assert_allclose(got["low"][s], (v[b:e] ** 2).sum().item(), rtol=1e-5, atol=1e-4)


def test_split_results_are_bitwise_reproducible() -> None:
    """The same partials meet in slot order on every run (no float atomics); the ticket counters reset
    themselves, so a second launch of the same plan (its workspace kept, never filled) gives the same bits."""
    args = fold_args(2)
    runs = []
    with simulated_multiprocessors(132):
        for _ in range(3):
            out = {k: v.clone() for k, v in args.items()}
            folds(**out)
            runs.append(tuple(out[k].numpy().tobytes() for k in ("total", "top", "low")))
    assert runs[0] == runs[1] == runs[2]


def test_half_precision_and_integer_folds_split() -> None:
    g = torch.Generator().manual_seed(3)
    offsets = offsets_of(LENGTHS, torch.int32)
    n = len(LENGTHS)
    args = {"values": torch.randn(int(offsets[-1]), generator=g).half(), "offsets": offsets,
            "total": torch.empty(n, dtype=torch.float16), "count": torch.empty(n, dtype=torch.int32)}
    with simulated_multiprocessors(132):
        assert spread(half_sums, args)
        got = three_ways(half_sums, args, ("total", "count"), rtol=1e-2, atol=1e-2, stablehlo=False)
    o = offsets.tolist()
    assert got["count"].tolist() == [int((args["values"][b:e] > 0).sum()) for b, e in zip(o, o[1:])]


def test_sparse_rows_split() -> None:
    """A CSR row with most of the entries: its pieces read the column indices at their own positions."""
    g = torch.Generator().manual_seed(4)
    rowptr = offsets_of(LENGTHS)
    nnz, n = int(rowptr[-1]), len(LENGTHS)
    args = {"data": torch.randn(nnz, generator=g), "cols": torch.randint(0, 50, (nnz,), generator=g),
            "rowptr": rowptr, "x": torch.randn(50, generator=g), "y": torch.empty(n)}
    with simulated_multiprocessors(132):
        assert spread(spmv, args)
        got = three_ways(spmv, args, ("y",), rtol=1e-5, atol=1e-4, stablehlo=False)
    dense = torch.sparse_csr_tensor(rowptr, args["cols"], args["data"], (n, 50)).to_dense()
    np.testing.assert_allclose(got["y"], (dense.double() @ args["x"].double()).numpy(), rtol=1e-5, atol=1e-4)


def test_unsorted_and_out_of_range_offsets_keep_their_meaning() -> None:
    """Pieces are cut from each subregion's own bounds: a reversed pair is empty, a subregion past the tensor's
    end is clipped to it, as in the oracle."""
    args = fold_args(5)
    offsets = args["offsets"].clone()
    offsets[3], offsets[9] = offsets[9], offsets[3]
    args["offsets"] = offsets
    with simulated_multiprocessors(132):
        three_ways(folds, args, ("total", "top", "low"), rtol=1e-5, atol=1e-4, stablehlo=False)


def test_the_plan_verifies_after_every_pass_and_explain_shows_it() -> None:
    args = fold_args(6)
    k = folds.specialize(args)
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert "split-segments" in names
    ops = list(program.walk())
    # three folds share the group's one split index and ticket; head, tail and helper-chunk slot arrays each
    # (the offsets are one tensor's: physical/passes/balance_segments.py), the heads and tails read in slot order
    assert sum(isinstance(o, P.Ticket) for o in ops) == 1 and sum(isinstance(o, P.SplitIndex) for o in ops) == 1
    assert sum(isinstance(o, P.Reduce) for o in ops) == 6 and sum(isinstance(o, P.HelperIndex) for o in ops) == 1
    ws = {w.name: w for w in program.workspaces}
    assert len(ws) == 10 and sum(w.resets and w.fill == 0 for w in ws.values()) == 1  # the counter resets itself
    assert all(w.fill is None for w in ws.values() if not w.resets)    # slots: never filled
    with simulated_multiprocessors(132):
        plan = folds.explain(*args.values())
    assert "reduce sum over SPLITS_0" in plan and "ticket arrivals" in plan and "SPLITS_0 copies" in plan
    assert "split across programs: SPLITS_0 programs share each block of instances" in plan
    # the offsets are one tensor's: the pieces are the heads, helpers may take whole chunks (none here: SPLITS_0 > 1)
    assert "folds head, chunk slots in chunk order, tail with each fold's combine" in plan
    assert "balanced by the data: HELPERS_0 helper programs past the blocks" in plan  # at these shapes
    count = program.constexpr("SPLITS_0")
    # the shapes split only where the folded tensor is too small to give a helper a chunk
    assert count.evaluate({"S": 2, "E": 4000, DEVICE_SMS: 132, "BLOCK_I0": 1}) > 1
    assert count.evaluate({"S": 16, "E": 1 << 21, DEVICE_SMS: 132, "BLOCK_I0": 1}) == 1
    assert count.evaluate({"S": 16, "E": 1 << 21, DEVICE_SMS: 0, "BLOCK_I0": 16}) == 1  # the interpreter


@intent.kernel
def mixed_bounds(values: f32[E], starts: i32[S], offsets: i64[S + 1], out: Out[i64[S]]):
    for s in parallel(S):
        out[s] = intent.argmax(values[starts[s]:offsets[s + 1]])


@intent.kernel
def centred(values: f32[E], offsets: i64[S + 1], out: Out[f32[S]]):
    for s in parallel(S):
        m = intent.max(values[offsets[s]:offsets[s + 1]])
        out[s] = intent.sum(values[offsets[s]:offsets[s + 1]] - m)


@intent.kernel
def nested(values: f32[E], offsets: i64[S + 1], out: Out[f32[S]]):
    for s in parallel(S):
        out[s] = intent.sum(values[offsets[s]:offsets[s + 1]] - intent.max(values[offsets[s]:offsets[s + 1]]))


@pytest.mark.parametrize("kernel, dtype, reason", [
    (mixed_bounds, torch.int64, "its subregion bounds differ in type"),
    (centred, torch.float32, "a fold reads another fold's result"),
    (nested, torch.float32, "a fold runs inside another op (a fold's map, a loop or a branch)"),
])
def test_groups_that_keep_whole_subregions_say_why(kernel, dtype, reason: str) -> None:
    starts = {"starts": torch.tensor([0, 3, 3], dtype=torch.int32)} if kernel is mixed_bounds else {}
    program = physical.lower(kernel.specialize({"values": torch.randn(9), **starts,
                                                "offsets": torch.tensor([0, 3, 3, 9]),
                                                "out": torch.empty(3, dtype=dtype)}))
    assert plan_segments(program, program.groups[0]) == reason


def test_an_output_stored_by_every_split_is_refused() -> None:
    """The rule split-effects on this pass's program: the segment's result stored without the last ticket."""
    import dataclasses

    args = fold_args(7)
    k = folds.specialize(args)
    p = physical.lower(k)
    g = p.groups[0]
    ops = list(g.body.ops)
    total = next(b.id for b in p.buffers if b.name == "total")
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.Store) and op.access.buffer == total)
    flat = next(op.results[0] for op in ops if isinstance(op, P.OwnedInstances))
    lane_ok = next(op.results[0] for op in ops if isinstance(op, P.Compare) and op.lhs.id == flat.id)
    ops[at] = dataclasses.replace(ops[at], access=dataclasses.replace(ops[at].access, mask=lane_ok))
    broken = p.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),))
    assert [v.rule for v in check(broken, k)] == ["split-effects"]


def test_explain_names_the_cliff_where_the_split_count_comes_out_one() -> None:
    """The split count follows the shapes, not the data: with blocks enough to fill the device it is 1. Where
    the helpers of balance_segments.py take the whole chunks there is no cliff; where the folded tensor is too
    small to give them a chunk (HELPERS_0 = 0) a subregion holding half the values runs whole in one program,
    and explain says so at those shapes only."""
    lengths = [3] * 4000
    lengths[7] = 12000
    offsets = offsets_of(lengths)
    n = len(lengths)
    args = {"values": torch.randn(int(offsets[-1])), "offsets": offsets, "total": torch.empty(n),
            "top": torch.empty(n), "low": torch.empty(n)}
    few = [0] * 4000
    few[7] = 1500
    small = offsets_of(few)
    small_args = {**args, "values": torch.randn(int(small[-1])), "offsets": small}
    cliff = "performance: SPLITS_0 = 1 at these shapes"
    with simulated_multiprocessors(132):
        assert splits(folds, args) == 1 and splits(folds, small_args) == 1
        assert cliff not in folds.explain(*args.values())  # balanced by the helpers
        plan = folds.explain(*small_args.values())
        assert "HELPERS_0 = 0" in plan
        assert cliff + " (the blocks of subregions already fill the device" in plan
        assert "each subregion runs whole in one program, so one holding much of the values runs alone" in plan
        assert cliff not in folds.explain(*fold_args(8).values())  # split: no cliff
    with simulated_multiprocessors(0):  # the interpreter runs one program at a time: nothing to balance
        assert cliff not in folds.explain(*small_args.values())


def test_one_split_stores_directly_with_no_workspace_traffic() -> None:
    """Where the launch decides SPLITS_0 = 1 and gives no helpers (HELPERS_0 = 0), constexpr branches keep only
    the direct form: the folds' results are stored by their program, no helper searches the offsets, and the
    workspace is neither written, read nor counted on."""
    import emit_triton
    from bench.traffic import counting

    args = fold_args(9)
    k = folds.specialize(args)
    source = emit_triton.emit(physical.lower(k)).source
    branches = [b.split("\n    else:\n")[:2] for b in source.split("    if SPLIT_0:\n")[1:]]
    assert len(branches) == 2  # the helper's search of the offsets, then the folds and their combine
    (search, no_search), (shared, alone) = branches
    assert "while" in search and "while" not in no_search.split("\n    # ")[0]
    assert "w_ws_" in shared and "atomic_add" in shared
    assert "w_ws_" not in alone.split("# store")[0] and "atomic" not in alone.split("# store")[0]
    out = {n: v.clone() for n, v in args.items()}
    with simulated_multiprocessors(0):
        text = folds.explain(*args.values())
        assert "SPLITS_0 = 1" in text and "HELPERS_0 = 0" in text and "SPLIT_0 = 0" in text
    with simulated_multiprocessors(0), counting(out) as traffic:
        folds(**out)
    assert traffic.atomic == 0 and set(traffic.read_by) | set(traffic.written_by) <= set(args)
    want = folds.oracle(**{n: v.clone() for n, v in args.items()})
    for n in ("total", "top", "low"):
        np.testing.assert_allclose(out[n].numpy(), np.asarray(want[n]), rtol=1e-5, atol=1e-4)


def test_a_branch_not_selected_by_the_split_count_is_refused() -> None:
    """Mutation: the `if` that holds the cooperation is selected by another constexpr: its other branch (stores
    by every program, no workspace) would run where several programs share a block."""
    import dataclasses

    args = fold_args(10)
    k = folds.specialize(args)
    p = physical.lower(k)
    g = p.groups[0]
    ops = list(g.body.ops)
    at = next(n for n, op in enumerate(ops) if isinstance(op, P.If) and op.flag == "SPLIT_0"
              and any(isinstance(o, P.Ticket) for o in op.then_.walk()))  # the folds' branch, not the search
    ops[at] = dataclasses.replace(ops[at], flag="HELPERS_0")
    broken = p.replace(groups=(dataclasses.replace(g, body=dataclasses.replace(g.body, ops=tuple(ops))),))
    found = check(broken, k)
    # a launch on a device has HELPERS_0 > 1: no flag an `if` may select by
    assert [v.rule for v in found] == ["structured-complete"] + ["split-effects"] * 3
    assert found[0].message == ("if (from region_fold at test_split_segments.py:42): if selects its branch by "
                                "HELPERS_0, which is no 0/1 constexpr of the program")
    found = found[1:]
    assert str(found[0]).startswith("[split-effects] store (from store at test_split_segments.py:40) writes total in "
                                    "every program that shares its block: a group split over programs writes "
                                    "outside its workspace only as the holder of the last ticket")
