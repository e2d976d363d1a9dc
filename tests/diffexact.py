"""Which results of a differential-testing kernel may differ between correct implementations.

Transcendentals, divisions, square roots, float sums/products of reductions, scans and contractions are
*inexact* (`inexact_values`): they round differently between implementations, so the outputs they feed
(`inexact_outputs`) are compared within a tolerance, and the kernels of `tests/diffgen.py` never compare,
floor or convert them. Finer classes of outputs name how they may differ: fed by a float fold whose
association the implementation chooses (`association_dependent_outputs`), by a periodic function of one
(`periodic_of_reassociated_outputs`), or by what XLA rewrites (`contracted_outputs`, `reassociated_outputs`).
"""

from __future__ import annotations

from collections.abc import Callable

from kir import (
    Atomic,
    AtomicCAS,
    Binary,
    BinaryFn,
    Dot,
    DType,
    For,
    If,
    Kernel,
    Load,
    Random,
    Reduce,
    Region,
    RegionFold,
    RegionScan,
    RngKind,
    Scan,
    Scatter,
    Store,
    TensorType,
    Unary,
    UnaryFn,
    Value,
    While,
)
from kir.core import Op

TRANSCENDENTAL = {UnaryFn.exp, UnaryFn.exp2, UnaryFn.log, UnaryFn.log2, UnaryFn.log1p, UnaryFn.sqrt, UnaryFn.rsqrt,
                  UnaryFn.sin, UnaryFn.cos, UnaryFn.tanh, UnaryFn.sigmoid, UnaryFn.erf}


def result_inexact(op: Op, inexact: Callable[[Value], bool]) -> bool:
    """Whether `op`'s float results may differ between correct implementations (by rounding).

    `inexact(v)` says whether a value already is; an `if` takes the exactness of what it yields."""
    operands = any(inexact(v) for v in op.operands() if isinstance(v.type, TensorType))
    if isinstance(op, Unary):
        return op.fn in TRANSCENDENTAL or operands
    if isinstance(op, Binary):
        return op.fn in (BinaryFn.div, BinaryFn.pow) or operands
    if isinstance(op, Reduce | Scan):
        return op.kind.value in ("sum", "prod", "custom") or operands
    if isinstance(op, RegionFold):
        return op.kind.value in ("sum", "prod", "custom") or operands or \
            (op.map is not None and region_inexact(op.map, inexact))
    if isinstance(op, Dot):
        return True
    if isinstance(op, Random):
        return op.kind is RngKind.randn
    if isinstance(op, For | While):
        return True  # float loop carries are taken as inexact (conservative)
    if isinstance(op, If):
        return operands or any(inexact(v) for r in (op.then_, op.else_) for v in r.yielded)
    return operands


def region_inexact(region: Region, outer: Callable[[Value], bool]) -> bool:
    """Whether a region yields an inexact value (its own ops classified afresh; outer values by `outer`)."""
    seen: set[int] = set()

    def inexact(v: Value) -> bool:
        return v.id in seen or outer(v)

    for o in region.walk():
        if result_inexact(o, inexact):
            seen.update(v.id for v in o.results)
    return any(inexact(v) for v in region.yielded)


def _is_float(v: Value) -> bool:
    dt = v.type.dtype
    return isinstance(dt, DType) and dt.is_float


def inexact_values(kernel: Kernel) -> tuple[set[int], set[int]]:
    """(float values, memories) whose contents may differ by rounding between correct implementations.

    A memory is inexact when an inexact float value is stored into it anywhere (flow-insensitive, so
    loops are covered); a load from it is then inexact too. Iterates to a fixed point.
    """
    values: set[int] = set()
    refs: set[int] = set()

    def inexact(v: Value) -> bool:
        return v.id in values

    while True:
        before = (len(values), len(refs))
        for o in kernel.walk():
            src = getattr(o, "src", None)
            reads_inexact = isinstance(o, Load | RegionFold) and src is not None and src.id in refs
            if isinstance(o, For | While):
                for r in o.regions():
                    values.update(a.id for a in r.args if _is_float(a))
            if reads_inexact or result_inexact(o, inexact):
                values.update(v.id for v in o.results if isinstance(v.type, TensorType) and _is_float(v))
            if writes_inexact(o, inexact, refs):
                refs.add(_written_value(o)[0].id)  # type: ignore[index]
        if (len(values), len(refs)) == before:
            return values, refs


def writes_inexact(o: Op, inexact: Callable[[Value], bool], refs: set[int]) -> bool:
    written = _written_value(o)
    if written is None:
        return False
    if isinstance(o, RegionScan):
        return o.src.id in refs or (_is_float(o.src) and o.kind.value in ("sum", "prod", "custom"))
    return inexact(written[1])


def _written_value(o: Op) -> tuple[Value, Value] | None:
    if isinstance(o, Store | Scatter):
        return o.dst, o.value
    if isinstance(o, Atomic):
        return o.dst, o.value
    if isinstance(o, AtomicCAS):
        return o.dst, o.value
    if isinstance(o, RegionScan):
        return o.dst, o.src
    return None


