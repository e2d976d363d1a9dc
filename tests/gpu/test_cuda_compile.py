"""torch.compile on CUDA: Inductor sees the generated Triton kernel (triton_op), no graph breaks, dynamic sizes,
and an RMSNorm training step matching eager PyTorch."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch._inductor.utils import run_and_get_code

import intent
from emit_triton import compile as compile_mod
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel(requires=[N <= 65536])
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        out[i, :] = e / intent.sum(e)


def _example(name: str):
    path = Path(__file__).resolve().parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"intent_gpu_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_inductor_compiles_the_generated_triton_kernel() -> None:
    torch._dynamo.reset()
    x = torch.randn(8, 500, device="cuda")
    f = torch.compile(lambda x: softmax(x.exp()) * 3, fullgraph=True)
    got, code = run_and_get_code(f, x)
    torch.testing.assert_close(got, torch.softmax(x.exp(), 1) * 3)
    name = compile_mod.emitted_for(softmax.specialize({"x": x})).name
    assert any(name in c for c in code), "the Triton kernel is not in Inductor's output code"
    assert torch._dynamo.explain(lambda x: softmax(x.exp()) * 3)(x).graph_break_count == 0


def test_dynamic_sizes_recompile_at_most_once() -> None:
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    f = torch.compile(lambda x: softmax(x) + 1, fullgraph=True, backend=counter)
    for rows in (8, 24, 40, 56):
        x = torch.randn(rows, 1000, device="cuda")
        torch.testing.assert_close(f(x), torch.softmax(x, 1) + 1)
    assert counter.frame_count <= 2


def test_rmsnorm_training_step_on_cuda() -> None:
    torch._dynamo.reset()
    rms = _example("rmsnorm")
    torch.manual_seed(0)
    ours = torch.nn.Sequential(torch.nn.Linear(64, 256), rms.RMSNorm(256), torch.nn.Linear(256, 8)).cuda()
    ref = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.RMSNorm(256, eps=1e-6), torch.nn.Linear(256, 8))
    ref = ref.cuda()
    ref.load_state_dict(ours.state_dict())
    step = torch.compile(lambda m, x, t: torch.nn.functional.mse_loss(m(x), t), fullgraph=True)
    for batch in (32, 48, 80):
        x, t = torch.randn(batch, 64, device="cuda"), torch.randn(batch, 8, device="cuda")
        loss = step(ours, x, t)
        loss.backward()
        want = torch.nn.functional.mse_loss(ref(x), t)
        want.backward()
        # Inductor may contract multiply-adds into FMAs and orders sums its own way: f32 rounding differences
        torch.testing.assert_close(loss, want, atol=1e-4, rtol=1e-3)
        for a, b in zip(ours.parameters(), ref.parameters()):
            torch.testing.assert_close(a.grad, b.grad, atol=1e-4, rtol=1e-3)
        ours.zero_grad()
        ref.zero_grad()
