"""`intent.load(DIR)`: kernels prebuilt by `kirc build`, launched from their registry without the compiler.

A build directory holds `registry.json` and, per kernel and dtype signature, the generated Triton
source and one cubin (with its PTX and Triton's metadata) per compiled specialisation. The registry
records everything a launch needs as data: the parameters and their symbolic shapes, the `requires`
predicates (with the symbols' lower bounds and the kernel's axioms), the ABI, the grid, the
constexprs and the operation counts, all in the expression format of `intent.runtime.expr`.

A loaded kernel checks its arguments as the compiler's launcher does (dtypes, ranks, devices,
shape-symbol consistency, refinements, scalar ranges, overlap of written memory), with errors that
name the parameter, then launches: on CUDA the stored cubin of the matching specialisation (Triton's
runtime, no compile), else Triton's JIT over the stored source; on CPU the stored source under
Triton's interpreter. Every registry entry carries a sha256 of its own content, which includes the
sha256 of every file it names: an entry or file that does not match is refused, never executed.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import IntentError, LaunchError
from . import expr as E
from . import profiling as profile_mod
from .checks import (
    byte_range,
    check_overlap,
    check_scalar,
    check_tensor,
    common_device,
    contiguous_strides,
    device_check_failure,
    settle,
    solve_affine,
)
from .index_width import TensorExtent, choose_index_width
from .safety import UnsafeModule, check_generated

FORMAT = "intent-aot/1"
REGISTRY = "registry.json"
MAX_GRID = 2**31 - 1
MAX_GEOMETRIES = 256


def entry_hash(entry: Mapping[str, Any]) -> str:
    """The sha256 an entry records of itself: its canonical JSON without the `hash` field."""
    body = {k: v for k, v in entry.items() if k != "hash"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def load(directory: str | Path, *, jit_fallback: bool = True) -> Prebuilt:
    """The kernels of a `kirc build` directory, as callables: `lib = intent.load(DIR); lib.softmax(x)`.

    `jit_fallback=False` refuses (with a `LaunchError`) a CUDA launch whose specialisation has no
    prebuilt cubin instead of compiling the stored source with Triton's JIT."""
    root = Path(directory)
    path = root / REGISTRY
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IntentError(f"{root} is not a kernel build directory: it has no {REGISTRY} (make one with kirc build)") \
            from None
    except (OSError, ValueError) as exc:
        raise IntentError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("kernels"), dict):
        raise IntentError(f"{path} is not a registry of format {FORMAT} (found {data.get('format')!r}); rebuild it "
                          f"with this version's kirc build" if isinstance(data, dict) else f"{path} is not a registry")
    kernels = {name: PrebuiltKernel(name, [Entry(root, name, e, jit_fallback, data.get("triton")) for e in entries])
               for name, entries in data["kernels"].items()}
    return Prebuilt(root, data.get("triton"), kernels)


class Prebuilt:
    """The kernels of one build directory, by name (attributes, `lib["name"]`, iteration)."""

    def __init__(self, root: Path, triton: str | None, kernels: dict[str, PrebuiltKernel]) -> None:
        self.root = root
        self.triton_version = triton
        self._kernels = kernels
        for name, k in kernels.items():
            if name.isidentifier() and not hasattr(type(self), name):
                setattr(self, name, k)

    def __getitem__(self, name: str) -> PrebuiltKernel:
        try:
            return self._kernels[name]
        except KeyError:
            raise KeyError(f"{self.root} has no kernel {name} (kernels: {', '.join(self._kernels) or 'none'})") \
                from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def __repr__(self) -> str:
        return f"<intent prebuilt kernels from {self.root}: {', '.join(self._kernels)}>"


