"""The bits of NaNs that arithmetic makes (documented in docs/testing.md, Tolerances).

KIR defines that an invalid operation (`inf // 2.0`, `0.0 / 0.0`, `sqrt(-1.0)`) gives a NaN, not which
NaN: x86 (NumPy, so the oracle and Triton's interpreter) gives the negative default NaN `0xFFF8...`,
XLA's CPU code the positive `0x7FF8...`, a GPU its canonical `0x7FFFFFFF`, and a NaN operand's payload may
or may not survive an operation (`min.NaN` on a GPU returns the canonical NaN). So a `bitcast` of such a
value to an integer has platform bits. A NaN that only moves (a load of input bits, a select, a layout op,
a sort, an atomic's old value, a loop carry) keeps its bits exactly; those bits stay compared.

`nan_bits_outputs` follows the data: the float values that may hold a NaN made by arithmetic
(`arithmetic_nan_values`, through memories and control flow), the bitcasts that read them, and the outputs
those bitcasts feed. For such an output, `NanBits.accept` runs the oracle twice more with the bitcasts'
NaNs replaced by two other quiet NaNs (sign and payload all set; positive and payload clear); elements that
differ between the three runs depend on the NaN's bits and accept any value, except that an element which
is a NaN of the bitcast's source dtype in every run must be a NaN there too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from kir import (
    Atomic,
    AtomicCAS,
    AtomicKind,
    Bitcast,
    Cast,
    Constant,
    DType,
    For,
    If,
    Kernel,
    Random,
    RegionScan,
    Scatter,
    Store,
    TensorType,
    While,
)
from kir.core import Op, Value
from kir.sort import Sort
from tests.diffexact import _is_float, _outputs_fed_by


def _float(v: Value) -> bool:
    return isinstance(v.type, TensorType) and _is_float(v)


def _makes_nan(o: Op) -> bool:
    """Whether `o`'s float results are computed (so a NaN among them has the platform's bits) rather than moved.

    Moves (`oracle.interp.MOVES`: loads, gathers, selects, layout ops, bitcasts), sorts, atomics' old values and
    control flow keep the bits of what they move; constants have the literal's bits; random values and
    conversions from integers are never NaN."""
    from oracle.interp import MOVES

    if type(o) in MOVES or isinstance(o, Sort | Atomic | AtomicCAS | If | For | While | Constant | Random):
        return False
    if isinstance(o, Cast):
        return _float(o.x)
    return True


def _writes_nan(o: Op, values: set[int]) -> Value | None:
    """The memory `o` writes a value that may be an arithmetic NaN into, if it does."""
    if isinstance(o, Store | Scatter | AtomicCAS):
        return o.dst if o.value.id in values else None
    if isinstance(o, Atomic):  # a float atomic other than an exchange computes what it stores
        computes = o.kind is not AtomicKind.xchg and isinstance(o.dst.type.dtype, DType) and o.dst.type.dtype.is_float
        return o.dst if computes or o.value.id in values else None
    if isinstance(o, RegionScan):
        src = o.src.type.dtype
        return o.dst if isinstance(src, DType) and src.is_float else None
    return None


def arithmetic_nan_values(kernel: Kernel) -> set[int]:
    """Ids of the float values that may hold a NaN made by an arithmetic operation: results of arithmetic,
    and what moves them (through memories, branches and loop carries). Iterates to a fixed point."""
    values: set[int] = set()
    refs: set[int] = set()

    def mark(vs: Any) -> None:
        values.update(v.id for v in vs if _float(v))

    while True:
        before = (len(values), len(refs))
        for o in kernel.walk():
            if isinstance(o, If):
                mark(r for r, a, b in zip(o.results, o.then_.yielded, o.else_.yielded) if {a.id, b.id} & values)
            elif isinstance(o, For | While):
                carried = o.body.args[1:] if isinstance(o, For) else o.body.args
                also = () if isinstance(o, For) else o.cond.args
                for k, (init, out) in enumerate(zip(o.inits, o.body.yielded)):
                    if {init.id, out.id} & values:
                        mark((o.results[k], carried[k]) + ((also[k],) if also else ()))
            elif _makes_nan(o):
                mark(o.results)
                # the accumulators of a combine region are results of earlier applications of it
                for region in o.regions():
                    mark(region.args)
            else:
                src = getattr(o, "src", None) if not isinstance(o, Atomic | AtomicCAS) else getattr(o, "dst", None)
                if any(v.id in values for v in o.operands()) or (src is not None and src.id in refs):
                    mark(o.results)
            written = _writes_nan(o, values)
            if written is not None:
                refs.add(written.id)
        if (len(values), len(refs)) == before:
            return values


def nan_bits_bitcasts(kernel: Kernel) -> set[int]:
    """`id`s of the bitcast ops whose float operand may be a NaN made by arithmetic."""
    values = arithmetic_nan_values(kernel)
    return {id(o) for o in kernel.walk() if isinstance(o, Bitcast) and o.x.id in values}


def nan_bits_outputs(kernel: Kernel) -> set[str]:
    """Outputs whose contents may depend on the bits of a NaN made by arithmetic (through a bitcast)."""
    targets = nan_bits_bitcasts(kernel)
    if not targets:
        return set()
    return _outputs_fed_by(kernel, lambda o, _: id(o) in targets)


# ---------------------------------------------------------------------------------------------- comparing


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(f"u{x.itemsize}") if x.dtype.kind in "fiu" else x


def _nan_patterns(dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """Two quiet NaNs of `dtype` that differ in the sign and in every payload bit, in the oracle's storage."""
    from oracle.numerics import bitcast, np_dtype, to_storage

    unsigned = {8: DType.u8, 16: DType.u16, 32: DType.u32, 64: DType.u64}[dtype.bits]
    ones = np.array([(1 << dtype.bits) - 1], np_dtype(unsigned))
    canonical = bitcast(to_storage(np.array([np.nan]), dtype), dtype, unsigned) & ~np.array(
        [1 << (dtype.bits - 1)], np_dtype(unsigned))
    return bitcast(ones, unsigned, dtype), bitcast(canonical, unsigned, dtype)


