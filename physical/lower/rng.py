"""Random numbers: Philox keyed by the seed, counter from the offset (its dtype width kept)."""

from __future__ import annotations

from kir import rng as KN

from .. import ops as P
from ..model import Fragment
from . import rule
from .context import Lowerer


@rule(KN.Random)
def lower_random(lw: Lowerer, op: KN.Random) -> None:
    seed, offset = lw.get(op.seed), lw.get(op.offset)
    t = op.result.type
    out = Fragment(t.dtype, offset.type.lanes or seed.type.lanes, offset.type.tile)  # type: ignore[arg-type]
    lw.bind(op.result, lw.add(P.Random, out, name=op.result.name, kind=op.kind, seed=seed, offset=offset))
