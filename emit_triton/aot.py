"""`kirc build`: compile chosen specialisations of kernels into a directory that `intent.load` runs
without the compiler ("build-time language, runtime artifact").

Per kernel and dtype assignment (a *dtype signature*) the directory holds the generated Triton
source, and per distinct specialisation that the given shape bindings reach (constexpr values such
as tile sizes, argument types, alignment) one cubin with its PTX and Triton's metadata. The cubins
are *portable within their constexpr values*: Triton's divisibility-by-16 assumptions about integer
arguments are dropped, so one cubin serves every size that gives the same tile sizes (pointer
alignment, which every torch allocation has, and unit strides stay specialised; a call that lacks
them is compiled from the stored source). `registry.json` holds, per entry, the parameters, the
refinements, the ABI, grid, constexpr and operation-count expressions (`intent.runtime.expr`), the
sha256 of each file and the entry's own hash (`intent.runtime.artifacts.entry_hash`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from intent.runtime.artifacts import FORMAT, REGISTRY, entry_hash, spec_json
from intent.runtime.checks import CHECK_TOKEN
from kir.core import Kernel, RefType
from kir.dtypes import DType
from kir.errors import IntentError, LaunchError
from kir.solver import default_lower_bounds

from . import launcher, targets
from .compile import intent_version, triton_version
from .exprs import encode

DEFAULT_EXTENT = 1024  # a shape symbol's value when the build is given none


def build(kernels: Sequence[tuple[str, Any]], out: str | Path, *, dtypes: Mapping[str, Sequence[DType]],
          shapes: Mapping[str, Sequence[int]], consts: Mapping[str, Sequence[object]] | None = None, arch: int = 90,
          log: Callable[[str], None] = print) -> Path:
    """Compile `kernels` ((name, kernel object or kir Kernel) pairs) into `out`; returns the registry path.

    `dtypes` gives the choices per dtype variable (a variable not named takes all its choices);
    `shapes` the values per shape symbol (all combinations are built; a symbol not named takes
    `DEFAULT_EXTENT`); `consts` the values per `intent.const` parameter (one not named takes its
    default). An existing registry in `out` keeps its other entries."""
    consts = dict(consts or {})
    if arch not in targets.AOT_ARCHES:
        raise LaunchError(f"--arch: expected one of {', '.join(map(str, targets.AOT_ARCHES))}, got {arch}")
    variables = {v.name for _, obj in kernels
                 for v in (obj.dtype_vars if isinstance(obj, Kernel) else obj.signature.dtype_vars)}
    for name in dtypes:
        if name not in variables:
            have = ", ".join(sorted(variables)) or "none"
            raise LaunchError(f"--dtype {name}: no kernel built has a dtype variable {name} (dtype variables: {have})")
    const_params = {p.name for _, obj in kernels if not isinstance(obj, Kernel) for p in obj.signature.consts}
    for name in consts:
        if name not in const_params:
            raise LaunchError(f"--const {name}: no kernel built has a compile-time parameter {name} (intent.const "
                              f"parameters: {', '.join(sorted(const_params)) or 'none'})")
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    registry = _existing(root)
    for name, obj in kernels:
        for kernel, values in _specialisations(obj, dtypes, consts):
            entry = _build_entry(root, name, kernel, shapes, arch, log, values, _call_params(obj))
            kept = [e for e in registry["kernels"].get(name, []) if e.get("signature") != entry["signature"]]
            registry["kernels"][name] = kept + [entry]
    path = root / REGISTRY
    path.write_text(json.dumps(registry, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _existing(root: Path) -> dict[str, Any]:
    fresh = {"format": FORMAT, "intent": intent_version(), "triton": triton_version(), "kernels": {}}
    path = root / REGISTRY
    if not path.is_file():
        return fresh
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return fresh
    if data.get("format") != FORMAT or data.get("triton") != triton_version():
        return fresh  # entries for another Triton would not launch with this one's runtime
    return data


def _call_params(obj: Any) -> list[dict[str, Any]]:
    """The parameters a call names, in order: the runtime ones and the compile-time (`intent.const`) ones."""
    if isinstance(obj, Kernel):
        return [{"name": p.name} for p in obj.params]
    from kir.frontend.signature import NO_DEFAULT

    return [{"name": p.name, **({"const": p.spec.kind.__name__,  # type: ignore[union-attr]
                                 "default": None if p.default is NO_DEFAULT else p.default,
                                 "has_default": p.default is not NO_DEFAULT} if p.is_const else {})}
            for p in obj.signature.params]


def _specialisations(obj: Any, dtypes: Mapping[str, Sequence[DType]], consts: Mapping[str, Sequence[object]]
                     ) -> list[tuple[Kernel, dict[str, object]]]:
    """Every (specialised kernel, its const values) the build makes of `obj`."""
    const_choices: list[tuple[str, list[object]]] = []
    if not isinstance(obj, Kernel):
        from kir.frontend.signature import NO_DEFAULT, const_fits

        for p in obj.signature.consts:
            kind = p.spec.kind  # type: ignore[union-attr]
            if p.name in consts:
                for v in consts[p.name]:
                    if not const_fits(v, kind):
                        raise LaunchError(f"--const {p.name}={v!r}: kernel {obj.__name__} expects a compile-time "
                                          f"{kind.__name__} (intent.const[{kind.__name__}])")
                const_choices.append((p.name, list(consts[p.name])))
            elif p.default is NO_DEFAULT:
                raise LaunchError(f"kernel {obj.__name__} has the compile-time parameter {p.name} "
                                  f"(intent.const[{kind.__name__}]) without a default: give --const {p.name}=...")
            else:
                const_choices.append((p.name, [p.default]))
    generic = obj if isinstance(obj, Kernel) else \
        obj.specialize_with({}, {n: vs[0] for n, vs in const_choices}) if const_choices else obj.kir
    variables = {v.name: v for v in generic.dtype_vars}
    names = list(variables)
    choices = [list(dtypes.get(n, variables[n].choices)) for n in names]
    for n, picked in zip(names, choices):
        for dt in picked:
            if dt not in variables[n].choices:
                have = ", ".join(map(str, variables[n].choices))
                raise LaunchError(f"dtype variable {n} of kernel {generic.name} is one of {have}, not {dt}")
    out = []
    for combo in itertools.product(*choices):
        assignment = dict(zip(names, combo))
        for values in itertools.product(*(vs for _, vs in const_choices)):
            chosen = dict(zip((n for n, _ in const_choices), values))
            if isinstance(obj, Kernel):
                from kir.cli import specialize_dtypes

                out.append((specialize_dtypes(obj, assignment) if assignment else obj, chosen))
            else:
                out.append((obj.specialize_with(assignment, chosen), chosen))
    return out


def _bindings(kernel: Kernel, shapes: Mapping[str, Sequence[int]]) -> list[dict[str, int]]:
    values = [list(shapes.get(s, [DEFAULT_EXTENT])) for s in kernel.symbols]
    return [dict(zip(kernel.symbols, combo)) for combo in itertools.product(*values)]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(root: Path, rel: str, data: bytes) -> dict[str, str]:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"file": rel, "sha256": _sha(data)}


def signature_of(kernel: Kernel, consts: Mapping[str, object] | None = None) -> str:
    """The signature of a specialised kernel: `name:dtype` per parameter, in order, then `name=value` per
    compile-time parameter."""
    return ",".join([f"{p.name}:{p.type.dtype}" for p in kernel.params] +
                    [f"{n}={v!r}" for n, v in (consts or {}).items()])


def _torch_args(kernel: Kernel, binding: Mapping[str, int]) -> dict[str, Any]:
    from kir.inputs import random_inputs, torch_argument

    return {p.name: torch_argument(p.type.dtype, value)  # type: ignore[arg-type]
            for p, value in zip(kernel.params, random_inputs(kernel, binding).values())}


def _build_entry(root: Path, name: str, kernel: Kernel, shapes: Mapping[str, Sequence[int]], arch: int,
                 log: Callable[[str], None], consts: Mapping[str, object], call_params: list[dict[str, Any]]
                 ) -> dict[str, Any]:
    signature = signature_of(kernel, consts)
    slug = hashlib.sha256(signature.encode()).hexdigest()[:12]
    folder = f"{name}/{slug}"
    entry: dict[str, Any] | None = None
    variants: dict[str, dict[str, Any]] = {}
    for binding in _bindings(kernel, shapes):
        try:
            args = _torch_args(kernel, binding)
        except LaunchError as exc:
            defaulted = [s for s in kernel.symbols if s not in shapes]
            hint = f" (symbols without --shape take {DEFAULT_EXTENT}: give --shape {defaulted[0]}=...)" \
                if defaulted else ""
            raise LaunchError(f"kernel {name}: {exc}{hint}") from None
        plan = launcher.plan_launch(kernel, args, materialise=False)
        if entry is None:
            entry = _describe(kernel, plan.emitted, signature)
            entry["consts"], entry["call_params"] = dict(consts), call_params
            entry["source"] = _write(root, f"{folder}/kernel.py", plan.emitted.source.encode("utf-8"))
        fn = plan.function(targets.Mode.COMPILED)
        entry["arg_names"] = list(fn.arg_names)
        assert plan.owner is not None
        arts = targets.compile_ahead_of_time(plan.emitted, fn, plan.key, arch, plan.positional, plan.keywords,
                                             owner=plan.owner, portable=True)
        sig, constexprs, attrs = arts.raw
        spec = spec_json(sig, constexprs, attrs)
        key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]
        if key in variants:
            continue
        if arts.cubin is None or arts.metadata is None:
            raise IntentError(f"Triton produced no cubin for kernel {name} on sm_{arch}")
        base = f"{folder}/sm{arch}-{key[:16]}"
        values = {c.name: plan.keywords[c.name] for c in plan.emitted.constexprs}
        variants[key] = {"arch": arch, "key": key, **spec, "constexpr_values": values,
                         "cubin": _write(root, base + ".cubin", arts.cubin),
                         "ptx": _write(root, base + ".ptx", arts.ptx.encode("utf-8")),
                         "metadata": _write(root, base + ".json", json.dumps(arts.metadata).encode("utf-8"))}
        shown = ", ".join(f"{k}={v}" for k, v in binding.items())
        log(f"{name} ({signature}) sm_{arch}: {', '.join(f'{k}={v}' for k, v in values.items()) or 'no constexprs'}"
            f"  [from {shown or 'no shapes'}]")
    assert entry is not None
    entry["variants"] = sorted(variants.values(), key=lambda v: v["key"])
    entry["hash"] = entry_hash(entry)
    return entry


def _describe(kernel: Kernel, emitted: Any, signature: str) -> dict[str, Any]:
    """The registry entry of a specialised kernel, without its files and variants."""
    params = []
    for p in kernel.params:
        t = p.type
        if isinstance(t, RefType):
            params.append({"name": p.name, "kind": "tensor", "role": t.role.value, "dtype": str(t.dtype),
                           "shape": [encode(d) for d in t.shape], "type": f"{t.dtype}[{', '.join(map(str, t.shape))}]"})
        else:
            params.append({"name": p.name, "kind": "scalar", "role": "in", "dtype": str(t.dtype),
                           "type": f"{t.dtype} scalar"})
    preds = [("bound", q) for q in default_lower_bounds(kernel.symbols, kernel.requires)] + \
        [("requires", q) for q in kernel.requires] + [("axiom", q) for q in kernel.axioms]
    options = dict(launcher.COMPILE_OPTIONS, **(launcher.CHECKED_OPTIONS if kernel.checks else {}))

    def arg(a: Any) -> dict[str, Any]:
        return {"kind": a.kind.value, "name": a.name, "param": a.param, "axis": a.axis,
                "dtype": None if a.dtype is None else str(a.dtype),
                "expr": None if a.expr is None else encode(a.expr), "fill": a.fill}

    abi = {"name": emitted.name, "args": [arg(a) for a in emitted.args],
           "constexprs": [{"name": c.name, "expr": encode(c.expr)} for c in emitted.constexprs],
           "grid": encode(emitted.grid), "num_warps": encode(emitted.num_warps),
           "num_stages": encode(emitted.num_stages), "index64_flag": emitted.index64_flag,
           "device_flag": emitted.device_flag}
    from .emit_access import CHECK_MESSAGES

    tokens = sorted(set(CHECK_TOKEN.findall(emitted.source)))
    return {"kernel": kernel.name, "signature": signature,
            "check_messages": {t: CHECK_MESSAGES[t] for t in tokens if t in CHECK_MESSAGES},
            "symbols": list(kernel.symbols), "params": params,
            "dtypes": {p.name: str(p.type.dtype) for p in kernel.params},
            "requires": [{"word": w, "text": str(q), "expr": encode(q)} for w, q in preds],
            "abi": abi, "options": options, "counts": {k: encode(v) for k, v in emitted.counts}}
