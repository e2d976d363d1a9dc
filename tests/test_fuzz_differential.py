"""The CI differential campaign: random kernels through the oracle, the launcher and the StableHLO exit.

160 kernels (four parts of 40, fixed seeds) must agree with the oracle, or fail only in ways already
saved in tests/fuzz_cases (known bugs, replayed as expected failures by test_fuzz_regressions.py).
A new failure is shrunk and saved under the test's tmp dir; the assertion message holds its `.kir`
text and how to replay it. The last part sizes its grids as for a one-multiprocessor GPU, so that
persistent groups run several striding programs. `python -m tests.fuzz --kernels N --seed S` runs
longer campaigns.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter

import numpy as np
import pytest

import kir
from emit_triton.targets import simulated_multiprocessors
from tests import fuzz
from tests.differential import Outcome, compare, run_case
from tests.diffexact import inexact_outputs
from tests.diffgen import SHAPE_CHOICES, random_case
from tests.diffinputs import load_case

CI_SEED = 20240
PARTS, PER_PART = 4, 40
# Parts whose grids are sized as for a GPU of this many multiprocessors instead of the interpreter's one
# program at a time: persistent groups then run several programs, each striding over its blocks.
SIMULATED_SMS = {3: 1}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("part", range(PARTS))
def test_random_kernels_agree_with_the_oracle(part: int, tmp_path) -> None:
    sms = SIMULATED_SMS.get(part)
    with simulated_multiprocessors(sms) if sms is not None else contextlib.nullcontext():
        summary = fuzz.campaign(PER_PART, CI_SEED + part, save_dir=tmp_path / "cases", shrink_seconds=60.0)
    assert summary.total == PER_PART, summary.text()
    problems = []
    for found in summary.new_failures:
        text = found.path.read_text() if found.path else str(found.case.kernel)
        replay = found.path.with_suffix(".json") if found.path else ""
        problems.append(f"{found.signature}\n{found.outcome.text()}\n{text}\n"
                        f"replay: python -m tests.fuzz --replay {replay}{f' --sms {sms}' if sms is not None else ''}")
    assert not problems, summary.text() + "\n\n" + "\n\n".join(problems)
    assert summary.outcomes["ok"] >= PER_PART // 2, summary.text()  # most kernels must really run


# ---------------------------------------------------------------------------------------------- the generator


def _draw(n: int, at: int) -> list:
    return [random_case(random.Random(f"{at}/{i}"))[0] for i in range(n)]


@pytest.fixture(scope="module")
def drawn() -> list:
    return _draw(300, 7)


# Op names and generator features each campaign must reach; a tuple is "any of".
REQUIRED = (
    "parallel", "for", "while", "if", "load", "store", "unary", "binary", "compare", "select", "cast", "bitcast",
    "broadcast", "transpose", "reshape", "slice", "concat", "expand_dims", "squeeze", "reduce", "scan",
    "region_fold", "region_scan", "gather", "scatter", "dot", "histogram", "atomic", "atomic_cas", "iota", "dim",
    "random", "alloc", "reduce:welford", ("reduce:argmax-pair", "reduce:argmin-pair"),
    ("region_fold:argmax", "region_fold:argmin"), "region_scan:custom", "scan:custom", "buffer:full",
    "buffer:empty", ("atomic:add", "atomic:or", "atomic:max", "atomic:min"),
    tuple(f"atomic:{k}:unique" for k in ("add", "max", "min", "and", "or", "xor", "xchg")),
    "dot:f32", "dot:i8", "loop", "sort", tuple(f"sort topk rank {r}" for r in (1, 2, 3, 4)), "layout:reshape merge",
    "layout:reshape regroup", "param:i4:tensor",
)


def test_the_generator_reaches_every_family(drawn) -> None:
    seen: Counter = Counter()
    for case in drawn:
        seen.update(case.notes)
    missing = [f for f in REQUIRED if not any(seen[x] for x in ((f,) if isinstance(f, str) else f))]
    assert not missing, f"never generated: {missing}"


def test_the_generator_draws_boundary_shapes_and_several_groups(drawn) -> None:
    sizes = Counter(v for case in drawn for _, v in case.shapes)
    for boundary in (1, 2, 3, 17, 33, 65, 129):
        assert sizes[boundary], f"size {boundary} never drawn"
    assert sizes[0], "no empty extent (E = 0) drawn"
    groups = Counter(sum(1 for o in case.kernel.body.ops if o.NAME == "parallel") for case in drawn)
    assert groups[2] + groups[3] > 20, groups
    assert set(SHAPE_CHOICES["N"]) >= {1, 7, 16, 17, 31, 64, 65, 127, 129}


def test_generated_kernels_verify_and_round_trip_through_text(drawn) -> None:
    from kir.text import parse_kernel, print_kernel

    for case in drawn[:60]:
        kir.verify(case.kernel)
        assert parse_kernel(print_kernel(case.kernel)) == case.kernel


def test_inputs_are_reproducible_from_the_case(drawn) -> None:
    for case in drawn[:30]:
        a, b = case.inputs(), case.inputs()
        assert a.keys() == b.keys()
        for name in a:
            assert np.array_equal(np.asarray(a[name]), np.asarray(b[name]), equal_nan=True), name


def test_the_parameter_shapes_determine_every_symbol(drawn) -> None:
    """The launch binds each symbol from the shapes; one that appears only in an extent that is not affine in
    it (`(B - B // 2 + 1) // 2`, the same for B = 2 and 3) gets an extent parameter (campaign 9400013, case 31:
    "the argument shapes do not determine B")."""
    from oracle.args import Binding

    found, _ = random_case(random.Random("9400013/31"))
    extents = [p for p in found.kernel.params if p.name.startswith("extent")]
    assert [str(d) for p in extents for d in p.type.shape] == ["B"]
    assert run_case(found, stablehlo=False).signatures() == []
    for case in [*drawn[:100], found]:
        assert Binding(case.kernel, case.inputs()).symbols == dict(case.shapes), case.describe()


# ---------------------------------------------------------------------------------------------- the runner


def test_a_wrong_launcher_is_caught_shrunk_saved_and_replayed(tmp_path, monkeypatch) -> None:
    """A launcher that gets integer sums wrong by one: the campaign reports it, shrinks it to a small
    kernel, saves a reproducer, and the reproducer fails the same way when replayed."""
    import tests.differential as differential

    honest = differential.run_launcher

    def off_by_one(kernel, inputs):
        got = honest(kernel, inputs)
        if any(o.NAME == "reduce" and o.kind.value == "sum" for o in kernel.walk()):
            got = {k: (v + 1 if v.dtype.kind in "iu" else v) for k, v in got.items()}
        return got

    monkeypatch.setattr(differential, "run_launcher", off_by_one)
    monkeypatch.setattr(fuzz, "CASES_DIR", tmp_path / "none")
    # bounded by candidate runs, not seconds: how far it shrinks must not depend on the machine's load
    summary = fuzz.campaign(30, 3, stablehlo=False, save_dir=tmp_path, shrink_seconds=float("inf"),
                            shrink_attempts=60, blocks=("rows",))
    found = [f for f in summary.new_failures if f.signature.startswith("mismatch@launch")]
    assert found, summary.text()
    saved = found[0].path
    assert saved is not None and saved.with_suffix(".json").exists()
    case, record = load_case(saved.with_suffix(".json"))
    # shrunk: smaller than the kernel the campaign drew (how far depends on the attempts given, not asserted)
    drawn, _ = random_case(random.Random(f"3/{record['campaign_case']}"), blocks=("rows",))
    assert len(list(case.kernel.walk())) < len(list(drawn.kernel.walk())), saved.read_text()
    assert record["signature"] == found[0].signature
    replayed = run_case(case, stablehlo=False)
    assert found[0].signature in replayed.signatures()


def test_compare_is_exact_for_integers_and_exact_floats_and_scaled_for_others() -> None:
    want = np.array([1.0, 2.0, np.nan, np.inf], np.float32)
    assert compare("o", "f32", want.copy(), want, exact=True, tol=0.0) is None
    assert compare("o", "f32", np.array([1.0, 2.0, np.nan, np.inf], np.float32) * np.float32(1.0000001), want,
                   exact=False, tol=1e-6) is None
    assert compare("o", "f32", np.array([1.0, 2.5, np.nan, np.inf], np.float32), want, exact=True, tol=1.0) == \
        "o (f32): 1 element(s) differ (exact), first at (1,): got 2.5, want 2.0"
    assert compare("o", "f32", np.array([1.0, 2.0, 0.0, np.inf], np.float32), want, exact=False, tol=1.0) == \
        "o (f32): NaN positions differ, first at (2,): got 0.0, want nan"
    assert compare("o", "f32", np.array([1.0, 2.0, np.nan, -np.inf], np.float32), want, exact=False, tol=1.0) == \
        "o (f32): infinities differ, first at (3,): got -inf, want inf"
    assert compare("o", "i32", np.array([1, 2], np.int32), np.array([1, 3], np.int32), exact=True, tol=1.0) == \
        "o (i32): 1 element(s) differ, first at (1,): got 2, want 3"
    assert compare("o", "f32", np.float32([-0.0]), np.float32([0.0]), exact=True, tol=0.0) is None


def test_signatures_group_one_cause() -> None:
    a = Outcome("mismatch", "launch", "out3 (bf16): 2 element(s) differ beyond 0.1, first at (0, 1): got 1, want 2")
    b = Outcome("mismatch", "launch", "out0 (bf16): 7 element(s) differ beyond 0.5, first at (3,): got 4, want 5")
    assert a.signature() == b.signature() == "mismatch@launch: bf16: element(s) differ"
    c = Outcome("crash", "launch", "InterpreterError: ValueError('atomic_or does not support int16')")
    assert c.signature() == "crash@launch: InterpreterError: ValueError('atomic_or does not support int#')"
    d = Outcome("ok", stablehlo="mismatch", details=["stablehlo: out1 (f32): NaN positions differ, first at (0,)"])
    assert d.signatures() == ["stablehlo-mismatch: f32: NaN positions differ"]


def test_inexact_outputs_follow_rounding_not_names(drawn) -> None:
    from kir.text import parse_kernel

    k = parse_kernel("""kernel t(x: in f32[N], a: out f32[N], b: out f32[N], c: out f32[N]) symbols(N) {
  %v: f32[N] = load %x[0:N]
  %e: f32[N] = unary exp %v
  %m: f32[N] = binary maximum %v, %v
  %p: pred = constant true : pred
  %r: f32[N] = if %p {
    yield %e
  } else {
    yield %m
  }
  store %a[0:N] = %m
  store %b[0:N] = %e
  store %c[0:N] = %r
  yield
}""")
    assert inexact_outputs(k) == {"b", "c"}


def test_products_folded_in_any_association_are_compared_on_finite_elements() -> None:
    from kir.text import parse_kernel
    from tests.diffexact import association_dependent_outputs

    k = parse_kernel("""kernel p(x: in f32[N], s: out f32[N], t: out f32[N], u: out f32) symbols(N) {
  %v: f32[N] = load %x[0:N]
  %c: f32[N] = scan prod(%v) axis=0
  store %s[0:N] = %c
  %d: f32[N] = scan sum(%v) axis=0
  store %t[0:N] = %d
  %r: f32 = reduce prod(%d) axes=(0)
  store %u[] = %r
  yield
}""")
    assert association_dependent_outputs(k) == {"s", "t", "u"}
    got, want = np.float32([np.nan, 1.0, np.inf]), np.float32([0.0, 1.0, 5.0])
    assert compare("s", "f32", got, want, exact=False, tol=1e-6, finite_only=True) is None
    assert compare("s", "f32", np.float32([0.0, 2.0, 1.0]), want, exact=False, tol=1e-6, finite_only=True) == \
        "s (f32): 2 element(s) differ beyond 5e-06, first at (1,): got 2.0, want 1.0"  # 1.0 vs 5.0 too


def test_periodic_functions_of_reassociated_values_are_not_compared_by_value() -> None:
    from kir.text import parse_kernel
    from tests.diffexact import periodic_of_reassociated_outputs

    k = parse_kernel("""kernel k(x: in f16[M, N], a: out f16[M], b: out f16[M], c: out f16[M]) symbols(M, N) {
  parallel (%i: i64) in (M) {
    %r: f16[N] = load %x[%i, 0:N]
    %p: f16 = reduce prod(%r) axes=(0)
    %m: f16 = reduce max(%r) axes=(0)
    %cp: f16 = unary cos %p
    %cm: f16 = unary cos %m
    store %a[%i] = %cp
    store %b[%i] = %cm
    store %c[%i] = %p
    yield
  }
  yield
}""")
    assert periodic_of_reassociated_outputs(k) == {"a"}  # max is exact; the product itself is compared


def test_divisions_by_reassociated_values_are_compared_at_their_conditioning() -> None:
    """`1 / (sum + x)` near a cancellation: the sum's allowed error, moved through the cancellation and the
    division, is the element's allowance; an element that a move within the allowed error takes across the
    pole is not compared; other outputs keep the uniform rule (campaign case 9500031/46)."""
    from kir.text import parse_kernel
    from tests.diffcond import pole_of_reassociated_outputs, slack
    from tests.differential import base_tolerance, check_outputs

    k = parse_kernel("""kernel k(x: in f32[M, N], y: in f32[M], a: out f32[M], b: out f32[M], c: out f32[M])
