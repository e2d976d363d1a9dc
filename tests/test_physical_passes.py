"""The ownership-enlargement pass: legality and profitability apart, blocks and warps from tile sizes."""

from __future__ import annotations

import intent
import physical
from intent import Out, f32, parallel
from physical.launch_expr import LConst
from physical.passes import PIPELINE, EnlargeOwnership
from tests import samples as S

M, I0 = intent.dims("M I0")


@intent.kernel
def row_sums(x: f32[M, I0], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.sum(x[i, :])


def blocks(program, env):
    full = dict(env)
    for n, e in program.constexprs:
        full[n] = e.evaluate(full)
    return full


def test_pipeline_order() -> None:
    assert [p.name for p in PIPELINE] == ["enlarge-ownership", "tile-contraction", "tile-layout", "aggregate-atomics",
                                           "split-scans", "looped-rows", "split-rows", "split-reductions",
                                           "persistent-programs", "split-segments", "split-region-scans"]


def test_construction_owns_one_instance_per_program() -> None:
    p = physical.construct(S.vector_add())
    assert dict(p.constexprs)["BLOCK_I0"] == LConst(1)
    assert EnlargeOwnership().legal(p) is True
    assert EnlargeOwnership().profitable(p)


def test_scalar_bodies_take_up_to_1024_instances() -> None:
    p = physical.lower(S.vector_add())
    env = blocks(p, {"N": 100_003})
    assert env["BLOCK_I0"] == 1024
    assert p.grid.evaluate(env) == 98  # cdiv(100003, 1024)
    small = blocks(p, {"N": 7})
    assert small["BLOCK_I0"] == 8 and p.grid.evaluate(small) == 1
    assert p.num_warps.evaluate(env) == 4


def test_short_rows_share_a_program_long_rows_do_not() -> None:
    p = physical.lower(S.softmax())
    short = blocks(p, {"M": 64, "N": 100})
    assert (short["BLOCK_N"], short["BLOCK_I0"]) == (128, 32)
    long = blocks(p, {"M": 4, "N": 20000})
    assert (long["BLOCK_N"], long["BLOCK_I0"]) == (32768, 1)
    assert p.num_warps.evaluate(long) == 16 and p.num_warps.evaluate(short) == 8


def test_enlargement_is_not_rerun_and_keeps_the_program_verified() -> None:
    p = physical.lower(S.two_groups(), verify=True)
    assert not EnlargeOwnership().profitable(p)
    env = blocks(p, {"M": 7, "N": 300, "P": 5000})
    assert env["BLOCK_I0"] == 8 and env["BLOCK_I1"] == 1024
    assert p.segments[1].offset.evaluate(env) == 1


def test_serial_groups_are_left_alone() -> None:
    p = physical.lower(S.racy_store())
    assert dict(p.constexprs)["BLOCK_I0"] == LConst(1)
    assert p.grid == LConst(1)


def test_legality_reason_for_a_mapped_serial_group() -> None:
    import dataclasses

    p = physical.construct(S.vector_add())
    bad = dataclasses.replace(p, groups=(dataclasses.replace(p.groups[0], serial=True),))
    assert EnlargeOwnership().legal(bad) == "group 0 maps instances to programs but is marked serial"


def test_every_planning_pass_plans_each_program_once(monkeypatch) -> None:
    """legal, profitable and run of one program share the pass's plan, kept by the lowering run's PassContext:
    each pass plans once per run, again in the next run, and no pass object keeps anything between runs."""
    from physical.passes import Pass

    planning = [p for p in PIPELINE if type(p).make_plan is not Pass.make_plan]
    assert {p.name for p in planning} >= {"tile-contraction", "tile-layout", "aggregate-atomics", "split-scans",
                                          "looped-rows", "split-reductions", "persistent-programs", "split-segments"}
    seen: dict[str, list[int]] = {p.name: [] for p in planning}
    for p in planning:
        real = type(p).make_plan
        monkeypatch.setattr(p, "make_plan", lambda program, p=p, real=real: seen[p.name].append(id(program))
                            or real(p, program))
    for kernel in (S.softmax(), S.histogram(), S.matmul(), S.cumsum_rows(), S.two_groups(), S.softmax()):
        physical.lower(kernel)
        for name, ids in seen.items():
            assert len(ids) == len(set(ids)) == 1, name  # each pass sees one program and plans it once
            ids.clear()
    monkeypatch.undo()
    state = {p.name: dict(vars(p)) for p in PIPELINE}
    physical.lower(S.softmax())
    assert {p.name: dict(vars(p)) for p in PIPELINE} == state  # nothing cached on the pipeline's pass objects


def test_the_pipeline_run_reports_the_passes_that_ran_and_verifies_after_each() -> None:
    import dataclasses

    import pytest

    from physical.lowering import run_pipeline
    from physical.passes import Pass
    from physical.verifier import PhysicalVerifyError

    k = S.softmax()
    program, names = run_pipeline(physical.construct(k), verify_with=k)
    assert program == physical.lower(k)
    assert names == ["enlarge-ownership", "looped-rows"]
    assert run_pipeline(physical.construct(k), passes=PIPELINE[1:])[1] == ["looped-rows"]

    class Misplaces(Pass):
        """Starts every segment at its own length: the segments no longer partition the grid."""

        name = "misplace-segments"

        def legal(self, program, ctx=None):
            return True

        def profitable(self, program, ctx=None):
            return True

        def run(self, program, ctx=None):
            return program.replace(segments=tuple(dataclasses.replace(s, offset=s.length) for s in program.segments))

    with pytest.raises(PhysicalVerifyError) as info:
        run_pipeline(physical.construct(k), verify_with=k, passes=[PIPELINE[0], Misplaces()])
    assert info.value.rule == "segments-partition"
    assert info.value.__notes__ == ["after the pass misplace-segments (passes run: enlarge-ownership, "
                                    "misplace-segments)"]
    assert run_pipeline(physical.construct(k), passes=[Misplaces()])[1] == ["misplace-segments"]  # not verified


def test_a_pass_asked_alone_plans_for_that_call() -> None:
    from physical.passes import PassContext, PersistentPrograms

    program = physical.PIPELINE[0].run(physical.construct(S.softmax()))
    step = PersistentPrograms()
    calls = []
    step.make_plan = lambda prog: calls.append(prog) or PersistentPrograms.make_plan(step, prog)  # type: ignore
    step.legal(program)
    step.profitable(program)
    assert len(calls) == 2
    ctx = PassContext()
    step.legal(program, ctx)
    step.profitable(program, ctx)
    assert len(calls) == 3


def test_a_shape_symbol_named_like_a_group_block_gets_its_own_constexpr() -> None:
    """A row of extent I0 is held in a tile block of its own, not in group 0's BLOCK_I0 (the program held the
    name twice, and the launcher and the kernel took different definitions)."""
    import torch

    program = physical.lower(row_sums.kir, verify=True)
    names = [n for n, _ in program.constexprs]
    assert len(names) == len(set(names)) and names[:2] == ["BLOCK_I0", "BLOCK_I0_0"]
    x, out = torch.randn(5, 3), torch.empty(5)
    row_sums(x, out)
    torch.testing.assert_close(out, x.sum(1))


def test_ownership_blocks_of_instances_or_tiles() -> None:
    from kir.dims import DSym
    from physical.launch_expr import LConstexpr
    from physical.model import Ownership

    B, M, N = DSym("B"), DSym("M"), DSym("N")
    consts = {"BLOCK_I0": LConstexpr("BLOCK_I0"), "TM": LConst(64), "TN": LConst(32)}
    env = {"B": 3, "M": 100, "N": 70, "BLOCK_I0": 16}
    blocks, tiles = Ownership("BLOCK_I0"), Ownership("BLOCK_I0", ("TM", "TN"))
    assert not blocks.tiled and tiles.tiled and tiles.axes((B, M, N)) == ((B,), (M, N))
    assert blocks.programs((B, M, N), consts).evaluate(env) == 1313  # cdiv(21000, 16)
    assert tiles.programs((B, M, N), consts).evaluate(env) == 3 * 2 * 3
    assert blocks.programs((), consts) == LConst(1)
    assert (str(blocks), str(tiles)) == ("BLOCK_I0 instances", "one TM x TN tile")
    g = physical.lower(S.softmax()).groups[0]
    assert g.block == g.ownership.block and not g.ownership.tiled
