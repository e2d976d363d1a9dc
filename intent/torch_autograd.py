"""`intent.autograd`: a forward kernel and a backward kernel paired into one differentiable PyTorch operator.

    rmsnorm = intent.autograd(forward=rmsnorm_fwd, backward=rmsnorm_bwd, save=["x", "w", "rstd"], outputs=["y"])
    y = rmsnorm(x, w, 1e-6)          # like rmsnorm_fwd, without its Out parameters
    y.sum().backward()               # runs rmsnorm_bwd

The backward kernel's parameters are matched to the forward's by name:

* `grad_<out>` (an input) receives the gradient of the forward output `<out>`;
* `grad_<x>` (an `Out` parameter) is the gradient the backward produces for the forward input `<x>`;
* any other tensor parameter is a forward input or output of that name, saved for the backward
  (`save` lists them, like `ctx.save_for_backward`; it defaults to exactly those);
* runtime scalars and const parameters of that name take the forward call's values.

The pair is registered with `torch.library.register_autograd` on a custom operator derived from the
forward kernel (`intent.torch_op`), so it works in eager mode, under `torch.compile` (the backward is
traced too) and with `torch.autograd.gradcheck`. Forward inputs without a `grad_` output get no
gradient (None), forward outputs without a `grad_` input are not differentiable, and outputs left
out of `outputs` are computed and saved but not returned. The backward kernel is not itself
differentiable (no double backward).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kir.core import Kernel, Role
from kir.errors import DiagnosticError, IntentError, LaunchError
from kir.frontend.signature import ConstSpec, ScalarSpec, TensorSpec

from .dsl import user_loc
from .kernel import KernelObject

GRAD = "grad_"


def _error(message: str) -> DiagnosticError:
    """A definition error, located where the author called `intent.autograd`."""
    return DiagnosticError(message, user_loc())


@dataclass(frozen=True)
class _Plan:
    """How the backward kernel's parameters are fed, derived once from the two signatures."""

    grad_inputs: tuple[tuple[str, str], ...]  # (backward parameter, forward output it is the gradient of)
    grad_outputs: tuple[tuple[str, str], ...]  # (backward Out parameter, forward input it is the gradient of)
    saved: tuple[str, ...]  # forward tensors (inputs or outputs) the backward reads, saved after the forward
    scalars: tuple[str, ...]  # forward runtime scalars the backward reads
    consts: tuple[str, ...]  # forward const parameters the backward takes too


