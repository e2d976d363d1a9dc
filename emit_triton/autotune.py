"""Bounded autotuning: a handful of launch configurations, timed once per specialisation and remembered.

The analytic model (`physical` passes) picks block sizes, `num_warps` and `num_stages`; a good kernel
never needs this module. A GPU user who wants the last few percent asks for it
(`@intent.kernel(autotune=True)`, or `INTENT_AUTOTUNE=1` for every kernel). The first launch of each
specialisation on a CUDA device then times at most six configurations around the model's own:

    num_warps in {w / 2, w, 2 w} (1..32)  x  num_stages in {s, s + 1}

Only these two are tuned: they change how Triton maps the same tiles onto the device, never which
elements a program owns, so every configuration computes the same thing (a float reduction may
associate differently across warps; KIR leaves that order unspecified). Block sizes stay the model's:
the grid and the bounds proofs are made for them.

Trials never touch the caller's data: every tensor the kernel writes, and every launcher workspace, is
copied before the trials and restored from that copy before each one; the real launch runs once,
afterwards, on the caller's tensors. The choice is kept in memory and on disk (a JSON artifact of the
kernel's cache entry, keyed by the device name, constexpr values, grid and index width), so later
launches and later processes take it without timing. Under Triton's interpreter (CPU tensors) nothing
is timed: interpreted time says nothing about the device.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import bound as bound_mod
from . import cache as cache_mod
from . import targets
from .abi import ArgKind
from .bound import BoundKernel

AUTOTUNE_ENV = "INTENT_AUTOTUNE"  # read by `intent.kernel` (which does not import this module)
MAX_CONFIGS = 6
REPEATS = 5

Timer = Callable[[Callable[[], None], Callable[[], None]], float]  # (reset, run) -> seconds


@dataclass(frozen=True)
class Config:
    num_warps: int
    num_stages: int

    def __str__(self) -> str:
        return f"num_warps={self.num_warps}, num_stages={self.num_stages}"


def configurations(num_warps: int, num_stages: int) -> list[Config]:
    """The model's configuration first, then its neighbours (at most `MAX_CONFIGS`)."""
    warps = [w for w in (num_warps, num_warps // 2, num_warps * 2) if 1 <= w <= 32]
    out: list[Config] = []
    for stages in (num_stages, num_stages + 1):
        for w in warps:
            c = Config(w, stages)
            if c not in out:
                out.append(c)
    return out[:MAX_CONFIGS]


# ---------------------------------------------------------------------------------------------- the record

def _record_name(device_name: str, keywords: Mapping[str, Any], grid: int) -> str:
    tuned = {"num_warps", "num_stages"}
    shown = sorted((k, repr(v)) for k, v in keywords.items() if k not in tuned)
    text = repr((device_name, shown, grid))
    return "autotune-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def remembered(owner: BoundKernel, entry_key: str, name: str, disk: cache_mod.DiskCache | None) -> Config | None:
    """The configuration chosen before for this entry and record: kept by the kernel's `owner`, else read
    from the disk record an earlier process wrote."""
    with owner.lock:
        hit = owner.tuned.get(f"{entry_key}/{name}")
    if hit is not None or disk is None:
        return hit
    payload = disk.read_artifact(entry_key, name)
    if payload is None:
        return None
    try:
        config = Config(int(payload["num_warps"]), int(payload["num_stages"]))
    except (KeyError, TypeError, ValueError):
        return None
    with owner.lock:
        owner.tuned[f"{entry_key}/{name}"] = config
    return config


def forget() -> None:
    """Drop the in-memory choices of every kernel (the disk records stay)."""
    for owner in bound_mod.every():
        with owner.lock:
            owner.tuned.clear()


# ---------------------------------------------------------------------------------------------- tuning


def _device_name(device: Any) -> str:
    if getattr(device, "type", "cpu") != "cuda":
        return "interpreter"
    import torch

    return torch.cuda.get_device_name(device)


def cuda_timer(reset: Callable[[], None], run: Callable[[], None]) -> float:
    """Median device time of `run` over `REPEATS` launches after one warm-up (compiles), each after `reset`."""
    import torch

    reset()
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPEATS):
        reset()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def wall_timer(reset: Callable[[], None], run: Callable[[], None]) -> float:
    reset()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def written_positions(kernel: Any, args: Sequence[Any], positional: Sequence[Any]) -> list[int]:
    """ABI positions of the tensors a launch may change: written parameters and workspaces."""
    written = {p.name for p in kernel.params if getattr(p.type, "role", None) is not None
               and p.type.role.value != "in"}
    return [n for n, a in enumerate(args)
            if (a.kind is ArgKind.TENSOR and a.param in written) or a.kind is ArgKind.WORKSPACE]


def tune(kernel: Any, emitted: Any, entry_key: str, fn: Any, target: targets.Target, grid: int,
         positional: Sequence[Any], keywords: Mapping[str, Any], *, timer: Timer | None = None,
         disk: cache_mod.DiskCache | None = None, force: bool = False) -> tuple[Config, list[tuple[Config, float]]]:
    """The configuration to launch with: remembered, else the fastest of `configurations` (timed with
    `timer`; trials run on copies of everything the kernel writes). Returns it and the trials' times
    (empty when remembered). Under the interpreter the model's configuration is returned untimed
    unless `force` (tests time the mechanism there)."""
    model = Config(int(keywords["num_warps"]), int(keywords["num_stages"]))
    if target.mode is targets.Mode.INTERPRETED and not force:
        return model, []
    name = _record_name(_device_name(target.device), keywords, grid)
    if disk is None:
        disk = cache_mod.default_cache()
    owner = bound_mod.bound(kernel)
    hit = remembered(owner, entry_key, name, disk)
    if hit is not None:
        return hit, []
    timer = timer or (cuda_timer if target.mode is targets.Mode.COMPILED else wall_timer)
    positions = written_positions(kernel, emitted.args, positional)
    pristine = {n: positional[n].clone() for n in positions}
    scratch = list(positional)
    for n in positions:
        scratch[n] = pristine[n].clone()

    def reset() -> None:
        for n in positions:
            scratch[n].copy_(pristine[n])

    trials: list[tuple[Config, float]] = []
    for config in configurations(model.num_warps, model.num_stages):
        options = dict(keywords, num_warps=config.num_warps, num_stages=config.num_stages)
        try:
            seconds = timer(reset, lambda options=options: targets.run(fn, target, grid, scratch, options))
        except Exception:  # noqa: BLE001  (a configuration the device cannot run, e.g. out of resources)
            continue
        trials.append((config, seconds))
    best = min(trials, key=lambda t: t[1])[0] if trials else model
    with owner.lock:
        owner.tuned[f"{entry_key}/{name}"] = best
    disk.write_artifact(entry_key, name, {"num_warps": best.num_warps, "num_stages": best.num_stages,
                                          "trials": [[c.num_warps, c.num_stages, s] for c, s in trials]})
    return best, trials


__all__ = ["Config", "configurations", "tune", "remembered", "forget", "cuda_timer", "wall_timer",
           "AUTOTUNE_ENV", "MAX_CONFIGS"]
