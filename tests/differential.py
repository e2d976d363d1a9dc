"""Run one case through the oracle, the Triton launcher (CPU, interpreter) and the StableHLO exit, and compare.

Comparison (documented in docs/testing.md):

* integers and preds: exactly;
* floats stored from *exact* values (see `tests/diffexact.inexact_values`): exactly, NaN equal to NaN and
  -0.0 equal to 0.0;
* other floats: the same NaN positions, the same infinities, and elementwise
  `|got - want| <= tol * max(1, max |want|)` over the finite elements, with
  `tol = eps * (16 + 4 * L)`: `eps` the machine epsilon of the least precise float type in the kernel
  (2^-10 when a contraction asks for tf32), `L` the longest reduced, scanned or contracted extent;
* elements that depend on the bits of a NaN that arithmetic made (through a `bitcast`): any value, but a
  NaN's bits stay a NaN's (`tests/diffnan.py`; a NaN loaded or moved keeps its bits and is compared).
"""

from __future__ import annotations

import math
import os
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emit_triton.sanitize import SanitizerError
from kir import Dot, DType, Kernel, Precision, Reduce, RegionFold, RegionScan, Scan
from kir.core import TensorType
from kir.dtypes import i4_unpacked
from kir.errors import DiagnosticError, IntentError, LaunchError, NotExpressible
from tests.diffcond import slack as conditioning
from tests.diffexact import (
    association_dependent_outputs,
    contracted_outputs,
    inexact_outputs,
    periodic_of_reassociated_outputs,
    reassociated_outputs,
)
from tests.diffinputs import Arg, Case
from tests.diffnan import NanBits

OUTCOMES = ("ok", "refused", "mismatch", "crash", "oracle_error", "launch_error", "invalid", "sanitizer")
FAILURES = ("mismatch", "crash", "oracle_error", "launch_error", "invalid", "sanitizer")
EPS = {DType.f16: 2.0**-10, DType.bf16: 2.0**-7, DType.f32: 2.0**-23, DType.f64: 2.0**-52, DType.f8e4m3: 2.0**-3,
       DType.f8e5m2: 2.0**-2}
TF32_EPS = 2.0**-10


@dataclass
class Outcome:
    """What happened to one case. `kind` is one of OUTCOMES; `stage` says where it happened."""

    kind: str
    stage: str = ""
    message: str = ""
    details: list[str] = field(default_factory=list)
    stablehlo: str = "skipped"  # ok | not_expressible | mismatch | crash | skipped
    # Set when the kernel holds bf16 values anywhere: Triton's interpreter computes on bf16 bit
    # patterns, so such failures are kept apart from the others.
    bf16: bool = False

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES or \
            self.stablehlo in ("mismatch", "crash")

    def signatures(self) -> list[str]:
        """Short keys that group failures with the same cause (a reproducer is saved for each new one):
        the launcher's failure, then the StableHLO exit's. Mismatches are keyed by the output dtype and
        the kind of difference; crashes by their message without numbers and names."""
        keys: list[str] = []
        if self.kind in FAILURES:
            head = self.message.splitlines()[0] if self.message else ""
            keys.append(f"{self.kind}@{self.stage}: "
                        f"{_mismatch_class(head) if self.kind == 'mismatch' else _normalise(head)}")
        if self.stablehlo in ("mismatch", "crash"):
            problem = next((d for d in self.details if d.startswith("stablehlo: ")), "")
            text = problem.removeprefix("stablehlo: ")
            key = _mismatch_class(text) if self.stablehlo == "mismatch" else _normalise(text)
            keys.append(f"stablehlo-{self.stablehlo}: {key}")
        return [f"{k} [bf16 kernel]" for k in keys] if self.bf16 else keys

    def signature(self) -> str:
        found = self.signatures()
        return found[0] if found else ""

    def text(self) -> str:
        lines = [f"{self.kind} at {self.stage}: {self.message}" if self.stage else self.kind]
        lines += self.details
        if self.stablehlo not in ("ok", "skipped"):
            lines.append(f"stablehlo: {self.stablehlo}")
        return "\n".join(lines)


def _mismatch_class(text: str) -> str:
    """`out3 (bf16): 2 element(s) differ beyond 0.1, first at ...` -> `bf16: element(s) differ beyond`."""
    import re

    m = re.match(r"\S+ \((\w+)\): (?:\d+ )?([^,]*?)(?: beyond [^,]*)?(?:, first.*)?$", text)
    return f"{m.group(1)}: {m.group(2)}" if m else _normalise(text)


