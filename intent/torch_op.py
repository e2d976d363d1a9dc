"""Intent kernels as PyTorch operators: `torch.library` custom ops derived from the KIR signature.

Every specialised kernel (one dtype assignment and const values) that PyTorch traces becomes, on first
use, an operator `torch.ops.intent.<kernel>__<digest>`:

* its schema comes from the KIR parameters: tensor inputs are `Tensor`, `InOut` parameters and the
  `Out` parameters the caller passes are mutated (`Tensor(a1!)`), the `Out` parameters the caller
  omits are returned, runtime scalars are `float`, `SymInt` or `bool` (const parameters are part of
  the specialisation, not of the schema);
* its fake (meta) implementation comes from the KIR types: the shape symbols are bound from the input
  sizes (symbolic sizes stay symbolic), the consistency of shared symbols, constant extents, the
  symbols' lower bounds, `requires` and axioms become `torch._check`s, and omitted outputs are
  allocated from their shape expressions. Dynamic shapes therefore trace without specialising sizes;
* its implementation is the ordinary launcher (all argument checks included); on CUDA tensors a
  second operator built with `torch.library.triton_op` (`intent.torch_triton`) exposes the generated
  Triton kernel itself to Inductor.

`KernelObject.__call__` routes here while PyTorch traces (`torch.compile`, `make_fx`, fake tensors,
dispatch modes); eager calls launch directly and never touch this module.
"""

from __future__ import annotations

import functools
import hashlib
import operator
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from kir.core import Kernel, Param, RefType, Role, shape_str
from kir.dims import DBin, DConst, Dim, DSym, PAnd, PCmp, PNot, POr, Pred
from kir.dtypes import DType
from kir.errors import LaunchError
from kir.solver import default_lower_bounds

from .runtime.checks import settle

if TYPE_CHECKING:
    pass

NAMESPACE = "intent"


# ---------------------------------------------------------------------------------------------- schema


def scalar_schema_type(dtype: DType) -> str:
    """The schema type of a runtime scalar: integers are `SymInt` so that dynamic values stay symbolic."""
    if dtype.is_pred:
        return "bool"
    if dtype.is_int:
        return "SymInt"
    return "float"


@dataclass(frozen=True)
class Schema:
    """The operator signature of one specialisation called with a given set of `Out` parameters."""

    text: str  # "(Tensor x, Tensor(a1!) out, float eps) -> ()"
    inputs: tuple[str, ...]  # the operator's arguments (KIR parameter names), in KIR order
    mutated: tuple[str, ...]  # InOut parameters and the Out parameters passed in
    returned: tuple[str, ...]  # the Out parameters the caller omitted, allocated and returned


def schema_for(kernel: Kernel, given: Iterable[str]) -> Schema:
    """The schema of `kernel` called with the parameters named in `given` (omitted `Out`s are returned)."""
    given = frozenset(given)
    parts: list[str] = []
    inputs: list[str] = []
    mutated: list[str] = []
    returned: list[str] = []
    for p in kernel.params:
        t = p.type
        if isinstance(t, RefType):
            if p.role is Role.OUT and p.name not in given:
                returned.append(p.name)
                continue
            if p.role is Role.IN:
                parts.append(f"Tensor {p.name}")
            else:
                # the alias set is named after the argument's position, as torch.library.infer_schema does
                parts.append(f"Tensor(a{len(inputs)}!) {p.name}")
                mutated.append(p.name)
        else:
            assert isinstance(t.dtype, DType), "operators are made for specialised kernels"
            parts.append(f"{scalar_schema_type(t.dtype)} {p.name}")
        inputs.append(p.name)
    result = "()" if not returned else "Tensor" if len(returned) == 1 else \
        f"({', '.join('Tensor' for _ in returned)})"
    return Schema(f"({', '.join(parts)}) -> {result}", tuple(inputs), tuple(mutated), tuple(returned))


# ---------------------------------------------------------------------------------------------- symbolic binding


