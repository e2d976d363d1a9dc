"""Region fold and region scan over a data-dependent subregion [begin, end) traversed in chunks."""

from __future__ import annotations

from kir.dtypes import DType
from kir.reduce import ReduceKind
from kir.scan import ScanKind

from ..model import Literal, POp, PRegion, PValue
from ._base import pop


@pop("region_fold")
class RegionFold(POp):
    """Fold the subregion [begin, end) per lane, `block` elements at a time.

    `source` is the slicing relation and summariser: it takes the chunk start (a uniform index
    offset from `begin`) and yields (component_1..component_k, member) fragments with one tile axis
    (the chunk); members outside `member` take the identity. The chunk loop runs to the longest
    subregion among the `active` lanes; `combine` merges components elementwise into a carried
    accumulator, then folds the accumulator's chunk axis. An empty subregion yields the identity.
    """

    begin: PValue
    end: PValue
    block: str
    source: PRegion
    kind: ReduceKind
    identity: tuple[Literal, ...]
    acc_dtypes: tuple[DType, ...]
    combine: PRegion
    active: PValue | None


@pop("region_scan")
class RegionScan(POp):
    """Scan the subregion [begin, end) per lane in chunks and hand each scanned chunk to `emit`.

    `source` as in `RegionFold`; `combine` is the transition combine; the running prefix (the final
    state of the previous chunk) is applied to each chunk's local scan, and `emit` (args: chunk
    start, scanned components..., member) writes the chunk. Reverse scans walk chunks from the end.
    """

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

    def has_effects(self) -> bool:
        return True
