"""The cached launch path is capturable by a CUDA graph: no host synchronisation, and no allocation but the
outputs the caller omitted (workspaces are kept by the plan). Checked on CPU by instrumenting every call
that synchronises or allocates while the cached path runs; tests/gpu captures and replays for real."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

import intent
from emit_triton import compile as compile_mod
from emit_triton import fast_launch, targets
from emit_triton.abi import ArgKind
from intent import Out, dims, f32, parallel

M, N = dims("M N")


@intent.kernel
def reverse_rows(x: f32[M, N], out: Out[f32[M, N]], total: Out[f32[M]]):
    for i in parallel(M):
        buf = intent.empty((N,), f32)
        for j in range(N):
            buf[N - 1 - j] = x[i, j]
        out[i, :] = buf
        total[i] = intent.sum(buf)


# Calls that wait for a device (or copy device memory to the host, which waits).
SYNCHRONISING = [(torch.cuda, "synchronize"), (torch.cuda.Stream, "synchronize"), (torch.cuda.Event, "synchronize"),
                 (torch.cuda.Stream, "query"), (torch.cuda.Event, "query"), (torch.Tensor, "item"),
                 (torch.Tensor, "cpu"), (torch.Tensor, "tolist"), (torch.Tensor, "numpy"), (torch.Tensor, "to"),
                 (torch.Tensor, "__bool__"), (torch.Tensor, "__int__"), (torch.Tensor, "__float__"),
                 (torch.Tensor, "__index__"), (torch.Tensor, "copy_"), (torch.Tensor, "nonzero")]
ALLOCATING = [(torch, name) for name in ("empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones",
                                         "ones_like", "full", "full_like", "tensor", "as_tensor", "clone")] + \
    [(torch.Tensor, name) for name in ("new_empty", "new_zeros", "new_full", "new_tensor", "clone", "contiguous")]


@contextmanager
def instrumented(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Any]]]:
    """Record synchronising and allocating calls, and the launches handed to Triton (which is stubbed)."""
    seen: dict[str, list[Any]] = {"sync": [], "alloc": [], "launch": []}

    def recording(kind: str, owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen[kind].append((name, args[1:] if owner is torch.Tensor else args, kwargs))
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    for owner, name in SYNCHRONISING:
        recording("sync", owner, name)
    for owner, name in ALLOCATING:
        recording("alloc", owner, name)
    monkeypatch.setattr(targets, "run", lambda fn, target, grid, positional, keywords, *rest:
                        seen["launch"].append(list(positional)))
    yield seen


def test_the_kernel_has_a_workspace() -> None:
    kernel = reverse_rows.specialize({"x": torch.empty(1, 1)})
    assert any(a.kind is ArgKind.WORKSPACE for a in compile_mod.emitted_for(kernel).args)


def test_cached_launches_neither_synchronise_nor_allocate_but_omitted_outputs(monkeypatch) -> None:
    fast_launch.clear()
    x = torch.randn(3, 5)
    out, total = reverse_rows(x)  # the full path: compiles, checks and records the plan
    torch.testing.assert_close(out, x.flip(1))
    given_out, given_total = torch.empty(3, 5), torch.empty(3)
    for _ in range(2):  # the first cached launch of each call form allocates its plan's workspace memory
        reverse_rows(x)
        reverse_rows(x, given_out, given_total)
    with instrumented(monkeypatch) as seen:
        for _ in range(4):
            reverse_rows(x)
        allocated = list(seen["alloc"])
        for _ in range(4):
            assert reverse_rows(x, given_out, given_total) is None
    assert seen["sync"] == []
    assert len(seen["launch"]) == 8  # every call took the cached path to Triton
    # only the two omitted outputs of each of the first four calls; none when the caller passes them
    assert [(name, args[0]) for name, args, _ in allocated] == [("empty", (3, 5)), ("empty", (3,))] * 4
    assert seen["alloc"] == allocated
    memory = [p.data_ptr() for launch in seen["launch"] for p, a in zip(launch, _abi(x))
              if a.kind is ArgKind.WORKSPACE]
    assert len(memory) == 8 and len(set(memory[:4])) == 1 and len(set(memory[4:])) == 1  # one per call form


def test_a_larger_workspace_grows_once_then_is_reused(monkeypatch) -> None:
    fast_launch.clear()
    small, large = torch.randn(2, 3), torch.randn(4, 9)
    reverse_rows(small)
    reverse_rows(large)  # a new geometry: the full path records it
    with instrumented(monkeypatch) as seen:
        for x in (small, large, small, large, small):
            out, _ = reverse_rows(x)
    sizes = [args[0] for _, args, _ in seen["alloc"]]
    workspace = [size for size in sizes if isinstance(size, int)]
    assert len(workspace) == 2 and workspace[0] < workspace[1]  # allocated for the small size, grown once
    assert len(sizes) == 2 * 5 + 2
    assert seen["sync"] == []
    got = [p for launch in seen["launch"] for p, a in zip(launch, _abi(large)) if a.kind is ArgKind.WORKSPACE]
    assert len({p.untyped_storage().data_ptr() for p in got[1:]}) == 1  # small sizes use a prefix of it


def test_the_cached_path_computes_the_same_results() -> None:
    fast_launch.clear()
    for _ in range(3):
        x = torch.randn(3, 6)
        out, total = reverse_rows(x)
        torch.testing.assert_close(out, x.flip(1))
        torch.testing.assert_close(total, x.sum(1))


def _abi(x: torch.Tensor) -> tuple[Any, ...]:
    return compile_mod.emitted_for(reverse_rows.specialize({"x": x})).args