def sym_dim(d: Dim, env: Mapping[str, Any]) -> Any:
    """`d` on symbols that may be `torch.SymInt`s (no `int()`: that would specialise them)."""
    if isinstance(d, DConst):
        return d.value
    if isinstance(d, DSym):
        return env[d.name]
    assert isinstance(d, DBin)
    a, b = sym_dim(d.lhs, env), sym_dim(d.rhs, env)
    return {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
            "%": operator.mod}[d.op](a, b)


def sym_pred(p: Pred, env: Mapping[str, Any]) -> Any:
    """`p` as a bool or `torch.SymBool` (`and`/`or`/`not` would force a concrete answer)."""
    if isinstance(p, PCmp):
        a, b = sym_dim(p.lhs, env), sym_dim(p.rhs, env)
        return {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
                ">=": operator.ge}[p.op](a, b)
    if isinstance(p, PNot):
        return torch.sym_not(sym_pred(p.item, env))
    assert isinstance(p, PAnd | POr)
    items = [sym_pred(q, env) for q in p.items]
    combine = operator.and_ if isinstance(p, PAnd) else operator.or_
    return functools.reduce(lambda x, y: combine(_sym_bool(x), _sym_bool(y)), items,
                            isinstance(p, PAnd))


def _sym_bool(x: Any) -> Any:
    return x if isinstance(x, torch.SymBool) else bool(x)


def _describe(p: Param) -> str:
    return f"a tensor ({p.type})"


def _shown(v: Any) -> Any:
    """A size for a message: the value a symbolic size has in this trace, when it has one."""
    if isinstance(v, torch.SymInt):
        hint = getattr(v.node, "hint", None)
        return hint if hint is not None else v
    return v


def _check(cond: Any, message: str) -> None:
    """`torch._check` for symbolic conditions (a guard or runtime assert, never a specialisation); a
    `LaunchError`, as at launch, when the condition is already decided."""
    if isinstance(cond, torch.SymBool):
        torch._check(cond, lambda: message)
    elif not cond:
        raise LaunchError(message)


def bind_symbolic(kernel: Kernel, args: Mapping[str, Any]) -> dict[str, Any]:
    """The shape-symbol binding of `args` (tensors may be fake, sizes symbolic), checked with `torch._check`.

    The checks are those of `emit_triton.arguments.bind_arguments` that depend on shapes: rank and dtype
    (static), constant extents, symbols shared between parameters, derived extents (`N + 1`), the
    symbols' lower bounds, `requires` and axioms. Memory overlap needs real addresses: the launcher
    checks it when the operator runs.
    """
    env: dict[str, Any] = {}
    origin: dict[str, str] = {}
    pending: list[tuple[str, int, Dim, Any]] = []
    for p in kernel.params:
        if p.name not in args or not isinstance(p.type, RefType):
            continue
        t, ref = args[p.name], p.type
        if not isinstance(t, torch.Tensor):
            raise LaunchError(f"parameter {p.name}: expected {_describe(p)}, got {type(t).__name__}")
        assert isinstance(ref.dtype, DType)
        if t.dtype != ref.dtype.torch:
            raise LaunchError(f"parameter {p.name}: expected {ref.dtype}, got {t.dtype}")
        if t.dim() != ref.rank:
            raise LaunchError(f"parameter {p.name}: expected rank {ref.rank} ({ref}), got a tensor of shape "
                              f"{tuple(t.shape)}")
        for axis, (d, extent) in enumerate(zip(ref.shape, t.shape)):
            if isinstance(d, DConst):
                _check(extent == d.value, f"parameter {p.name}: axis {axis} has extent {_shown(extent)} but the kernel "
                                          f"expects {d.value}")
            elif isinstance(d, DSym):
                if d.name not in env:
                    env[d.name], origin[d.name] = extent, f"parameter {p.name}"
                else:
                    _check(extent == env[d.name], f"parameter {p.name}: axis {axis} has extent {_shown(extent)} but "
                                                  f"{d.name} = {_shown(env[d.name])} from {origin[d.name]}")
            else:
                pending.append((p.name, axis, d, extent))
    _bind_derived(pending, env, origin)
    for p in kernel.params:
        if isinstance(p.type, RefType) and p.name not in args and p.role is Role.OUT:
            unbound = sorted(set().union(*(d.symbols() for d in p.type.shape)) - env.keys())
            if unbound:
                verb = "is" if len(unbound) == 1 else "are"
                raise LaunchError(f"out parameter {p.name} was omitted and its shape {shape_str(p.type.shape)} "
                                  f"cannot be inferred: {', '.join(unbound)} {verb} not bound by any input")
    for s in kernel.symbols:
        if s not in env:
            raise LaunchError(f"shape symbol {s} of kernel {kernel.name} is not bound by any argument")
    for word, preds in (("", default_lower_bounds(kernel.symbols, kernel.requires)),
                        ("requires ", kernel.requires), ("axiom ", kernel.axioms)):
        for pred in preds:
            _check(sym_pred(pred, env), _failed(word, pred, env))
    return env


