"""Physical construction: worksets, groups, segments, launch expressions, access relations, registry."""

from __future__ import annotations

import pytest

import kir
import physical
from kir.dims import DConst, DSym
from kir.errors import DiagnosticError, LaunchError
from physical import ops as P
from physical.launch_expr import LBin, LConst, LDim, LMinMax, LNextPow2, LSum, LTileBlock, LWarps, lcdiv, lprod
from physical.lower import LOWER, REFUSALS
from physical.model import BufferScope, Guard, Proven
from tests import samples as S

M, N = DSym("M"), DSym("N")


def accesses(program: physical.Program) -> list[tuple[P.POp, object]]:
    return [(o, o.access) for o in program.walk() if hasattr(o, "access")]


def test_softmax_rows_are_the_workset() -> None:
    p = physical.construct(S.softmax())
    (g,) = p.groups
    assert g.domain == (M,)
    assert not g.serial
    # the row axis N stays inside the instance, as a tile of next_pow2(N)
    assert dict(p.constexprs)["BLOCK_N"] == LTileBlock(LDim(N), what="axis of extent N")
    reduces = [o for o in g.body.walk() if isinstance(o, P.Reduce)]
    assert [str(r.kind) for r in reduces] == ["max", "sum"]
    assert all(r.member is not None for r in reduces)  # padded elements take the identity
    assert reduces[0].identity == (float("-inf"),) and reduces[1].identity == (0.0,)


def test_vector_add_top_level_write_is_a_workset_over_n() -> None:
    p = physical.construct(S.vector_add())
    (g,) = p.groups
    assert g.domain == (N,)
    assert p.grid == LDim(N)  # one instance per program before enlargement


def test_segment_sum_maps_segments_and_keeps_extents_in_data() -> None:
    p = physical.construct(S.segment_sum())
    (g,) = p.groups
    assert g.domain == (DSym("S"),)
    (fold,) = [o for o in g.body.walk() if isinstance(o, P.RegionFold)]
    assert fold.begin.type.lanes and fold.end.type.lanes
    # the data-dependent source access is guarded, never assumed
    (load,) = [o for o in fold.source.walk() if isinstance(o, P.Load)]
    assert isinstance(load.access.bounds, Guard)
    assert "E" not in str(p.grid) and "values" not in str(p.grid)


def test_matmul_free_axes_with_k_inside() -> None:
    p = physical.construct(S.matmul())
    (g,) = p.groups
    assert g.domain == (M, N)
    (c,) = [o for o in g.body.walk() if isinstance(o, P.Contract)]
    assert [t.extent for t in c.lhs.type.tile] == [DSym("K")]
    assert c.result.type.lanes and c.result.type.tile == ()
    assert str(c.acc_dtype) == "f32"


def test_recurrence_channels_with_time_ordered_inside() -> None:
    p = physical.construct(S.recurrence())
    (g,) = p.groups
    assert g.domain == (DSym("C"),)
    (loop,) = [o for o in g.body.walk() if isinstance(o, P.For)]
    carried = loop.body.args[1]
    assert carried.type.lanes and carried.type.tile == ()  # one accumulator per channel lane
    assert not loop.body.args[0].type.lanes  # time is one ordered loop for all lanes


def test_two_groups_two_segments() -> None:
    p = physical.construct(S.two_groups())
    assert [g.domain for g in p.groups] == [(M,), (DSym("P"),)]
    s0, s1 = p.segments
    assert s0.offset == LConst(0) and s0.length == LDim(M)
    assert s1.offset == LDim(M) and s1.length == LDim(DSym("P"))
    assert p.grid == LSum((LDim(M), LDim(DSym("P"))))
    assert p.grid.evaluate({"M": 3, "N": 4, "P": 5}) == 8


def test_empty_segment_launches_nothing_for_its_group() -> None:
    p = physical.lower(S.two_groups())
    env = {"M": 0, "N": 4, "P": 5, **{n: e.evaluate({"M": 0, "N": 4, "P": 5}) for n, e in p.constexprs}}
    s0, s1 = p.segments
    assert s0.length.evaluate(env) == 0
    assert s1.offset.evaluate(env) == 0
    assert p.grid.evaluate(env) == s1.length.evaluate(env) > 0


def test_racy_parallel_falls_back_to_one_ordered_instance_with_a_note() -> None:
    p = physical.construct(S.racy_store())
    (g,) = p.groups
    assert g.domain == () and g.serial
    assert p.grid == LConst(1)
    assert any("store in instance (n=0) and store in instance (n=1) write the same element" in n.message
               and "unique=True" in n.message for n in p.notes)