class PrebuiltKernel:
    """One kernel of a build directory: call it like the `@intent.kernel` it was built from."""

    def __init__(self, name: str, entries: list[Entry]) -> None:
        self.__name__ = name
        self.entries = entries
        first = entries[0].data if entries else {}
        self._call = first.get("call_params") or [{"name": p["name"]} for p in first.get("params", [])]
        self.params = [p["name"] for p in self._call]
        self._consts = {p["name"]: p for p in self._call if "const" in p}

    @property
    def signatures(self) -> list[str]:
        return [e.signature for e in self.entries]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) > len(self.params):
            raise LaunchError(f"{self.__name__}() takes {len(self.params)} arguments ({', '.join(self.params)}) but "
                              f"{len(args)} were given")
        given = dict(zip(self.params, args))
        for k, v in kwargs.items():
            if k not in self.params:
                raise LaunchError(f"unexpected argument {k}: kernel {self.__name__} has no parameter {k} "
                                  f"(parameters: {', '.join(self.params)})")
            if k in given:
                raise LaunchError(f"{self.__name__}() got multiple values for argument '{k}'")
            given[k] = v
        consts = self._const_values(given)
        runtime = {k: v for k, v in given.items() if k not in self._consts} if self._consts else given
        return self._entry_for(runtime, consts).launch(runtime)

    def _const_values(self, given: Mapping[str, Any]) -> dict[str, Any]:
        values = {}
        for name, p in self._consts.items():
            if name in given:
                values[name] = given[name]
            elif p.get("has_default"):
                values[name] = p["default"]
            else:
                raise LaunchError(f"missing argument {name} (intent.const[{p['const']}])")
        return values

    def _entry_for(self, given: Mapping[str, Any], consts: Mapping[str, Any]) -> Entry:
        if len(self.entries) == 1 and not consts:
            return self.entries[0]
        for e in self.entries:
            if e.accepts_dtypes(given) and _same_consts(e.data.get("consts", {}), consts):
                return e
        seen = [f"{n}:{_dtype_name(v)}" for n, v in given.items() if _dtype_name(v) is not None]
        seen += [f"{n}={v!r}" for n, v in consts.items()]
        shown = ", ".join(seen) or "these arguments"
        raise LaunchError(f"kernel {self.__name__}: no prebuilt specialisation for {shown} "
                          f"(built: {'; '.join(self.signatures)})")

    def __repr__(self) -> str:
        return f"<intent prebuilt kernel {self.__name__} ({'; '.join(self.signatures)})>"


def _same_consts(built: Mapping[str, Any], given: Mapping[str, Any]) -> bool:
    """Const values match as `intent.const` keys them: equal values of the same kind (True is not 1)."""
    return built.keys() == given.keys() and all(
        given[k] == v and isinstance(given[k], bool) == isinstance(v, bool) for k, v in built.items())


# ---------------------------------------------------------------------------------------------- dtypes

