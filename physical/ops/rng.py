"""Counter-based random numbers (Philox 4x32-10), bit-exact with Triton's tl.rand/randn/randint."""

from __future__ import annotations

from kir.rng import RngKind

from ..model import POp, PValue
from ._base import POSITIONWISE, PURE, pop


@pop("random", PURE | POSITIONWISE)
class Random(POp):
    """The offset's dtype width is part of the counter (64-bit offsets set the high counter word)."""

    kind: RngKind
    seed: PValue
    offset: PValue