@contextmanager
def _nans_replaced(targets: set[int], which: int) -> Iterator[None]:
    """While active, the oracle's bitcasts in `targets` give the bits of pattern `which` of `_nan_patterns`
    (of their source dtype) where their operand is a NaN."""
    from oracle.interp import EVAL
    from oracle.numerics import bitcast
    from oracle.pointwise import value_dtype

    saved = EVAL[Bitcast]

    def replaced(frame: Any, op: Op) -> Any:
        (bits,) = saved(frame, op)
        if id(op) not in targets:
            return (bits,)
        src, dst = value_dtype(op.x), value_dtype(op.results[0])  # type: ignore[attr-defined]
        nan = bitcast(_nan_patterns(src)[which], src, dst)
        x = np.asarray(frame.get(op.x), np.float64)  # type: ignore[attr-defined]
        return (np.where(np.isnan(x), nan, bits).astype(bits.dtype),)

    EVAL[Bitcast] = replaced
    try:
        yield
    finally:
        EVAL[Bitcast] = saved


class NanBits:
    """The outputs of a case whose elements may hold platform NaN bits, and how to accept them.

    The two extra oracle runs happen on the first `accept` whose `got` differs from `want` in its bits."""

    def __init__(self, kernel: Kernel, inputs: Mapping[str, Any], want: Mapping[str, np.ndarray],
                 exclude: frozenset[str] | set[str] = frozenset()) -> None:
        self.kernel = kernel
        self.inputs = inputs
        self.want = want  # the oracle's own results, which the two extra runs are measured against
        self.outputs = nan_bits_outputs(kernel) - set(exclude)
        self._runs: list[dict[str, np.ndarray]] | None = None

    def _moved(self) -> list[dict[str, np.ndarray]]:
        if self._runs is None:
            import oracle

            targets = nan_bits_bitcasts(self.kernel)
            self._runs = []
            for which in (0, 1):
                with _nans_replaced(targets, which):
                    self._runs.append(oracle.run(self.kernel, {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                                               for k, v in self.inputs.items()}))
        return self._runs

    def _source_dtype(self, width: int) -> DType | None:
        """The one float dtype of `width` bits the kernel's NaN-bits bitcasts read, if there is one."""
        targets = nan_bits_bitcasts(self.kernel)
        found = {o.x.type.dtype for o in self.kernel.walk() if id(o) in targets}  # type: ignore[attr-defined]
        same = [d for d in found if isinstance(d, DType) and d.bits == width]
        return same[0] if len(same) == 1 else None

    def accept(self, name: str, dtype: DType, got: np.ndarray, want: np.ndarray) -> np.ndarray:
        """`got` with `want` in place of each element that may differ by the bits of an arithmetic NaN (`want`:
        the oracle's results as the comparison sees them, e.g. with subnormals flushed)."""
        got, want = np.asarray(got), np.asarray(want)
        if name not in self.outputs or got.shape != want.shape:
            return got
        g = got.astype(want.dtype) if got.dtype != want.dtype else got
        if np.array_equal(_bits(g), _bits(want)):
            return got
        plain = np.asarray(self.want[name])
        moved = [np.asarray(run[name]) for run in self._moved()]
        depends = np.zeros(want.shape, bool)
        for m in moved:
            depends |= _bits(m) != _bits(plain)
        accepted = depends
        source = self._source_dtype(dtype.bits) if dtype.bits else None
        if source is not None and want.dtype.kind in "iu":
            from oracle.numerics import bitcast

            def nan(x: np.ndarray) -> np.ndarray:
                return np.isnan(np.asarray(bitcast(x.astype(want.dtype), dtype, source), np.float32))

            always = nan(plain)
            for m in moved:
                always &= nan(m)
            accepted = depends & (~always | nan(g))
        return np.where(accepted, want, g).astype(want.dtype)
