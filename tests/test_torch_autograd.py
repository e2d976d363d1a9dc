"""`intent.autograd`: forward/backward kernel pairs in eager autograd, gradcheck and torch.compile."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

import intent
from intent import DiagnosticError, InOut, LaunchError, Out, dims, f32, parallel, torch_op

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
M, N = dims("M N")


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"intent_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Dynamo finds a module's globals through sys.modules
    spec.loader.exec_module(module)
    return module


rms = _example("rmsnorm")
sm = _example("softmax_autograd")
ce = _example("cross_entropy")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _f64(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)).requires_grad_()


# ---------------------------------------------------------------------------------------------- gradcheck


def test_gradcheck_rmsnorm() -> None:
    x, w = _f64(3, 5), _f64(5, seed=1)
    assert torch.autograd.gradcheck(lambda x, w: rms.rmsnorm(x, w, 1e-6), (x, w))


def test_gradcheck_softmax() -> None:
    assert torch.autograd.gradcheck(sm.softmax, (_f64(3, 6),))


def test_gradcheck_cross_entropy() -> None:
    target = torch.tensor([0, 4, 2])
    assert torch.autograd.gradcheck(lambda x: ce.cross_entropy(x, target), (_f64(3, 5),))


def test_values_and_gradients_match_torch() -> None:
    x, w = _f64(4, 6), _f64(6, seed=1)
    target = torch.tensor([5, 0, 3, 3])
    cases = [
        (lambda: rms.rmsnorm(x, w, 1e-5), lambda: torch.nn.functional.rms_norm(x, (6,), w, 1e-5), (x, w)),
        (lambda: sm.softmax(x), lambda: torch.softmax(x, 1), (x,)),
        (lambda: ce.cross_entropy(x, target),
         lambda: torch.nn.functional.cross_entropy(x, target, reduction="none"), (x,)),
    ]
    for ours, theirs, inputs in cases:
        got, want = ours(), theirs()
        torch.testing.assert_close(got, want)
        g = torch.randn_like(got)
        for a, b in zip(torch.autograd.grad(got, inputs, g), torch.autograd.grad(want, inputs, g)):
            torch.testing.assert_close(a, b)


def test_only_inputs_that_require_grad_get_one() -> None:
    x, w = _f64(2, 3), torch.randn(3, dtype=torch.float64)
    rms.rmsnorm(x, w, 1e-6).sum().backward()
    assert x.grad is not None and w.grad is None


def test_hidden_and_undifferentiable_outputs() -> None:
    assert rms.rmsnorm.outputs == ("y",) and rms.rmsnorm.save == ("x", "w", "rstd")
    y = rms.rmsnorm(_f64(2, 3), _f64(3), 1e-6)
    assert isinstance(y, torch.Tensor) and y.shape == (2, 3)  # rstd is computed and saved, not returned
    both = intent.autograd(forward=rms.rmsnorm_fwd, backward=rms.rmsnorm_bwd)
    y, rstd = both(_f64(2, 3), _f64(3), 1e-6)
    assert y.requires_grad and not rstd.requires_grad  # the backward takes no grad_rstd


def test_a_call_takes_no_out_parameter() -> None:
    x = _f64(2, 3)
    with pytest.raises(LaunchError, match="softmax_fwd\\(\\) computes its Out parameter y itself"):
        sm.softmax(x, y=torch.empty(2, 3, dtype=torch.float64))
    with pytest.raises(LaunchError, match=re.escape("softmax_fwd() takes 1 arguments (x) but 2 were given")):
        sm.softmax(x, x)


# ---------------------------------------------------------------------------------------------- torch.compile


def test_compiled_backward_dynamic_sizes() -> None:
    counter = CompileCounterWithBackend("aot_eager")

    def loss(x, w):
        return (sm.softmax(rms.rmsnorm(x, w, 1e-6)) ** 2).sum()

    f = torch.compile(loss, fullgraph=True, backend=counter)
    for rows in (3, 5, 6):
        x, w = torch.randn(rows, 8, requires_grad=True), torch.randn(8, requires_grad=True)
        got = f(x, w)
        gx, gw = torch.autograd.grad(got, (x, w))
        want = loss(x, w)
        torch.testing.assert_close(got, want)
        for a, b in zip((gx, gw), torch.autograd.grad(want, (x, w))):
            torch.testing.assert_close(a, b)
    assert counter.frame_count == 2


def test_rmsnorm_module_training_step_compiled_matches_eager_pytorch() -> None:
    """The RMSNorm module inside a torch.compile(fullgraph=True) training step (Inductor, CPU), against
    the same model with torch.nn.RMSNorm in eager mode: losses, gradients and updated parameters."""
    torch.manual_seed(0)

    def model_with(norm: torch.nn.Module) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(8, 16), norm, torch.nn.GELU(), torch.nn.Linear(16, 4))

    ours, ref = model_with(rms.RMSNorm(16, eps=1e-6)), model_with(torch.nn.RMSNorm(16, eps=1e-6))
    with torch.no_grad():
        ours[1].weight.uniform_(0.5, 1.5)
    ref.load_state_dict(ours.state_dict())
    opt_ours = torch.optim.SGD(ours.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)

    def loss_of(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(model(x), target)

    counter = CompileCounterWithBackend("inductor")
    step = torch.compile(loss_of, fullgraph=True, backend=counter)
    for batch in (6, 10, 13):
        x, target = torch.randn(batch, 8), torch.randn(batch, 4)
        for model, opt, fn in ((ours, opt_ours, step), (ref, opt_ref, loss_of)):
            opt.zero_grad()
            loss = fn(model, x, target)
            loss.backward()
            model.loss = loss.detach()
        torch.testing.assert_close(ours.loss, ref.loss)
        for (name, a), b in zip(ours.named_parameters(), ref.parameters()):
            torch.testing.assert_close(a.grad, b.grad, msg=name)
        opt_ours.step()
        opt_ref.step()
    for a, b in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b)
    assert counter.frame_count == 2  # the first batch size, then one dynamic graph


# ---------------------------------------------------------------------------------------------- definition errors


@intent.kernel
def twice(x: f32[N], y: Out[f32[N]]):
    for i in parallel(N):
        y[i] = x[i] * 2


@intent.kernel
def twice_bwd(grad_y: f32[N], grad_x: Out[f32[N]]):
    for i in parallel(N):
        grad_x[i] = grad_y[i] * 2


@intent.kernel
def bad_out_name(grad_y: f32[N], dx: Out[f32[N]]):
    for i in parallel(N):
        dx[i] = grad_y[i]


@intent.kernel
def reads_unknown(grad_y: f32[N], z: f32[N], grad_x: Out[f32[N]]):
    for i in parallel(N):
        grad_x[i] = grad_y[i] * z[i]


@intent.kernel
def reads_x(grad_y: f32[N], x: f32[N], grad_x: Out[f32[N]]):
    for i in parallel(N):
        grad_x[i] = grad_y[i] * x[i]


@intent.kernel
def in_place(x: InOut[f32[N]]):
    for i in parallel(N):
        x[i] = x[i] * 2


def _message(**kwargs) -> str:
    with pytest.raises(DiagnosticError) as info:
        intent.autograd(**kwargs)
    assert info.value.loc is not None and info.value.loc.file == __file__  # located at the call
    return info.value.message


def test_definition_errors() -> None:
    pair = "intent.autograd(twice, "
    assert _message(forward=twice, backward=bad_out_name) == (
        f"{pair}bad_out_name): the backward kernel's Out parameter dx must be named grad_<x> for a tensor "
        f"input x of twice (its tensor inputs: x)")
    assert _message(forward=twice, backward=reads_unknown) == (
        f"{pair}reads_unknown): the backward kernel's parameter z names no parameter of twice; name incoming "
        f"gradients grad_<output>, produced gradients grad_<input> (Out), and saved values and scalars by their "
        f"forward names")
    assert _message(forward=twice, backward=reads_x, save=[]) == (
        f"{pair}reads_x): the backward kernel reads x, which save=[] does not list")
    assert _message(forward=twice, backward=twice_bwd, save=["x"]) == (
        f"{pair}twice_bwd): save lists x, which the backward kernel does not read")
    assert _message(forward=twice, backward=twice_bwd, outputs=["z"]) == (
        f"{pair}twice_bwd): outputs names 'z', which is not an Out parameter of twice (its Out parameters: y)")
    assert _message(forward=in_place, backward=twice_bwd) == (
        "intent.autograd(in_place, twice_bwd): the forward kernel's parameter x is InOut; a differentiable "
        "forward writes only its Out parameters")
    assert _message(forward=twice, backward=twice) == (
        f"{pair}twice): the backward kernel's Out parameter y must be named grad_<x> for a tensor input x of "
        f"twice (its tensor inputs: x)")


def test_the_backward_operator_exists_before_any_backward_runs() -> None:
    """A compiled backward loaded from PyTorch's caches in a new process calls the backward kernel's operator
    without tracing it: the operator is registered when the forward is, not when the backward is traced."""

    @intent.kernel
    def cube(x: f32[N], y: Out[f32[N]]):
        for i in parallel(N):
            y[i] = x[i] * x[i] * x[i]

    @intent.kernel
    def cube_bwd(grad_y: f32[N], x: f32[N], grad_x: Out[f32[N]]):
        for i in parallel(N):
            grad_x[i] = grad_y[i] * 3 * x[i] * x[i]

    cubed = intent.autograd(forward=cube, backward=cube_bwd)
    with torch.no_grad():
        cubed(torch.randn(4))
    names = [op.name for op in torch_op.registered()]
    assert any(n.startswith("cube__autograd__") for n in names) and any(n.startswith("cube_bwd__") for n in names)


def test_a_pair_without_saved_values() -> None:
    doubled = intent.autograd(forward=twice, backward=twice_bwd)
    x = torch.randn(5, requires_grad=True)
    doubled(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((5,), 2.0))
