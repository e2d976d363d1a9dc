"""The real pipeline: physical.lower -> emit_triton.emit -> launcher, on the hand-built sample kernels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import emit_triton
import oracle
from tests import samples
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def private_cache(isolated_cache):  # noqa: F811
    return isolated_cache


def sample_args(name: str) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return {
        "softmax": lambda: {"x": torch.randn(5, 37, generator=g)},
        "vector_add": lambda: {"x": torch.randn(300, generator=g)[::1], "y": torch.randn(600, generator=g)[::2]},
        "segment_sum": lambda: {"values": torch.randn(50, generator=g), "offsets": torch.tensor([0, 3, 3, 20, 50])},
        "recurrence": lambda: {"a": torch.rand(3, 9, generator=g), "x": torch.randn(3, 9, generator=g)},
        "histogram": lambda: {"x": torch.randint(0, 8, (100,), generator=g, dtype=torch.int32),
                              "counts": torch.zeros(8, dtype=torch.int32)},
    }[name]()


@pytest.mark.parametrize("name", ["softmax", "vector_add", "segment_sum", "recurrence", "histogram"])
def test_sample_matches_the_oracle(name):
    kernel = getattr(samples, name)()
    args = sample_args(name)
    want = oracle.run(kernel, {n: v.numpy().copy() for n, v in args.items()})
    given = {n: v.clone() for n, v in args.items()}
    returned = emit_triton.launch(kernel, given)
    omitted = [p.name for p in kernel.outputs if p.name not in given]
    got = dict(zip(omitted, returned if isinstance(returned, tuple) else (returned,))) if omitted else {}
    got.update({p.name: given[p.name] for p in kernel.outputs if p.name in given})
    assert sorted(got) == sorted(want)
    for out, expected in want.items():
        assert got[out].shape == expected.shape
        np.testing.assert_allclose(got[out].numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["vector_add", "segment_sum"])
def test_sample_compiles_ahead_of_time(name):
    kernel = getattr(samples, name)()
    text = emit_triton.ptx(kernel, sample_args(name), arch=90)
    assert ".entry" in text and ".target sm_90" in text
    assert "@triton.jit" in emit_triton.source(kernel, sample_args(name))
