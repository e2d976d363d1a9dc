"""The memory sanitizer (`emit_triton.sanitize`): it fires on an access outside the declared access relation,
on an address outside the tensor's storage, and on an output element the kernel should write but did not;
it stays silent on correct kernels."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import emit_triton
import intent
import physical
from emit_triton import SanitizerError, sanitizing
from emit_triton import compile as compile_mod
from emit_triton import sanitize as sanitize_mod
from physical import ops as P
from tests.frontend_support import kernel, position, write
from tests.mutations import edit, only


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(sanitize_mod.ENV, raising=False)
    compile_mod.clear_emitted()
    yield
    compile_mod.clear_emitted()


COPY = """
@intent.kernel
def copy(x: f32[M], y: f32[N], out: Out[f32[N]]):
    for i in parallel(N):
        out[i] = y[i] * 2.0
"""


def _mutated(monkeypatch, k: intent.KernelObject, change) -> None:
    """Launches of `k` run the physical program `change(program)` (a deliberately wrong one)."""
    real = physical.lower
    target = k.kir

    def lower(kir_kernel):
        program = real(kir_kernel)
        return change(program) if kir_kernel == target else program

    monkeypatch.setattr(physical, "lower", lower)
    compile_mod.clear_emitted()  # nothing emitted from the right program stays in use


def _buffer_of(program, param: str) -> int:
    return next(b.id for b in program.buffers if b.param == param)


def test_a_load_outside_its_declared_access_relation_is_reported_at_its_source(tmp_path, monkeypatch):
    path = write(tmp_path, COPY)
    k = intent.kernels_in_file(str(path))["copy"]
    x_buffer = _buffer_of(physical.lower(k.kir), "x")

    def read_x_instead_of_y(program):  # the relation claims x[i] for i < N; x has M < N elements
        load = only(program, P.Load)
        moved = dataclasses.replace(load, access=dataclasses.replace(load.access, buffer=x_buffer))
        return edit(program, lambda op: moved if op == load else None)

    _mutated(monkeypatch, k, read_x_instead_of_y)
    args = {"x": torch.ones(3), "y": torch.ones(8), "out": torch.zeros(8)}
    line, col = position(path, "y[i]")
    with pytest.raises(SanitizerError) as info:
        emit_triton.launch(k.kir, args, sanitize=True)
    assert str(info.value) == (f"sanitizer: load outside the access relation the physical program declared at "
                               f"{path}:{line}:{col}: an active lane's coordinates lie outside x")


def test_an_address_outside_the_tensors_storage_is_reported(tmp_path, monkeypatch):
    path = write(tmp_path, COPY)
    k = intent.kernels_in_file(str(path))["copy"]
    program = physical.lower(k.kir)
    x_buffer, y_buffer = _buffer_of(program, "x"), _buffer_of(program, "y")

    def x_declared_as_long_as_y(program):  # relation and buffer agree (both N), the tensor x has M elements
        y_shape = next(b.shape for b in program.buffers if b.id == y_buffer)
        load = only(program, P.Load)
        moved = dataclasses.replace(load, access=dataclasses.replace(load.access, buffer=x_buffer))
        program = edit(program, lambda op: moved if op == load else None)
        return program.replace(buffers=tuple(dataclasses.replace(b, shape=y_shape) if b.id == x_buffer else b
                                             for b in program.buffers))

    _mutated(monkeypatch, k, x_declared_as_long_as_y)
    line, col = position(path, "y[i]")
    with pytest.raises(SanitizerError) as info:
        emit_triton.launch(k.kir, {"x": torch.ones(3), "y": torch.ones(8), "out": torch.zeros(8)}, sanitize=True)
    assert str(info.value) == (f"sanitizer: load outside the storage of tensor x at {path}:{line}:{col}: an "
                               f"active lane's address lies outside the tensor's storage span")


def test_an_output_element_left_unwritten_is_reported_with_the_store_that_writes_it(tmp_path, monkeypatch):
    path = write(tmp_path, COPY)
    k = intent.kernels_in_file(str(path))["copy"]

    def skip_the_last_instance(program):  # the store's mask drops instance N - 1 (a wrong guard)
        store = only(program, P.Store)
        return edit(program, lambda op: [] if op == store else None)

    _mutated(monkeypatch, k, skip_the_last_instance)
    line, col = position(path, "out[i] =")
    with pytest.raises(SanitizerError) as info:
        emit_triton.launch(k.kir, {"x": torch.ones(3), "y": torch.ones(5), "out": torch.zeros(5)}, sanitize=True)
    assert str(info.value) == (f"sanitizer: kernel copy left 5 element(s) of out unwritten that it writes (the "
                               f"oracle does), the first out[0], written by store at {path}:{line}:{col}")


def test_without_the_sanitizer_the_wrong_store_goes_unnoticed(tmp_path, monkeypatch):
    path = write(tmp_path, COPY)
    k = intent.kernels_in_file(str(path))["copy"]
    _mutated(monkeypatch, k, lambda program: edit(program, lambda op: [] if isinstance(op, P.Store) else None))
    out = torch.zeros(5)
    emit_triton.launch(k.kir, {"x": torch.ones(3), "y": torch.ones(5), "out": out}, sanitize=False)
    assert out.tolist() == [0.0] * 5


def test_the_environment_switch_and_the_context_turn_it_on(tmp_path, monkeypatch):
    path = write(tmp_path, COPY)
    k = intent.kernels_in_file(str(path))["copy"]
    _mutated(monkeypatch, k, lambda program: edit(program, lambda op: [] if isinstance(op, P.Store) else None))
    args = {"x": torch.ones(3), "y": torch.ones(5), "out": torch.zeros(5)}
    with sanitizing(), pytest.raises(SanitizerError):
        emit_triton.launch(k.kir, dict(args))
    monkeypatch.setenv(sanitize_mod.ENV, "1")
    with pytest.raises(SanitizerError):
        emit_triton.launch(k.kir, dict(args))
    with sanitizing(False):
        emit_triton.launch(k.kir, dict(args))


def test_checks_true_kernels_are_sanitized(tmp_path, monkeypatch):
    k = kernel(tmp_path, COPY.replace("@intent.kernel", "@intent.kernel(checks=True)"))
    assert sanitize_mod.wanted(k.kir) and not sanitize_mod.wanted(kernel(tmp_path, COPY).kir)


def test_the_sanitized_module_checks_every_access(tmp_path):
    k = kernel(tmp_path, COPY)
    args = {"x": torch.ones(3), "y": torch.ones(5), "out": torch.zeros(5)}
    plain, checked = emit_triton.source(k.kir, args), emit_triton.source(k.kir, args, sanitize=True)
    assert "device_assert" not in plain
    assert checked.count("# sanitizer: ") == 2 and checked.count("tl.device_assert(") == 4


# ---------------------------------------------------------------------------------------------- silence

CORRECT = """
@intent.kernel
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        out[i, :] = e / intent.sum(e)

