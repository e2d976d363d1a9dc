"""The verifier's sample launches (physical/verifier/index.py) select the split form of every split pass.

Rules compare launch expressions on a few sample bindings of the shape symbols; the checks that depend on the
launch (slot counts, tickets, the padding of slot tiles, the workspace protocol) only see a split form where a
sample selects it. Few long rows and few huge segments on a 132-multiprocessor device do: this keeps it so for
each pass of the pipeline that splits work over the programs of a launch."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import intent
import physical
from intent import Out, dims, f32, i64, parallel
from physical import ops as P
from physical.launch_expr import LBin, LConstexpr
from physical.lowering import run_pipeline
from physical.model import Program
from physical.passes import PIPELINE
from physical.verifier import check
from physical.verifier.index import evaluate, index_of
from tests.mutations import swap

M, N, S, E = dims("M N S E")


@intent.kernel
def row_sums(x: f32[M, N], out: Out[f32[M]]):
    for r in parallel(M):
        out[r] = intent.sum(x[r, :])


@intent.kernel
def prefix(x: f32[N], out: Out[f32[N]]):
    out[:] = intent.cumsum(x)


@intent.kernel
def row_prefixes(x: f32[M, N], out: Out[f32[M, N]]):
    for r in parallel(M):
        out[r, :] = intent.cumsum(x[r, :])


@intent.kernel
def segment_sums(values: f32[E], offsets: i64[S + 1], total: Out[f32[S]]):
    for s in parallel(S):
        total[s] = intent.sum(values[offsets[s]:offsets[s + 1]])


@intent.kernel
def span_sums(values: f32[E], starts: i64[S], ends: i64[S], total: Out[f32[S]]):
    for s in parallel(S):
        total[s] = intent.sum(values[starts[s]:ends[s]])


@intent.kernel
def segment_prefixes(values: f32[E], offsets: i64[S + 1], out: Out[f32[E]]):
    for s in parallel(S):
        out[offsets[s]:offsets[s + 1]] = intent.cumsum(values[offsets[s]:offsets[s + 1]])


def rows(*shape: int) -> dict[str, torch.Tensor]:
    return {"x": torch.zeros(shape)}


def segments() -> dict[str, torch.Tensor]:
    return {"values": torch.zeros(300), "offsets": torch.tensor([0, 100, 300])}


# each split pass of the pipeline: a kernel it splits, and the arguments it is specialised for
SPLIT_PASSES = {
    "split-reductions": (row_sums, lambda: rows(3, 300) | {"out": torch.zeros(3)}),
    "split-scans": (prefix, lambda: rows(300) | {"out": torch.zeros(300)}),
    "split-rows": (row_prefixes, lambda: rows(3, 300) | {"out": torch.zeros(3, 300)}),
    "split-segments": (segment_sums, lambda: segments() | {"total": torch.zeros(2)}),
    "split-region-scans": (segment_prefixes, lambda: segments() | {"out": torch.zeros(300)}),
}


def lowered(name: str) -> Program:
    kernel, args = SPLIT_PASSES[name]
    k = kernel.specialize(args())
    program, ran = run_pipeline(physical.construct(k), verify_with=k)  # every rule, on every sample, after each pass
    assert name in ran
    return program


def split_selected(program: Program, env: dict[str, int]) -> bool:
    """Whether the launch `env` runs some group split over several programs: a split flag set (SPLIT_g = 1), a
    split count above one (SPLITS_g), helpers (HELPERS_g), or, for a split scan (a chunk `<block>_SPLIT<g>` and no
    split count), several programs along its one row."""
    counted: set[int] = set()
    for name, _ in program.constexprs:
        kind, _, gid = name.rpartition("_")
        if kind in ("SPLIT", "SPLITS", "HELPERS") and gid.isdigit():
            counted.add(int(gid))
            value = env.get(name)
            if value is not None and (value > 1 if kind == "SPLITS" else value > 0):
                return True
    for name, _ in program.constexprs:
        chunk, _, gid = name.rpartition("_SPLIT")
        if chunk and gid.isdigit() and int(gid) not in counted and any(
                seg.group == int(gid) and (evaluate(seg.length, env) or 0) > 1 for seg in program.segments):
            return True
    return False


def test_the_table_names_every_split_pass_of_the_pipeline():
    assert {p.name for p in PIPELINE if p.name.startswith("split-")} == set(SPLIT_PASSES)


@pytest.mark.parametrize("name", sorted(SPLIT_PASSES))
def test_a_sample_launch_selects_each_split_form(name):
    program = lowered(name)
    envs = index_of(program).envs
    chosen = [k for k, env in enumerate(envs) if split_selected(program, env)]
    assert chosen, f"no sample launch selects the split form of {name}"
    assert not split_selected(program, envs[0])  # the interpreter sample keeps one program a row


def test_a_sample_launch_gives_segments_both_split_counts_and_helpers():
    """balance-segments' helpers (HELPERS_0 > 0, the shape split 1) and split-segments' pieces (SPLITS_0 > 1) are two
    ways a launch shares a segment: where the bounds are one offsets tensor's the data decides (helpers), elsewhere
    the shapes do (pieces); a sample selects each."""
    program = lowered("split-segments")
    envs = index_of(program).envs
    assert any(env["HELPERS_0"] > 0 and env["SPLITS_0"] == 1 for env in envs)
    assert all(env["SPLITS_0"] == 1 for env in envs)
    k = span_sums.specialize({"values": torch.zeros(300), "starts": torch.tensor([0, 100]),
                              "ends": torch.tensor([100, 300]), "total": torch.zeros(2)})
    program, ran = run_pipeline(physical.construct(k), verify_with=k)
    envs = index_of(program).envs
    assert "split-segments" in ran and any(env["SPLITS_0"] > 1 for env in envs)
    assert all(env.get("HELPERS_0", 0) == 0 for env in envs)


def test_a_split_form_retiring_the_programs_of_one_split_is_refused_on_the_split_sample():
    """Mutation: the split form's retire_ticket counts one program per block (the count without SPLITS_0), which is
    the segment's length only where SPLITS_0 = 1: the last program would restore the flags while others still
    wait. The count is checked on the launches that run the split form."""
    program = lowered("split-rows")
    retire = next(op for op in program.walk() if isinstance(op, P.RetireTicket))
    wrong = LBin("//", retire.programs, LConstexpr("SPLITS_0"))
    broken = swap(program, retire, dataclasses.replace(retire, programs=wrong))
    length = next(s.length for s in broken.segments if s.group == 0)
    found = [v.message for v in check(broken) if v.rule == "lookback-protocol"]
    assert found == [f"group 0: retire_ticket counts {wrong} programs, but the segment launches {length}"]
    ix = index_of(broken)
    split_form = ix.place[id(next(op for op in broken.walk() if isinstance(op, P.RetireTicket)))].form
    assert [ix.runs_form(broken.groups[0], split_form, env) for env in ix.envs] == \
        [split_selected(broken, env) for env in ix.envs]
