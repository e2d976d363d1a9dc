"""Layout ops on values held in registers inside an instance (slice, concat, regrouping reshape) and
histograms of rank > 1 values, against the oracle; the .kir layout example runs end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import intent
import physical
from intent import Out, dims, f32, i32, parallel
from physical import ops as P

M, N, C, B = dims("M N C B")
ROOT = Path(__file__).resolve().parents[1]


@intent.kernel(requires=[N >= 3])
def strided(x: f32[M, N], out: Out[f32[M, N - 2]], odd: Out[f32[M, N // 2]]):
    for i in parallel(M):
        e = x[i, :] * 2.0
        out[i, :] = e[1:N - 1]
        odd[i, :] = e[1:N:2]


@intent.kernel(requires=[N >= 2])
def rotate(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        e = x[i, :] + 1.0
        out[i, :] = intent.concat((e[1:N], e[0:1]), axis=0)


@intent.kernel
def regroup(x: f32[M, 3, C], flat: Out[f32[M, 3 * C]], swapped: Out[f32[M, C, 3]]):
    for i in parallel(M):
        v = x[i, :, :] - 0.5
        flat[i, :] = intent.reshape(v, (3 * C,))
        swapped[i, :, :] = intent.reshape(v, (C, 3))


@intent.kernel
def single_instance(x: f32[N], out: Out[f32[2 * N]]):
    e = intent.exp(x)
    col = intent.reshape(e, (N, 1))
    out[:] = intent.reshape(intent.concat((col, col * 2.0), axis=1), (2 * N,))


@intent.kernel
def counts2d(x: i32[M, N, C], counts: Out[i32[M, B]]):
    for i in parallel(M):
        counts[i, :] = intent.histogram(x[i, :, :], B)


def _run_and_compare(kernel, args: dict) -> None:
    want = kernel.oracle(**{k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in args.items()})
    kernel(**args)
    for name, value in want.items():
        np.testing.assert_allclose(args[name].numpy(), value, rtol=1e-6, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("m, n", [(1, 3), (5, 8), (3, 37)])
def test_slices_of_a_register_value(m: int, n: int) -> None:
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(n))
    _run_and_compare(strided, {"x": x, "out": torch.empty(m, n - 2), "odd": torch.empty(m, n // 2)})


@pytest.mark.parametrize("m, n", [(1, 2), (4, 9), (2, 64)])
def test_concat_of_register_values(m: int, n: int) -> None:
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(n))
    out = torch.empty(m, n)
    _run_and_compare(rotate, {"x": x, "out": out})
    assert torch.equal(out, torch.roll(x + 1.0, -1, dims=1))


@pytest.mark.parametrize("m, c", [(1, 1), (3, 5), (2, 17)])
def test_regrouping_reshapes(m: int, c: int) -> None:
    x = torch.randn(m, 3, c, generator=torch.Generator().manual_seed(c))
    flat, swapped = torch.empty(m, 3 * c), torch.empty(m, c, 3)
    _run_and_compare(regroup, {"x": x, "flat": flat, "swapped": swapped})
    assert torch.equal(swapped, (x - 0.5).reshape(m, c, 3))


def test_layout_ops_without_lanes() -> None:
    x = torch.randn(11, generator=torch.Generator().manual_seed(2))
    out = torch.empty(22)
    _run_and_compare(single_instance, {"x": x, "out": out})
    program = physical.lower(single_instance.kir, verify=True)
    names = {op.NAME for op in program.walk()}
    assert {"tile_concat", "tile_reshape"} <= names


def test_register_layout_ops_are_in_the_program_and_source() -> None:
    program = physical.lower(regroup.kir, verify=True)
    assert sum(isinstance(op, P.TileReshape) for op in program.walk()) == 2
    x = torch.empty(2, 3, 4)
    src = regroup.triton_source(x=x, flat=torch.empty(2, 12), swapped=torch.empty(2, 4, 3))
    assert src.count("tl.gather(") == 2 and "tl.reshape(" in src


@pytest.mark.parametrize("m, n, c, b", [(1, 1, 1, 1), (3, 4, 5, 6), (2, 7, 3, 20)])
def test_histogram_of_a_rank_2_value(m: int, n: int, c: int, b: int) -> None:
    g = torch.Generator().manual_seed(m * n * c)
    x = torch.randint(-2, b + 2, (m, n, c), generator=g, dtype=torch.int32)
    counts = torch.empty(m, b, dtype=torch.int32)
    _run_and_compare(counts2d, {"x": x, "counts": counts})
    for i in range(m):
        row = x[i].reshape(-1)
        assert torch.equal(counts[i], torch.bincount(row[(row >= 0) & (row < b)].long(), minlength=b).int())


LAYOUT_KIR = """\
# Layout ops: transpose, reshape, slice, concat, expand_dims, squeeze and broadcast.
kernel layout(x: in f32[M, N], t: out f32[N, M], flat: out f32[M * N], ends: out f32[M, 2], col: out f32[M, 1])
    symbols(M, N) requires(N >= 2) {
  %xv: f32[M, N] = load %x[0:M, 0:N]
  %xt: f32[N, M] = transpose %xv perm=(1, 0)
  store %t[0:N, 0:M] = %xt
  %xf: f32[M * N] = reshape %xv shape=(M * N)
  store %flat[0:M * N] = %xf
  %first: f32[M, 1] = slice %xv starts=(0, 0) stops=(M, 1) steps=(1, 1)
  %last: f32[M, 1] = slice %xv starts=(0, N - 1) stops=(M, N) steps=(1, 1)
  %both: f32[M, 1 + 1] = concat(%first, %last) axis=1
  %both2: f32[M, 2] = reshape %both shape=(M, 2)
  store %ends[0:M, 0:2] = %both2
  %firstv: f32[M] = squeeze %first axis=1
  %col2: f32[M, 1] = expand_dims %firstv axis=1
  %scale: f32 = constant 0.5 : f32
  %scale_b: f32[M, 1] = broadcast %scale shape=(M, 1) dims=()
  %col3: f32[M, 1] = binary mul %col2, %scale_b
  store %col[0:M, 0:1] = %col3
  yield
}
"""


@pytest.mark.parametrize("text", ["example", "concat"])
def test_layout_kir_runs_against_the_oracle(tmp_path: Path, text: str) -> None:
    path = ROOT / "examples" / "kir" / "layout.kir"
    if text == "concat":  # the example with a concat and a reshape of register values
        path = tmp_path / "layout.kir"
        path.write_text(LAYOUT_KIR)
    done = subprocess.run([sys.executable, "-m", "kir.cli", "run", str(path), "--shape", "M=5", "N=7"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("PASS")