def _normalise(text: str) -> str:
    """Drop numbers and value names so that one bug gives one signature."""
    import re

    text = re.sub(r"%\w+", "%v", text)
    text = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", text)
    return text[:120]


# ---------------------------------------------------------------------------------------------- tolerances


def tolerance(kernel: Kernel, env: Mapping[str, int]) -> float:
    """The relative tolerance of inexact float outputs (module docstring), with the growth for `pow`."""
    # pow(a, b) multiplies the relative error of a by |b| and that of b by |b ln a|: nested in loops (as
    # the generator does), one ulp of difference grows by orders of magnitude
    growth = POW_GROWTH if any(o.NAME == "binary" and str(o.fn) == "pow" and _is_float_value(o.results[0])
                               for o in kernel.walk()) else 1.0
    return base_tolerance(kernel, env) * growth


def base_tolerance(kernel: Kernel, env: Mapping[str, int]) -> float:
    """`eps * (16 + 4 L)`: the error allowed a value folded in an association the implementation chooses."""
    eps = 0.0
    longest = 0
    for o in kernel.walk():
        for v in o.results:
            t = v.type
            if isinstance(t, TensorType) and isinstance(t.dtype, DType) and t.dtype in EPS:
                eps = max(eps, EPS[t.dtype])
        # an accumulator narrower than the result (acc_dtype=f32 for an f64 fold) rounds at its own eps
        accs = getattr(o, "acc_dtypes", None) or (getattr(o, "acc_dtype", None),)
        for acc in accs if isinstance(accs, tuple) else ():
            if isinstance(acc, DType) and acc in EPS:
                eps = max(eps, EPS[acc])
        if isinstance(o, Dot) and o.precision is Precision.tf32:
            eps = max(eps, TF32_EPS)
        longest = max(longest, _reduced_extent(o, env))
    for p in kernel.params:
        dt = p.type.dtype
        if isinstance(dt, DType) and dt in EPS:
            eps = max(eps, EPS[dt])
    return eps * (16 + 4 * longest)


POW_GROWTH = 1024.0


def _is_float_value(v) -> bool:
    return isinstance(v.type, TensorType) and isinstance(v.type.dtype, DType) and v.type.dtype.is_float


def _reduced_extent(o: Any, env: Mapping[str, int]) -> int:
    if isinstance(o, Reduce):
        shape = o.inputs[0].type.shape
        return math.prod(shape[a].evaluate(env) for a in o.axes) if shape else 1
    if isinstance(o, Scan):
        return o.inputs[0].type.shape[o.axis].evaluate(env)
    if isinstance(o, Dot):
        shape = o.lhs.type.shape
        return math.prod(shape[a].evaluate(env) for a in o.lhs_contract)
    if isinstance(o, RegionFold | RegionScan):
        src = o.src.type
        return max((d.evaluate(env) for d in src.shape), default=1)
    return 0


def compare(name: str, dtype: str, got: np.ndarray, want: np.ndarray, exact: bool, tol: float,
            finite_only: bool = False, slack: np.ndarray | None = None) -> str | None:
    """None when `got` agrees with `want`, else a one-line description of the first difference.
    `finite_only`: elements where either side is NaN or infinite are not compared (float products
    folded in an implementation-chosen association, see `association_dependent_outputs`). `slack`: a
    per-element absolute allowance on top of the limit, `inf` where the element is not compared
    (ill-conditioned at the inputs, see `tests/diffcond.py`)."""
    got, want = np.asarray(got), np.asarray(want)
    if slack is not None and want.dtype.kind == "f" and got.shape == want.shape == slack.shape:
        skip = np.isinf(slack)
        got, want = np.where(skip, 0, got).astype(got.dtype), np.where(skip, 0, want).astype(want.dtype)
        slack = np.where(skip, 0.0, slack)
    else:
        slack = None
    if finite_only and want.dtype.kind == "f" and got.shape == want.shape:
        with np.errstate(invalid="ignore"):
            either = ~(np.isfinite(got.astype(np.float64)) & np.isfinite(want.astype(np.float64)))
        got, want = np.where(either, 0, got).astype(got.dtype), np.where(either, 0, want).astype(want.dtype)
    name = f"{name} ({dtype})"
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} != {want.shape}"
    if want.dtype.kind != "f":
        if got.dtype != want.dtype:
            got = got.astype(want.dtype)
        bad = np.argwhere(got != want)
        if bad.size:
            at = tuple(int(i) for i in bad[0])
            return f"{name}: {len(bad)} element(s) differ, first at {at}: got {_show(got[at])}, want {_show(want[at])}"
        return None
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if (nan_g != nan_w).any():
        at = tuple(int(i) for i in np.argwhere(nan_g != nan_w)[0])
        return f"{name}: NaN positions differ, first at {at}: got {_show(g[at])}, want {_show(w[at])}"
    finite = np.isfinite(w) & np.isfinite(g)
    inf_bad = ~nan_w & ~finite & (g != w)
    if inf_bad.any():
        at = tuple(int(i) for i in np.argwhere(inf_bad)[0])
        return f"{name}: infinities differ, first at {at}: got {_show(g[at])}, want {_show(w[at])}"
    if exact:
        bad = finite & (g != w)
        limit = 0.0
    else:
        scale = max(1.0, float(np.abs(w[finite]).max())) if finite.any() else 1.0
        limit = tol * scale
        with np.errstate(invalid="ignore", over="ignore"):
            bad = finite & (np.abs(g - w) > limit + (0.0 if slack is None else slack))
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        return (f"{name}: {int(bad.sum())} element(s) differ{' (exact)' if exact else f' beyond {limit:.3g}'}, "
                f"first at {at}: got {_show(g[at])}, want {_show(w[at])}")
    return None