_TORCH_DTYPES = {"bool": "pred", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
                 "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "f16", "bfloat16": "bf16",
                 "float32": "f32", "float64": "f64", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
# i4 tensors are int8 or uint8 tensors of packed bytes (kir.dtypes.I4_PACKING, checked by checks.check_tensor): the
# last axis holds two elements a byte; an omitted i4 output is allocated as uint8


_DTYPE_NAMES: dict[Any, str] = {}  # torch dtype -> Intent's name, filled when torch is first needed


def _dtype_name(value: Any) -> str | None:
    dt = getattr(value, "dtype", None)
    if dt is None or type(value).__module__.split(".")[0] != "torch":
        return None
    found = _DTYPE_NAMES.get(dt)
    if found is None:
        found = _DTYPE_NAMES[dt] = _TORCH_DTYPES.get(str(dt).removeprefix("torch."), str(dt))
    return found


def _torch_dtype(name: str) -> Any:
    import torch

    if name == "i4":
        return torch.uint8
    for t, n in _TORCH_DTYPES.items():
        if n == name:
            return getattr(torch, t)
    raise IntentError(f"unknown dtype {name} in a registry")


# ---------------------------------------------------------------------------------------------- entries


@dataclass
class _Geometry:
    """What follows from the shapes, strides and integer scalars of a call (memoised per entry)."""

    env: dict[str, int]
    out_shapes: dict[str, tuple[int, ...]]
    workspaces: dict[str, int]
    constexprs: dict[str, Any]
    grid: int
    keywords: dict[str, Any]
    info: profile_mod.LaunchInfo | None = None  # what a profile records of launches of this geometry
    # (arch, 16-byte alignment of each tensor argument) -> the prebuilt variant for it (None: none covers)
    variants: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    # (name, name, bytes the first reaches, bytes the second reaches): given tensors of which one is written
    pairs: tuple[tuple[str, str, int, int], ...] = ()
    out_dtypes: dict[str, Any] = field(default_factory=dict)  # omitted outputs' torch dtypes
    template: list[Any] | None = None  # runtime arguments fixed by the geometry (`Entry._template`)
    slots: tuple[tuple[int, str, str, Any], ...] = ()  # (position, kind, name, detail) filled per call


@dataclass
class _Loaded:
    functions: dict[str, Any] = field(default_factory=dict)  # "interpreted" | "compiled" -> jit function
    compiled: dict[str, Any] = field(default_factory=dict)  # variant key -> Triton CompiledKernel
    warned: set[str] = field(default_factory=set)


class Entry:
    """One kernel's dtype signature in a registry."""

    def __init__(self, root: Path, kernel: str, data: Mapping[str, Any], jit_fallback: bool,
                 triton_version: str | None = None) -> None:
        self.root, self.kernel, self.data, self.jit_fallback = root, kernel, data, jit_fallback
        self.triton_version = triton_version  # the Triton the cubins were compiled and described by
        self.signature = str(data.get("signature", "?"))
        self.problem: str | None = None
        recorded, computed = data.get("hash"), entry_hash(data)
        if recorded != computed:
            self.problem = f"its registry entry does not match its hash (recorded {recorded}, computed {computed})"
        else:
            try:
                self._check_shape()
            except (KeyError, TypeError, ValueError) as exc:
                self.problem = f"its registry entry is malformed: {exc}"
        self._geometries: dict[tuple[Any, ...], _Geometry] = {}
        self._roles = [(p["name"], p["role"]) for p in data.get("params", [])] if self.problem is None else []
        self._loaded = _Loaded()
        self._lock = threading.Lock()

    def _check_shape(self) -> None:
        d = self.data
        for p in d["params"]:
            for k, s in enumerate(p.get("shape", [])):
                E.validate(s, f"shape of {p['name']} axis {k}")
        for r in d["requires"]:
            E.validate(r["expr"], r["text"])
        abi = d["abi"]
        for x in [a.get("expr") for a in abi["args"]] + [c["expr"] for c in abi["constexprs"]] + \
                [abi["grid"], abi["num_warps"], abi["num_stages"]] + list(d.get("counts", {}).values()):
            if x is not None and not isinstance(x, bool):
                E.validate(x, "the ABI")

    def describe(self) -> str:
        return f"prebuilt kernel {self.kernel} ({self.signature}) in {self.root}"

    def accepts_dtypes(self, given: Mapping[str, Any]) -> bool:
        for p in self.data["params"]:
            if p["kind"] == "tensor" and p["name"] in given:
                found = _dtype_name(given[p["name"]])
                if found is not None and found != p["dtype"]:  # not a tensor: the argument check reports it
                    return False
        return True

    # ------------------------------------------------------------------------------------------ checks
    def _refuse(self) -> None:
        if self.problem is not None:
            raise IntentError(f"{self.describe()}: {self.problem}; refusing to run it (rebuild the directory with "
                              f"kirc build)")

    def _bind(self, given: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], Any]:
        tensors: dict[str, Any] = {}
        scalars: dict[str, Any] = {}
        for p in self.data["params"]:
            name, text = p["name"], p["type"]
            if name not in given:
                if p["kind"] == "tensor" and p["role"] == "out":
                    continue
                what = f"a tensor ({text})" if p["kind"] == "tensor" else f"a {p['dtype']} scalar"
                raise LaunchError(f"missing argument {name}: expected {what}")
            value = given[name]
            if p["kind"] == "scalar":
                scalars[name] = check_scalar(name, p["dtype"], value)
                continue
            tensors[name] = check_tensor(name, text, p["dtype"], len(p["shape"]), value, _dtype_name)
        device = common_device(tensors)
        return tensors, scalars, device

    def _geometry(self, tensors: Mapping[str, Any], scalars: Mapping[str, Any], on_gpu: bool, sms: int
                  ) -> _Geometry:
        d = self.data
        env: dict[str, int] = {}
        origin: dict[str, str] = {}
        pending: list[tuple[str, int, Any, int]] = []
        for p in d["params"]:
            t = tensors.get(p["name"])
            if t is None:
                continue
            for axis, (dim, extent) in enumerate(zip(p["shape"], _logical_shape(p, t))):
                if isinstance(dim, int):
                    if extent != dim:
                        raise LaunchError(f"parameter {p['name']}: axis {axis} has extent {extent} but the kernel "
                                          f"expects {dim}")
                elif isinstance(dim, str):
                    if dim not in env:
                        env[dim], origin[dim] = extent, f"parameter {p['name']}"
                    elif env[dim] != extent:
                        raise LaunchError(f"parameter {p['name']}: axis {axis} has extent {extent} but {dim} = "
                                          f"{env[dim]} from {origin[dim]}")
                else:
                    pending.append((p["name"], axis, dim, extent))
        _solve_pending(pending, env, origin)
        for p in d["params"]:
            if p["kind"] == "tensor" and p["name"] not in tensors:
                unbound = sorted({n for s in p["shape"] for n in E.names(s)} - env.keys())
                if unbound:
                    verb = "is" if len(unbound) == 1 else "are"
                    raise LaunchError(f"out parameter {p['name']} was omitted and its shape {p['type']} cannot be "
                                      f"inferred: {', '.join(unbound)} {verb} not bound by any input")
        for param, axis, dim, extent in pending:
            unbound = sorted(set(E.names(dim)) - env.keys())
            if unbound:
                raise LaunchError(f"parameter {param}: axis {axis} has extent {extent} = {E.render(dim)}, which does "
                                  f"not determine {', '.join(unbound)}; pass a parameter whose shape gives it directly")
        for s in d["symbols"]:
            if s not in env:
                raise LaunchError(f"shape symbol {s} of kernel {self.kernel} is not bound by any argument")
        for r in d["requires"]:
            _check_pred(r, env, origin)
        out_shapes: dict[str, tuple[int, ...]] = {}
        for p in d["params"]:
            if p["kind"] == "tensor" and p["name"] not in tensors:
                shape = tuple(E.evaluate(s, env) for s in p["shape"])
                if any(e < 0 for e in shape):
                    raise LaunchError(f"out parameter {p['name']} was omitted and its shape {p['type']} evaluates "
                                      f"to {shape}, which has a negative extent")
                if p["dtype"] == "i4":  # allocated as its packed bytes
                    if shape[-1] % 2:
                        raise LaunchError(f"out parameter {p['name']} was omitted and its shape {p['type']} evaluates "
                                          f"to {shape}: i4 packs two elements per byte, so the last extent must be "
                                          f"even")
                    shape = (*shape[:-1], shape[-1] // 2)
                out_shapes[p["name"]] = shape
        for name, value in scalars.items():
            if isinstance(value, int) and not isinstance(value, bool) and name not in env:
                env[name] = value
        env[E.DEVICE_SMS] = sms
        return self._plan(env, tensors, out_shapes, on_gpu)

    def _plan(self, env: dict[str, int], tensors: Mapping[str, Any], out_shapes: dict[str, tuple[int, ...]],
              on_gpu: bool) -> _Geometry:
        abi = self.data["abi"]
        what = ""
        try:
            values = dict(env)
            workspaces: dict[str, int] = {}
            extents = [TensorExtent(n, tuple(t.shape), tuple(t.stride())) for n, t in tensors.items()]
            extents += [TensorExtent(n, s, contiguous_strides(s)) for n, s in out_shapes.items()]
            for a in abi["args"]:
                if a["kind"] == "symbol":
                    what = f"ABI argument {a['name']}"
                    values[a["name"]] = E.evaluate(a["expr"], env)
                elif a["kind"] == "workspace":
                    what = f"the size of workspace {a['name']}"
                    workspaces[a["name"]] = values[a["name"]] = E.evaluate(a["expr"], env)
                    extents.append(TensorExtent(a["name"], (workspaces[a["name"]],), (1,)))
            constexprs: dict[str, Any] = {}
            for c in abi["constexprs"]:
                what = f"constexpr {c['name']}"
                constexprs[c["name"]] = E.evaluate(c["expr"], env)
            what = "the grid"
            grid = E.evaluate(abi["grid"], env)
            what = "num_warps"
            keywords: dict[str, Any] = dict(constexprs)
            ints = {k: v for k, v in constexprs.items() if isinstance(v, int) and not isinstance(v, bool)}
            values.update(ints)
            width = choose_index_width(extents, values, grid, tile=max(ints.values(), default=1))
            if abi.get("index64_flag"):
                keywords[abi["index64_flag"]] = width.index64
            if abi.get("device_flag"):  # generated code that differs between the device and the interpreter
                keywords[abi["device_flag"]] = on_gpu
            keywords["num_warps"] = E.evaluate(abi["num_warps"], env)
            what = "num_stages"
            keywords["num_stages"] = E.evaluate(abi["num_stages"], env)
        except (KeyError, ZeroDivisionError) as exc:
            raise IntentError(f"{self.describe()}: {what} cannot be evaluated: {exc}") from None
        if grid > MAX_GRID:
            raise LaunchError(f"kernel {self.kernel}: these shapes need {grid} programs, more than the {MAX_GRID} one "
                              f"launch may have")
        keywords.update(self.data.get("options", {}))
        return _Geometry(env, out_shapes, workspaces, constexprs, grid, keywords)

    # ------------------------------------------------------------------------------------------ launch
    def launch(self, given: Mapping[str, Any]) -> Any:
        device, on_gpu, geometry, positional, outputs = self.prepare(given)
        if geometry.grid > 0:
            self._run(device, on_gpu, geometry, positional)
        made = [outputs[p["name"]] for p in self.data["params"] if p["name"] in outputs]
        if not made:
            return None
        return made[0] if len(made) == 1 else tuple(made)

    def prepare(self, given: Mapping[str, Any]) -> tuple[Any, bool, _Geometry, list[Any], dict[str, Any]]:
        """Check `given` and compute a launch: (device, on a GPU, geometry, runtime arguments, allocated outputs)."""
        import torch

        self._refuse()
        tensors, scalars, device = self._bind(given)
        key = tuple((n, tuple(t.shape), t.stride()) for n, t in tensors.items()) + \
            tuple((n, v) for n, v in scalars.items() if isinstance(v, int))
        on_gpu = device.type == "cuda" and not _interpreting()
        geometry = self._geometries.get((key, on_gpu))
        if geometry is None:
            geometry = self._geometry(tensors, scalars, on_gpu, _multiprocessors(device) if on_gpu else 0)
            check_overlap(self._roles, tensors)  # self-overlap follows from the geometry; pairs are checked per call
            geometry.pairs = _written_pairs(self._roles, tensors)
            geometry.out_dtypes = {n: _torch_dtype(self._param(n)["dtype"]) for n in geometry.out_shapes}
            if len(self._geometries) >= MAX_GEOMETRIES:
                self._geometries.clear()
            self._geometries[(key, on_gpu)] = geometry
        for a, b, reach_a, reach_b in geometry.pairs:  # memory a written parameter shares with another
            start_a, start_b = tensors[a].data_ptr(), tensors[b].data_ptr()
            if start_a < start_b + reach_b and start_b < start_a + reach_a:
                check_overlap(self._roles, tensors)  # raises the error naming both (byte ranges intersect)
        outputs = {n: torch.empty(shape, dtype=geometry.out_dtypes[n], device=device)
                   for n, shape in geometry.out_shapes.items()}
        if geometry.template is None:
            geometry.template = self._template(tensors, outputs, geometry)
        positional = list(geometry.template)
        for position, kind, name, extra in geometry.slots:  # what varies between calls of one geometry
            if kind == "tensor":
                positional[position] = tensors[name] if name in tensors else outputs[name]
            elif kind == "scalar":
                positional[position] = _scalar_argument(extra, scalars[name])
            else:
                count, fill, dtype = extra
                positional[position] = torch.empty(count, dtype=dtype, device=device) if fill is None \
                    else torch.full((count,), fill, dtype=dtype, device=device)
        return device, on_gpu, geometry, positional, outputs

    def _template(self, tensors: Mapping[str, Any], outputs: Mapping[str, Any], geometry: _Geometry) -> list[Any]:
        """The runtime arguments that follow from the geometry (strides, symbols), with the positions of
        those that vary between calls (`geometry.slots`)."""
        template: list[Any] = []
        slots: list[tuple[int, str, str, Any]] = []
        for position, a in enumerate(self.data["abi"]["args"]):
            kind = a["kind"]
            if kind == "stride":
                t = tensors[a["param"]] if a["param"] in tensors else outputs[a["param"]]
                template.append(t.stride(a["axis"]))
            elif kind == "symbol":
                template.append(E.evaluate(a["expr"], geometry.env))
            else:
                template.append(None)
                extra = a["dtype"] if kind == "scalar" else \
                    (geometry.workspaces[a["name"]], a.get("fill"), _torch_dtype(a["dtype"])) if kind == "workspace" \
                    else None
                slots.append((position, kind, a["param"] if kind != "workspace" else a["name"], extra))
        geometry.slots = tuple(slots)
        return template

    def _param(self, name: str) -> Mapping[str, Any]:
        return next(p for p in self.data["params"] if p["name"] == name)

    def _run(self, device: Any, on_gpu: bool, geometry: _Geometry, positional: list[Any]) -> None:
        try:
            self._launch(device, on_gpu, geometry, positional)
        except Exception as exc:
            failed = device_check_failure(exc, self.data.get("check_messages", {})) \
                if geometry.keywords.get("debug") else None
            if failed is None:
                raise
            raise IntentError(failed) from None

    def _launch(self, device: Any, on_gpu: bool, geometry: _Geometry, positional: list[Any]) -> None:
        from . import triton_adapter as adapter

        if not on_gpu:
            fn = self._function(adapter.Mode.INTERPRETED)
            _execute(self, geometry, device, "interpreter",
                     lambda: adapter.run_interpreted(fn, geometry.grid, positional, geometry.keywords))
            return
        import torch

        fn = self._function(adapter.Mode.COMPILED)
        compiled, label = self._variant(fn, device, positional, geometry)
        with torch.cuda.device(device):
            if compiled is not None:
                args = positional + [geometry.keywords[n] for n in self.data["arg_names"][len(positional):]]
                _execute(self, geometry, device, label, lambda: compiled[(geometry.grid, 1, 1)](*args))
            else:
                _execute(self, geometry, device, label, lambda: fn[(geometry.grid,)](*positional, **geometry.keywords))

    def info(self, geometry: _Geometry) -> profile_mod.LaunchInfo:
        """What a profile records of a launch of this entry with `geometry` (made once per geometry)."""
        if geometry.info is None:
            ints = {k: int(v) for k, v in geometry.constexprs.items() if isinstance(v, int)}
            geometry.info = profile_mod.LaunchInfo(
                self.kernel, profile_mod.specialisation_text(self.data["dtypes"], geometry.constexprs),
                self.data.get("counts", {}).items(), {**geometry.env, **ints})
        return geometry.info

    def _function(self, mode: Any) -> Any:
        from . import triton_adapter as adapter

        found = self._loaded.functions.get(mode.value)
        if found is not None:
            return found
        with self._lock:
            src = self.data["source"]
            text = self._read(src, "the Triton source").decode("utf-8")
            try:  # refuse, never run, text of the wrong shape (hashes catch damage; anyone can rehash)
                check_generated(text, self.data["abi"]["name"])
            except UnsafeModule as exc:
                raise UnsafeModule(f"{self.describe()}: refusing to run its Triton source {self.root / src['file']}: "
                                   f"{exc}") from None
            name = f"_intent_prebuilt_{self.kernel}_{src['sha256'][:16]}_{mode.value}"
            module = adapter.import_source(self.root / src["file"], text, name, mode)
            fn = getattr(module, self.data["abi"]["name"])
            self._loaded.functions[mode.value] = fn
            return fn

    def _read(self, ref: Mapping[str, str], what: str) -> bytes:
        path = self.root / ref["file"]
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise IntentError(f"{self.describe()}: cannot read {what} {path}: {exc.strerror or exc}") from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != ref["sha256"]:
            raise IntentError(f"{self.describe()}: {what} {path} does not match its recorded sha256 (recorded "
                              f"{ref['sha256']}, computed {digest}); refusing to run it (rebuild the directory with "
                              f"kirc build)")
        return data

    def _same_triton(self) -> bool:
        import triton

        return self.triton_version == triton.__version__

    def find_variant(self, fn: Any, arch: int, positional: list[Any], keywords: Mapping[str, Any]
                     ) -> Mapping[str, Any] | None:
        """The prebuilt variant whose cubin is valid for a call specialised by Triton's rules, if any."""
        from . import triton_adapter as adapter

        _, signature, constexprs, attrs = adapter.specialisation(fn, arch, positional, keywords)
        call = spec_json(signature, constexprs, attrs)
        return next((v for v in self.data["variants"] if v["arch"] == arch and _covers(v, call)), None)

    def _variant(self, fn: Any, device: Any, positional: list[Any], geometry: _Geometry) -> tuple[Any, str]:
        """The prebuilt cubin for this call's specialisation, or (None, "jit") to compile the stored source."""
        import torch

        from . import triton_adapter as adapter

        major, minor = torch.cuda.get_device_capability(device)
        arch = major * 10 + minor
        # Triton's specialisation of a call follows from the geometry (types, integer values) and the
        # alignment of its pointers, so the choice is made once per geometry and alignment pattern.
        aligned = (arch, *(a.data_ptr() % 16 == 0 for a in positional if isinstance(a, torch.Tensor)))
        if aligned in geometry.variants:
            v = geometry.variants[aligned]
        elif not self._same_triton():  # cubins are launched by the Triton that made them
            v = geometry.variants[aligned] = None
        else:
            v = geometry.variants[aligned] = self.find_variant(fn, arch, positional, geometry.keywords)
        if v is not None:
            compiled = self._loaded.compiled.get(v["key"])
            if compiled is None:
                for ref, what in ((v["cubin"], "cubin"), (v["metadata"], "Triton metadata")):
                    self._read(ref, what)  # refuse files that do not match before Triton reads them
                compiled = adapter.load_compiled(self.root, self.data["abi"]["name"], v["metadata"]["file"],
                                                 v["cubin"]["file"], self.data["arg_names"], dict(v["signature"]),
                                                 {tuple(k): c for k, c in v["constexprs"]}, v["key"])
                self._loaded.compiled[v["key"]] = compiled
            return compiled, f"cubin sm_{arch}"
        built = ", ".join(f"sm_{v['arch']} {v['constexpr_values']}" for v in self.data["variants"]) or "none"
        if not self._same_triton():
            import triton

            built = f"cubins of Triton {self.triton_version}, this is Triton {triton.__version__}"
        wanted = {k: geometry.constexprs[k] for k in sorted(geometry.constexprs)}
        if not self.jit_fallback:
            raise LaunchError(f"{self.describe()}: no prebuilt cubin for sm_{arch} with {wanted} (built: {built}); "
                              f"add these shapes to kirc build --shape, or load with jit_fallback=True")
        if str(wanted) not in self._loaded.warned:
            self._loaded.warned.add(str(wanted))
            warnings.warn(f"{self.describe()}: no prebuilt cubin for sm_{arch} with {wanted} (built: {built}); "
                          f"compiling the stored Triton source", stacklevel=4)
        return None, "jit"


def _execute(entry: Entry, geometry: _Geometry, device: Any, path: str, run: Any) -> None:
    """Run one launch (`run`); the profiler replaces this function while it records."""
    run()


def _profiled(original: Any) -> Any:
    def execute(entry: Entry, geometry: _Geometry, device: Any, path: str, run: Any) -> None:
        profile_mod.record(entry.info(geometry), geometry.grid, device, path, run)

    return execute


profile_mod.instrument(sys.modules[__name__], "_execute", _profiled)


def spec_json(signature: Mapping[str, str], constexprs: Mapping[Any, Any], attrs: Mapping[Any, Any]
               ) -> dict[str, Any]:
    """A specialisation as JSON data: (name, type) pairs in argument order, constexpr and attribute values by
    argument path."""
    return {"signature": [[k, v] for k, v in signature.items()],
            "constexprs": sorted([list(k), v if isinstance(v, (bool, int, float, str)) or v is None else repr(v)]
                                 for k, v in constexprs.items()),
            "attrs": sorted([list(k), [list(a) for a in v]] for k, v in attrs.items() if v)}


def _covers(variant: Mapping[str, Any], call: Mapping[str, Any]) -> bool:
    """Whether a cubin compiled for `variant` is valid for a call specialised as `call`: the same argument
    types and constant values, and no assumption (alignment, divisibility) the call does not satisfy."""
    if variant["signature"] != call["signature"] or variant["constexprs"] != call["constexprs"]:
        return False
    have = {json.dumps(k): v for k, v in call["attrs"]}
    return all(all(a in have.get(json.dumps(k), []) for a in v) for k, v in variant["attrs"])


def _interpreting() -> bool:
    from . import triton_adapter as adapter

    return adapter.user_wants_interpreter() or adapter.library_mode() is adapter.Mode.INTERPRETED


_multiprocessor_counts: dict[int, int] = {}


def _multiprocessors(device: Any) -> int:
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _multiprocessor_counts:
        _multiprocessor_counts[index] = int(torch.cuda.get_device_properties(index).multi_processor_count)
    return _multiprocessor_counts[index]


# ---------------------------------------------------------------------------------------------- checks


def _written_pairs(roles: list[tuple[str, str]], tensors: Mapping[str, Any]) -> tuple[tuple[str, str, int, int], ...]:
    """The pairs of given tensors whose memory must not intersect (one is written), with their byte reaches;
    freshly allocated outputs share memory with nothing."""
    present = [(n, r) for n, r in roles if n in tensors]
    reach = {n: (lambda r: 0 if r is None else r[1] - r[0])(byte_range(tensors[n])) for n, _ in present}
    return tuple((p, q, reach[p], reach[q]) for i, (p, pr) in enumerate(present) for q, qr in present[i + 1:]
                 if (pr != "in" or qr != "in") and reach[p] and reach[q])


def _solve_pending(pending: list[tuple[str, int, Any, int]], env: dict[str, int], origin: dict[str, str]) -> None:
    """Bind symbols that compound extents determine (`S + 1`, `2 * S`), then check the others."""

    def resolve(item: tuple[str, int, Any, int]) -> bool:
        param, axis, dim, extent = item
        unbound = sorted(set(E.names(dim)) - env.keys())
        if not unbound:
            try:
                want: int | None = E.evaluate(dim, env)
            except ZeroDivisionError:
                want = None
            if want != extent:
                given = ", ".join(f"{s} = {env[s]} from {origin[s]}" for s in sorted(set(E.names(dim))))
                shown = "cannot be evaluated (division by zero)" if want is None else f"= {want}"
                raise LaunchError(f"parameter {param}: axis {axis} has extent {extent} but {E.render(dim)} "
                                  f"{shown} ({given})")
            return True
        value = _solve_for(dim, unbound[0], extent, env) if len(unbound) == 1 else None
        if value is None:
            return False
        env[unbound[0]], origin[unbound[0]] = value, f"parameter {param}"
        return True

    settle(pending, resolve)


def _solve_for(dim: Any, symbol: str, extent: int, env: Mapping[str, int]) -> int | None:
    """`dim == extent` solved for `symbol` when `dim` is affine in it (as `kir.dims.solve_for`)."""
    return solve_affine(lambda v: E.evaluate(dim, {**env, symbol: v}), extent)


def _check_pred(r: Mapping[str, Any], env: Mapping[str, int], origin: Mapping[str, str]) -> None:
    symbols = sorted(set(E.names(r["expr"])))
    try:
        ok = bool(E.evaluate(r["expr"], env))
        failure = None if ok else f"{r['text']} failed: " + ", ".join(f"{s} = {env[s]}" for s in symbols)
    except (KeyError, ZeroDivisionError) as exc:
        failure = f"{r['text']} cannot be evaluated: {exc}"
    if failure is None:
        return
    whence = "; ".join(f"{s} from {origin[s]}" for s in symbols if s in origin)
    if r["word"] == "bound":
        raise LaunchError(f"{failure} ({whence}; a shape symbol is >= 1 unless the kernel states {symbols[0]} >= 0)")
    raise LaunchError(f"{r['word']} {failure} ({whence})")


def _logical_shape(p: Mapping[str, Any], t: Any) -> tuple[int, ...]:
    """The extents of the values a tensor holds: an i4 tensor's last axis holds two per byte."""
    shape = tuple(int(e) for e in t.shape)
    return (*shape[:-1], 2 * shape[-1]) if p["dtype"] == "i4" and shape else shape


def _scalar_argument(dtype: str, value: Any) -> Any:
    """As `emit_triton.abi.scalar_argument`: an f64 scalar travels as its 64-bit pattern."""
    if dtype == "f64":
        import struct

        return struct.unpack("<q", struct.pack("<d", float(value)))[0]
    return value
