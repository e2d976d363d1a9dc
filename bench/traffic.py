"""Global-memory bytes moved per launch, against the ideal, counted under Triton's interpreter.

    python bench/traffic.py [--quick] [--only FAMILY ...] [--detail] [--sms N]

Generated kernels run on CPU tensors (Triton's interpreter) while `TrafficCounter` hooks the
interpreter's memory entry points. Every load, store and atomic counts the bytes of its *active*
elements only (mask true) times the element size; an atomic read-modify-write counts its element
twice (read and write), like an in-out tensor in the ideal. The ideal reads every input element
once and writes every output element once (in-out: both). Launches and programs come from the
interpreter's grid. `--detail` adds the bytes read and written per tensor.

Grids follow the launch device: under the interpreter, which runs one program at a time, a group whose
programs walk their blocks (persistent programs, for data every instance reads) launches one program.
`--sms 132` sizes every grid as for an H100/H200 instead, so that the table shows the traffic of the
grid the GPU would run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository's packages, not bench/'s siblings
    _ROOT = Path(__file__).resolve().parent.parent
    sys.path[:] = [str(_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _ROOT / "bench"]

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench.fast_reduce import vectorised_custom_reductions  # noqa: E402
from bench.kernels import BenchCase, clone_args, ideal_bytes, traffic_cases  # noqa: E402
from bench.report import failure_text, markdown_table, megabytes, ratio, verdict  # noqa: E402
from emit_triton.targets import simulated_multiprocessors  # noqa: E402
from intent.runtime import triton_adapter as adapter  # noqa: E402

SECTOR = 32  # bytes: the unit of a global-memory transaction
OTHER = "(other)"  # memory that belongs to no named tensor: launcher workspace, stray addresses

# The interpreter's memory entry points that every other one funnels into: plain loads and stores,
# tensor-descriptor loads/stores/gathers/scatters and atomic loads/stores all call the masked forms.
_HOOKED = ("set_grid_dim", "set_grid_idx", "create_masked_load", "create_masked_store", "create_atomic_rmw",
           "create_atomic_cas")


@dataclass
class Traffic:
    """What one counting session saw."""

    launches: int = 0
    programs: int = 0
    loaded: int = 0  # bytes
    stored: int = 0
    atomic: int = 0  # bytes, read + write
    atomic_ops: int = 0  # active atomic elements
    read_by: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # tensor -> bytes read
    written_by: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    max_atomics_per_address_per_program: int = 0
    # the device model (bench/model.py): 32-byte sectors each access instruction touches, per program
    sector_bytes: int = 0
    program_sector_bytes: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    launch_first_program: list[int] = field(default_factory=list)  # serial number of each launch's first program

    @property
    def total(self) -> int:
        return self.loaded + self.stored + self.atomic


class TrafficCounter:
    """Counts global-memory traffic of Triton's interpreter while installed.

        with TrafficCounter({"x": x, "out": out}) as counter:
            kernel(x=x, out=out)
        counter.traffic.total

    `tensors` names memory for the per-tensor attribution (by address range); anything else is
    attributed to `(other)`.
    """

    def __init__(self, tensors: Mapping[str, Any] | None = None) -> None:
        self.traffic = Traffic()
        self._regions: list[tuple[int, int, str]] = []
        for name, t in (tensors or {}).items():
            if isinstance(t, torch.Tensor) and t.numel() > 0:
                span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
                self._regions.append((t.data_ptr(), t.data_ptr() + span * t.element_size(), name))
        self._regions.sort()
        self._starts = np.array([r[0] for r in self._regions], dtype=np.uint64)
        self._ends = np.array([r[1] for r in self._regions], dtype=np.uint64)
        self._program = -1
        self._atomic_programs: list[np.ndarray] = []
        self._atomic_addresses: list[np.ndarray] = []

    # ------------------------------------------------------------------ installation
    def __enter__(self) -> TrafficCounter:
        self._hooks = adapter.interpreter_builder_hooks(_HOOKED, self._hook)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(None, None, None)
        self._finish_atomics()

    def _hook(self, name: str, original: Any) -> Any:
        if name == "set_grid_dim":
            def set_grid_dim(nx: int, ny: int, nz: int) -> Any:
                self.traffic.launches += 1
                self.traffic.launch_first_program.append(self._program + 1)
                self.traffic.programs += int(nx) * int(ny) * int(nz)
                return original(nx, ny, nz)
            return set_grid_dim
        if name == "set_grid_idx":
            def set_grid_idx(*idx: int) -> Any:
                self._program += 1  # a serial number: distinct across launches
                return original(*idx)
            return set_grid_idx
        if name == "create_masked_load":
            def load(ptrs: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
                self._record("load", ptrs, mask)
                return original(ptrs, mask, *rest, **kw)
            return load
        if name == "create_masked_store":
            def store(ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
                self._record("store", ptrs, mask)
                return original(ptrs, value, mask, *rest, **kw)
            return store
        if name == "create_atomic_rmw":
            def rmw(op: Any, ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
                self._record("atomic", ptrs, mask)
                return original(op, ptrs, value, mask, *rest, **kw)
            return rmw
        assert name == "create_atomic_cas"

        def cas(ptrs: Any, *rest: Any, **kw: Any) -> Any:
            self._record("atomic", ptrs, None)
            return original(ptrs, *rest, **kw)
        return cas

    # ------------------------------------------------------------------ counting
    def _record(self, kind: str, ptrs: Any, mask: Any) -> None:
        addresses = np.asarray(ptrs.data)
        if mask is not None:
            active = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
            addresses = addresses[active]
        addresses = addresses.reshape(-1).astype(np.uint64, copy=False)
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        n = int(addresses.size)
        t = self.traffic
        if n:
            # one instruction moves each distinct 32-byte sector among its active lanes once; an atomic
            # is performed per distinct address (each one a sector transaction at L2)
            units = np.unique(addresses if kind == "atomic" else addresses // SECTOR)
            moved = int(units.size) * SECTOR
            t.sector_bytes += moved
            t.program_sector_bytes[self._program] += moved
        if kind == "load":
            t.loaded += n * size
            self._attribute(addresses, size, t.read_by)
        elif kind == "store":
            t.stored += n * size
            self._attribute(addresses, size, t.written_by)
        else:
            t.atomic += 2 * n * size
            t.atomic_ops += n
            self._attribute(addresses, size, t.read_by)
            self._attribute(addresses, size, t.written_by)
            if n:  # an atomic whose lanes are all masked off performs nothing
                self._atomic_programs.append(np.full(n, self._program, dtype=np.int64))
                self._atomic_addresses.append(addresses.astype(np.int64))

    def _attribute(self, addresses: np.ndarray, size: int, table: dict[str, int]) -> None:
        if addresses.size == 0:
            return
        if not self._regions:
            table[OTHER] += int(addresses.size) * size
            return
        slot = np.searchsorted(self._starts, addresses, side="right") - 1
        inside = (slot >= 0) & (addresses < self._ends[np.maximum(slot, 0)])
        counts = np.bincount(slot[inside], minlength=len(self._regions))
        for (_, _, name), count in zip(self._regions, counts):
            if count:
                table[name] += int(count) * size
        stray = int(addresses.size - inside.sum())
        if stray:
            table[OTHER] += stray * size

    def _finish_atomics(self) -> None:
        if not self._atomic_addresses:
            return
        pairs = np.stack([np.concatenate(self._atomic_programs), np.concatenate(self._atomic_addresses)], axis=1)
        _, counts = np.unique(pairs, axis=0, return_counts=True)
        self.traffic.max_atomics_per_address_per_program = max(
            self.traffic.max_atomics_per_address_per_program, int(counts.max()))
        self._atomic_programs.clear()
        self._atomic_addresses.clear()


@contextmanager
def counting(tensors: Mapping[str, Any] | None = None) -> Iterator[Traffic]:
    """`with counting(args) as traffic: ...`: the same counter, yielding its `Traffic`."""
    with TrafficCounter(tensors) as counter:
        yield counter.traffic


# ---------------------------------------------------------------------------------------------- measurement


@dataclass
class Row:
    case: BenchCase
    traffic: Traffic | None
    ideal: int
    seconds: float
    sizes: dict[str, int] = field(default_factory=dict)  # tensor -> bytes
    error: str | None = None  # the pipeline failed: the cell shown instead of numbers
    wrong: str | None = None  # ran, but the outputs differ from torch

    @property
    def ratio(self) -> float | None:
        if self.traffic is None or self.ideal == 0:
            return None
        return self.traffic.total / self.ideal

    @property
    def atomics_ok(self) -> bool | None:
        if self.traffic is None or self.traffic.atomic_ops == 0:
            return None
        return self.traffic.max_atomics_per_address_per_program <= 1

    @property
    def met(self) -> bool | None:
        """Whether the issue's target for this kernel holds (None where it states none)."""
        if self.error is not None or self.wrong is not None:
            return False if (self.case.traffic_target is not None or self.case.family == "histogram") else None
        if self.case.family == "histogram":
            return self.atomics_ok
        if self.case.traffic_target is None or self.ratio is None:
            return None
        return self.ratio <= self.case.traffic_target