def _show(x: Any) -> str:
    x = x.item() if hasattr(x, "item") else x
    return repr(x)


# ---------------------------------------------------------------------------------------------- running


def _copy(inputs: Mapping[str, Arg]) -> dict[str, Arg]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}


def _crash(stage: str, exc: BaseException) -> Outcome:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{os.path.relpath(tb[-1].filename)}:{tb[-1].lineno}" if tb else "?"
    return Outcome("crash", stage, f"{type(exc).__name__}: {exc}".splitlines()[0][:300], [f"raised at {where}"])


def run_launcher(kernel: Kernel, inputs: Mapping[str, Arg]) -> dict[str, np.ndarray]:
    import emit_triton

    args = _copy(inputs)
    emit_triton.launch(kernel, args)
    # an i4 output comes back as its packed bytes; the oracle and the StableHLO exit give its values
    return {p.name: (i4_unpacked(args[p.name]) if p.type.dtype is DType.i4 else np.asarray(args[p.name]))
            for p in kernel.outputs}


def check_outputs(kernel: Kernel, env: Mapping[str, int], got: Mapping[str, np.ndarray],
                  want: Mapping[str, np.ndarray], also_loose: set[str] | frozenset[str] = frozenset(),
                  slack: Mapping[str, np.ndarray] | None = None, nan_bits: NanBits | None = None) -> list[str]:
    """Problems of `got` against `want`; `also_loose`: further outputs compared within the tolerance;
    `slack`: per-element allowances of ill-conditioned outputs (`tests.diffcond.slack`); `nan_bits`: the
    outputs whose elements may hold the platform's bits of an arithmetic NaN (`tests.diffnan`)."""
    tol = tolerance(kernel, env)
    loose = inexact_outputs(kernel) | set(also_loose)
    reassociated = association_dependent_outputs(kernel)
    unbounded = periodic_of_reassociated_outputs(kernel)
    problems = []
    for p in kernel.outputs:
        if p.name not in want:  # not compared by value (see `_stablehlo`)
            continue
        if p.name in unbounded:
            if got[p.name].shape != want[p.name].shape:
                problems.append(f"{p.name}: shape {got[p.name].shape}, want {want[p.name].shape}")
            continue
        g = got[p.name] if nan_bits is None else nan_bits.accept(p.name, p.type.dtype, got[p.name], want[p.name])
        found = compare(p.name, str(p.type.dtype), g, want[p.name], p.name not in loose, tol,
                        finite_only=p.name in reassociated, slack=(slack or {}).get(p.name))
        if found:
            problems.append(found)
    return problems


def run_case(case: Case, stablehlo: bool = True) -> Outcome:
    """Oracle first (the meaning), then the launcher, then (when it applies) the StableHLO exit."""
    outcome = _run_case(case, stablehlo)
    outcome.bf16 = DType.bf16 in _dtypes(case.kernel)
    return outcome


def _dtypes(kernel: Kernel) -> set[object]:
    """The dtypes of the kernel's parameters and of every value it computes."""
    types = [p.type for p in kernel.params] + [v.type for o in kernel.walk() for v in o.results]
    return {getattr(t, "dtype", None) for t in types}


