"""Counter-based random numbers (Philox 4x32-10), bit-exact with Triton's tl.rand/randn/randint."""

from __future__ import annotations

from kir.rng import RNG_DTYPE, RngKind

from ..model import Fragment, POp, PValue
from ._base import POSITIONWISE, PURE, broadcast_problem, pop, typing_rule


@pop("random", PURE | POSITIONWISE)
class Random(POp):
    """The offset's dtype width is part of the counter (64-bit offsets set the high counter word)."""

    kind: RngKind
    seed: PValue
    offset: PValue


# ---------------------------------------------------------------------------------------------- typing


@typing_rule(Random, one_result=True)
def _random(op: Random, r: Fragment) -> list[str]:
    out = []
    if not op.seed.type.dtype.is_int or not op.offset.type.dtype.is_int:
        out.append("seed and offset must be integers")
    if r.dtype != RNG_DTYPE[op.kind]:
        out.append(f"{op.kind} gives {RNG_DTYPE[op.kind]}, not {r.dtype}")
    p = broadcast_problem((op.seed, op.offset), r)
    return out + ([p] if p else [])
