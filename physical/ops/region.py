"""Region fold and region scan over a data-dependent subregion [begin, end) traversed in chunks."""

from __future__ import annotations

from kir.dtypes import DType
from kir.reduce import ReduceKind
from kir.scan import ScanKind

from ..model import Literal, POp, PRegion, PValue
from ._base import EFFECTS, NO_TRAITS, WRITES, active_members, effect_members, pop, typed_elsewhere, typing_rule
from .reduce import native_reduce
from .scan import native_scan

# Built-in folds whose combine commutes: a region fold accumulates them per chunk position
COMMUTATIVE_REDUCE = frozenset({ReduceKind.sum, ReduceKind.prod, ReduceKind.max, ReduceKind.min, ReduceKind.any,
                                ReduceKind.all})


@pop("region_fold", NO_TRAITS)
class RegionFold(POp):
    """Fold the subregion [begin, end) per lane, `block` elements at a time.

    `source` is the slicing relation and summariser: it takes the chunk start (a uniform index
    offset from `begin`) and yields (component_1..component_k, member) fragments with one tile axis
    (the chunk); members outside `member` take the identity. The chunk loop runs to the longest
    subregion among the `active` lanes. Built-in kinds that commute merge components elementwise into
    a carried accumulator and fold its chunk axis after the loop; any other combine folds each chunk
    in element order and joins it to a per-lane carry, so the elements meet in subregion order. An
    empty subregion yields the identity.
    """

    @property
    def per_position(self) -> bool:
        """Whether chunks merge elementwise into an accumulator folded once after the loop (commuting kinds)."""
        return self.kind in COMMUTATIVE_REDUCE

    @property
    def native(self) -> bool:
        """Whether that final fold of the accumulator is the target's native reduction (else a tree)."""
        return self.per_position and native_reduce(self.kind)

    begin: PValue
    end: PValue
    block: str
    source: PRegion
    kind: ReduceKind
    identity: tuple[Literal, ...]
    acc_dtypes: tuple[DType, ...]
    combine: PRegion
    active: PValue | None


@pop("region_scan", WRITES | EFFECTS)
class RegionScan(POp):
    """Scan the subregion [begin, end) per lane in chunks and hand each scanned chunk to `emit`.

    `source` as in `RegionFold`; `combine` is the transition combine; the running prefix (the total of
    the previous chunks) is combined with each chunk's local scan, and `emit` (args: chunk start,
    scanned components..., member) writes the chunk. Reverse scans walk chunks from the end and keep
    index order (the running prefix is then the combine's right operand), as in the oracle.
    """

    @property
    def native(self) -> bool:
        """Whether each chunk's local scan and total are the target's cumulative sum and sum (a native sum
        scan; a product has no native total to carry to the next chunk), else the element-order tree."""
        return self.kind is ScanKind.sum and native_scan(self.kind, len(self.acc_dtypes), self.exclusive,
                                                        self.acc_dtypes[0])

    begin: PValue
    end: PValue
    block: str
    source: PRegion
    kind: ScanKind
    reverse: bool
    exclusive: bool
    identity: tuple[Literal, ...]
    acc_dtypes: tuple[DType, ...]
    combine: PRegion
    emit: PRegion
    active: PValue | None


HELD_PREFIX = "BLOCK_HELD_"


def held_block(group: int) -> str:
    """The constexpr of the tile of its piece that a program of split group `group` holds on chip across the
    wait for its predecessors (passes/split_region_scan.py): its loads and stores together with the region scan
    over the rest of the piece cover each position of the subregions once."""
    return f"{HELD_PREFIX}{group}"


def is_held(block: str) -> bool:
    """Whether the tile axis of constexpr `block` is a split region scan's held tile."""
    return block.startswith(HELD_PREFIX)


# ---------------------------------------------------------------------------------------------- typing


typing_rule(RegionFold, RegionScan)(typed_elsewhere)


# ---------------------------------------------------------------------------------------------- members


effect_members(RegionScan)(active_members)