@intent.kernel
def compact(x: f32[N], count: Out[i32[1]], out: Out[f32[N]]):
    for i in parallel(N):
        v = x[i]
        if v > 0:
            slot = intent.atomic_add(count, 0, 1)
            intent.store(out, slot, v, unique=True)

@intent.kernel
def rows(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        buf = intent.zeros((N,), f32)
        for j in range(N):
            buf[j] = buf[j] + x[i, j] * 2.0
        out[i, :] = buf + 1.0

@intent.kernel
def gather_scatter(x: f32[N], idx: i32[M], out: Out[f32[M]], hist: InOut[i32[N]]):
    for m in parallel(M):
        v = x[idx[m]]
        out[m] = v
        intent.atomic_add(hist, idx[m], 1)

@intent.kernel
def prefix(x: f32[M, N], out: Out[f32[M, N]]):
    out[:, :] = intent.cumsum(x, axis=1) + 1.0

@intent.kernel
def recurrence(x: f32[N], h: Out[f32[N]]):
    acc = 0.0
    for t in range(N):
        acc = acc * 0.5 + x[t]
        h[t] = acc
"""


def test_silent_on_correct_kernels(tmp_path):
    ks = intent.kernels_in_file(str(write(tmp_path, CORRECT)))
    g = torch.Generator().manual_seed(5)
    x2 = torch.randn(6, 40, generator=g)
    cases = {
        "softmax": {"x": x2, "out": torch.empty(6, 40)},
        "compact": {"x": torch.randn(50, generator=g), "count": torch.zeros(1, dtype=torch.int32),
                    "out": torch.zeros(50)},
        "rows": {"x": torch.randn(1025, 2, generator=g), "out": torch.empty(1025, 2)},
        # a transposed view, with indices out of range (gathers read 0, atomics drop: not violations)
        "gather_scatter": {"x": torch.randn(9, generator=g),
                           "idx": torch.tensor([0, 3, 8, 11, -1, 3], dtype=torch.int32),
                           "out": torch.empty(6), "hist": torch.zeros(9, dtype=torch.int32)},
        "prefix": {"x": x2.t().contiguous().t()[:, :7], "out": torch.empty(6, 7)},
        "recurrence": {"x": torch.randn(33, generator=g), "h": torch.empty(33)},
    }
    for name, args in cases.items():
        plain = {a: v.clone() for a, v in args.items()}
        ks[name](**plain)
        sanitized = {a: v.clone() for a, v in args.items()}
        emit_triton.launch(ks[name].kir, sanitized, sanitize=True)
        for a in plain:
            assert torch.equal(plain[a], sanitized[a]) or name == "compact", (name, a)
        if name == "compact":  # slots come in an unspecified order
            n = int(sanitized["count"][0])
            assert n == int(plain["count"][0])
            np.testing.assert_array_equal(np.sort(sanitized["out"][:n].numpy()), np.sort(plain["out"][:n].numpy()))


def test_omitted_outputs_are_allocated_filled_and_returned(tmp_path):
    k = kernel(tmp_path, COPY)
    y = torch.arange(6, dtype=torch.float32)
    out = emit_triton.launch(k.kir, {"x": torch.ones(2), "y": y}, sanitize=True)
    assert isinstance(out, torch.Tensor) and out.tolist() == (y * 2).tolist()


def test_numpy_arguments_are_sanitized_in_place(tmp_path, monkeypatch):
    path = write(tmp_path, COPY)
    k = intent.kernels_in_file(str(path))["copy"]
    args = {"x": np.ones(2, np.float32), "y": np.arange(4, dtype=np.float32), "out": np.zeros(4, np.float32)}
    emit_triton.launch(k.kir, args, sanitize=True)
    assert args["out"].tolist() == [0.0, 2.0, 4.0, 6.0]
    _mutated(monkeypatch, k, lambda program: edit(program, lambda op: [] if isinstance(op, P.Store) else None))
    with pytest.raises(SanitizerError, match="left 4 element"):
        emit_triton.launch(k.kir, dict(args, out=np.zeros(4, np.float32)), sanitize=True)


SENTINEL_VALUES = """
@intent.kernel
def copies(a: i8[N], b: i32[N], c: f32[N], d: pred[N], oa: Out[i8[N]], ob: Out[i32[N]], oc: Out[f32[N]],
           od: Out[pred[N]]):
    for i in parallel(N):
        oa[i] = a[i]
        ob[i] = b[i]
        oc[i] = c[i]
        od[i] = d[i]
"""


def test_a_written_value_equal_to_the_sentinel_is_not_reported(tmp_path):
    k = kernel(tmp_path, SENTINEL_VALUES)
    args = {"a": torch.tensor([-91, 1], dtype=torch.int8), "b": torch.tensor([0x7FA5A5A5, 0], dtype=torch.int32),
            "c": torch.tensor([0x7FA5A5A5, 0x3F800000], dtype=torch.int32).view(torch.float32),  # sentinel bits, 1.0
            "d": torch.tensor([True, False]),
            "oa": torch.zeros(2, dtype=torch.int8), "ob": torch.zeros(2, dtype=torch.int32), "oc": torch.zeros(2),
            "od": torch.zeros(2, dtype=torch.bool)}
    emit_triton.launch(k.kir, args, sanitize=True)
    assert args["oa"].tolist() == [-91, 1] and args["ob"].tolist() == [0x7FA5A5A5, 0]
    assert args["oc"].view(torch.int32).tolist()[0] == 0x7FA5A5A5 and args["od"].tolist() == [True, False]
