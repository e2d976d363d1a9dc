"""`physical.explain`: worksets, groups, segments with their launch expressions, buffer scopes, per-access
bounds justification and performance notes."""

from __future__ import annotations

import physical
from kir import INDEX_DTYPE, Builder, Constant, Load, Parallel, Param, RefType, Role, Store, Yield, build_kernel, scalar
from kir.core import Kernel
from kir.dims import DSym
from kir.dtypes import DType
from kir.errors import Loc
from kir.solver import ShapeSolver
from physical.verifier import RULES
from tests import samples

N = DSym("N")


def last_writer_wins() -> Kernel:
    """Every instance writes out[0]: instances conflict, so the loop runs in order in one instance."""
    b = Builder(ShapeSolver(("N",)))
    args = b.begin_region((RefType(DType.f32, (N,), Role.IN), RefType(DType.f32, (N,), Role.OUT)), ("x", "out"))
    x, out = (Param(n, a) for n, a in zip(("x", "out"), args))
    (n,) = b.begin_region((scalar(INDEX_DTYPE),), ("n",))
    zero = b.add(Constant, value=0, dtype=DType.i64)
    loc = Loc("fallback.py", 7, 9)
    b.make(Store, dst=out.value, index=(zero,), value=b.add(Load, src=x.value, index=(n,), loc=loc), loc=loc)
    b.make(Yield, values=())
    b.make(Parallel, domain=(N,), body=b.end_region(), loc=Loc("fallback.py", 6, 5))
    b.make(Yield, values=())
    return build_kernel("last_writer_wins", (x, out), ("N",), b.end_region())


def test_softmax_explains_its_rows_segment_buffers_and_bounds():
    k = samples.softmax()
    text = physical.explain(k)
    lines = text.splitlines()
    assert lines[0] == ("kernel softmax: one launch, grid = cdiv(M, BLOCK_I0) programs, num_warps = "
                        "warps_for(BLOCK_I0 * (4096 if BLOCK_N_LOOPED else BLOCK_N))")
    assert lines[1] == "group 0 (parallel): workset over (M), flattened row-major"
    assert lines[2] == "  each program owns BLOCK_I0 consecutive instances"
    assert lines[3] == "  segment: programs [0, cdiv(M, BLOCK_I0))"
    assert lines[4] == "  inside each instance: reduce max over N (tile); reduce sum over N (tile)"
    assert lines[5] == "  looped when BLOCK_N_LOOPED is 1: N in chunks of BLOCK_N_CHUNK, 3 passes over the row"
    # Each constexpr is defined once, in terms of those before it.
    assert lines[6:11] == ["constexprs:", "  BLOCK_N = next_pow2(N)", "  BLOCK_N_LOOPED = min(1, BLOCK_N // 65536)",
                           "  BLOCK_I0 = 1 if BLOCK_N_LOOPED else min(max(1, 4096 // BLOCK_N), next_pow2(M))",
                           "  BLOCK_N_CHUNK = 4096"]
    assert text.count("next_pow2(N)") == 1 and text.count("// 65536") == 1
    assert lines[11] == "memory:"
    assert lines[12].startswith("  bytes moved = (4 * max(0, cdiv(N, 4096)) * M * 4096 + ") and \
        lines[12].endswith(") if BLOCK_N_LOOPED else (4 * M * N + 4 * M * N)")
    assert lines[13] == "  ideal = 4 * M * N + 4 * M * N (every input read once, every output written once)"
    assert lines[14:17] == ["buffers:", "  x: f32[M, N] external_view, init external, lifetime host, read",
                            "  out: f32[M, N] external_view, init external, lifetime host, write"]
    assert lines[17] == "accesses:"
    assert lines[18].startswith("  load x (load): proven 0 <= ")
    assert lines[19].startswith("  store out (store): proven 0 <= ")
    assert lines[20:] == ["performance notes:", "  none", f"construction verifier: all {len(RULES)} rules hold"]


def test_a_conservative_fallback_is_explained_with_its_note():
    text = physical.explain(last_writer_wins())
    lines = text.splitlines()
    assert lines[1] == ("group 0 (parallel at fallback.py:6): a single instance (independence could not be proven; "
                        "everything runs in order)")
    assert lines[2] == "  segment: programs [0, 1)"
    assert lines[3] == "  inside each instance: ordered for loop"
    note = lines[lines.index("performance notes:") + 1]
    assert note.startswith("  fallback.py:6:5: instances of this parallel loop may conflict: store at fallback.py:7:9 "
                           "in instance (n=0) and store at fallback.py:7:9 in instance (n=1) write the same element "
                           "(with N=2); it runs in order inside one program instance.")
    assert "guarded by an explicit in-range mask" not in text  # every access here has a proof


def test_guards_and_data_dependent_work_are_explained():
    text = physical.explain(samples.segment_sum())
    inside = next(line for line in text.splitlines() if line.startswith("  inside each instance: "))
    assert "region fold sum over a data-dependent subregion [begin, end), in chunks of BLOCK_C256" in inside
    assert any(line.startswith("  load values (region_fold): guarded by an explicit in-range mask (%")
               for line in text.splitlines())
    hist = physical.explain(samples.histogram())
    inside = next(line for line in hist.splitlines() if line.startswith("  inside each instance: "))
    assert inside.endswith("atomic add (acq_rel, shared by the invocation, gpu scope)")
