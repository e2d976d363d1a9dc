"""Run one kernel object three ways (the oracle, the launcher on CPU tensors, the StableHLO exit) and compare."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

import intent
from kir.errors import NotExpressible


def _copy(args: Mapping[str, object]) -> dict[str, object]:
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}


def _np(x: object) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        if x.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
            return x.float().numpy()
        return x.numpy()
    return np.asarray(x)


def three_ways(k: intent.KernelObject, args: Mapping[str, object], outputs: tuple[str, ...], *, rtol: float = 1e-6,
               atol: float = 1e-6, stablehlo: bool = True) -> dict[str, np.ndarray]:
    """The launcher's outputs, after checking them (and the StableHLO exit's, when `stablehlo`) against the
    oracle's within `rtol`/`atol` (0/0: bit for bit, NaN equal to NaN)."""
    want = k.oracle(**_copy(args))
    launched = _copy(args)
    k(**launched)
    got = {n: _np(launched[n]) for n in outputs}
    for n in outputs:
        np.testing.assert_allclose(got[n].astype(np.float64), np.asarray(want[n]).astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True, err_msg=f"launcher vs oracle: {n}")
    if stablehlo:
        try:
            shlo = k.stablehlo_run(**_copy(args))
        except NotExpressible:
            raise
        for n in outputs:
            np.testing.assert_allclose(np.asarray(shlo[n]).astype(np.float64),
                                       np.asarray(want[n]).astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=f"StableHLO vs oracle: {n}")
    return got