def test_histogram_atomics_keep_order_and_get_device_scope() -> None:
    p = physical.construct(S.histogram())
    (g,) = p.groups
    assert g.domain == (DSym("E"),)
    (a,) = [o for o in g.body.walk() if isinstance(o, P.AtomicRMW)]
    assert str(a.order) == "acq_rel" and a.scope == "gpu" and str(a.sharing) == "invocation"
    assert isinstance(a.access.bounds, Guard)  # out-of-range bins are dropped by the guard


def test_affine_accesses_carry_z3_proofs() -> None:
    p = physical.construct(S.softmax())
    for op, acc in accesses(p):
        assert isinstance(acc.bounds, Proven), op
        assert "< M" in acc.bounds.predicate and "< N" in acc.bounds.predicate
        assert acc.mask is not None  # lane validity and tile membership


def test_buffers_of_parameters_are_external_views() -> None:
    p = physical.construct(S.softmax())
    assert {b.name: (b.scope, str(b.access)) for b in p.buffers} == {
        "x": (BufferScope.EXTERNAL_VIEW, "read"), "out": (BufferScope.EXTERNAL_VIEW, "write")}


def test_scan_rows() -> None:
    p = physical.construct(S.cumsum_rows(reverse=True, exclusive=True))
    (sc,) = [o for o in p.walk() if isinstance(o, P.Scan)]
    assert sc.reverse and sc.exclusive and sc.axis == 0 and sc.identity == (0.0,)


def test_launch_expressions_evaluate() -> None:
    e = lcdiv(lprod((LDim(M), LDim(N))), LMinMax("min", (LConst(1024), LNextPow2(LDim(N)))))
    assert e.evaluate({"M": 3, "N": 100}) == 3  # cdiv(300, 128)
    assert str(e) == "cdiv((M * N), min(1024, next_pow2(N)))"
    assert LBin("//", LConst(4096), LNextPow2(LConst(5))).evaluate({}) == 512
    assert LNextPow2(LConst(0)).evaluate({}) == 1 and LNextPow2(LConst(17)).evaluate({}) == 32
    assert LWarps(LConst(4095)).evaluate({}) == 4 and LWarps(LConst(4096)).evaluate({}) == 8
    assert LWarps(LConst(16384)).evaluate({}) == 16


def test_tile_block_refuses_tiles_beyond_the_limit_at_launch() -> None:
    e = LTileBlock(LDim(N), limit=1024, what="axis N")
    assert e.evaluate({"N": 1000}) == 1024
    with pytest.raises(LaunchError, match=r"N = 1025 needs a tile of 2048 elements \(axis N\), more than the 1024"):
        e.evaluate({"N": 1025})


def test_every_kir_op_has_a_lowering_rule() -> None:
    missing = [name for name, cls in kir.OP_CLASSES.items() if cls not in LOWER]
    assert missing == []
    assert set(REFUSALS) <= set(LOWER)


def _slice_kernel() -> kir.Kernel:
    from kir import Builder, Load, Parallel, Param, RefType, Role, Slice, SliceOp, Store, Yield, build_kernel, scalar
    from kir.solver import ShapeSolver

    b = Builder(ShapeSolver(("M", "N")))
    x, out = (Param(n, a) for n, a in zip(("x", "out"), b.begin_region(
        (RefType(kir.DType.f32, (M, N), Role.IN), RefType(kir.DType.f32, (M, N), Role.OUT)), ("x", "out"))))
    (i,) = b.begin_region((scalar(kir.INDEX_DTYPE),), ("i",))
    row = b.add(Load, src=x.value, index=(i, Slice(DConst(0), N)))
    part = b.add(SliceOp, x=row, starts=(DConst(0),), stops=(N,), steps=(1,), loc=kir.Loc("k.py", 7, 5))
    b.make(Store, dst=out.value, index=(i, Slice(DConst(0), N)), value=part)
    b.make(Yield, values=())
    b.make(Parallel, domain=(M,), body=b.end_region())
    b.make(Yield, values=())
    return build_kernel("sliced", (x, out), ("M", "N"), b.end_region())


def test_slice_of_a_register_value_lowers_inside_the_instance() -> None:
    # the whole-row slice is the row itself; other slices gather in registers (tests/test_perf_layout_*.py)
    p = physical.lower(_slice_kernel(), verify=True)
    assert not any(isinstance(op, P.TileSlice) for op in p.walk())


def test_generic_kernels_must_be_specialised() -> None:
    import dataclasses

    k = dataclasses.replace(S.vector_add(), dtype_vars=(kir.DTypeVar("T", (kir.DType.f32,)),))
    with pytest.raises(DiagnosticError, match="is generic over T; specialise it before physical construction"):
        physical.construct(k)