def _failed(word: str, pred: Pred, env: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{s} = {_shown(env[s])}" for s in sorted(pred.symbols()))
    why = "" if word else f" (a shape symbol is >= 1 unless the kernel states {next(iter(pred.symbols()))} >= 0)"
    return f"{word}{pred} failed: {shown}{why}"


def _bind_derived(pending: list[tuple[str, int, Dim, Any]], env: dict[str, Any], origin: dict[str, str]) -> None:
    """Bind symbols that only derived extents (`S + 1`, `2 * S`) determine; check the others."""

    def resolve(item: tuple[str, int, Dim, Any]) -> bool:
        name, axis, d, extent = item
        unbound = sorted(d.symbols() - env.keys())
        if not unbound:
            _check(sym_dim(d, env) == extent, f"parameter {name}: axis {axis} has extent {_shown(extent)} but "
                                              f"{d} = {_shown(sym_dim(d, env))}")
            return True
        if len(unbound) > 1:
            return False
        s = unbound[0]
        base = sym_dim(d, {**env, s: 0})
        slope = sym_dim(d, {**env, s: 1}) - base
        if not isinstance(slope, int) or slope == 0 or sym_dim(d, {**env, s: 2}) - base != 2 * slope:
            return False  # not affine in s with a constant slope: another parameter may bind s
        _check((extent - base) % slope == 0, f"parameter {name}: axis {axis} has extent {_shown(extent)}, "
                                             f"which is not of the form {d}")
        env[s], origin[s] = (extent - base) // slope, f"parameter {name}"
        return True

    settle(pending, resolve)
    for name, axis, d, extent in pending:
        unbound = sorted(d.symbols() - env.keys())
        raise LaunchError(f"parameter {name}: axis {axis} has extent {extent} = {d}, which does not determine "
                          f"{', '.join(unbound)}; pass a parameter whose shape gives it directly")


def fake_outputs(kernel: Kernel, schema: Schema, args: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
    """The omitted outputs as the kernel would allocate them (empty tensors of symbolic shape)."""
    env = bind_symbolic(kernel, args)
    device = next((v.device for v in args.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))
    outs = []
    for name in schema.returned:
        ref = kernel.param(name).type
        assert isinstance(ref, RefType) and isinstance(ref.dtype, DType)
        outs.append(torch.empty([sym_dim(d, env) for d in ref.shape], dtype=ref.dtype.torch, device=device))
    return tuple(outs)


# ---------------------------------------------------------------------------------------------- operators


@dataclass
class KernelOp:
    """One registered operator: a specialised kernel called with one set of `Out` parameters."""

    name: str  # the operator name in the `intent` namespace
    kernel: Kernel
    schema: Schema
    autotune: bool
    definition: Any  # the torch.library CustomOpDef

    @property
    def qualname(self) -> str:
        return f"{NAMESPACE}::{self.name}"

    @property
    def op(self) -> Any:
        """The `OpOverload`, `torch.ops.intent.<name>.default`."""
        return getattr(getattr(torch.ops, NAMESPACE), self.name).default

    def run(self, *values: Any) -> Any:
        """The implementation: the launcher, with every check of a direct launch."""
        from emit_triton import launch

        args = dict(zip(self.schema.inputs, values))
        result = launch(self.kernel, args, autotune=True) if self.autotune else launch(self.kernel, args)
        return result if self.schema.returned else None

    def fake(self, *values: Any) -> Any:
        outs = fake_outputs(self.kernel, self.schema, dict(zip(self.schema.inputs, values)))
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs


_ops: dict[tuple[int, frozenset[str], bool], tuple[Kernel, KernelOp]] = {}
_by_name: dict[str, KernelOp] = {}
_lock = threading.RLock()


def op_name(kernel: Kernel, given: frozenset[str], autotune: bool) -> str:
    """`<kernel>__<digest>`: the digest covers the specialised KIR (dtypes, consts, checks), the `Out`
    parameters passed, the schema and the launch options, so equal kernels share an operator across kernel
    objects, and a name in a compiled program cached on disk means the same operator in every process."""
    schema = schema_for(kernel, _given_names(kernel, given))
    text = "\0".join([str(kernel), f"checks={kernel.checks}", f"autotune={autotune}", ",".join(sorted(given)),
                      schema.text])
    return f"{kernel.name}__{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def _given_names(kernel: Kernel, outs: frozenset[str]) -> set[str]:
    """Every parameter a call passes when it passes the `Out` parameters in `outs`."""
    return {p.name for p in kernel.params if p.role is not Role.OUT or p.name in outs}


def op_for(kernel: Kernel, given: Iterable[str], *, autotune: bool = False,
           device: torch.device | None = None) -> KernelOp:
    """The operator of `kernel` called with the parameters in `given`, registered on first use: a
    `triton_op` for launches on `device` when it is a CUDA device (`intent.torch_triton`), otherwise an
    opaque custom operator."""
    from . import torch_triton

    outs = frozenset(p.name for p in kernel.params if p.role is Role.OUT and p.name in set(given))
    triton = device is not None and torch_triton.supported(kernel, autotune, device)
    key = (id(kernel), outs, autotune, triton)
    hit = _ops.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    with _lock:
        name = op_name(kernel, outs, autotune) + ("_triton" if triton else "")
        found = _by_name.get(name)
        if found is None:
            schema = schema_for(kernel, _given_names(kernel, outs))
            found = torch_triton.register_triton(name, kernel, schema) if triton else \
                register(name, kernel, schema, autotune)
        _ops[key] = (kernel, found)
        return found


def registry_lock() -> Any:
    """Held while an operator is looked up and registered (registration is process-wide)."""
    return _lock


def registered_op(name: str) -> KernelOp | None:
    return _by_name.get(name)


def register(name: str, kernel: Kernel, schema: Schema, autotune: bool) -> KernelOp:
    """Define `intent::<name>` with `schema`: the launcher as its implementation, the KIR-derived fake."""
    entry = KernelOp(name, kernel, schema, autotune, None)

    def run(*values: Any) -> Any:
        return entry.run(*values)

    def fake(*values: Any) -> Any:
        return entry.fake(*values)

    definition = torch.library.custom_op(entry.qualname, run, mutates_args=schema.mutated, schema=schema.text)
    definition.register_fake(fake)
    entry.definition = definition
    return record(entry)


def record(entry: KernelOp) -> KernelOp:
    """Remember a registered operator by name (operators are process-wide and never registered twice)."""
    with _lock:
        _by_name[entry.name] = entry
    return entry


def registered() -> tuple[KernelOp, ...]:
    """The operators registered so far in this process."""
    return tuple(_by_name.values())


# ---------------------------------------------------------------------------------------------- tracing


def tracing() -> bool:
    """Whether a kernel call now is being traced rather than run: Dynamo compiling, or a dispatch mode
    (fake tensors, functionalisation, `make_fx`, user modes) active."""
    return torch.compiler.is_dynamo_compiling() or torch._C._len_torch_dispatch_stack() > 0


def _constant_result(fn: Any) -> Any:
    """`torch._dynamo.assume_constant_result` without importing Dynamo in processes that never compile:
    Dynamo calls `fn` at trace time and puts its (constant) result into the program."""
    fn._dynamo_marked_constant = True
    return fn


@_constant_result
def _param_names(obj: Any) -> tuple[tuple[str, ...], frozenset[str]]:
    """The parameter names a call of `obj` binds positionally, and which of them are const parameters.
    Objects other than kernel objects (`intent.autograd`) provide `_op_parameters()`."""
    custom = getattr(obj, "_op_parameters", None)
    if custom is not None:
        return custom()
    sig = obj.signature
    return tuple(p.name for p in sig.params), frozenset(p.name for p in sig.consts)


def _stand_in(kind: str, payload: Any) -> Any:
    if kind == "tensor":
        return torch.empty(0, dtype=payload[0], device="meta")
    return 0 if kind == "scalar" else payload  # "none" (an absent optional tensor) and "const": the value


def stand_ins(positional: tuple[Any, ...], keywords: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Arguments standing for a described call: empty meta tensors of the dtypes, consts by value. They
    are made with any tracing mode set aside, so that no trace records them."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        return tuple(_stand_in(*d) for d in positional), {n: _stand_in(k, v) for n, k, v in keywords}


@_constant_result
def _resolve(obj: Any, positional: tuple[Any, ...], keywords: tuple[Any, ...]
             ) -> tuple[str, tuple[str, ...], tuple[int, ...] | None]:
    """The operator for a call described by (kind, payload) pairs: (operator name, its inputs, which of its
    results the call returns (None: all, as they are)).

    Runs as plain Python even under Dynamo, so it may build KIR, emit and register. Tensors are
    described by dtype only, scalars not at all (they never specialise), consts by value.
    Objects other than kernel objects provide `_op_resolve(positional, keywords)`.
    """
    custom = getattr(obj, "_op_resolve", None)
    if custom is not None:
        return custom(positional, keywords)
    args, kwargs = stand_ins(positional, keywords)
    kernel, bound = obj._prepare(args, kwargs)
    entry = op_for(kernel, bound, autotune=obj.autotune, device=call_device(positional, keywords))
    return entry.name, entry.schema.inputs, None


def call_device(positional: tuple[Any, ...], keywords: tuple[Any, ...]) -> torch.device | None:
    """The device of the first tensor of a described call."""
    for kind, payload in (*positional, *((k, v) for _, k, v in keywords)):
        if kind == "tensor":
            return payload[1]
    return None


def _call_descriptor(name: str | None, value: Any, consts: frozenset[str]) -> tuple[str, Any]:
    if isinstance(value, torch.Tensor):
        return "tensor", (value.dtype, value.device)
    if value is None:  # an optional tensor left out: its own specialisation
        return "none", None
    if name is not None and name in consts:
        return "const", value
    return "scalar", None


def call(obj: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """`obj(*args, **kwargs)` as a call of its operator (what `KernelObject.__call__` does when traced).

    Written so that Dynamo can trace it: only attribute reads, tuples and dicts here; everything that
    builds or registers happens in `_resolve`, whose result Dynamo takes as a constant.
    """
    names, consts = _param_names(obj)
    positional = tuple(_call_descriptor(names[i] if i < len(names) else None, a, consts) for i, a in enumerate(args))
    keywords = tuple((k, *_call_descriptor(k, v, consts)) for k, v in kwargs.items())
    name, inputs, picked = _resolve(obj, positional, keywords)
    bound = dict(zip(names, args))
    bound.update(kwargs)
    result = getattr(getattr(torch.ops, NAMESPACE), name).default(*[bound[n] for n in inputs])
    if picked is None:
        return result
    if len(picked) == 1:
        return result[picked[0]] if isinstance(result, tuple) else result
    return tuple(result[i] for i in picked)
