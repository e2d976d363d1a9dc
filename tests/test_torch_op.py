"""Kernels as PyTorch operators: schemas and fakes derived from KIR, torch.compile without graph breaks."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import intent
from intent import InOut, LaunchError, Out, dims, f32, i32, parallel, pred, torch_op

M, N = dims("M N")


@intent.kernel(requires=[N <= 64])
def rowsum(x: f32[M, N], out: Out[f32[M]]):
    for i in parallel(M):
        out[i] = intent.sum(x[i, :])


@intent.kernel
def scaled(x: f32[M, N], acc: InOut[f32[M, N]], s: f32, k: i32, flag: pred, y: Out[f32[M, N]],
           sums: Out[f32[M]]):
    for i in parallel(M):
        row = x[i, :] * s + k.to(f32)
        acc[i, :] = acc[i, :] + row
        y[i, :] = intent.where(flag, row, -row)
        sums[i] = intent.sum(row)


@intent.kernel
def diff(x: f32[N + 1], y: Out[f32[N]]):
    for i in parallel(N):
        y[i] = x[i + 1] - x[i]


@intent.kernel
def add(x: f32[N], y: f32[N], z: Out[f32[N]]):
    for i in parallel(N):
        z[i] = x[i] + y[i]


@intent.kernel
def maybe_scaled(x: f32[N], w: f32[N] | None, y: Out[f32[N]]):
    for i in parallel(N):
        if w is not None:
            y[i] = x[i] * w[i]
        else:
            y[i] = x[i]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _kir(k: intent.KernelObject, **dtypes: str):
    return k.specialize_with(dtypes)


# ---------------------------------------------------------------------------------------------- schema


def test_schema_returns_omitted_outs_and_mutates_inout_and_given_outs() -> None:
    kir = _kir(scaled)
    every = {"x", "acc", "s", "k", "flag"}
    assert torch_op.schema_for(kir, every).text == \
        "(Tensor x, Tensor(a1!) acc, float s, SymInt k, bool flag) -> (Tensor, Tensor)"
    given = torch_op.schema_for(kir, every | {"y"})
    assert given.text == "(Tensor x, Tensor(a1!) acc, float s, SymInt k, bool flag, Tensor(a5!) y) -> Tensor"
    assert given.mutated == ("acc", "y") and given.returned == ("sums",)
    assert torch_op.schema_for(kir, every | {"y", "sums"}).text.endswith("Tensor(a5!) y, Tensor(a6!) sums) -> ()")


def test_operator_names_cover_the_specialisation_and_the_outs_given() -> None:
    kir = _kir(rowsum)
    a = torch_op.op_for(kir, {"x"})
    b = torch_op.op_for(kir, {"x", "out"})
    assert a.name.startswith("rowsum__") and a.name != b.name
    assert torch_op.op_for(kir, {"x"}) is a
    assert a.op is getattr(torch.ops.intent, a.name).default
    assert str(a.op._schema) == f"intent::{a.name}(Tensor x) -> Tensor"


def test_eager_calls_register_no_operator() -> None:
    before = len(torch_op.registered())
    x = torch.randn(3, 5)
    torch.testing.assert_close(add(x[0], x[1]), x[0] + x[1])
    assert len(torch_op.registered()) == before
    assert not torch_op.tracing()


def test_the_operator_launches_with_every_check_of_a_direct_launch() -> None:
    entry = torch_op.op_for(_kir(add), {"x", "y", "z"})
    x = torch.randn(4)
    with pytest.raises(LaunchError, match="parameter z: its memory overlaps parameter x"):
        entry.op(x, torch.randn(4), x)


def test_dynamo_takes_the_resolver_as_a_constant() -> None:
    # torch_op marks its resolver as torch._dynamo.assume_constant_result does, without importing Dynamo
    assert torch._dynamo.assume_constant_result(lambda: 0)._dynamo_marked_constant is True
    assert torch_op._resolve._dynamo_marked_constant is True


# ---------------------------------------------------------------------------------------------- torch.compile


def test_compile_fullgraph_has_no_graph_break() -> None:
    def f(x):
        return rowsum(torch.sin(x)) * 2

    explained = torch._dynamo.explain(f)(torch.randn(3, 8))
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    assert any("intent." in str(node.target) for g in explained.graphs for node in g.graph.nodes)


def test_compile_two_sizes_recompile_once_then_stay_dynamic() -> None:
    counter = CompileCounterWithBackend("aot_eager")
    f = torch.compile(lambda x: rowsum(x * 2) + 1, fullgraph=True, backend=counter)
    for shape in [(3, 8), (5, 16), (6, 40), (2, 3)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(f(x), (x * 2).sum(1) + 1)
    assert counter.frame_count == 2  # the first size, then one dynamic graph for every other size


def test_requires_guard_the_trace_instead_of_specialising_sizes() -> None:
    counter = CompileCounterWithBackend("aot_eager")
    f = torch.compile(rowsum, fullgraph=True, dynamic=True, backend=counter)
    for n in (8, 40, 64):
        x = torch.randn(3, n)
        torch.testing.assert_close(f(x), x.sum(1))
    assert counter.frame_count == 1
    with pytest.raises(Exception, match=r"requires N <= 64 failed: N = 100"):
        f(torch.randn(3, 100))


def test_compile_with_given_outs_inout_and_scalars() -> None:
    def f(x, acc, y, k):
        sums = scaled(x, acc, 0.5, k, False, y=y)
        return sums + 1

    x, acc, y = torch.randn(3, 4), torch.randn(3, 4), torch.empty(3, 4)
    acc0 = acc.clone()
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(x, acc, y, 2)
    row = x * 0.5 + 2
    torch.testing.assert_close(got, row.sum(1) + 1)
    torch.testing.assert_close(acc, acc0 + row)
    torch.testing.assert_close(y, -row)


def test_optional_tensors_pick_their_specialisation_under_compile() -> None:
    f = torch.compile(lambda x, w: maybe_scaled(x, w) + maybe_scaled(x, None), fullgraph=True, backend="aot_eager")
    x, w = torch.randn(5), torch.randn(5)
    torch.testing.assert_close(f(x, w), x * w + x)


def test_derived_extents_bind_symbols_symbolically() -> None:
    counter = CompileCounterWithBackend("aot_eager")
    f = torch.compile(lambda x: diff(x) + 1, fullgraph=True, dynamic=True, backend=counter)
    for n in (9, 13):
        x = torch.randn(n)
        torch.testing.assert_close(f(x), x[1:] - x[:-1] + 1)
    assert counter.frame_count == 1


def test_compile_with_inductor() -> None:
    f = torch.compile(lambda x, y: add(x.exp(), y) * 3, fullgraph=True)
    x, y = torch.randn(7), torch.randn(7)
    torch.testing.assert_close(f(x, y), (x.exp() + y) * 3)


# ---------------------------------------------------------------------------------------------- other tracers


def test_make_fx_records_the_operator_with_symbolic_shapes() -> None:
    gm = make_fx(lambda x: rowsum(x), tracing_mode="symbolic")(torch.randn(3, 8))
    targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert len(targets) == 1 and targets[0].startswith("intent.rowsum__")
    x = torch.randn(5, 7)
    torch.testing.assert_close(gm(x), x.sum(1))


def test_fake_tensors_get_shapes_and_launch_errors() -> None:
    with FakeTensorMode():
        out = diff(torch.empty(11))
        assert out.shape == (10,) and out.dtype == torch.float32
        with pytest.raises(LaunchError, match="parameter y: axis 0 has extent 4 but N = 3 from parameter x"):
            add(torch.empty(3), torch.empty(4))
        with pytest.raises(LaunchError, match="parameter x: expected f32, got torch.float64"):
            add(torch.empty(3, dtype=torch.float64), torch.empty(3))
        with pytest.raises(LaunchError, match=r"N >= 1 failed: N = 0 \(a shape symbol is >= 1"):
            add(torch.empty(0), torch.empty(0))
