"""Golden printed physical programs of the acceptance kernels (reviewed by reading them).

Regenerate with `INTENT_UPDATE_GOLDEN=1 python -m pytest tests/test_physical_golden.py`, then read the
diff: softmax's workset is its rows, segment sum's its segments, the histogram's its elements,
matmul's the free axes (M, N) with K contracted inside an instance, the recurrence's its channels
with time an ordered loop inside, and two_groups has two groups in two program-space segments.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import physical
from kir.core import Kernel
from kir.dims import DSym
from physical import ops as P
from physical.model import Program
from physical.verifier import verify
from tests import acceptance

GOLDEN_DIR = Path(__file__).resolve().parent / "golden" / "physical"

# golden name -> (acceptance module, kernel)
GOLDEN = {
    "softmax": ("softmax", "softmax"),
    "segment_sum": ("segment_sum", "segment_sum"),
    "histogram": ("histogram", "histogram"),
    "matmul": ("matmul", "matmul"),
    "recurrence": ("recurrence", "linear_recurrence"),
    "two_groups": ("two_groups", "row_sums_and_scale"),
}


def acceptance_kernel(module: str, name: str) -> Kernel:
    return getattr(acceptance.load(acceptance.path_of(module)), name).kir


_LOWERED: dict[str, tuple[Kernel, Program]] = {}


def lowered(name: str) -> tuple[Kernel, Program]:
    if name not in _LOWERED:
        k = acceptance_kernel(*GOLDEN[name])
        _LOWERED[name] = (k, physical.lower(k))
    return _LOWERED[name]


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_printed_program_matches_its_golden_file(name):
    kernel, program = lowered(name)
    verify(program, kernel)
    text = physical.print_program(program)
    path = GOLDEN_DIR / f"{name}.txt"
    if os.environ.get("INTENT_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path}; run with INTENT_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8")


def _domains(program: Program) -> list[tuple[str, ...]]:
    return [tuple(str(d) for d in g.domain) for g in program.groups]


def _inside(program: Program, cls: type) -> list:
    """The ops of class `cls` in each group's body as it holds its rows whole (a looped form, the other region
    of a `looped_rows` op, recomputes them in chunks)."""
    return [op for g in program.groups for op in P.whole_form(g.body).walk() if isinstance(op, cls)]


def test_softmax_workset_is_its_rows():
    _, p = lowered("softmax")
    assert _domains(p) == [("M",)]
    reductions = _inside(p, P.Reduce)
    assert [str(r.kind) for r in reductions] == ["max", "sum"]
    assert all(r.inputs[0].type.tile[0].extent == DSym("N") for r in reductions)


def test_segment_sum_workset_is_its_segments():
    _, p = lowered("segment_sum")
    assert _domains(p) == [("S",)]
    # each instance folds its own data-dependent subregion: where programs cooperate (the `if` on SPLIT_0) a
    # head and a tail piece (the helpers fold the whole chunks between, physical/passes/balance_segments.py)
    # and the last participant their partials; in the direct form the whole subregion
    (branch,) = [op for op in p.groups[0].body.ops if isinstance(op, P.If) and any(
        isinstance(o, P.RegionFold) for o in op.then_.walk())]
    cooperating, direct = ([op for op in r.walk() if isinstance(op, P.RegionFold)]
                           for r in (branch.then_, branch.else_))
    assert (len(cooperating), len(direct)) == (3, 1) and len(_inside(p, P.RegionFold)) == 4
    assert all(f.begin.type.lanes and f.end.type.lanes for f in cooperating + direct)


def test_histogram_workset_is_its_elements():
    _, p = lowered("histogram")
    assert _domains(p) == [("E",)]
    atomics = _inside(p, P.AtomicRMW)  # per element, and (when the bins are few) aggregated per bin
    assert atomics and {(str(a.kind), str(a.order), a.scope) for a in atomics} == {("add", "acq_rel", "gpu")}


def test_matmul_workset_is_the_free_axes_with_k_inside():
    kernel, p = lowered("matmul")
    initial = physical.construct(kernel)  # one instance per (m, n), summing over the whole K tile
    assert _domains(initial) == [("M", "N")]
    (dot,) = _inside(initial, P.Contract)
    assert [str(t.extent) for t in dot.lhs.type.tile] == ["K"] and dot.axes == (0,)
    assert _domains(p) == [("M", "N")]  # after the passes: a program owns an (M, N) tile and walks K in order
    assert len(p.groups[0].tiles) == 2
    (loop,) = _inside(p, P.For)
    (mm,) = [op for op in loop.body.walk() if isinstance(op, P.MatMul)]
    assert [str(t.extent) for t in mm.lhs.type.tile][-1] == [str(t.extent) for t in mm.rhs.type.tile][0]


def test_recurrence_workset_is_its_channels_with_time_ordered_inside():
    _, p = lowered("recurrence")
    assert _domains(p) == [("C",)]
    (loop,) = _inside(p, P.For)
    assert str(p.groups[0].body.ops[0].NAME) == "owned_instances"
    assert any(isinstance(op, P.Store) for op in loop.body.ops)  # h[c, t] is written in time order
    assert len(loop.inits) == 1  # the carried state


def test_two_groups_take_two_segments_of_one_launch():
    _, p = lowered("two_groups")
    assert _domains(p) == [("M",), ("P",)]
    first, second = p.segments
    assert str(first.offset) == "0" and second.offset == first.length
    assert p.grid == physical.launch_expr.lsum((first.length, second.length))
