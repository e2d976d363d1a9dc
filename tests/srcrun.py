"""Run a generated source case (`tests/srcgen.py`): import it, then oracle, launcher, StableHLO and the
torch reference, and compare.

    python -m tests.fuzz --source --kernels 2000 --seed 11      a source-level campaign
    python -m tests.fuzz --replay tests/fuzz_cases/source/src_x.json

The module is written to a file and imported, so the real frontend parses it. The launch goes
through the kernel object (`kernel(**args)`, the author's call) with torch tensors, some of them
non-contiguous views (a transposed view of other storage, a strided slice of a larger tensor).
Launcher and StableHLO results are compared with the oracle by `tests/differential.py`'s rules
(exact where the kernel's values are exact, else `eps * (16 + 4 L)` scaled); the oracle's results
are then compared with the reference the generator wrote: exactly for the outputs the generator
knows to be exact, else with the same tolerance. Outputs filled through an atomic counter (stream
compaction) are compared as multisets.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from emit_triton.sanitize import SanitizerError, sanitizing
from kir.dtypes import i4_packed, i4_unpacked
from kir.errors import DiagnosticError, IntentError, LaunchError
from tests.diffcond import slack as conditioning
from tests.differential import (
    Outcome,
    _copy,
    _crash,
    _mismatch_class,
    _normalise,
    _stablehlo,
    check_outputs,
    compare,
    tolerance,
)
from tests.diffexact import association_dependent_outputs
from tests.diffinputs import Arg, Case, InputSpec, make_inputs
from tests.diffnan import NanBits
from tests.srcgen import AVOID, SourceCase, SrcParam, random_source_case

SOURCE_CASES_DIR = Path(__file__).resolve().parent / "fuzz_cases" / "source"
TORCH = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "i4": torch.int8,  # two values a byte (kir.dtypes.I4_PACKING)
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u8": torch.uint8,
    "u16": torch.uint16,
    "u32": torch.uint32,
    "u64": torch.uint64,
    "pred": torch.bool,
    "f8e4m3": torch.float8_e4m3fn,
    "f8e5m2": torch.float8_e5m2,
}
FP8 = ("f8e4m3", "f8e5m2")


@dataclass
class SourceOutcome(Outcome):
    """An `Outcome` with the verdict of the torch reference against the oracle."""

    reference: str = "skipped"  # ok | mismatch | crash | skipped

    @property
    def failed(self) -> bool:
        return super().failed or self.reference in ("mismatch", "crash")

    def signatures(self) -> list[str]:
        keys = super().signatures()
        if self.reference in ("mismatch", "crash"):
            text = next((d for d in self.details if d.startswith("reference: ")), "").removeprefix("reference: ")
            key = _mismatch_class(text) if self.reference == "mismatch" else _normalise(text)
            keys.append(f"source-reference-{self.reference}: {key}")
        return [k if k.startswith("source") else f"source {k}" for k in keys]

    def text(self) -> str:
        out = super().text()
        return out + (f"\nreference: {self.reference}" if self.reference not in ("ok", "skipped") else "")


# ---------------------------------------------------------------------------------------------- loading


def write_module(case: SourceCase, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(case.source.encode()).hexdigest()[:12]
    path = folder / f"src_{digest}.py"
    if not path.exists() or path.read_text(encoding="utf-8") != case.source:
        path.write_text(case.source, encoding="utf-8")
    return path


def import_module(path: Path) -> Any:
    """Import a generated file (its kernel is built by the frontend at import)."""
    name = "_intent_src_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def as_torch(value: Arg, p: SrcParam) -> Any:
    """The launch argument for `p`: a torch tensor holding `value`, laid out as `p.view` asks."""
    if p.shape is None:
        return value
    arr = np.asarray(value)
    if p.dtype == "i4":  # the packed bytes (the runner passes every side i4 arguments packed)
        arr = arr if arr.dtype == np.uint8 else arr.view(np.uint8)
        return _laid_out(torch.from_numpy(np.ascontiguousarray(arr)).view(torch.int8).clone(), p)
    return _laid_out(torch.from_numpy(np.ascontiguousarray(arr)).to(TORCH[p.dtype]).clone(), p)


def _laid_out(base: torch.Tensor, p: SrcParam) -> torch.Tensor:
    """`base` (a fresh tensor) passed as `p.view` asks."""
    if p.view == "t" and base.dim() == 2:
        return base.t().contiguous().t()  # the same values, transposed storage
    if p.view == "s" and base.dim() >= 1:
        big = torch.zeros(base.shape[:-1] + (2 * base.shape[-1] + 1,), dtype=base.dtype)
        view = big[..., 1::2]
        view.copy_(base)
        return view
    return base


def from_torch(t: torch.Tensor, dtype: str = "") -> np.ndarray:
    t = t.detach().contiguous()
    if dtype == "i4":
        return i4_unpacked(t.numpy())
    narrow = (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)
    return t.float().numpy() if t.dtype in narrow else t.numpy()


def reference_inputs(inputs: Mapping[str, Arg], case: SourceCase) -> dict[str, Any]:
    """The reference's arguments: floats as float64, integers as int64 (u64 as its bit pattern), preds as bool."""
    out: dict[str, Any] = {}
    for p in case.params:
        v = inputs[p.name]
        if p.shape is None:
            out[p.name] = v
            continue
        arr = np.asarray(v)
        if p.dtype == "pred":
            out[p.name] = torch.from_numpy(arr.astype(bool))
        elif p.dtype.startswith(("i", "u")):
            out[p.name] = torch.from_numpy(arr.astype(np.int64))
        else:
            out[p.name] = torch.from_numpy(arr.astype(np.float64))
    return out


