"""Every case of the project's acceptance kernels (tests/acceptance) through the launcher on CPU tensors
(Triton's interpreter), the NumPy oracle and, where the kernel is expressible there, the StableHLO exit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intent
from tests import acceptance

DEFAULT_TOL = dict(atol=1e-5, rtol=1e-5)


def clone(args: dict) -> dict:
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}


def assert_matches(where: str, got, want: torch.Tensor, tol: dict) -> None:
    got = got.cpu() if isinstance(got, torch.Tensor) else torch.from_numpy(np.array(got))
    assert tuple(got.shape) == tuple(want.shape), f"{where}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    if want.dtype.is_floating_point:
        assert torch.allclose(got.double(), want.double(), equal_nan=True, **tol), \
            f"{where}: max abs diff {(got.double() - want.double()).abs().nan_to_num(float('inf')).max().item():.3g}"
    else:
        assert torch.equal(got.to(want.dtype), want), f"{where}: integers differ"


@pytest.mark.parametrize("path", acceptance.FILES, ids=[p.stem for p in acceptance.FILES])
def test_every_case_matches_through_launcher_oracle_and_stablehlo(path) -> None:
    module = acceptance.load(path)
    tol = getattr(module, "TOL", DEFAULT_TOL)
    cases = list(module.cases())
    assert cases, f"{path.stem} has no cases"
    for n, (kernel, args, expected) in enumerate(cases):
        where = f"{path.stem}[{n}] {kernel.__name__}"
        launched = clone(args)
        kernel(**launched)
        for name, want in expected.items():
            assert_matches(f"{where} launch {name}", launched[name], want, tol)
        results = kernel.oracle(**clone(args))
        for name, want in expected.items():
            assert_matches(f"{where} oracle {name}", results[name], want, tol)
        try:
            results = kernel.stablehlo_run(**clone(args))
        except intent.NotExpressible:
            continue
        for name, want in expected.items():
            assert_matches(f"{where} stablehlo {name}", results[name], want, tol)
