"""CUDA graphs capture cached launches: no host synchronisation, no allocation but the omitted outputs."""

from __future__ import annotations

import torch

import intent
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel(requires=[N <= 65536])
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        out[i, :] = e / intent.sum(e)


@intent.kernel
def reverse_rows(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        buf = intent.empty((N,), f32)  # a local buffer: a workspace the plan keeps
        for j in range(N):
            buf[N - 1 - j] = x[i, j]
        out[i, :] = buf


def _warm(fn, *args) -> None:
    """Compile and plan on a side stream, as torch.cuda.graph requires of captured work."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def test_cached_launches_do_not_synchronise() -> None:
    x = torch.randn(64, 1000, device="cuda")
    out = torch.empty_like(x)
    for _ in range(2):  # the full path, then the first cached launch (which allocates the workspace)
        softmax(x, out)
        softmax(x)
        reverse_rows(x)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call now raises
    try:
        for _ in range(10):
            softmax(x, out)
            softmax(x)
            reverse_rows(x)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.testing.assert_close(out, torch.softmax(x, 1))


def test_capture_and_replay_with_given_and_omitted_outputs() -> None:
    x = torch.randn(32, 777, device="cuda")
    out = torch.empty_like(x)

    def step():
        softmax(x, out)
        return softmax(x * 2), reverse_rows(x)

    _warm(step)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        doubled, reversed_ = step()
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, torch.softmax(x, 1))
        torch.testing.assert_close(doubled, torch.softmax(x * 2, 1))
        torch.testing.assert_close(reversed_, x.flip(1))


def test_compiled_with_cuda_graphs() -> None:
    f = torch.compile(lambda x: softmax(x * 2) + 1, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):
        x = torch.randn(16, 300, device="cuda")
        torch.testing.assert_close(f(x), torch.softmax(x * 2, 1) + 1)
