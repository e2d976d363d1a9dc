"""Conditioning of outputs that divide by, or raise to a power, a value whose association the
implementation chooses (documented in docs/testing.md, Tolerances).

The uniform tolerance `eps * (16 + 4 L) * max(1, max |want|)` bounds errors that stay of the size of the
output's largest element. A float sum folded in another association is off by up to that much in absolute
terms; a cancellation after it (`sum + x` near zero) turns that into a large relative error, and a division
by the result or a negative power of it (`(sum + x) ** -2`) turns the relative error into an absolute one
of any size. Such an element is ill-conditioned at the point the inputs chose, not wrong.

So for the outputs where a reassociated value reaches a divisor or either operand of a `pow`
(`pole_of_reassociated_outputs`), the oracle runs twice more with every reassociated value moved by its
own allowed error, `+d` and `-d` with `d = eps * (16 + 4 L) * max(1, max |value|)` (the bound the
comparison assumes for it). How far each output element moves is its propagated error: it is allowed on
top of the usual limit (`slack`), and an element that a move within the allowed error makes NaN or
infinite, or leaves finite where the oracle's is not, is not compared at all. Outputs without such a path
keep the uniform rule untouched.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from kir import Kernel
from kir.core import Op, TensorType
from tests.diffexact import _is_float, _outputs_fed_by, _reassociated_values, _reassociates

# pow's condition in its base is |b| (and |b ln a| in its exponent); a divisor's is one, but both meet
# a pole where the base or divisor is zero
POLES = ("div", "pow")


def pole_of_reassociated_outputs(kernel: Kernel) -> set[str]:
    """Outputs fed by a division whose divisor, or a `pow` whose base or exponent, depends on a float
    sum, product or contraction folded in an association the implementation chooses."""
    reassociated = _reassociated_values(kernel)

    def seeds(o: Op, values: set[int]) -> bool:
        if o.NAME != "binary" or str(getattr(o, "fn", "")) not in POLES:
            return False
        near_pole = (o.rhs,) if str(o.fn) == "div" else (o.lhs, o.rhs)  # type: ignore[attr-defined]
        return any(v.id in reassociated for v in near_pole)

    return _outputs_fed_by(kernel, seeds)


def slack(kernel: Kernel, env: Mapping[str, int], inputs: Mapping[str, Any],
          want: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-element extra absolute allowance (`inf`: not compared) for each output of
    `pole_of_reassociated_outputs`; empty when the kernel has none."""
    import oracle
    from tests.differential import base_tolerance

    names = pole_of_reassociated_outputs(kernel)
    if not names:
        return {}
    d = base_tolerance(kernel, env)
    moved = []
    for sign in (1.0, -1.0):
        with _moved_reassociations(kernel, sign * d):
            moved.append(oracle.run(kernel, {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                             for k, v in inputs.items()}))
    return {name: _spread(np.asarray(want[name]), [np.asarray(m[name]) for m in moved]) for name in names}


def _spread(want: np.ndarray, moved: list[np.ndarray]) -> np.ndarray:
    w = want.astype(np.float64)
    out = np.zeros(w.shape)
    for m in moved:
        m = m.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            both = np.isfinite(w) & np.isfinite(m)
            # a move within the allowed error changes whether the element is finite: it sits on a pole
            flips = np.isfinite(w) != np.isfinite(m)
            out = np.where(both, np.maximum(out, np.abs(m - w)), out)
            out = np.where(flips, np.inf, out)
    return out


@contextmanager
def _moved_reassociations(kernel: Kernel, rel: float) -> Iterator[None]:
    """While active, the oracle adds `rel * max(1, max |x|)` to every float result `x` of the kernel's
    reassociating ops (reductions, scans, region folds of sum/prod/custom, contractions)."""
    from oracle.interp import EVAL

    targets = {id(o) for o in kernel.walk() if _reassociates(o, set())}
    classes = {type(o) for o in kernel.walk() if id(o) in targets}
    saved = {cls: EVAL[cls] for cls in classes}

    def wrap(fn: Any) -> Any:
        def moved(frame: Any, op: Op) -> Any:
            results = fn(frame, op)
            if id(op) not in targets:
                return results
            return [_move(x, v, rel) for x, v in zip(results, op.results)]
        return moved

    try:
        for cls, fn in saved.items():
            EVAL[cls] = wrap(fn)
        yield
    finally:
        EVAL.update(saved)


def _move(x: Any, v: Any, rel: float) -> Any:
    if not (isinstance(x, np.ndarray) and isinstance(v.type, TensorType) and _is_float(v)):
        return x
    with np.errstate(all="ignore"):
        wide = x.astype(np.float64)
        finite = np.abs(wide[np.isfinite(wide)])
        step = rel * max(1.0, float(finite.max()) if finite.size else 1.0)
        return (wide + step).astype(x.dtype)
