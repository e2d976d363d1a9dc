"""Several split groups in one kernel: each group's workspace, split count and protocol stand on their own.

Groups over one domain get constexprs with equal definitions (BLOCK_I0 and BLOCK_I1, SPLITS_0 and SPLITS_1), and
a slot array states its copy count as its split count's definition written out (the launcher sizes workspaces
from shape symbols). The verifier takes a written-out definition for the constexpr it defines; with two
constexprs of one definition that is either of them, and the proof that a split index stays below its own
SPLITS_g must hold whichever it names (found by tests/test_physical_kirgen.py: two `parallel(S)` loops folding
`values[offsets[i]:offsets[i + 1]]`). Small sizes still split: the launches are sized as for a 132-multiprocessor
device (a segment of 24000 values), or a few multiprocessors with short chunks for row reductions and scans.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch

import emit_triton
import intent
import oracle
import physical
from emit_triton.compile import clear_emitted
from emit_triton.launcher import plan_launch
from emit_triton.targets import simulated_multiprocessors
from intent import Out, dims, f32, i64, parallel
from kir.text import parse_kernel
from physical import ops as P
from physical.launch_expr import LBin, LConst
from physical.lowering import run_pipeline
from physical.passes.looped import BUDGET_VARIABLE
from physical.verifier import check
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)

S, E, M, N = dims("S E M N")

# one long segment, empty and short ones: at 132 multiprocessors each group splits its blocks over 3 programs
LENGTHS = [0, 24000, 1, 255, 256, 257, 0, 3, 512, 2, 0, 1, 700, 5, 0, 256]

TWO_FOLDS = """kernel two_folds(offsets: in i64[S + 1], values: in f32[E], outv: out f32[S]) symbols(S, E) {
  parallel (%0: i64) in (S) {
    %2: i64 = load %offsets[%0]
    %3: i64 = constant 1 : i64
    %4: i64 = binary add %0, %3
    %5: i64 = load %offsets[%4]
    %6: f32 = region_fold sum %values[%2:%5]
    store %outv[%0] = %6
    yield
  }
  parallel (%8: i64) in (S) {
    %10: i64 = load %offsets[%8]
    %11: i64 = constant 1 : i64
    %12: i64 = binary add %8, %11
    %13: i64 = load %offsets[%12]
    %14: f32 = region_fold sum %values[%10:%13]
    yield
  }
  yield
}
"""


@pytest.fixture(autouse=True)
def fresh(isolated_cache):  # noqa: F811
    clear_emitted()
    yield
    clear_emitted()


def passes_verified(kernel) -> tuple[physical.Program, list[str]]:
    """The lowered program and the passes that ran; the verifier holds after construction and every pass."""
    program = physical.construct(kernel)
    assert [str(v) for v in check(program, kernel)] == []
    return run_pipeline(program, verify_with=kernel)


def offsets_of(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int64)


def segment_args(outputs: dict[str, int], seed: int = 0) -> dict[str, torch.Tensor]:
    """Values and offsets of LENGTHS, and an output per name: 0 for one element per segment, else that many."""
    offsets = offsets_of(LENGTHS)
    values = torch.randn(int(offsets[-1]), generator=torch.Generator().manual_seed(seed))
    return {"values": values, "offsets": offsets,
            **{n: torch.empty(k or len(LENGTHS)) for n, k in outputs.items()}}


def split_counts(kernel, args) -> dict[str, int]:
    keywords = plan_launch(kernel, args, materialise=False).keywords
    # the programs per block, and the helpers past the blocks where the data balances a region scan
    return {k: v for k, v in keywords.items() if k.startswith("SPLITS_") or (k.startswith("HELPERS_") and v)}


# ---------------------------------------------------------------------------------------------- two folds


def test_two_groups_folding_the_same_subregions_verify_after_every_pass() -> None:
    k = parse_kernel(TWO_FOLDS)
    with simulated_multiprocessors(132):
        program, names = passes_verified(k)
    assert "split-segments" in names
    consts = dict(program.constexprs)
    assert consts["SPLITS_0"] == consts["SPLITS_1"]  # the case: one definition, two constexprs
    slots = sorted((b for b in program.buffers if b.copies is not None and b.name == "partial"),
                   key=lambda b: b.owner_group)
    assert [b.owner_group for b in slots] == [0, 1]
    assert len({b.storage for b in slots}) == 2  # a workspace each
    splits = [op for op in program.walk() if isinstance(op, P.SplitIndex)]
    assert sorted((op.group, op.splits) for op in splits) == [(0, "SPLITS_0"), (1, "SPLITS_1")]


def test_a_copy_count_below_the_split_count_is_still_refused() -> None:
    """Constexprs of one definition share their value, not any bound: a slot array of one copy fewer than its
    group's split count leaves the last split's slot out of range, whichever constexpr its count names."""
    k = parse_kernel(TWO_FOLDS)
    program = physical.lower(k)
    slots = next(b for b in program.buffers if b.name == "partial" and b.owner_group == 0)
    short = dataclasses.replace(slots, copies=LBin("-", slots.copies, LConst(1)))
    broken = program.replace(buffers=tuple(short if b.id == slots.id else b for b in program.buffers))
    found = [str(v) for v in check(broken, k) if v.rule == "bounds-justified"]
    assert len(found) == 2
    assert found[0].startswith("[bounds-justified] store (from region_fold at <string>:7) on partial: copy index "
                               "%split")
    assert found[1].startswith("[bounds-justified] load (from region_fold at <string>:7) on partial: copy index "
                               "%slot")
    assert all("is not proven within the " in f and f.endswith(" copies of its workspace") for f in found)


def test_two_split_segment_groups_agree_with_the_oracle_and_reproduce_bitwise() -> None:
    k = parse_kernel(TWO_FOLDS)
    args = segment_args({"outv": 0}, seed=1)
    want = oracle.run(k, {n: v.clone() for n, v in args.items()})["outv"]
    runs = []
    with simulated_multiprocessors(132):
        # the bounds are offsets: the data decides, with helpers (each group its own workspace and counter)
        assert split_counts(k, args) == {"SPLITS_0": 1, "SPLITS_1": 1, "HELPERS_0": 6, "HELPERS_1": 6}
        for _ in range(2):  # the second launch finds both groups' counters reset
            out = {n: v.clone() for n, v in args.items()}
            emit_triton.launch(k, out, sanitize=True)
            runs.append(out["outv"].numpy().tobytes())
            np.testing.assert_allclose(out["outv"].numpy(), np.asarray(want), rtol=1e-5, atol=1e-4)
    assert runs[0] == runs[1]


# ---------------------------------------------------------------------------------------------- siblings


@intent.kernel
def three_folds(values: f32[E], offsets: i64[S + 1], a: Out[f32[S]], b: Out[f32[S]], c: Out[f32[S]]):
    for s in parallel(S):
        a[s] = intent.sum(values[offsets[s]:offsets[s + 1]])
    for s in parallel(S):
        b[s] = intent.max(values[offsets[s]:offsets[s + 1]])
    for s in parallel(S):
        c[s] = intent.min(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def fold_and_scan(values: f32[E], offsets: i64[S + 1], a: Out[f32[S]], b: Out[f32[E]]):
    for s in parallel(S):
        a[s] = intent.sum(values[offsets[s]:offsets[s + 1]])
    for s in parallel(S):
        b[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def two_region_scans(values: f32[E], offsets: i64[S + 1], a: Out[f32[E]], b: Out[f32[E]]):
    for s in parallel(S):
        a[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])
    for s in parallel(S):
        b[offsets[s]:offsets[s + 1]] = intent.cummax(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def rows_and_folds(x: f32[M, N], values: f32[E], offsets: i64[S + 1], a: Out[f32[M]], b: Out[f32[S]]):
    for i in parallel(M):
        a[i] = intent.sum(x[i, :])
    for s in parallel(S):
        b[s] = intent.sum(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def two_scans(x: f32[N], a: Out[f32[N]], b: Out[f32[N]]):
    a[:] = intent.cumsum(x)
    b[:] = intent.cummax(x)


def _rows_and_folds_args() -> dict[str, torch.Tensor]:
    x = torch.randn(2, 600, generator=torch.Generator().manual_seed(3))
    return {"x": x, **segment_args({}, seed=3), "a": torch.empty(2), "b": torch.empty(len(LENGTHS))}


# kernel, arguments, simulated multiprocessors, the passes that split, the split counts at these shapes (a
# region scan sizes its pieces by its held tile, a fold by its chunk, so their counts differ)
SIBLINGS = {
    "three_folds": (three_folds, lambda: segment_args({"a": 0, "b": 0, "c": 0}, 4), 132, ["split-segments"],
                    {"SPLITS_0": 1, "SPLITS_1": 1, "SPLITS_2": 1, "HELPERS_0": 6, "HELPERS_1": 6,
                     "HELPERS_2": 6}),
    "fold_and_scan": (fold_and_scan, lambda: segment_args({"a": 0, "b": sum(LENGTHS)}, 5), 132,
                      ["split-segments", "split-region-scans"], {"SPLITS_0": 1, "HELPERS_0": 6, "SPLITS_1": 1,
                                                                "HELPERS_1": 6}),
    "two_region_scans": (two_region_scans, lambda: segment_args({"a": sum(LENGTHS), "b": sum(LENGTHS)}, 6), 132,
                         ["split-region-scans"], {"SPLITS_0": 1, "HELPERS_0": 6, "SPLITS_1": 1,
                                                                "HELPERS_1": 6}),
    "rows_and_folds": (rows_and_folds, _rows_and_folds_args, 4, ["split-reductions", "split-segments"],
                       {"SPLITS_0": 16, "SPLITS_1": 1, "HELPERS_1": 6}),
    "two_scans": (two_scans, lambda: {"x": torch.randn(300, generator=torch.Generator().manual_seed(7)),
                                      "a": torch.empty(300), "b": torch.empty(300)}, 4, ["split-scans"], {}),
}


@pytest.mark.parametrize("case", list(SIBLINGS))
def test_sibling_splits_in_one_kernel_verify_and_agree_with_the_oracle(case: str, monkeypatch) -> None:
    kernel, make, sms, splitting, counts = SIBLINGS[case]
    monkeypatch.setenv(BUDGET_VARIABLE, "64")  # short chunks: rows of 600 and scans of 300 split
    args = make()
    with simulated_multiprocessors(sms):
        k = kernel.specialize(args)
        program, names = passes_verified(k)
        assert [n for n in names if n.startswith("split")] == splitting
        assert split_counts(k, args) == counts
        out = {n: v.clone() for n, v in args.items()}
        emit_triton.launch(k, out, sanitize=True)
    if case == "two_scans":  # a look-back per group, over a sync buffer of its own
        assert len({op.sync for op in program.walk() if isinstance(op, P.FoldSlots)}) == 2
    want = kernel.oracle(**{n: v.clone() for n, v in args.items()})
    for n in want:
        np.testing.assert_allclose(out[n].numpy(), np.asarray(want[n]), rtol=1e-4, atol=1e-3, err_msg=n)


# ---------------------------------------------------------------------------------------------- invariant folds

# A fold inside `parallel` over values that do not vary by instance (whole tensors loaded outside the loop,
# subregion bounds loaded outside it) is the same for every instance: no split (its partial has no lanes to
# publish per instance; found by tests/test_physical_kirgen.py at --hypothesis-seed=10, where the split body's
# one-program branch yielded the lane-less partial as the instances' results).
INVARIANT = {
    "reduce": ("""kernel invariant_reduce(x: in f32[N], out: out f32[N]) symbols(N) {
  %0: f32[N] = load %x[0:N]
  parallel (%i: i64) in (N) {
    %1: f32 = reduce sum(%0) axes=(0)
    %2: f32 = load %x[%i]
    %3: f32 = binary add %1, %2
    store %out[%i] = %3
    yield
  }
  yield
}""", "split-reductions", "its reduction is the same for every instance"),
    "custom_reduce_unused": ("""kernel invariant_pairs(idx: in i64[N], xi: in i8[N], out: out i64[N]) symbols(N) {
  %1: i64[N] = load %idx[0:N]
  %2: i8[N] = load %xi[0:N]
  parallel (%i: i64) in (N) {
    %9: i64, %10: i8 = reduce custom(%1, %2) axes=(0) identity=(1, 1) combine=(%a: i64, %b: i8, %c: i64, %d: i8) {
      %e: i64 = binary add %a, %c
      %f: i8 = binary add %b, %d
      yield %e, %f
    }
    %11: i64 = binary add %i, %i
    store %out[%i] = %11
    yield
  }
  yield
}""", "split-reductions", "its reduction is the same for every instance"),
    "region_fold": ("""kernel same_fold(offsets: in i64[S + 1], values: in f32[E], outv: out f32[S]) symbols(S, E) {
  %c: i64 = constant 0 : i64
  %one: i64 = constant 1 : i64
  %b: i64 = load %offsets[%c]
  %e: i64 = load %offsets[%one]
  parallel (%s: i64) in (S) {
    %1: f32 = region_fold sum %values[%b:%e]
    %2: i64 = load %offsets[%s]
    %3: f32 = cast %2 to f32
    %4: f32 = binary add %1, %3
    store %outv[%s] = %4
    yield
  }
  yield
}""", "split-segments", "a fold is the same for every instance"),
}


def _invariant_args(case: str) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    if case == "reduce":
        return {"x": torch.randn(300, generator=g), "out": torch.empty(300)}
    if case == "custom_reduce_unused":
        return {"idx": torch.randint(-5, 5, (300,), generator=g), "xi": torch.randint(-5, 5, (300,), generator=g,
                dtype=torch.int8), "out": torch.empty(300, dtype=torch.int64)}
    return {**segment_args({"outv": 0}, seed=11)}


@pytest.mark.parametrize("case", list(INVARIANT))
def test_a_fold_the_same_for_every_instance_is_not_split(case: str, monkeypatch) -> None:
    src, split_pass, reason = INVARIANT[case]
    monkeypatch.setenv(BUDGET_VARIABLE, "64")  # short chunks: the reduction's row of 300 is looped
    k = parse_kernel(src)
    with simulated_multiprocessors(132):
        program, names = passes_verified(k)
        assert split_pass not in names
        # the reason the plan gives, on the program the split pass sees
        position = next(n for n, p in enumerate(physical.PIPELINE) if p.name == split_pass)
        before, _ = run_pipeline(physical.construct(k), passes=physical.PIPELINE[:position])
        (group,) = before.groups
        assert physical.PIPELINE[position].plan_group(before, group) == reason
        args = _invariant_args(case)
        want = oracle.run(k, {n: v.clone() for n, v in args.items()})
        out = {n: v.clone() for n, v in args.items()}
        emit_triton.launch(k, out, sanitize=True)
    for n in want:
        np.testing.assert_allclose(out[n].numpy(), np.asarray(want[n]), rtol=1e-5, atol=1e-4, err_msg=n)