def measure(case: BenchCase, seed: int = 0, fast_reduce: bool = True) -> Row:
    """Run `case` once on CPU tensors under the counter; check its outputs against torch.

    `fast_reduce` vectorises the interpreter's custom-combine reductions (see bench/fast_reduce.py).
    """
    args = case.build(torch.device("cpu"), torch.Generator().manual_seed(seed))
    try:
        expected = case.eager(clone_args(args)) if case.eager_is_reference else {}
    except Exception:  # torch rejects the arguments too: the kernel's own error is the one to show
        expected = {}
    ideal = ideal_bytes(case.kernel, args)
    sizes = {k: v.numel() * v.element_size() for k, v in args.items() if isinstance(v, torch.Tensor)}
    start = time.perf_counter()
    try:
        with TrafficCounter(args) as counter, _maybe(fast_reduce):
            case.kernel(**args)
    except Exception as exc:  # the table records a failing kernel instead of hiding it
        return Row(case, None, ideal, time.perf_counter() - start, sizes, error=failure_text(exc))
    row = Row(case, counter.traffic, ideal, time.perf_counter() - start, sizes)
    row.wrong = _mismatch(args, expected, case.tol)
    return row


@contextmanager
def _maybe(fast_reduce: bool) -> Iterator[None]:
    if not fast_reduce:
        yield
        return
    with vectorised_custom_reductions():
        yield


