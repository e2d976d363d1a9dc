"""The construction verifier on tile-owning groups: each rule the tiled contraction relies on, broken once."""

from __future__ import annotations

import dataclasses

import intent
import physical
from intent import Out, dims, f32
from physical import ops as P
from physical.launch_expr import LConst
from physical.model import AccessRelation, Fragment, Group, PRegion, Program
from physical.verifier import check

M, N, K = dims("M N K")


@intent.kernel
def matmul(a: f32[M, K], b: f32[K, N], c: Out[f32[M, N]]):
    c[:, :] = intent.dot(a, b)


def _program() -> tuple[Program, Group, P.Store]:
    program = physical.lower(matmul.kir, verify=True)
    g = program.groups[0]
    (store,) = [op for op in g.body.ops if isinstance(op, P.Store)]
    return program, g, store


def _with_body(program: Program, g: Group, ops: list[P.POp]) -> Program:
    return dataclasses.replace(program, groups=(dataclasses.replace(g, body=PRegion(g.body.args, tuple(ops))),))


def _rule(program: Program, rule: str) -> list[str]:
    return [v.message for v in check(program, matmul.kir) if v.rule == rule]


def test_the_tiled_program_keeps_every_rule() -> None:
    program, _, _ = _program()
    assert check(program, matmul.kir) == []


def test_a_store_not_masked_to_the_domain_is_reported() -> None:
    program, g, store = _program()
    in_m = next(op for op in g.body.ops if isinstance(op, P.Broadcast) and op.x.name == "in_m")
    access = dataclasses.replace(store.access, mask=in_m.result)  # drops `cols < N`
    ops = [dataclasses.replace(store, access=access) if op is store else op for op in g.body.ops]
    assert _rule(_with_body(program, g, ops), "ownership") == [
        "store in tile group 0 is not masked by BLOCK_TN0 positions below N: positions past the domain would "
        "perform it"]


def test_a_segment_that_does_not_count_the_tiles_is_reported() -> None:
    program, g, _ = _program()
    seg = dataclasses.replace(program.segments[0], length=LConst(1))
    bad = dataclasses.replace(program, segments=(seg,), grid=LConst(1))
    assert _rule(bad, "ownership") == ["segment of group 0 (store) has 1 programs, but its domain needs "
                                       "cdiv(M, BLOCK_TM0) * cdiv(N, BLOCK_TN0)"]


def test_a_group_that_decodes_no_tile_is_reported() -> None:
    program, g, _ = _program()
    ops = [op for op in g.body.ops if not isinstance(op, P.OwnedTile)]
    assert "tile group 0 (store) has 0 owned_tile; its programs must decode their tile exactly once" in \
        _rule(_with_body(program, g, ops), "ownership")


def test_two_tiles_writing_the_same_elements_conflict() -> None:
    program, g, store = _program()
    rows = store.access.coords[0]
    access = AccessRelation(store.access.buffer, (rows, rows), store.access.mask, store.access.bounds,
                            store.access.fill)
    ops = [dataclasses.replace(store, access=access) if op is store else op for op in g.body.ops]
    found = _rule(_with_body(program, g, ops), "unordered-conflict")
    assert found == ["store (from store at test_perf_verifier_tiles.py:20) may write the element of c that it writes "
                     "in another instance, with neither unique, reduction nor atomic semantics"]


def test_owned_tile_results_are_typed() -> None:
    program, g, _ = _program()
    tile = next(op for op in g.body.ops if isinstance(op, P.OwnedTile))
    rows, cols = tile.results
    wrong = dataclasses.replace(tile, results=(rows, dataclasses.replace(cols, type=Fragment(cols.type.dtype))))
    ops = [wrong if op is tile else op for op in g.body.ops]
    assert any("a tiled coordinate is an integer tile of one axis held in BLOCK_TN0, got i64" in m
               for m in _rule(_with_body(program, g, ops), "fragment-types"))
