"""Device checks: with `checks=True`, an out-of-range gather, scatter or atomic index fails the launch with
an IntentError naming the op and its source line (a tl.device_assert in the generated kernel)."""

from __future__ import annotations

import pytest
import torch

import intent
import physical
from intent import InOut, Out, dims, f32, i32, parallel
from kir.errors import IntentError
from physical import ops as P

M, N = dims("M N")


@intent.kernel(checks=True)
def gather(x: f32[M], idx: i32[N], out: Out[f32[N]]):
    for n in parallel(N):
        out[n] = x[idx[n]]


@intent.kernel
def gather_unchecked(x: f32[M], idx: i32[N], out: Out[f32[N]]):
    for n in parallel(N):
        out[n] = x[idx[n]]


@intent.kernel(checks=True)
def scatter(v: f32[N], idx: i32[N], out: InOut[f32[M]]):
    for n in parallel(N):
        out[idx[n]] = v[n]


@intent.kernel(checks=True)
def count(idx: i32[N], counts: InOut[i32[M]]):
    for n in parallel(N):
        intent.atomic_add(counts, idx[n], 1)


X = torch.arange(5, dtype=torch.float32)


def _line(fn, text: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn.__wrapped__)
    return start + next(k for k, line in enumerate(lines) if text in line)


def test_in_range_gather_runs() -> None:
    out = torch.empty(3)
    gather(X, torch.tensor([0, 4, 2], dtype=torch.int32), out)
    assert out.tolist() == [0.0, 4.0, 2.0]


def test_out_of_range_gather_raises_naming_the_op_and_line() -> None:
    with pytest.raises(IntentError) as info:
        gather(X, torch.tensor([0, 7, 2], dtype=torch.int32), torch.empty(3))
    line = _line(gather, "out[n] = x[idx[n]]")
    assert str(info.value).startswith(f"device check failed: gather out of range at {__file__}:{line}:")
    assert str(info.value).endswith(": an index into x lies outside its extent")
    with pytest.raises(IntentError, match=f"gather out of range at {__file__}:{line}:[0-9]+: index 7 on axis 0"):
        gather.oracle(x=X.numpy(), idx=torch.tensor([0, 7, 2], dtype=torch.int32).numpy(), out=torch.empty(3).numpy())


def test_negative_index_is_out_of_range_too() -> None:
    with pytest.raises(IntentError, match="^device check failed: gather out of range at "):
        gather(X, torch.tensor([-1], dtype=torch.int32), torch.empty(1))


def test_without_checks_an_out_of_range_gather_reads_the_fill_value() -> None:
    out = torch.full((3,), 9.0)
    gather_unchecked(X, torch.tensor([0, 7, 2], dtype=torch.int32), out)
    assert out.tolist() == [0.0, 0.0, 2.0]
    src = gather_unchecked.triton_source(x=X, idx=torch.zeros(3, dtype=torch.int32), out=out)
    assert "tl.device_assert" not in src


def test_out_of_range_scatter_raises() -> None:
    out = torch.zeros(5)
    scatter(torch.ones(2), torch.tensor([1, 3], dtype=torch.int32), out)
    assert out.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    line = _line(scatter, "out[idx[n]] = v[n]")
    with pytest.raises(IntentError, match=f"^device check failed: scatter out of range at {__file__}:{line}:[0-9]+: "
                                          f"an index into out lies outside its extent$"):
        scatter(torch.ones(2), torch.tensor([1, 5], dtype=torch.int32), out)


def test_out_of_range_atomic_raises() -> None:
    counts = torch.zeros(4, dtype=torch.int32)
    count(torch.tensor([0, 3, 3], dtype=torch.int32), counts)
    assert counts.tolist() == [1, 0, 0, 2]
    with pytest.raises(IntentError, match="^device check failed: atomic_add out of range at .*an index into counts "
                                          "lies outside its extent$"):
        count(torch.tensor([0, 4], dtype=torch.int32), torch.zeros(4, dtype=torch.int32))


def test_checks_are_explicit_ops_of_the_physical_program() -> None:
    program = physical.lower(gather.kir, verify=True)
    (check,) = [op for op in program.walk() if isinstance(op, P.Check)]
    assert check.message.startswith(P.DEVICE_CHECK + "gather out of range at ")
    assert not any(isinstance(op, P.Check) for op in physical.lower(gather_unchecked.kir).walk())
    src = gather.triton_source(x=X, idx=torch.zeros(3, dtype=torch.int32), out=torch.empty(3))
    assert src.count("tl.device_assert(") == 1 and __file__ not in src  # a token, not the message


def test_device_checks_are_compiled_into_the_ptx() -> None:
    idx = torch.zeros(3, dtype=torch.int32)
    assert "__assertfail" in gather.ptx(arch=90, x=X, idx=idx, out=torch.empty(3))
    assert "__assertfail" not in gather_unchecked.ptx(arch=90, x=X, idx=idx, out=torch.empty(3))
