"""Control: `parallel` (one child frame with a lane per instance), ordered `for` and `while` with
lane-batched carries, `if` with results, and `yield`.

Lanes that diverge run their regions separately: a loop runs each iteration on the lanes still in
it (all of them when the trip count or the condition is the same everywhere), and `if` runs each
branch on the lanes that take it.
"""

from __future__ import annotations

import numpy as np

from kir.control import For, If, Parallel, While, Yield
from kir.errors import IntentError

from .interp import Frame, eval_region, evaluates
from .memory import at
from .numerics import np_dtype


@evaluates(Yield)
def _yield(frame: Frame, op: Yield) -> tuple[()]:
    return ()  # the enclosing region reads its yielded values


@evaluates(Parallel)
def _parallel(frame: Frame, op: Parallel) -> tuple[()]:
    domain = tuple(frame.dim(d) for d in op.domain)
    if any(n < 0 for n in domain):
        raise IntentError(f"parallel{at(op)}: negative extent in domain {list(domain)}")
    per_lane = int(np.prod(domain, dtype=np.int64))
    if per_lane == 0 or frame.size == 0:
        return ()
    # Instances are row-major over (outer lane, *domain): instance order is lane order.
    child = frame.lanes(np.repeat(np.arange(frame.size), per_lane))
    ramp = np.arange(per_lane, dtype=np.int64)
    coords = (ramp,) if len(domain) == 1 else np.unravel_index(ramp, domain)
    indices = [c if frame.size == 1 else np.tile(c, frame.size) for c in coords]
    eval_region(child, op.body, indices)
    return ()


def _merge(into: list[np.ndarray], lanes: np.ndarray, values: list[np.ndarray], size: int) -> list[np.ndarray]:
    """`into` with `values` written at `lanes` (each carried value expanded to one entry per lane)."""
    out = []
    for old, new in zip(into, values):
        full = np.array(np.broadcast_to(old, (size, *old.shape[1:]))) if old.shape[0] != size else old.copy()
        full[lanes] = new
        out.append(full)
    return out


def _narrow(values: list[np.ndarray], lanes: np.ndarray) -> list[np.ndarray]:
    return [v if v.shape[0] == 1 else v[lanes] for v in values]


@evaluates(For)
def _for(frame: Frame, op: For) -> list[np.ndarray]:
    start, stop, step = (frame.get(v) for v in (op.start, op.stop, op.step))
    carried = [frame.get(v) for v in op.inits]
    if (step == 0).any():
        raise IntentError(f"for{at(op)}: the step is 0")
    if start.shape[0] == stop.shape[0] == step.shape[0] == 1:
        for iv in range(int(start[0]), int(stop[0]), int(step[0])):
            carried = eval_region(frame.scope(), op.body, [np.array([iv], start.dtype), *carried])
        return carried
    start, stop, step = (frame.full(x).astype(np.int64) for x in (start, stop, step))
    span = np.where(step > 0, stop - start, start - stop)
    trips = np.maximum((span + np.abs(step) - 1) // np.abs(step), 0)
    dtype = np_dtype(op.start.type.dtype)  # type: ignore[union-attr]
    for k in range(int(trips.max(initial=0))):
        lanes = np.flatnonzero(trips > k)
        iv = (start + k * step).astype(dtype)
        if lanes.shape[0] == frame.size:
            carried = eval_region(frame.scope(), op.body, [iv, *carried])
        else:
            out = eval_region(frame.lanes(lanes), op.body, [iv[lanes], *_narrow(carried, lanes)])
            carried = _merge(carried, lanes, out, frame.size)
    return carried


@evaluates(While)
def _while(frame: Frame, op: While) -> list[np.ndarray]:
    carried = [frame.get(v) for v in op.inits]
    lanes: np.ndarray | None = None  # None: every lane is still looping
    while True:
        sub = frame.scope() if lanes is None else frame.lanes(lanes)
        state = carried if lanes is None else _narrow(carried, lanes)
        (go,) = eval_region(sub, op.cond, state)
        go = np.broadcast_to(go, (sub.size,))
        if not go.any():
            return carried
        if lanes is None and go.all():
            carried = eval_region(frame.scope(), op.body, carried)
            continue
        lanes = np.flatnonzero(go) if lanes is None else lanes[go]
        out = eval_region(frame.lanes(lanes), op.body, _narrow(carried, lanes))
        carried = _merge(carried, lanes, out, frame.size)


@evaluates(If)
def _if(frame: Frame, op: If) -> list[np.ndarray]:
    cond = frame.get(op.cond)
    if cond.shape[0] == 1 or cond.all() or not cond.any():
        return eval_region(frame.scope(), op.then_ if cond[0] else op.else_, [])
    taken, other = np.flatnonzero(cond), np.flatnonzero(~cond)
    then_out = eval_region(frame.lanes(taken), op.then_, [])
    else_out = eval_region(frame.lanes(other), op.else_, [])
    out = []
    for t, e in zip(then_out, else_out):
        merged = np.empty((frame.size, *t.shape[1:]), t.dtype)
        merged[taken] = np.broadcast_to(t, (taken.shape[0], *t.shape[1:]))
        merged[other] = np.broadcast_to(e, (other.shape[0], *e.shape[1:]))
        out.append(merged)
    return out
