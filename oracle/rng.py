"""Counter-based random numbers: Philox 4x32-10, bit-exact with Triton's tl.rand/randn/randint.

The seed is the seed value's integer (taken modulo 2**64, as Triton casts it to uint64) and the
offset keeps its dtype, whose width decides the counter words (see `oracle/philox.py`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kir.rng import Random, RngKind

from .interp import Frame, evaluates
from .philox import philox_rand, philox_randint, philox_randn

GENERATORS: dict[RngKind, Callable[[int, np.ndarray], np.ndarray]] = {
    RngKind.rand: philox_rand,
    RngKind.randn: philox_randn,
    RngKind.randint: philox_randint,
}


@evaluates(Random)
def _random(frame: Frame, op: Random) -> tuple[np.ndarray]:
    seed, offset = frame.get(op.seed), frame.get(op.offset)
    gen = GENERATORS[op.kind]
    if seed.shape[0] == 1 or (seed == seed[0]).all():
        return (gen(int(seed[0]), offset),)
    offset = frame.full(offset)
    out: np.ndarray | None = None
    for s in np.unique(seed):  # instances with different seeds: one Philox call per seed
        lanes = np.flatnonzero(seed == s)
        part = gen(int(s), offset[lanes])
        if out is None:
            out = np.empty(offset.shape, part.dtype)
        out[lanes] = part
    assert out is not None
    return (out,)
