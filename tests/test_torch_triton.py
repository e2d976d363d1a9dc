"""The CUDA operator path (`torch.library.triton_op`), checked without a GPU: its schema, its eager launch,
the launch arguments it computes against the launcher's, and the functionalised graph Inductor receives
(the generated Triton kernel itself, on symbolic sizes). tests/gpu runs it on a device."""

from __future__ import annotations

import logging

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd

import intent
from bench.kernels import traffic_cases
from emit_triton import targets
from emit_triton.abi import ArgKind
from emit_triton.launcher import plan_launch
from intent import InOut, Out, dims, f32, i32, parallel, pred, torch_op, torch_triton

M, N = dims("M N")


@intent.kernel(requires=[N <= 4096])
def softmax(x: f32[M, N], out: Out[f32[M, N]]):
    for i in parallel(M):
        row = x[i, :]
        e = intent.exp(row - intent.max(row))
        out[i, :] = e / intent.sum(e)


@intent.kernel
def mixed(x: f32[M, N], acc: InOut[f32[M, N]], s: f32, k: i32, flag: pred, y: Out[f32[M, N]], sums: Out[f32[M]]):
    for i in parallel(M):
        row = x[i, :] * s + k.to(f32)
        acc[i, :] = acc[i, :] + row
        y[i, :] = intent.where(flag, row, -row)
        sums[i] = intent.sum(row)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def triton_softmax() -> torch_op.KernelOp:
    kir = softmax.specialize_with()
    return torch_triton.register_triton("softmax_triton_op_test", kir, torch_op.schema_for(kir, {"x"}))


def test_only_compiled_cuda_launches_take_the_triton_path() -> None:
    kir = softmax.specialize_with()
    assert not torch_triton.supported(kir, False, torch.device("cpu"))
    assert not torch_triton.supported(kir, True, torch.device("cuda", 0))  # autotuning times launches
    assert not torch_triton.supported(softmax.with_options(checks=True).specialize_with(), False,
                                      torch.device("cuda", 0))


def test_triton_operator_schema_and_eager_call(triton_softmax) -> None:
    assert str(triton_softmax.op._schema) == "intent::softmax_triton_op_test(Tensor x) -> Tensor"
    x = torch.randn(3, 7)
    torch.testing.assert_close(triton_softmax.op(x), torch.softmax(x, 1))  # eagerly: the launcher


@pytest.mark.parametrize("outs", [(), ("y",), ("y", "sums")], ids=["returned", "one-given", "all-given"])
def test_triton_operator_schemas_match_the_derived_schema(outs) -> None:
    kir = mixed.specialize_with()
    schema = torch_op.schema_for(kir, {"x", "acc", "s", "k", "flag", *outs})
    entry = torch_triton.register_triton(f"mixed_triton_test_{len(outs)}", kir, schema)  # checks the schema
    assert str(entry.op._schema).split("(", 1)[1] == schema.text[1:]
    x, acc = torch.randn(2, 3), torch.zeros(2, 3)
    given = {name: torch.empty(2, 3) if name == "y" else torch.empty(2) for name in outs}
    result = entry.op(x, acc, 2.0, 1, True, *given.values())
    row = x * 2 + 1
    torch.testing.assert_close(acc, row)
    if not outs:
        torch.testing.assert_close(result[0], row)
        torch.testing.assert_close(result[1], row.sum(1))
    else:
        torch.testing.assert_close(given["y"], row)


def test_inductor_receives_the_triton_kernel_on_symbolic_sizes(triton_softmax) -> None:
    graphs = []

    def capture(gm: torch.fx.GraphModule, inputs: list) -> object:
        graphs.append(gm)
        return lambda *args: (torch.zeros(1), torch.zeros(1))  # never run: no device to launch on here

    # Without a GPU, Triton has no driver to analyse which tensors the kernel writes; torch logs that.
    logging.getLogger("torch._higher_order_ops.triton_kernel_wrap").setLevel(logging.ERROR)
    f = torch.compile(lambda x: triton_softmax.op(x) + 1, backend=aot_autograd(fw_compiler=capture),
                      fullgraph=True, dynamic=True)
    f(torch.randn(4, 8))
    (graph,) = graphs
    (node,) = [n for n in graph.graph.nodes if "triton_kernel_wrapper" in str(n.target)]
    kwargs = node.kwargs["kwargs"]
    assert isinstance(kwargs["p_x"], torch.fx.Node) and isinstance(kwargs["s_M"], torch.fx.Node)
    assert isinstance(kwargs["s_N"], torch.fx.Node)  # N stays symbolic: BLOCK_N is guarded to a range
    assert kwargs["BLOCK_N"] == 8 and kwargs["INDEX_64"] is True
    assert isinstance(node.kwargs["grid"][0][0], torch.fx.Node)


@pytest.mark.parametrize("case", traffic_cases("tiny"), ids=lambda c: f"{c.family}-{c.label}")
def test_traced_launch_arguments_are_the_launchers(case) -> None:
    """On concrete sizes the traced path computes exactly what `plan_launch` does (as on a 132-SM device)."""
    args = case.build(torch.device("cpu"), torch.Generator().manual_seed(0))
    kernel, abi = case.kernel._prepare((), args)
    schema = torch_op.schema_for(kernel, abi)
    with targets.simulated_multiprocessors(132):
        ours = torch_triton.launch_arguments(kernel, schema, abi)
        plan = plan_launch(kernel, abi, materialise=False)
    assert ours.grid == plan.grid
    for a, got, want in zip(plan.emitted.args, ours.positional, plan.positional, strict=True):
        if a.kind is ArgKind.TENSOR and a.param in abi:
            assert got is want
        elif a.kind in (ArgKind.TENSOR, ArgKind.WORKSPACE):
            assert isinstance(got, torch.Tensor) and got.dtype == want.dtype
        else:
            assert got == want, a.name
    for name in [c.name for c in plan.emitted.constexprs] + ["num_warps", "num_stages"]:
        assert ours.keywords[name] == plan.keywords[name], name
    assert ours.keywords[plan.emitted.index64_flag] is True