symbols(M, N) {
  parallel (%i: i64) in (M) {
    %r: f32[N] = load %x[%i, 0:N]
    %s: f32 = reduce sum(%r) axes=(0)
    %m: f32 = reduce max(%r) axes=(0)
    %v: f32 = load %y[%i]
    %d: f32 = binary add %s, %v
    %one: f32 = constant 1.0 : f32
    %q: f32 = binary div %one, %d
    %dm: f32 = binary add %m, %v
    %qm: f32 = binary div %one, %dm
    %ps: f32 = binary div %s, %v
    store %a[%i] = %q
    store %b[%i] = %qm
    store %c[%i] = %ps
    yield
  }
  yield
}""")
    assert pole_of_reassociated_outputs(k) == {"a"}  # max is exact; dividing a sum is linear in it
    env = {"M": 3, "N": 4}
    x = np.float32([[1.0, 2.0, 3.0, 4.0]] * 3)
    # sum 10 + y: far from the pole, 0.01 from it, on it (a move within the sum's allowed error leaves it)
    y = np.float32([-5.0, -9.99, -10.0])
    import oracle

    want = oracle.run(k, {"x": x, "y": y, "a": np.zeros(3, np.float32), "b": np.zeros(3, np.float32),
                          "c": np.zeros(3, np.float32)})
    allowed = slack(k, env, {"x": x, "y": y, "a": np.zeros(3, np.float32), "b": np.zeros(3, np.float32),
                             "c": np.zeros(3, np.float32)}, want)
    assert set(allowed) == {"a"}
    d = base_tolerance(k, env) * 10  # the sum's allowed error
    assert allowed["a"][0] == pytest.approx(abs(1 / (5 + d) - 1 / 5), rel=0.05)  # rounded to f32
    assert allowed["a"][1] == pytest.approx(1 / (0.01 - d) - 1 / 0.01, rel=1e-2)
    assert np.isinf(allowed["a"][2])
    # the sum one ulp off: 1 / 0.01 moves by far more than the uniform limit, within the conditioning
    got = dict(want)
    s = np.float32(10.0) + np.spacing(np.float32(10.0))
    assert np.isinf(want["a"][2])
    got["a"] = np.float32([want["a"][0], np.float32(1) / (s + y[1]), 12345.0])
    assert check_outputs(k, env, got, want)  # the uniform rule alone flags it
    assert check_outputs(k, env, got, want, slack=allowed) == []
    got["a"] = np.float32([want["a"][0] * 1.01, want["a"][1], want["a"][2]])  # beyond its conditioning
    assert check_outputs(k, env, got, want, slack=allowed)[0].startswith("a (f32): 1 element(s) differ")


NAN_BITS_KERNEL = """kernel k(xs: in f64[N], ys: in f64[N], cs: in pred[N], made: out u64[N], loaded: out u64[N],
  chosen: out u64[N], sign: out u64[N], carried: out u64[N], kept: out u64[N]) symbols(N) {
  %x: f64[N] = load %xs[0:N]
  %y: f64[N] = load %ys[0:N]
  %c: pred[N] = load %cs[0:N]
  %two: f64 = constant 2.0 : f64
  %twos: f64[N] = broadcast %two shape=(N) dims=()
  %q: f64[N] = binary floordiv %x, %twos
  %qb: u64[N] = bitcast %q to u64
  store %made[0:N] = %qb
  %xb: u64[N] = bitcast %x to u64
  store %loaded[0:N] = %xb
  %s: f64[N] = select %c, %x, %y
  %sb: u64[N] = bitcast %s to u64
  store %chosen[0:N] = %sb
  %k: u64 = constant 63 : u64
  %ks: u64[N] = broadcast %k shape=(N) dims=()
  %top: u64[N] = binary shr %qb, %ks
  store %sign[0:N] = %top
  %lo: i64 = constant 0 : i64
  %hi: i64 = constant 2 : i64
  %one: i64 = constant 1 : i64
  %r: f64[N] = for (%it: i64, %acc: f64[N]) in range(%lo, %hi, %one) init(%y) {
    %m: f64[N] = binary mul %acc, %twos
    yield %m
  }
  %rb: u64[N] = bitcast %r to u64
  store %carried[0:N] = %rb
  %w: f64[N] = for (%it2: i64, %acc2: f64[N]) in range(%lo, %hi, %one) init(%x) {
    yield %acc2
  }
  %wb: u64[N] = bitcast %w to u64
  store %kept[0:N] = %wb
  yield
}"""


def test_only_bitcasts_of_nans_that_arithmetic_made_have_platform_bits() -> None:
    """A NaN made by an operation (`inf // 2.0`) has the platform's bits (x86 and NumPy 0xFFF8..., XLA
    0x7FF8...): outputs fed by its bitcast, through integer arithmetic or a loop carry too, accept any NaN
    bits; a NaN loaded, selected or carried unchanged keeps its bits (campaign case 9400555/32)."""
    from kir.text import parse_kernel
    from tests.diffnan import nan_bits_outputs

    k = parse_kernel(NAN_BITS_KERNEL)
    assert nan_bits_outputs(k) == {"made", "sign", "carried"}


def test_the_comparison_accepts_any_bits_of_an_arithmetic_nan_and_no_other_difference() -> None:
    import oracle
    from kir.text import parse_kernel
    from tests.differential import check_outputs
    from tests.diffnan import NanBits

    k = parse_kernel(NAN_BITS_KERNEL)
    quiet_nan = np.uint64(0x7FF8_0000_0000_0001).view(np.float64)  # a payload the loads must keep
    inputs = {"xs": np.array([np.inf, 3.0, quiet_nan]), "ys": np.array([1.0, np.nan, 5.0]),
              "cs": np.array([True, False, True])}
    inputs |= {name: np.zeros(3, np.uint64) for name in ("made", "loaded", "chosen", "sign", "carried", "kept")}
    want = oracle.run(k, inputs)
    env = {"N": 3}
    positive = np.uint64(0x7FF8_0000_0000_0000)
    got = dict(want)
    got["made"] = want["made"].copy()
    got["made"][0] = positive  # XLA's default NaN for inf // 2.0 (NumPy's is 0xFFF8...)
    got["sign"] = np.array([0, 0, 0], np.uint64)  # so its sign bit
    assert check_outputs(k, env, got, want)  # compared bit for bit, they differ
    nan_bits = NanBits(k, inputs, want)
    assert check_outputs(k, env, got, want, nan_bits=nan_bits) == []
    # the element that is not a NaN (3.0 // 2.0) keeps its bits; a NaN's bits must stay a NaN's
    got["made"] = want["made"].copy()
    got["made"][1] = np.uint64(0x3FF0_0000_0000_0001)
    assert check_outputs(k, env, got, want, nan_bits=nan_bits) == [
        "made (u64): 1 element(s) differ, first at (1,): got 4607182418800017409, want 4607182418800017408"]
    got["made"] = want["made"].copy()
    got["made"][0] = np.uint64(0x7FF0_0000_0000_0000)  # inf, not a NaN
    assert check_outputs(k, env, got, want, nan_bits=nan_bits)[0].startswith("made (u64): 1 element(s) differ")
    # loaded and selected NaNs keep their payload exactly, even with the exemption at hand
    for name in ("loaded", "chosen", "kept"):
        got = dict(want)
        got[name] = np.where(np.isnan(want[name].view(np.float64)), positive, want[name])
        assert check_outputs(k, env, got, want, nan_bits=nan_bits)[0].startswith(f"{name} (u64): 1 element(s) differ")


def test_i4_parameters_travel_packed_and_are_compared_as_values() -> None:
    """An i4 tensor is passed as its packed bytes (two values a byte, kir.dtypes.I4_PACKING) to the oracle, the
    launcher and the StableHLO exit; the launcher's packed output is unpacked before the comparison."""
    from kir.dtypes import i4_unpacked
    from kir.text import parse_kernel
    from tests.differential import run_launcher
    from tests.diffinputs import Case, InputSpec

    k = parse_kernel("""kernel k(x: in i4[M, N], out: out i4[M, N], s: out i32[M]) symbols(M, N) {
  parallel (%i: i64) in (M) {
    %r: i4[N] = load %x[%i, 0:N]
    %c: i4 = constant 3 : i4
    %cs: i4[N] = broadcast %c shape=(N) dims=()
    %y: i4[N] = binary add %r, %cs
    store %out[%i, 0:N] = %y
    %w: i32[N] = cast %r to i32
    %t: i32 = reduce sum(%w) axes=(0)
    store %s[%i] = %t
    yield
  }
  yield
}""")
    case = Case(k, (("M", 3), ("N", 6)), (("x", InputSpec("values", wide=True)),), 5)
    inputs = case.inputs()
    assert inputs["x"].dtype == np.uint8 and inputs["x"].shape == (3, 3)
    x = i4_unpacked(inputs["x"])
    got = run_launcher(k, inputs)
    np.testing.assert_array_equal(got["out"], ((x.astype(np.int64) + 3 + 8) % 16 - 8).astype(np.int8))
    np.testing.assert_array_equal(got["s"], x.astype(np.int32).sum(axis=1))
    outcome = run_case(case)
    assert (outcome.kind, outcome.stablehlo) == ("ok", "ok"), outcome.text()