@pytest.mark.parametrize("make", S.ALL, ids=lambda f: f.__name__)
def test_every_sample_lowers_and_verifies(make) -> None:
    p = physical.lower(make(), verify=True)
    text = physical.print_program(p)
    assert text.startswith(f"program {p.name}\n")
    assert "segment group 0" in text


def test_explain_names_worksets_segments_and_bounds() -> None:
    text = physical.explain(S.two_groups())
    assert "group 0 (parallel): workset over (M)" in text
    assert "group 1 (parallel): workset over (P)" in text
    # the row sums may split their rows over SPLITS_0 programs each (1 where rows fill the device)
    assert "segment: programs [0, cdiv(M, BLOCK_I0) * SPLITS_0)" in text
    assert "segment: programs [cdiv(M, BLOCK_I0) * SPLITS_0, cdiv(M, BLOCK_I0) * SPLITS_0 + cdiv(P, BLOCK_I1))" \
        in text
    assert "load x" in text and "proven" in text


# ---------------------------------------------------------------------------------------------- atomics Triton lacks

_RMW = """kernel rmw(keys: in i32[N], v: in {dt}[N], acc: inout {dt}[B]) symbols(N, B) {{
  parallel (%n: i64) in (N) {{
    %k: i32 = load %keys[%n]
    %x: {dt} = load %v[%n]
    %old: {dt} = atomic {kind} %acc[%k], %x order=relaxed
    yield
  }}
  yield
}}"""

_CAS = """kernel cas(acc: inout {dt}[N], out: out {dt}[N]) symbols(N) {{
  parallel (%i: i64) in (N) {{
    %e: {dt} = load %acc[%i]
    %old: {dt} = atomic_cas %acc[%i], %e, %e order=relaxed
    store %out[%i] = %old
    yield
  }}
  yield
}}"""

_NARROW = "is not supported by the Triton target (Triton has no 8- or 16-bit atomics); use a 32-bit buffer"
_HALF = "is not supported by the Triton target (its only 16-bit float atomic is add); use an f32 buffer"


@pytest.mark.parametrize("kind,dt,message", [
    ("max", "u8", f"atomic max on u8 {_NARROW}"),
    ("add", "i8", f"atomic add on i8 {_NARROW}"),
    ("or", "i16", f"atomic or on i16 {_NARROW}"),
    ("xor", "pred", f"atomic xor on pred {_NARROW}"),
    ("xchg", "f16", f"atomic xchg on f16 {_HALF}"),
    ("min", "bf16", f"atomic min on bf16 {_HALF}"),
])
def test_atomics_triton_lacks_are_refused_at_the_op(kind: str, dt: str, message: str) -> None:
    """Found by the differential fuzzer: these crashed inside Triton at launch (GPU and interpreter)."""
    from kir.text import parse_kernel

    with pytest.raises(DiagnosticError) as err:
        physical.lower(parse_kernel(_RMW.format(dt=dt, kind=kind), "rmw.kir"))
    assert err.value.message == message
    assert (err.value.file, err.value.line) == ("rmw.kir", 5)


def test_atomic_cas_on_bytes_is_refused_but_16_bit_cas_lowers() -> None:
    from kir.text import parse_kernel

    with pytest.raises(DiagnosticError) as err:
        physical.lower(parse_kernel(_CAS.format(dt="u8"), "cas.kir"))
    assert err.value.message == ("atomic_cas on u8 is not supported by the Triton target (Triton's compare-and-swap "
                                 "needs 16-, 32- or 64-bit elements); use a 16- or 32-bit buffer")
    assert err.value.line == 4
    for dt in ("i16", "f16", "bf16", "i32"):
        physical.lower(parse_kernel(_CAS.format(dt=dt)), verify=True)


@pytest.mark.parametrize("kind,dt", [("add", "f16"), ("add", "bf16"), ("max", "f32"), ("xchg", "f64"),
                                     ("and", "u32"), ("min", "i64")])
def test_atomics_triton_has_still_lower(kind: str, dt: str) -> None:
    from kir.text import parse_kernel

    physical.lower(parse_kernel(_RMW.format(dt=dt, kind=kind)), verify=True)


def test_the_differential_runner_counts_an_atomic_refusal_as_refused() -> None:
    from kir.text import parse_kernel
    from tests.differential import run_case
    from tests.diffinputs import Case, InputSpec

    k = parse_kernel(_RMW.format(dt="u16", kind="add"))
    specs = (("keys", InputSpec("index", extent="B")), ("v", InputSpec("values")), ("acc", InputSpec("values")))
    outcome = run_case(Case(k, (("N", 3), ("B", 2)), specs, 0), stablehlo=False)
    assert (outcome.kind, outcome.failed) == ("refused", False)
    assert outcome.message == f"atomic add on u16 {_NARROW}"