def _run_case(case: Case, stablehlo: bool) -> Outcome:
    import oracle
    from kir import verify

    kernel, env = case.kernel, case.env
    try:
        verify(kernel)
    except DiagnosticError as exc:  # generated kernels are valid by construction: this is a finding
        return Outcome("invalid", "verify", exc.message.splitlines()[0][:300])
    inputs = case.inputs()
    try:
        want = oracle.run(kernel, _copy(inputs))
    except Exception as exc:  # the generator promises runnable kernels: any failure here is a finding
        return Outcome("oracle_error", "oracle", f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
    try:
        got = run_launcher(kernel, inputs)
    except DiagnosticError as exc:
        if exc.message.startswith("internal"):
            return Outcome("crash", "lower", exc.message.splitlines()[0][:300])
        return Outcome("refused", "lower", exc.message.splitlines()[0][:300])
    except LaunchError as exc:
        return Outcome("launch_error", "launch", str(exc).splitlines()[0][:300])
    except SanitizerError as exc:  # campaigns run under the memory sanitizer (emit_triton.sanitize)
        return Outcome("sanitizer", "launch", str(exc).splitlines()[0][:300])
    except IntentError as exc:
        return Outcome("crash", "launch", f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
    except Exception as exc:
        return _crash("launch", exc)
    allowed = conditioning(kernel, env, inputs, want)
    nan_bits = NanBits(kernel, inputs, want)
    problems = check_outputs(kernel, env, got, want, slack=allowed, nan_bits=nan_bits)
    outcome = Outcome("mismatch", "launch", problems[0], problems[1:]) if problems else Outcome("ok")
    if stablehlo:
        outcome.stablehlo, extra = _stablehlo(case, inputs, want, allowed, nan_bits)
        outcome.details += extra
    return outcome


def _stablehlo(case: Case, inputs: Mapping[str, Arg], want: Mapping[str, np.ndarray],
              slack: Mapping[str, np.ndarray] | None = None, nan_bits: NanBits | None = None
              ) -> tuple[str, list[str]]:
    try:
        import oracle.stablehlo as shlo

        got = shlo.run(case.kernel, _copy(inputs))
    except NotExpressible as exc:
        return "not_expressible", [str(exc).splitlines()[0][:200]]
    except Exception as exc:
        return "crash", [f"stablehlo: {type(exc).__name__}: {exc}".splitlines()[0][:300]]
    # XLA's CPU runtime computes with subnormal floats flushed to zero (flush-to-zero and denormals-are-zero: in
    # results, compares and the f32 values inside the computation, so that an f32 subnormal cast to f64 arrives
    # as 0): compare XLA's results with the oracle's after flushing both the same way
    # f32 and bf16 values have f32's subnormals, which XLA's CPU runtime flushes
    single = bool(_dtypes(case.kernel) & {DType.f32, DType.bf16})
    # and it contracts a float multiply feeding an add into a fused multiply-add
    loose = contracted_outputs(case.kernel) | reassociated_outputs(case.kernel)
    problems = check_outputs(case.kernel, case.env, {k: _flush(v, single) for k, v in got.items()},
                             {k: _flush(v, single) for k, v in want.items()}, loose, slack, nan_bits)
    if problems and _computes_flushed(case.kernel):
        # a subnormal inside the computation is zero there too (`log(exp(-95.0))` is -inf, not -95), and so is
        # one a bitcast makes from bits: then XLA must agree with the oracle modelling the flush of every
        # intermediate value (oracle.run(flush_subnormals=True)), the StableHLO exit's second accepted answer
        import oracle

        flushed = oracle.run(case.kernel, _copy(inputs), flush_subnormals=True)
        if not check_outputs(case.kernel, case.env, {k: _flush(v, single) for k, v in got.items()},
                             {k: _flush(v, single) for k, v in flushed.items()}, loose, slack, nan_bits):
            problems = []
    return ("mismatch", [f"stablehlo: {p}" for p in problems]) if problems else ("ok", [])


def _computes_flushed(kernel: Kernel) -> bool:
    """Whether the kernel has values of a dtype XLA's CPU runtime computes without subnormals (f32, bf16, f64)."""
    from oracle.interp import FLUSHED

    return any(getattr(v.type, "dtype", None) in FLUSHED for o in kernel.walk() for v in o.results)


def _flush(x: np.ndarray, single: bool = False) -> np.ndarray:
    """`x` with its dtype's subnormals flushed to zero (`single`: also anything below f32's smallest normal)."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return x
    tiny = max(float(np.finfo(x.dtype).tiny), float(np.finfo(np.float32).tiny) if single else 0.0)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x) < tiny, np.zeros((), x.dtype) * np.sign(x), x).astype(x.dtype)