def _canonical(outputs: Mapping[str, np.ndarray], unordered: frozenset[str]) -> dict[str, np.ndarray]:
    return {k: (np.sort(np.asarray(v).astype(np.float64)) if k in unordered else v) for k, v in outputs.items()}


# ---------------------------------------------------------------------------------------------- running


def run_source_case(case: SourceCase, stablehlo: bool = True, folder: Path | None = None) -> SourceOutcome:
    """Import the case's module, then oracle, launcher, StableHLO exit and reference; compare."""
    import oracle
    from kir import verify

    folder = folder or Path(tempfile.gettempdir()) / "intent-srcfuzz"
    path = write_module(case, folder)
    try:
        module = import_module(path)
        kobj = getattr(module, case.name)
        kernel = kobj.kir
        verify(kernel)
    except DiagnosticError as exc:  # generated kernels are valid by construction: this is a finding
        return SourceOutcome("invalid", "frontend", exc.message.splitlines()[0][:300])
    except Exception as exc:
        return SourceOutcome(**vars(_crash("frontend", exc)))
    env = case.env
    by_name = {p.name: p for p in case.params}
    specs = tuple((p.name, p.spec) for p in case.params)
    inputs = make_inputs(kernel, env, dict(specs), case.seed)
    for p in case.params:  # fp8 values are drawn as f32: every side sees them rounded as torch rounds them
        if p.dtype in FP8 and p.shape is not None:
            inputs[p.name] = torch.from_numpy(np.asarray(inputs[p.name])).to(TORCH[p.dtype]).float().numpy()
    # i4 arguments are packed bytes on every side (the reference reads the values)
    packed = {k: (i4_packed(v) if by_name[k].dtype == "i4" and by_name[k].shape is not None else v)
              for k, v in inputs.items()}
    try:
        want = oracle.run(kernel, _copy(packed))
    except Exception as exc:
        return SourceOutcome("oracle_error", "oracle", f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
    args = {name: as_torch(value, by_name[name]) for name, value in packed.items()}
    try:
        kobj(**args)
        got = {p.name: from_torch(args[p.name], by_name[p.name].dtype) for p in kernel.outputs}
    except DiagnosticError as exc:
        kind = "crash" if exc.message.startswith("internal") else "refused"
        return SourceOutcome(kind, "lower", exc.message.splitlines()[0][:300])
    except LaunchError as exc:
        return SourceOutcome("launch_error", "launch", str(exc).splitlines()[0][:300])
    except SanitizerError as exc:  # campaigns launch under the memory sanitizer (emit_triton.sanitize)
        return SourceOutcome("sanitizer", "launch", str(exc).splitlines()[0][:300])
    except IntentError as exc:
        return SourceOutcome("crash", "launch", f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
    except Exception as exc:
        return SourceOutcome(**vars(_crash("launch", exc)))
    want_c, got_c = _canonical(want, case.unordered), _canonical(got, case.unordered)
    # unordered outputs are compared as sorted multisets: their elements have no place to be ill-conditioned at
    allowed = {k: v for k, v in conditioning(kernel, env, packed, want).items() if k not in case.unordered}
    nan_bits = NanBits(kernel, packed, want, exclude=case.unordered)
    problems = check_outputs(kernel, env, got_c, want_c, slack=allowed, nan_bits=nan_bits)
    outcome = SourceOutcome("mismatch", "launch", problems[0], problems[1:]) if problems else SourceOutcome("ok")
    if stablehlo and not case.unordered:
        outcome.stablehlo, extra = _stablehlo(Case(kernel, case.shapes, specs, case.seed), packed, want, allowed,
                                              nan_bits)
        outcome.details += extra
    outcome.reference, extra = _reference(case, kernel, module, inputs, want, allowed, nan_bits)
    outcome.details += extra
    return outcome


def _reference(
    case: SourceCase, kernel: Any, module: Any, inputs: Mapping[str, Arg], want: Mapping[str, np.ndarray],
    slack: Mapping[str, np.ndarray] | None = None, nan_bits: NanBits | None = None,
) -> tuple[str, list[str]]:
    try:
        ref = module.reference(reference_inputs(inputs, case))
    except Exception as exc:
        return "crash", [f"reference: {type(exc).__name__}: {exc}".splitlines()[0][:300]]
    tol = tolerance(kernel, case.env)
    loose = association_dependent_outputs(kernel)
    problems = []
    for p in kernel.outputs:
        r = ref[p.name].detach().numpy()
        dt = str(p.type.dtype)
        if dt.startswith(("i", "u")):
            r = r.astype(np.int64).astype(_np_dtype(dt))
        r, w = (
            _canonical({p.name: r}, case.unordered)[p.name],
            _canonical({p.name: want[p.name]}, case.unordered)[p.name],
        )
        if nan_bits is not None:
            r = nan_bits.accept(p.name, p.type.dtype, r, w)
        found = compare(p.name, dt, r, w, p.name in case.exact, tol, finite_only=p.name in loose,
                        slack=(slack or {}).get(p.name))
        if found:
            problems.append(found)
    return ("mismatch", [f"reference: {p}" for p in problems]) if problems else ("ok", [])


def _np_dtype(dt: str) -> np.dtype:
    return np.dtype(
        {
            "i4": np.int8,
            "i8": np.int8,
            "i16": np.int16,
            "i32": np.int32,
            "i64": np.int64,
            "u8": np.uint8,
            "u16": np.uint16,
            "u32": np.uint32,
            "u64": np.uint64,
        }[dt]
    )


# ---------------------------------------------------------------------------------------------- saving


def save_source_case(case: SourceCase, folder: Path, stem: str, info: Mapping[str, Any]) -> Path:
    """Write `<stem>.py` (kernel and reference) and `<stem>.json` (shapes, parameters, seed, facts, what happened)."""
    folder.mkdir(parents=True, exist_ok=True)
    py = folder / f"{stem}.py"
    py.write_text(case.source, encoding="utf-8")
    record = {
        "source": py.name,
        "kernel_name": case.name,
        "shapes": [list(kv) for kv in case.shapes],
        "seed": case.seed,
        "params": [
            {
                "name": p.name,
                "dtype": p.dtype,
                "shape": list(p.shape) if p.shape is not None else None,
                "role": p.role,
                "spec": p.spec.to_json(),
                "view": p.view,
            }
            for p in case.params
        ],
        "exact": sorted(case.exact),
        "unordered": sorted(case.unordered),
        **info,
    }
    (folder / f"{stem}.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return py


def load_source_case(json_path: Path) -> tuple[SourceCase, dict[str, Any]]:
    record = json.loads(json_path.read_text(encoding="utf-8"))
    source = (json_path.parent / record["source"]).read_text(encoding="utf-8")
    params = tuple(
        SrcParam(
            p["name"],
            p["dtype"],
            tuple(p["shape"]) if p["shape"] is not None else None,
            p["role"],
            InputSpec.from_json(p["spec"]),
            p.get("view", ""),
        )
        for p in record["params"]
    )
    case = SourceCase(
        record["kernel_name"],
        source,
        tuple((str(k), int(v)) for k, v in record["shapes"]),
        params,
        int(record["seed"]),
        frozenset(record["exact"]),
        frozenset(record["unordered"]),
    )
    return case, record


# ---------------------------------------------------------------------------------------------- campaigns


def source_campaign(
    kernels: int,
    seed: int,
    *,
    stablehlo: bool = True,
    save_dir: Path | None = SOURCE_CASES_DIR,
    progress: bool = False,
    blocks: tuple[str, ...] | None = None,
    avoid: frozenset[str] = AVOID,
    log: Callable[[str], None] | None = None,
    sanitize: bool = True,
    small: bool = False,
) -> Any:
    """Run `kernels` generated source cases (case `i` from `random.Random(f"source/{seed}/{i}")`); save the
    first case of each new failure signature (unshrunk: a source case is reduced by hand). Launches run under
    the memory sanitizer unless `sanitize` is False; `small` keeps to sizes up to 17 (see `srcgen.Gen`). Returns
    `tests.fuzz.Summary`."""
    with sanitizing(sanitize):
        return _source_campaign(kernels, seed, stablehlo, save_dir, progress, blocks, avoid, log, small)


def _source_campaign(
    kernels: int,
    seed: int,
    stablehlo: bool,
    save_dir: Path | None,
    progress: bool,
    blocks: tuple[str, ...] | None,
    avoid: frozenset[str],
    log: Callable[[str], None] | None,
    small: bool = False,
) -> Any:
    from tests.fuzz import CASES_DIR, Found, Progress, Summary, known_signatures

    summary = Summary()
    known = known_signatures(CASES_DIR, SOURCE_CASES_DIR, *((save_dir,) if save_dir is not None else ()))
    bar = Progress(kernels, progress)
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="intent-srcfuzz-") as tmp:
        for i in range(kernels):
            case = random_source_case(random.Random(f"source/{seed}/{i}"), blocks=blocks, avoid=avoid, small=small)
            outcome = run_source_case(case, stablehlo, Path(tmp))
            summary.count(case, outcome)  # type: ignore[arg-type]
            bar.update(summary)
            if not outcome.failed:
                continue
            fresh = [s for s in outcome.signatures() if s not in known]
            for s in outcome.signatures():
                if s in known:
                    summary.known_hits[s] += 1
            if not fresh:
                continue
            found = Found(fresh[0], outcome, case, None)  # type: ignore[arg-type]
            if save_dir is not None:
                stem = "src_" + hashlib.sha1(found.signature.encode()).hexdigest()[:10]
                found.path = save_source_case(
                    case,
                    save_dir,
                    stem,
                    {
                        "signature": found.signature,
                        "failure": outcome.text(),
                        "campaign_seed": seed,
                        "campaign_case": i,
                        "features": list(case.notes),
                    },
                )
            known[found.signature] = found.path or Path("?")
            summary.failures.append(found)
            if log is not None:
                log(f"new failure: {found.signature} -> {found.path}")
    summary.seconds = time.time() - start
    bar.close()
    return summary


def replay_source(path: Path, stablehlo: bool = True) -> SourceOutcome:
    case, _ = load_source_case(path)
    return run_source_case(case, stablehlo)


if __name__ == "__main__":
    from tests.fuzz import main

    sys.exit(main(["--source", *sys.argv[1:]]))
