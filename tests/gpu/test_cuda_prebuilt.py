"""Prebuilt kernels on a CUDA device: the cubin of `kirc build` runs through Triton's runtime, is profiled
with CUDA events, and a specialisation without a cubin is compiled from the stored source or refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import intent
from intent.errors import LaunchError
from kir.cli import main as kirc

KERNEL = '''
import intent
from intent import Out, dims, f32, parallel

N = dims("N")


@intent.kernel
def scale(x: f32[N], alpha: f32, out: Out[f32[N]]):
    for i in parallel(N):
        out[i] = x[i] * alpha
'''


def _arch() -> int:
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if _arch() not in (80, 90):
        pytest.skip(f"kirc build targets sm_80 and sm_90, this device is sm_{_arch()}")
    folder = tmp_path_factory.mktemp("prebuilt")
    (folder / "scale.py").write_text(KERNEL)
    assert kirc(["build", str(folder / "scale.py"), "--shape", "N=64", "--arch", str(_arch()),
                 "-o", str(folder / "out")]) == 0
    return folder / "out"


def test_the_prebuilt_cubin_runs_and_is_profiled(built: Path) -> None:
    lib = intent.load(built)
    x = torch.arange(64, dtype=torch.float32, device="cuda")
    with intent.profile() as p:
        y = lib.scale(x, 2.0)
        lib.scale(x[:50], 3.0)  # another size with the same tile size: the same cubin
    assert torch.equal(y, x * 2)
    first, second = p.launches
    assert first.path == second.path == f"cubin sm_{_arch()}"
    assert first.timing == "cuda events" and first.seconds > 0
    assert (first.bytes, first.flops) == (2 * 64 * 4, 64) and second.bytes == 2 * 50 * 4
    assert "% peak" in str(p)


def test_a_specialisation_without_a_cubin_is_compiled_or_refused(built: Path) -> None:
    x = torch.arange(1000, dtype=torch.float32, device="cuda")  # another tile size than the build's N=64
    with pytest.warns(UserWarning, match=r"no prebuilt cubin for sm_\d+ with \{'BLOCK_I0': 1024\}"):
        assert torch.equal(intent.load(built).scale(x, 2.0), x * 2)
    with pytest.raises(LaunchError, match=r"no prebuilt cubin for sm_\d+ .* load with jit_fallback=True"):
        intent.load(built, jit_fallback=False).scale(x, 2.0)


L = intent.dims("L")


@intent.kernel
def double(x: intent.f32[L], out: intent.Out[intent.f32[L]]):
    out[:] = x * 2.0


def test_the_profiler_times_compiler_launches_with_cuda_events() -> None:
    x = torch.randn(4096, device="cuda")
    double(x)
    with intent.profile() as p:
        y = double(x)
    assert torch.equal(y, x * 2.0)
    (launch,) = p.launches
    assert launch.path == "jit" and launch.timing == "cuda events" and launch.seconds > 0
    assert (launch.bytes, launch.flops) == (2 * 4096 * 4, 4096) and launch.gbs is not None