class AutogradKernel:
    """What `intent.autograd` returns: call it like the forward kernel without its `Out` parameters."""

    def __init__(self, forward: KernelObject, backward: KernelObject, save: Sequence[str] | None = None,
                 outputs: Sequence[str] | None = None) -> None:
        for what, k in (("forward", forward), ("backward", backward)):
            if not isinstance(k, KernelObject):
                raise _error(f"intent.autograd: {what} must be an @intent.kernel, got {k!r}")
        self.forward = forward
        self.backward = backward
        self.__name__ = forward.__name__
        self.__qualname__ = forward.__qualname__
        self.__doc__ = forward.__doc__
        self.__module__ = forward.__module__
        fwd = forward.signature
        where = f"intent.autograd({forward.__name__}, {backward.__name__})"
        for p in fwd.params:
            if isinstance(p.spec, TensorSpec) and p.spec.role is Role.INOUT:
                raise _error(f"{where}: the forward kernel's parameter {p.name} is InOut; a differentiable "
                                  f"forward writes only its Out parameters")
        fwd_outs = [p.name for p in fwd.params if isinstance(p.spec, TensorSpec) and p.spec.role is Role.OUT]
        if not fwd_outs:
            raise _error(f"{where}: the forward kernel has no Out parameter to differentiate")
        self.outputs = tuple(outputs) if outputs is not None else tuple(fwd_outs)
        for name in self.outputs:
            if name not in fwd_outs:
                raise _error(f"{where}: outputs names {name!r}, which is not an Out parameter of "
                                  f"{forward.__name__} (its Out parameters: {', '.join(fwd_outs)})")
        if not self.outputs or len(set(self.outputs)) != len(self.outputs):
            raise _error(f"{where}: outputs must name one or more distinct Out parameters, got "
                              f"{list(self.outputs)}")
        self._plan = _plan(where, forward, backward, fwd_outs, save)
        self._ops: dict[tuple[int, tuple[tuple[str, Any], ...], bool], tuple[Kernel, Any]] = {}
        self._lock = threading.Lock()

    @property
    def save(self) -> tuple[str, ...]:
        return self._plan.saved

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .torch_op import call

        return call(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<intent.autograd {self.forward.__name__} / {self.backward.__name__}>"

    # -------------------------------------------------------------------------------------- operator
    def _op_parameters(self) -> tuple[tuple[str, ...], frozenset[str]]:
        sig = self.forward.signature
        names = tuple(p.name for p in sig.params
                      if not (isinstance(p.spec, TensorSpec) and p.spec.role is Role.OUT))
        return names, frozenset(p.name for p in sig.consts)

    def _op_resolve(self, positional: tuple[Any, ...], keywords: tuple[Any, ...]
                    ) -> tuple[str, tuple[str, ...], tuple[int, ...]]:
        from .torch_op import call_device, stand_ins

        names, _ = self._op_parameters()
        outs = {p.name for p in self.forward.signature.params
                if isinstance(p.spec, TensorSpec) and p.spec.role is Role.OUT}
        for name, _, _ in keywords:
            if name in outs:
                raise LaunchError(f"{self.__name__}() computes its Out parameter {name} itself; a differentiable "
                                  f"call takes only the forward kernel's inputs")
        if len(positional) > len(names):
            raise LaunchError(f"{self.__name__}() takes {len(names)} arguments ({', '.join(names)}) but "
                              f"{len(positional)} were given")
        args, kwargs = stand_ins(positional, keywords)
        for name in names[:len(args)]:
            if name in kwargs:
                raise LaunchError(f"{self.__name__}() got multiple values for argument '{name}'")
        kwargs.update(zip(names, args))
        kernel, bound = self.forward._prepare((), kwargs)
        consts = tuple(sorted((p.name, kwargs.get(p.name, p.default)) for p in self.forward.signature.consts))
        entry = self._op_for(kernel, consts, call_device(positional, keywords))
        picked = tuple(entry.schema.returned.index(o) for o in self.outputs)
        return entry.name, entry.schema.inputs, picked

    def _op_for(self, kernel: Kernel, consts: tuple[tuple[str, Any], ...], device: Any) -> Any:
        from . import torch_op, torch_triton

        triton = device is not None and torch_triton.supported(kernel, self.forward.autotune, device)
        key = (id(kernel), consts, triton)
        hit = self._ops.get(key)
        if hit is not None and hit[0] is kernel:
            return hit[1]
        with self._lock, torch_op.registry_lock():
            given = {p.name for p in kernel.params if p.role is not Role.OUT}
            base = torch_op.op_name(kernel, frozenset(), self.forward.autotune)
            text = "\0".join([base, _kernel_identity(self.backward), repr(self._plan), repr(self.outputs),
                              repr(consts)])
            name = f"{kernel.name}__autograd__{hashlib.sha256(text.encode()).hexdigest()[:12]}" + \
                ("_triton" if triton else "")
            entry = torch_op.registered_op(name)
            if entry is None:
                schema = torch_op.schema_for(kernel, given)
                entry = torch_triton.register_triton(name, kernel, schema) if triton else \
                    torch_op.register(name, kernel, schema, self.forward.autotune)
                _register_autograd(self, entry, dict(consts))
            self._backward_op(kernel, dict(consts), device)
            self._ops[key] = (kernel, entry)
            return entry

    def _backward_op(self, kernel: Kernel, consts: dict[str, Any], device: Any) -> None:
        """Register the operator the backward kernel will be called through, now, while Dynamo traces the
        forward: a compiled backward taken from PyTorch's caches in a new process calls that operator
        without tracing (and so without registering) anything."""
        import torch

        from . import torch_op

        def tensor(name: str) -> tuple[str, Any]:
            if name not in {p.name for p in kernel.params}:  # an optional input left out
                return "none", None
            t = kernel.param(name).type
            return "tensor", (t.dtype.torch, device if device is not None else torch.device("cpu"))

        grads = dict(self._plan.grad_inputs)
        keywords = []
        for p in self.backward.signature.params:
            spec = p.spec
            if isinstance(spec, TensorSpec) and spec.role is Role.OUT:
                continue
            if isinstance(spec, ConstSpec):
                keywords.append((p.name, "const", consts.get(p.name, p.default)))
            elif isinstance(spec, ScalarSpec):
                keywords.append((p.name, "scalar", None))
            else:
                keywords.append((p.name, *tensor(grads.get(p.name, p.name))))
        torch_op._resolve(self.backward, (), tuple(keywords))


def _kernel_identity(k: KernelObject) -> str:
    """What distinguishes one backward kernel from another for naming the operator across processes."""
    try:
        return str(k.kir)
    except IntentError:  # const parameters without defaults: no generic KIR
        return f"{k.__module__}.{k.__qualname__}{k.signature.params!r}"


def _plan(where: str, forward: KernelObject, backward: KernelObject, fwd_outs: list[str],
          save: Sequence[str] | None) -> _Plan:
    fwd = {p.name: p for p in forward.signature.params}
    fwd_inputs = [n for n, p in fwd.items() if isinstance(p.spec, TensorSpec) and p.spec.role is Role.IN]
    grad_inputs, grad_outputs, saved, scalars, consts = [], [], [], [], []
    for p in backward.signature.params:
        spec = p.spec
        base = p.name[len(GRAD):] if p.name.startswith(GRAD) else None
        if isinstance(spec, TensorSpec) and spec.role is Role.INOUT:
            raise _error(f"{where}: the backward kernel's parameter {p.name} is InOut; it reads gradients "
                              f"and saved values and writes Out gradients")
        if isinstance(spec, TensorSpec) and spec.role is Role.OUT:
            if base is None or base not in fwd_inputs:
                raise _error(f"{where}: the backward kernel's Out parameter {p.name} must be named grad_<x> "
                                  f"for a tensor input x of {forward.__name__} (its tensor inputs: "
                                  f"{', '.join(fwd_inputs) or 'none'})")
            grad_outputs.append((p.name, base))
            continue
        if base is not None and base not in fwd and isinstance(spec, TensorSpec):
            raise _error(f"{where}: the backward kernel's parameter {p.name} is the gradient of {base}, which "
                              f"is not an Out parameter of {forward.__name__} (its Out parameters: "
                              f"{', '.join(fwd_outs)})")
        if base is not None and base in fwd_outs and p.name not in fwd:
            if not isinstance(spec, TensorSpec):
                raise _error(f"{where}: the backward kernel's parameter {p.name} (the gradient of {base}) "
                                  f"must be a tensor")
            grad_inputs.append((p.name, base))
            continue
        if p.name not in fwd:
            raise _error(f"{where}: the backward kernel's parameter {p.name} names no parameter of "
                              f"{forward.__name__}; name incoming gradients grad_<output>, produced gradients "
                              f"grad_<input> (Out), and saved values and scalars by their forward names")
        f = fwd[p.name]
        if isinstance(spec, ConstSpec) != isinstance(f.spec, ConstSpec) \
                or isinstance(spec, ScalarSpec) != isinstance(f.spec, ScalarSpec):
            raise _error(f"{where}: the backward kernel's parameter {p.name} is not the same kind of "
                              f"parameter (tensor, scalar or const) as the forward's")
        if isinstance(spec, ConstSpec):
            consts.append(p.name)
        elif isinstance(spec, ScalarSpec):
            scalars.append(p.name)
        else:
            saved.append(p.name)
    if not grad_outputs:
        raise _error(f"{where}: the backward kernel has no Out parameter grad_<x>: it computes no gradient")
    if save is not None:
        listed = list(save)
        for name in listed:
            if name not in fwd or not isinstance(fwd[name].spec, TensorSpec):
                raise _error(f"{where}: save names {name!r}, which is not a tensor parameter of "
                                  f"{forward.__name__}")
        missing = [n for n in saved if n not in listed]
        if missing:
            raise _error(f"{where}: the backward kernel reads {', '.join(missing)}, which save={listed} "
                              f"does not list")
        unread = [n for n in listed if n not in saved]
        if unread:
            raise _error(f"{where}: save lists {', '.join(unread)}, which the backward kernel does not read")
        saved = [n for n in listed if n in saved]
    return _Plan(tuple(grad_inputs), tuple(grad_outputs), tuple(saved), tuple(scalars), tuple(consts))


def _register_autograd(fn: AutogradKernel, entry: Any, consts: dict[str, Any]) -> None:
    import torch

    plan = fn._plan
    schema = entry.schema
    differentiable = {base for _, base in plan.grad_inputs}
    undifferentiable = tuple(i for i, n in enumerate(schema.returned) if n not in differentiable)
    grads_for = {base: name for name, base in plan.grad_outputs}
    backward_outs = tuple(p.name for p in fn.backward.signature.params
                          if isinstance(p.spec, TensorSpec) and p.spec.role is Role.OUT)

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        outs = output if isinstance(output, tuple) else (output,)
        values = dict(zip(schema.inputs, inputs))
        values.update(zip(schema.returned, outs))
        ctx.save_for_backward(*(values[n] for n in plan.saved))
        ctx.intent_scalars = {n: values[n] for n in plan.scalars}
        if undifferentiable:
            ctx.mark_non_differentiable(*(outs[i] for i in undifferentiable))

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        args: dict[str, Any] = dict(zip(plan.saved, ctx.saved_tensors))
        args.update(ctx.intent_scalars)
        args.update((n, consts[n]) for n in plan.consts)
        for name, base in plan.grad_inputs:
            args[name] = grads[schema.returned.index(base)]
        result = fn.backward(**args)
        produced = dict(zip(backward_outs, result if isinstance(result, tuple) else (result,)))
        return tuple(produced[grads_for[n]] if n in grads_for and ctx.needs_input_grad[i] else None
                     for i, n in enumerate(schema.inputs))

    torch.library.register_autograd(entry.qualname, backward, setup_context=setup_context)


def autograd(forward: KernelObject, backward: KernelObject, *, save: Sequence[str] | None = None,
             outputs: Sequence[str] | None = None) -> AutogradKernel:
    """Pair `forward` with `backward` (see the module doc for how their parameters are matched).

    `save`: the forward tensors (inputs or outputs) the backward kernel reads, as `ctx.save_for_backward`
    would list them (default: exactly those the backward reads). `outputs`: the forward Out parameters
    the call returns (default: all, in parameter order; one name returns one tensor)."""
    return AutogradKernel(forward, backward, save, outputs)
