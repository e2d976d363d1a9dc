"""examples/sparsemax.py against a torch formulation of sparsemax (sort, cumulative sum, support, threshold),
through the oracle, the launcher on CPU and the StableHLO exit, at row lengths that are not powers of two."""

from __future__ import annotations

import os

import pytest
import torch

import intent
from tests.breadth_support import three_ways

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torch_sparsemax(z: torch.Tensor) -> torch.Tensor:
    desc, _ = torch.sort(z, dim=-1, descending=True)
    running = desc.cumsum(-1)
    rank = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    support = 1 + rank * desc > running
    k = support.sum(-1, keepdim=True)
    tau = ((desc * support).sum(-1, keepdim=True) - 1) / k
    return torch.clamp(z - tau, min=0)


@pytest.mark.parametrize(("m", "n"), [(1, 1), (3, 17), (4, 300)])
def test_sparsemax(m: int, n: int) -> None:
    sparsemax = intent.kernels_in_file(os.path.join(ROOT, "examples", "sparsemax.py"))["sparsemax"]
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(n)) * 3
    got = three_ways(sparsemax, {"x": x, "out": torch.empty(m, n)}, ("out",), rtol=1e-5, atol=1e-6)
    out = torch.from_numpy(got["out"])
    torch.testing.assert_close(out, torch_sparsemax(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.sum(-1), torch.ones(m), rtol=1e-5, atol=1e-5)  # on the simplex
    assert (out >= 0).all() and (n < 17 or (out == 0).any())                       # and sparse


def test_top_k_sampling() -> None:
    """examples/top_k_sampling.py against torch.topk, softmax and inverse-CDF sampling with the same draws."""
    sample = intent.kernels_in_file(os.path.join(ROOT, "examples", "top_k_sampling.py"))["top_k_sample"]
    gen = torch.Generator().manual_seed(11)
    logits, u = torch.randn(6, 50, generator=gen) * 2, torch.rand(6, generator=gen)
    u[0], u[1] = 0.0, 0.999999                                    # the most likely candidate; the last one
    got = three_ways(sample, {"logits": logits, "u": u, "token": torch.empty(6, dtype=torch.int64),
                              "prob": torch.empty(6)}, ("token", "prob"), rtol=1e-6, atol=1e-7)
    vals, idx = torch.topk(logits, 8)
    probs = torch.softmax(vals, -1)
    pick = (probs.cumsum(-1) <= u[:, None]).sum(-1).clamp(max=7)
    assert got["token"].tolist() == idx.gather(1, pick[:, None])[:, 0].tolist()
    torch.testing.assert_close(torch.from_numpy(got["prob"]), probs.gather(1, pick[:, None])[:, 0])
    assert got["token"][0] == logits[0].argmax()
