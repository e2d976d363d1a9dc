"""Mutation tests of the construction verifier, where the helpers of balanced jagged folds and scans join
(ownership).

Over a (segments, columns) workset a chunk of a segment's rows has a helper per block the segment's columns may
span (physical/passes/balance_segments.py, balance_region_scan.py): the helper of part j decodes the j-th block of
its chunk's owner and joins there the lanes of part j. The rule proves, on every sample launch with helpers and for
every instance, that the helper of a lane's part decodes the block that holds the lane, and that the lane's part is
one the helpers are numbered over (HELPER_SPAN covers the blocks a segment spans): each chunk a lane hands over is
taken for it. Each mutation breaks one of those and expects the rule's exact message; both forms, forward and
reverse, must still verify.
"""

from __future__ import annotations

import dataclasses

import pytest

import physical.passes.balance_region_scan as balance_region_scan
import physical.passes.balance_segments as balance_segments
from kir import BinaryFn
from physical import ops as P
from physical.launch_expr import LBin, LConst, lcdiv
from physical.model import Program, PValue
from physical.verifier import check
from tests.mutations import Mutations, assert_reported, balanced, fresh_id, only, swap
from tests.test_balance_jagged_folds import jagged
from tests.test_balance_jagged_scans import backwards, running

FAMILY = Mutations()
more = FAMILY.also

KERNELS = {"jagged": jagged, "running": running, "backwards": backwards}
WIDE = "JE=4099, JD=4116, J=4133 on 132 multiprocessors"   # a segment's columns span up to 258 blocks of 16
NARROW = "JE=4194307, JD=3, J=4194375 on 132 multiprocessors"  # 3 columns, in two blocks where they straddle one


def value(p: Program, name: str) -> PValue:
    found = {v.id: v for op in p.walk() for v in op.results if v.name == name}
    assert len(found) == 1, f"expected one {name}, found {len(found)}"
    return next(iter(found.values()))


def block_of_part(p: Program) -> P.Binary:
    """The helper's block `at + part` (the owner's first block plus its part) in the search for its block."""
    parts = {v.id for op in p.walk() for v in op.results if v.name == "helper_part"}
    return only(p, P.Binary, lambda op: op.fn is BinaryFn.add and op.rhs.id in parts)


def with_block(p: Program, make) -> Program:
    """The helper's block `at + part` replaced by what `make(at, part, fresh)` gives (ops ending in its value)."""
    add = block_of_part(p)
    ops = make(add.lhs, add.rhs, fresh_id(p))
    last = ops[-1]
    return swap(p, add, [*ops[:-1], dataclasses.replace(last, results=add.results)])


def next_block(p: Program) -> Program:
    def make(at, part, n):
        one = PValue(n, part.type, "one")
        more = PValue(n + 1, part.type, "more")
        return [P.Const(results=(one,), value=1, dtype=part.type.dtype),
                P.Binary(results=(more,), fn=BinaryFn.add, lhs=at, rhs=part),
                P.Binary(results=(PValue(n + 2, part.type),), fn=BinaryFn.add, lhs=more, rhs=one)]

    return with_block(p, make)


def misplaced(p: Program, where: str) -> str:
    block = only(p, P.OwnedInstances).helper_block
    return (f"[ownership] a helper of group 0 (parallel) joins a lane only in the block %{block.id} it decodes, which "
            f"is not proven to hold the lanes of its part %{value(p, 'lane_part').id} in its owner's segment "
            f"({where}): a chunk the lane hands to the helpers might be taken for it by none")


def uncovered(p: Program, parts: int, where: str) -> str:
    return (f"[ownership] a helper of group 0 (parallel) joins a lane as the helper of the lane's part "
            f"%{value(p, 'lane_part').id}, which may lie outside [0, {parts}), the parts a chunk has helpers for "
            f"({where}): a chunk the lane hands to the helpers might be taken for it by none")


# ---------------------------------------------------------------------------------------------- the helper's block


@more("scan_helper_joins_the_next_block", "ownership")
def scan_helper_decodes_the_block_after_its_part():
    """`at + part + 1`: the helper of part j decodes the (j + 1)-th block of its owner, where no lane is of part j:
    the chunk is scanned for none of the segment's columns."""
    k, p = balanced(running)
    broken = next_block(p)
    return k, broken, misplaced(broken, WIDE)


@more("reverse_scan_helper_joins_the_next_block", "ownership")
def reverse_scan_helper_decodes_the_block_after_its_part():
    k, p = balanced(backwards)
    broken = next_block(p)
    return k, broken, misplaced(broken, WIDE)


@more("fold_helper_joins_the_next_block", "ownership")
def fold_helper_decodes_the_block_after_its_part():
    """The same in a jagged fold: no helper draws the lane's ticket for the chunk, and its last participant would
    never come."""
    k, p = balanced(jagged)
    broken = next_block(p)
    return k, broken, misplaced(broken, WIDE)


@more("scan_helpers_all_join_the_first_block", "ownership")
def scan_helper_decodes_its_owners_first_block():
    """`at`: every part's helper decodes the owner's first block, so only the lanes of part 0 are joined."""
    k, p = balanced(running)
    broken = with_block(p, lambda at, part, n: [P.Binary(results=(PValue(n, part.type),), fn=BinaryFn.maximum,
                                                            lhs=at, rhs=at)])
    return k, broken, misplaced(broken, WIDE)


# ---------------------------------------------------------------------------------------------- the helpers' span


def spanned_by_extent(monkeypatch) -> None:
    """The blocks a segment spans counted as cdiv(D, BLOCK): a segment whose columns straddle a block's edge lies
    in one block more."""
    for module in (balance_segments, balance_region_scan):
        monkeypatch.setattr(module, "blocks_spanned", lambda width, block: lcdiv(width, block))


@more("fold_helper_span_one_too_small", "ownership")
def fold_helpers_one_part_short():
    """HELPER_SPAN one less than the blocks a segment spans: the lanes in a segment's last block have no helper."""
    k, p = balanced(jagged)
    consts = dict(p.constexprs)
    consts["HELPER_SPAN_0"] = LBin("-", consts["HELPER_SPAN_0"], LConst(1))
    broken = dataclasses.replace(p, constexprs=tuple((n, consts[n]) for n, _ in p.constexprs))
    return k, broken, uncovered(broken, 257, WIDE)


def test_a_fold_span_that_misses_straddling_segments_is_reported(monkeypatch):
    spanned_by_extent(monkeypatch)
    k, p = balanced(jagged)
    assert_reported("ownership", k, p, uncovered(p, 1, NARROW))


@pytest.mark.parametrize("name", ["running", "backwards"])
def test_a_scan_span_that_misses_straddling_segments_is_reported(monkeypatch, name):
    spanned_by_extent(monkeypatch)
    k, p = balanced(KERNELS[name])
    assert_reported("ownership", k, p, uncovered(p, 1, NARROW))


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_balanced_jagged_forms_verify(name):
    k, p = balanced(KERNELS[name])
    assert check(p, k) == []


@pytest.mark.parametrize("name", sorted(FAMILY.more))
def test_more_mutations_are_reported_by_their_rule(name):
    rule, make = FAMILY.more[name]
    assert_reported(rule, *make())