def _mismatch(got: Mapping[str, Any], expected: Mapping[str, torch.Tensor], tol: Mapping[str, float]) -> str | None:
    for name, want in expected.items():
        have = got[name]
        if have.dtype.is_floating_point:
            ok = torch.allclose(have.double(), want.double(), equal_nan=True, **tol)
        else:
            ok = torch.equal(have, want.to(have.dtype))
        if not ok:
            diff = (have.double() - want.double()).abs().nan_to_num(float("inf")).max().item()
            return f"{name}: max abs diff {diff:.3g} against torch"
    return None


# ---------------------------------------------------------------------------------------------- tables

HEADERS = ("kernel", "size", "launches", "programs", "loaded MB", "stored MB", "atomic MB", "total MB", "ideal MB",
           "ratio", "target", "met", "notes")


def table(rows: list[Row]) -> str:
    out = []
    for r in rows:
        c = r.case
        target = f"<= {c.traffic_target}" if c.traffic_target is not None else (
            "<= 1 atomic/bin/program" if c.family == "histogram" else "-")
        if r.traffic is None:
            out.append((c.family, c.label, "-", "-", "-", "-", "-", "-", megabytes(r.ideal), "-", target,
                        verdict(r.met), f"FAILED: {r.error}"))
            continue
        t = r.traffic
        notes = []
        if t.atomic_ops:
            notes.append(f"{t.atomic_ops} atomics, max {t.max_atomics_per_address_per_program} per address "
                         f"per program")
        if r.wrong:
            notes.append(f"WRONG RESULT: {r.wrong}")
        notes.append(f"{r.seconds:.1f}s")
        out.append((c.family, c.label, t.launches, t.programs, megabytes(t.loaded), megabytes(t.stored),
                    megabytes(t.atomic), megabytes(t.total), megabytes(r.ideal), ratio(r.ratio), target,
                    verdict(r.met), "; ".join(notes)))
    return markdown_table(HEADERS, out)


def detail_table(rows: list[Row]) -> str:
    """Bytes read and written per tensor, as multiples of the tensor's size."""
    out = []
    for r in rows:
        if r.traffic is None:
            continue
        for name in sorted(set(r.traffic.read_by) | set(r.traffic.written_by)):
            read, written = r.traffic.read_by.get(name, 0), r.traffic.written_by.get(name, 0)
            size = r.sizes.get(name, 0)
            out.append((r.case.name, name, megabytes(read), _times(read, size), megabytes(written),
                        _times(written, size)))
    return markdown_table(("case", "tensor", "read MB", "reads/size", "written MB", "writes/size"), out)


def _times(n: int, size: int) -> str:
    return "-" if not size else f"{n / size:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (seconds, not minutes)")
    ap.add_argument("--only", nargs="*", metavar="FAMILY", help="kernel families to run (e.g. softmax cumsum)")
    ap.add_argument("--detail", action="store_true", help="also print bytes per tensor")
    ap.add_argument("--exact-reduce", action="store_true",
                    help="keep the interpreter's element-by-element custom-combine reductions (slow)")
    ap.add_argument("--sms", type=int, metavar="N",
                    help="size the grids as for a GPU of N multiprocessors (132: an H100/H200) instead of the "
                         "interpreter's one-program-at-a-time; the kernels still run under the interpreter")
    opts = ap.parse_args(argv)
    cases = [c for c in traffic_cases("quick" if opts.quick else "full") if not opts.only or c.family in opts.only]
    rows = []
    grids = simulated_multiprocessors(opts.sms) if opts.sms is not None else nullcontext()
    with grids:
        for case in cases:
            rows.append(measure(case, fast_reduce=not opts.exact_reduce))
            print(f"measured {case.name}: {rows[-1].seconds:.1f}s", file=sys.stderr, flush=True)
    if opts.sms is not None:
        print(f"grids sized for {opts.sms} multiprocessors\n")
    print(table(rows))
    if opts.detail:
        print()
        print(detail_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
