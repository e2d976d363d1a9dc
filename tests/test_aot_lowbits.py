"""`kirc build`, `kirc run` and `intent.load` with fp8 and i4 parameters: the registry names the dtypes, the loaded
kernel takes torch's float8 tensors and i4's packed bytes, and gives what the compiler's own launch gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import intent
from intent.errors import LaunchError
from kir.cli import main as kirc

KERNELS = '''
import intent
from intent import Out, dims, f32, f8e4m3, f8e5m2, i4, parallel

M, N = dims("M N")


@intent.kernel
def dequant(x: f32[M, N], w: i4[M, N], s: f8e5m2, q: Out[f8e4m3[M, N]], back: Out[f32[M, N]]):
    for i in parallel(M):
        q[i, :] = (x[i, :] * w[i, :].to(f32)).to(f8e4m3)
        back[i, :] = q[i, :].to(f32) * s.to(f32)


@intent.kernel
def requant(q: f8e4m3[M, N], w: Out[i4[M, N]]):
    for i in parallel(M):
        w[i, :] = intent.clamp(intent.round(q[i, :].to(f32)), -8.0, 7.0).to(i4)
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    import importlib.util

    folder = tmp_path_factory.mktemp("aot_lowbits")
    (folder / "lowbits.py").write_text(KERNELS)
    assert kirc(["build", str(folder / "lowbits.py"), "--shape", "M=4", "N=8", "-o", str(folder / "out")]) == 0
    spec = importlib.util.spec_from_file_location("lowbits_kernels", folder / "lowbits.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return folder / "out", mod


def _args() -> dict[str, object]:
    g = torch.Generator().manual_seed(3)
    return {"x": torch.randn(4, 8, generator=g), "w": torch.randint(0, 256, (4, 4), generator=g, dtype=torch.uint8),
            "s": 0.75}


def test_the_registry_names_fp8_and_i4(built: tuple[Path, object]) -> None:
    folder, _ = built
    kernels = json.loads((folder / "registry.json").read_text())["kernels"]
    assert [e["signature"] for e in kernels["dequant"]] == ["x:f32,w:i4,s:f8e5m2,q:f8e4m3,back:f32"]
    assert [e["signature"] for e in kernels["requant"]] == ["q:f8e4m3,w:i4"]


def test_a_loaded_kernel_with_fp8_and_i4_matches_the_compilers_launch(built: tuple[Path, object]) -> None:
    folder, mod = built
    lib = intent.load(folder)
    args = _args()
    q, back = torch.empty(4, 8, dtype=torch.float8_e4m3fn), torch.empty(4, 8)
    lib.dequant(**args, q=q, back=back)
    q2, back2 = torch.empty_like(q), torch.empty_like(back)
    mod.dequant(**args, q=q2, back=back2)  # type: ignore[attr-defined]
    assert torch.equal(q.view(torch.uint8), q2.view(torch.uint8)) and torch.equal(back, back2)
    # omitted outputs are allocated with their dtypes; the packed bytes may be int8 too
    q3, back3 = lib.dequant(x=args["x"], w=args["w"].view(torch.int8), s=args["s"])  # type: ignore[union-attr]
    assert q3.dtype == torch.float8_e4m3fn and torch.equal(q3.view(torch.uint8), q.view(torch.uint8))
    assert torch.equal(back3, back)


@pytest.mark.parametrize("change, message", [
    ({"w": torch.zeros(4, 4, dtype=torch.int16)},
     "parameter w: expected i4 values packed two per byte in an int8 or uint8 tensor of rank 2 (the last axis holds "
     "N // 2 bytes), got a tensor of torch.int16 and shape (4, 4)"),
    ({"w": torch.zeros(4, 8, dtype=torch.uint8)}, "parameter w: axis 1 has extent 16 but N = 8 from parameter x"),
    ({"s": 60000.0}, "parameter s: 60000.0 does not fit f8e5m2 (largest finite value 57344)"),
    ({"q": torch.empty(4, 8, dtype=torch.float8_e5m2)}, "parameter q: expected f8e4m3, got torch.float8_e5m2"),
])
def test_fp8_and_i4_arguments_are_checked(built: tuple[Path, object], change: dict[str, object],
                                          message: str) -> None:
    folder, _ = built
    lib = intent.load(folder)
    args = {**_args(), "q": torch.empty(4, 8, dtype=torch.float8_e4m3fn), "back": torch.empty(4, 8), **change}
    with pytest.raises(LaunchError) as caught:
        lib.dequant(**args)
    assert str(caught.value) == message


def test_a_loaded_kernel_writes_i4(built: tuple[Path, object]) -> None:
    from kir.dtypes import i4_unpacked

    folder, mod = built
    lib = intent.load(folder)
    q = (torch.randn(4, 8, generator=torch.Generator().manual_seed(4)) * 5).to(torch.float8_e4m3fn)
    w = lib.requant(q)  # omitted: allocated as packed bytes
    assert w.dtype == torch.uint8 and w.shape == (4, 4)
    want = torch.clamp(torch.round(q.float()), -8, 7).to(torch.int8).numpy()
    assert (i4_unpacked(w.numpy()) == want).all()
    given = torch.full((4, 4), 0x5A, dtype=torch.int8)
    lib.requant(q, given)
    assert (i4_unpacked(given.numpy()) == want).all()


def test_kirc_run_compares_fp8_and_i4_kernels(built: tuple[Path, object], capsys: pytest.CaptureFixture[str]
                                              ) -> None:
    folder, _ = built
    for name in ("dequant", "requant"):
        assert kirc(["run", str(folder.parent / "lowbits.py"), "--kernel", name, "--shape", "M=4", "N=8"]) == 0
    out = capsys.readouterr().out
    assert "q: max abs error 0 (f8e4m3" in out and out.rstrip().endswith("PASS")


@pytest.mark.parametrize("kernel", ["dequant", "requant"])
def test_a_standalone_module_with_fp8_and_i4(built: tuple[Path, object], tmp_path: Path, kernel: str) -> None:
    """`kirc lower --standalone` draws fp8 tensors and packed i4 bytes, and runs without Intent."""
    import os
    import subprocess
    import sys

    import numpy as np

    from kir.dtypes import i4_unpacked

    folder, mod = built
    target = tmp_path / f"{kernel}_standalone.py"
    assert kirc(["lower", str(folder.parent / "lowbits.py"), "--kernel", kernel, "--emit=triton", "--standalone",
                 "--shape", "M=3", "N=6", "-o", str(target)]) == 0
    driver = tmp_path / "driver.py"
    driver.write_text(f'''
import sys
import torch
sys.path.insert(0, {str(tmp_path)!r})
import {kernel}_standalone as m
args = m.make_inputs("cpu")
inputs = {{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}}
m.launch(args)
torch.save({{"inputs": inputs, "outputs": {{n: args[n] for n in m.OUTPUTS}}}}, {str(tmp_path / "result.pt")!r})
''', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRITON_INTERPRET"] = "1"
    done = subprocess.run([sys.executable, str(driver)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    saved = torch.load(tmp_path / "result.pt")
    want = getattr(mod, kernel).oracle(**saved["inputs"])
    for name, got in saved["outputs"].items():
        values = i4_unpacked(got.numpy()) if got.dtype == torch.uint8 else got.float().numpy()
        np.testing.assert_array_equal(values, np.asarray(want[name]), err_msg=name)
