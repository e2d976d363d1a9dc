"""`with intent.profile() as p:` records every kernel launch; `print(p)` shows them, `p.roofline(path)` draws them.

Each record holds the kernel, its specialisation (dtype signature and constexpr values), the grid,
the device time (CUDA events on a GPU; wall time under Triton's interpreter, labelled so), and the
bytes moved and FLOPs computed, evaluated from the operation-count expressions that the compiler
derives from the physical program's access relations and ops (`physical.counts`) on the launch's
shape symbols. With the device's peaks (`intent.runtime.peaks`) it gives achieved GB/s and % of peak.

Launch sites register with `instrument(module, name, wrap)`: while at least one profile is active
the module's function `name` is replaced by `wrap(original)`, and restored when the last one ends,
so a launch outside a profile runs exactly the code it runs without the profiler.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from . import expr as E
from .peaks import Peaks, device_peaks

_lock = threading.RLock()
_active: list[Profile] = []
_sites: list[tuple[ModuleType, str, Callable[[Any], Any]]] = []
_originals: dict[tuple[int, str], Any] = {}


def instrument(module: ModuleType, name: str, wrap: Callable[[Any], Any]) -> None:
    """Register `module.name` as a launch site (patched with `wrap(original)` while profiling)."""
    with _lock:
        _sites.append((module, name, wrap))
        if _active:
            _patch(module, name, wrap)


def _patch(module: ModuleType, name: str, wrap: Callable[[Any], Any]) -> None:
    original = getattr(module, name)
    _originals[(id(module), name)] = original
    setattr(module, name, wrap(original))


def _unpatch_all() -> None:
    for module, name, _ in _sites:
        original = _originals.pop((id(module), name), None)
        if original is not None:
            setattr(module, name, original)


# ---------------------------------------------------------------------------------------------- what a launch is


class LaunchInfo:
    """What the profiler needs of a launch besides its timing; `counts` are evaluated only when profiling.

    `counts` maps "bytes", "flops" and "exact" to expressions: launch expressions (with `evaluate`) or
    expression data (`intent.runtime.expr`); `env` binds their names."""

    __slots__ = ("kernel", "specialisation", "counts", "env", "_values")

    def __init__(self, kernel: str, specialisation: str, counts: Any, env: Mapping[str, Any]) -> None:
        self.kernel, self.specialisation, self.counts, self.env = kernel, specialisation, counts, env
        self._values: tuple[int | None, int | None, bool] | None = None

    def values(self) -> tuple[int | None, int | None, bool]:
        """(bytes, flops, exact); None where the kernel has no count (or it cannot be evaluated)."""
        if self._values is None:
            table = dict(self.counts)
            found: list[Any] = []
            for name in ("bytes", "flops", "exact"):
                e = table.get(name)
                try:
                    found.append(None if e is None else int(e.evaluate(self.env)) if hasattr(e, "evaluate")
                                 else int(E.evaluate(e, self.env)))
                except (KeyError, ZeroDivisionError, ValueError, TypeError):
                    found.append(None)
            self._values = (found[0], found[1], bool(found[2]))
        return self._values


def specialisation_text(dtypes: Mapping[str, str], constexprs: Mapping[str, Any]) -> str:
    shown = ",".join(dtypes.values())
    tiles = " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in constexprs.items())
    return f"{shown} {tiles}".strip()


# ---------------------------------------------------------------------------------------------- records


@dataclass
class Launch:
    """One recorded launch."""

    kernel: str
    specialisation: str
    grid: int
    device: str
    path: str  # how it ran: "interpreter", "jit", "cubin sm_90", ...
    bytes: int | None
    flops: int | None
    exact: bool  # the counts are exact (not estimates: while loops, data-dependent bounds)
    _seconds: float | None = None
    _events: tuple[Any, Any] | None = field(default=None, repr=False)

    @property
    def timing(self) -> str:
        return "wall (interpreter)" if self.path == "interpreter" else "cuda events"

    @property
    def seconds(self) -> float:
        if self._seconds is None:
            assert self._events is not None
            start, end = self._events
            end.synchronize()
            self._seconds = start.elapsed_time(end) / 1e3
            self._events = None
        return self._seconds

    @property
    def gbs(self) -> float | None:
        return self.bytes / self.seconds / 1e9 if self.bytes is not None and self.seconds > 0 else None

    @property
    def gflops(self) -> float | None:
        return self.flops / self.seconds / 1e9 if self.flops is not None and self.seconds > 0 else None


class Profile:
    """The launches recorded while its `with` block ran (see the module doc)."""

    def __init__(self, peak_gbs: float | None = None, peak_tflops: float | None = None) -> None:
        self.launches: list[Launch] = []
        self._peak_gbs, self._peak_tflops = peak_gbs, peak_tflops
        self._peaks: dict[str, Peaks] = {}

    def __enter__(self) -> Profile:
        with _lock:
            if not _active:
                for module, name, wrap in _sites:
                    _patch(module, name, wrap)
            _active.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        with _lock:
            if self in _active:
                _active.remove(self)
            if not _active:
                _unpatch_all()
        for launch in self.launches:
            launch.seconds  # noqa: B018  (resolve CUDA events once, at the end)

    def __iter__(self) -> Iterator[Launch]:
        return iter(self.launches)

    def __len__(self) -> int:
        return len(self.launches)

    def peaks(self, device: str) -> Peaks:
        """The peaks of `device` ("cpu" has none unless given to `profile(peak_gbs=..., peak_tflops=...)`)."""
        found = self._peaks.get(device)
        if found is None:
            name = device
            if device.startswith("cuda"):
                import torch

                name = torch.cuda.get_device_name(torch.device(device))
            found = device_peaks(name, self._peak_gbs)
            if self._peak_tflops:
                found = Peaks(found.device, found.bandwidth, self._peak_tflops * 1e12)
            self._peaks[device] = found
        return found

    def _record(self, info: LaunchInfo, grid: int, device: Any, path: str, run: Callable[[], Any]) -> Any:
        nbytes, flops, exact = info.values()
        launch = Launch(info.kernel, info.specialisation, grid, str(device), path, nbytes, flops, exact)
        if device.type == "cuda" and path != "interpreter":
            import torch

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = run()
            end.record()
            launch._events = (start, end)
        else:
            began = time.perf_counter()
            result = run()
            launch._seconds = time.perf_counter() - began
        self.launches.append(launch)
        return result

    # ------------------------------------------------------------------------------------------ reports
    def rows(self) -> list[list[str]]:
        out = []
        for x in self.launches:
            peaks = self.peaks(x.device)
            gbs, gflops = x.gbs, x.gflops
            approx = "" if x.exact else "~"
            out.append([x.kernel, x.specialisation, str(x.grid), x.path, f"{x.seconds * 1e3:.3f}", x.timing,
                        "-" if x.bytes is None else f"{approx}{x.bytes}",
                        "-" if x.flops is None else f"{approx}{x.flops}",
                        "-" if gbs is None else f"{gbs:.3g}",
                        f"{100 * gbs * 1e9 / peaks.bandwidth:.1f}%" if gbs is not None and peaks.bandwidth else "-",
                        "-" if gflops is None else f"{gflops:.3g}",
                        f"{100 * gflops * 1e9 / peaks.flops:.2f}%" if gflops is not None and peaks.flops else "-"])
        return out

    HEADERS = ("kernel", "specialisation", "grid", "ran as", "ms", "timing", "bytes", "FLOPs", "GB/s", "% peak BW",
               "GFLOP/s", "% peak FLOP/s")

    def __str__(self) -> str:
        rows = self.rows()
        if not rows:
            return "no kernel launches recorded"
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(self.HEADERS)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(self.HEADERS, widths)).rstrip(),
                 "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        if any(not x.exact for x in self.launches):
            lines.append("~: an estimate (a loop whose trip count depends on data is counted once)")
        return "\n".join(lines)

    def roofline(self, path: str, *, device: str | None = None) -> str:
        """Draw achieved FLOP/s against arithmetic intensity (FLOPs per byte) with the device's roofs
        into `path` (any format matplotlib writes); needs matplotlib (`pip install intent[profile]`)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("Profile.roofline needs matplotlib: pip install 'intent[profile]'") from None
        points = [x for x in self.launches if x.bytes and x.flops is not None and x.seconds > 0
                  and (device is None or x.device == device)]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP / byte)")
        ax.set_ylabel("achieved GFLOP/s")
        intensities = [max(x.flops, 1) / x.bytes for x in points] or [1.0]
        lo, hi = min(intensities) / 4, max(intensities) * 4
        for dev in sorted({x.device for x in points}):
            peaks = self.peaks(dev)
            if peaks.bandwidth:
                top = peaks.flops or peaks.bandwidth * hi
                ridge = top / peaks.bandwidth
                xs = [lo, min(max(ridge, lo), hi), hi]
                ax.plot(xs, [min(peaks.bandwidth * v, top) / 1e9 for v in xs], "k-", lw=1,
                        label=f"{peaks.device} roof")
        for kernel in sorted({x.kernel for x in points}):
            mine = [x for x in points if x.kernel == kernel]
            ax.scatter([max(x.flops, 1) / x.bytes for x in mine], [max(x.flops, 1) / x.seconds / 1e9 for x in mine],
                       label=kernel)
        timing = {x.timing for x in points}
        ax.set_title("roofline" + (" (wall time under the interpreter)" if "wall (interpreter)" in timing else ""))
        if points:
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return path


def profile(*, peak_gbs: float | None = None, peak_tflops: float | None = None) -> Profile:
    """`with intent.profile() as p:` records every kernel launch in the block (see the module doc).

    `peak_gbs` / `peak_tflops` override the device's peaks (or give them for a device not in the table)."""
    return Profile(peak_gbs, peak_tflops)


def record(info: LaunchInfo | None, grid: int, device: Any, path: str, run: Callable[[], Any]) -> Any:
    """Run `run` (one launch) and record it in every active profile (called by instrumented sites)."""
    with _lock:
        profiles = list(_active)
    if info is None or not profiles:
        return run()
    result = profiles[-1]._record(info, grid, device, path, run)
    for other in profiles[:-1]:
        other.launches.append(profiles[-1].launches[-1])
    return result