def association_dependent_outputs(kernel: Kernel) -> set[str]:
    """Outputs fed by float sums or products folded in an association the implementation chooses
    (reductions, scans, region folds and scans of `sum`, `prod` and custom combines, contractions): a
    partial result that overflows to inf and then meets a zero or an opposite infinity gives NaN in one
    association and 0 or inf in another, so their non-finite elements are not compared
    (docs/testing.md, Tolerances)."""
    return _outputs_fed_by(kernel, _reassociates)


def _reassociates(o: Op, values: set[int]) -> bool:
    """A float sum, product or custom fold, or a contraction: its association is the implementation's."""
    kind = getattr(getattr(o, "kind", None), "value", None)
    # a region scan has no results: its float data is the memory it reads
    floats = any(_is_float(v) for v in o.results + tuple(o.operands())
                 if isinstance(v.type, TensorType) or isinstance(o, RegionScan | RegionFold) and v is o.src)
    return floats and (isinstance(o, Dot) or isinstance(o, Reduce | Scan | RegionFold | RegionScan)
                       and kind in ("sum", "prod", "custom"))


PERIODIC = ("sin", "cos", "tan")


def periodic_of_reassociated_outputs(kernel: Kernel) -> set[str]:
    """Outputs fed by sin, cos or tan of a value whose association the implementation chooses: the
    function's absolute error is its argument's relative error times the argument, without bound (a
    product of eight f16 values off by two ulps, 504.8 against 504.2, gives cos -0.50 against -0.02), so
    these outputs are not compared by value (docs/testing.md, Tolerances)."""
    reassociated = _reassociated_values(kernel)

    def seeds(o: Op, values: set[int]) -> bool:
        return o.NAME == "unary" and str(getattr(o, "fn", "")) in PERIODIC and \
            any(v.id in reassociated for v in o.operands())

    return _outputs_fed_by(kernel, seeds)


def _reassociated_values(kernel: Kernel) -> set[int]:
    found: set[int] = set()
    _outputs_fed_by(kernel, _reassociates, found)
    return found


def _outputs_fed_by(kernel: Kernel, seeds: Callable[[Op, set[int]], bool], values: set[int] | None = None
                    ) -> set[str]:
    """Output names whose final contents depend on a value of a `seeds` op (through values and the memory
    they are written to); `values` collects the dependent value ids."""
    values = set() if values is None else values
    refs: set[int] = set()
    while True:
        before = (len(values), len(refs))
        for o in kernel.walk():
            src = getattr(o, "src", None)
            nested = any(r.id in values for region in o.regions() for inner in region.ops for r in inner.results)
            if seeds(o, values) or nested or (src is not None and src.id in refs) or \
                    any(v.id in values for v in o.operands()):
                values.update(v.id for v in o.results)
                written = _written_value(o)
                if written is not None:
                    refs.add(written[0].id)
        if (len(values), len(refs)) == before:
            return {p.name for p in kernel.outputs if p.value.id in refs}


def contracted_outputs(kernel: Kernel) -> set[str]:
    """Outputs fed by a float add or subtract of a float product: XLA's CPU compiler contracts the two into
    one fused multiply-add (one rounding instead of two; `jax.jit(lambda a, x: a + x * 1.5)` differs from
    NumPy in the last bit), so StableHLO results of these outputs are compared within the tolerance
    (docs/testing.md, Tolerances). A uniform `random rand` value is such a product too: Philox's bits, as
    a float, times the f32 literal 4.6566127342e-10 (Triton's `uint_to_uniform_float`)."""
    products = {v.id for o in kernel.walk() if (o.NAME == "binary" and str(o.fn) == "mul"
                                                 or o.NAME == "random" and str(o.kind) == "rand")
                for v in o.results if _is_float(v)}

    def seeds(o: Op, values: set[int]) -> bool:
        return o.NAME == "binary" and str(o.fn) in ("add", "sub") and \
            any(v.id in products for v in o.operands())

    return _outputs_fed_by(kernel, seeds)


def reassociated_outputs(kernel: Kernel) -> set[str]:
    """Outputs fed by a float add or subtract of a constant whose other operand is itself a float add or
    subtract of a constant: XLA's algebraic simplifier folds the two constants first (`(a - 0.5) - -3.0`
    becomes `a + 2.5`: one rounding instead of two; in f16 and in f32 alike), so StableHLO results of these
    outputs are compared within the tolerance (docs/testing.md, Tolerances)."""
    constants: set[int] = set()
    for o in kernel.walk():
        if o.NAME == "constant" or (o.NAME == "broadcast" and any(v.id in constants for v in o.operands())):
            constants.update(v.id for v in o.results)

    def with_constant(o: Op) -> bool:
        return o.NAME == "binary" and str(o.fn) in ("add", "sub") and any(_is_float(v) for v in o.results) \
            and any(v.id in constants for v in o.operands())

    chained = {v.id for o in kernel.walk() if with_constant(o) for v in o.results}

    def seeds(o: Op, values: set[int]) -> bool:
        return with_constant(o) and any(v.id in chained for v in o.operands())

    return _outputs_fed_by(kernel, seeds)


def inexact_outputs(kernel: Kernel) -> set[str]:
    """Names of output parameters whose final contents are compared within a tolerance."""
    _, refs = inexact_values(kernel)
    return {p.name for p in kernel.outputs if p.value.id in refs}
