"""`.kir` printing and parsing: parse(print(k)) == k and print is a fixed point, on random and hand-built kernels."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kir
from kir import (
    Binary,
    BinaryFn,
    Builder,
    Constant,
    DType,
    Gather,
    Loc,
    Param,
    RefType,
    Role,
    Unary,
    UnaryFn,
    Yield,
    build_kernel,
)
from kir.dims import DBin, DConst, DSym, PAnd, PCmp, PNot, POr
from kir.solver import ShapeSolver
from kir.text import TextLoc, parse_kernel, parse_module, print_kernel, print_module
from tests import kirgen, samples

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples" / "kir").glob("*.kir"))
N = DSym("N")


def assert_round_trip(k: kir.Kernel) -> str:
    text = print_kernel(k)
    back = parse_kernel(text, "rt.kir")
    assert back == k
    assert print_kernel(back) == text
    generic = print_kernel(k, generic=True)
    back_generic = parse_kernel(generic, "rt_generic.kir")
    assert back_generic == k
    assert print_kernel(back_generic, generic=True) == generic
    return text


ROUND_TRIP_EXAMPLES = 200


def test_random_kernels_round_trip() -> None:
    seen: list[kir.Kernel] = []

    @settings(max_examples=ROUND_TRIP_EXAMPLES, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(kirgen.kernels())
    def round_trip(k: kir.Kernel) -> None:
        assert_round_trip(k)
        seen.append(k)

    round_trip()
    assert len(seen) >= ROUND_TRIP_EXAMPLES  # the property ran on as many kernels as promised
    assert len({print_kernel(k) for k in seen}) > ROUND_TRIP_EXAMPLES // 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kirgen.kernels())
def test_random_kernels_are_valid(k: kir.Kernel) -> None:
    kir.verify(k)


@pytest.mark.parametrize("family", kirgen.FAMILIES)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_each_family_round_trips_and_verifies(family: str, data: st.DataObject) -> None:
    k = data.draw(kirgen.kernels(families=(family,)))
    assert_round_trip(k)
    kir.verify(k)


@pytest.mark.parametrize("make", samples.ALL, ids=lambda f: f.__name__)
def test_samples_round_trip(make) -> None:
    assert_round_trip(make())


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_a_fixed_point_of_print_parse(path: Path) -> None:
    kernels = parse_module(path.read_text(encoding="utf-8"), str(path))
    assert kernels
    for k in kernels:
        text = assert_round_trip(k)
        assert parse_kernel(text) == k
    assert parse_module(print_module(kernels)) == kernels


def test_softmax_prints_exactly() -> None:
    assert print_kernel(samples.softmax()) == """\
kernel softmax(x: in f32[M, N], out: out f32[M, N]) symbols(M, N) requires(N <= 65536) {
  parallel (%i: i64) in (M) {
    %row: f32[N] = load %x[%i, 0:N]
    %mx: f32 = reduce max(%row) axes=(0)
    %0: f32[N] = broadcast %mx shape=(N) dims=()
    %1: f32[N] = binary sub %row, %0
    %e: f32[N] = unary exp %1
    %s: f32 = reduce sum(%e) axes=(0)
    %2: f32[N] = broadcast %s shape=(N) dims=()
    %3: f32[N] = binary div %e, %2
    store %out[%i, 0:N] = %3
    yield
  }
  yield
}
"""


def test_str_of_a_kernel_is_its_text() -> None:
    k = samples.vector_add()
    assert str(k) == print_kernel(k)


def _kernel_with(values: list[tuple[int | float | bool, DType]], names: list[str | None]) -> kir.Kernel:
    b = Builder(ShapeSolver(()))
    b.begin_region(())
    for (v, dt), name in zip(values, names):
        b.add(Constant, value=v, dtype=dt, name=name)
    b.make(Yield, values=())
    return build_kernel("consts", (), (), b.end_region())


@pytest.mark.parametrize("value,text", [(math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan"), (-0.0, "-0.0"),
                                        (1e-05, "1e-05"), (0.1, "0.1"), (1.7976931348623157e308,
                                                                          "1.7976931348623157e+308"),
                                        (5e-324, "5e-324"), (3, "3"), (-3, "-3")])
def test_float_literals_round_trip_exactly(value: float, text: str) -> None:
    k = _kernel_with([(value, DType.f64)], [None])
    printed = assert_round_trip(k)
    assert f"constant {text} : f64" in printed
    back = parse_kernel(printed).body.ops[0].value
    assert type(back) is type(value)
    if isinstance(value, float) and not math.isnan(value):
        assert math.copysign(1.0, back) == math.copysign(1.0, value) and back == value


def test_integer_and_bool_literals_round_trip() -> None:
    k = _kernel_with([(2**64 - 1, DType.u64), (-(2**63), DType.i64), (True, DType.pred), (False, DType.pred)],
                     [None, None, None, None])
    text = assert_round_trip(k)
    assert "constant 18446744073709551615 : u64" in text
    assert "constant -9223372036854775808 : i64" in text
    assert "constant true : pred" in text


def test_value_names_are_unique_and_deterministic() -> None:
    names = ["row", "row", "row_1", "row", None, "for", "a-b", "é", None, "_", "0"]
    k = _kernel_with([(1, DType.i32)] * len(names), names)
    text = assert_round_trip(k)
    printed = [line.split(":")[0].strip() for line in text.splitlines()[1:-2]]
    assert printed == ["%row", "%row_1", "%row_1_1", "%row_2", "%0", "%for_", "%1", "%2", "%3", "%_", "%4"]


def test_value_names_do_not_clash_with_parameters() -> None:
    b = Builder(ShapeSolver(("N",)))
    (x,) = b.begin_region((RefType(DType.f32, (N,), Role.IN),), ("x",))
    b.add(kir.Load, src=x, index=(kir.Slice(DConst(0), N),), name="x")
    b.make(Yield, values=())
    k = build_kernel("k", (Param("x", x),), ("N",), b.end_region())
    text = assert_round_trip(k)
    assert "%x_1: f32[N] = load %x[0:N]" in text


def test_dims_keep_their_structure() -> None:
    dims = [DBin("-", DBin("+", N, DConst(1)), DConst(1)), DBin("-", N, DBin("-", N, DConst(1))),
            DBin("*", DBin("+", N, DConst(1)), DConst(2)), DBin("+", N, DBin("*", DConst(2), N)),
            DBin("//", N, DBin("*", DConst(2), DConst(2))), DBin("%", DBin("//", N, DConst(2)), DConst(3)),
            DBin("+", N, DConst(-1)), DConst(-4), DBin("-", DConst(-4), N)]
    b = Builder(ShapeSolver(("N",)))
    b.begin_region(())
    for d in dims:
        b.add(kir.DimValue, dim=d)
    b.make(Yield, values=())
    k = build_kernel("dims", (), ("N",), b.end_region())
    text = assert_round_trip(k)
    assert [line.split("= dim ")[1].split(" :")[0] for line in text.splitlines() if "= dim " in line] == [
        "N + 1 - 1", "N - (N - 1)", "(N + 1) * 2", "N + 2 * N", "N // (2 * 2)", "N // 2 % 3", "N + (-1)", "-4",
        "(-4) - N"]


def test_header_round_trips_everything() -> None:
    T = kir.DTypeVar("T", (DType.f16, DType.bf16, DType.f32))
    M = DSym("M")
    requires = (PCmp("<=", N, DConst(65536)), PCmp("==", DBin("%", N, DConst(4)), DConst(0)),
                POr((PAnd((PCmp(">", M, DConst(1)), PCmp("<", M, DConst(9)))), PNot(PCmp("==", N, DConst(8))))),
                PAnd((PAnd((PCmp(">=", M, DConst(0)), PCmp("<=", M, N))), PCmp("!=", N, DConst(3)))),
                PNot(PNot(PCmp("==", M, M))), PAnd(()), POr((PCmp("==", N, N),)))
    b = Builder(ShapeSolver(("M", "N"), requires))
    x, s = b.begin_region((RefType(T, (M, N), Role.INOUT), kir.scalar(T)), ("x", "alpha"))
    b.make(Yield, values=())
    k = build_kernel("hdr", (Param("x", x), Param("alpha", s)), ("M", "N"), b.end_region(), requires=requires,
                     axioms=(PCmp("==", DBin("*", M, N), DSym("N")),), dtype_vars=(T,),
                     consts=(("BLOCK", 128), ("eps", 1e-06), ("flag", True), ("mode", 'fa"st\n\u00e9')),
                     checks=True, loc=Loc('we "ird".py', 3, 7))
    text = assert_round_trip(k)
    assert text.splitlines()[0] == (
        'kernel hdr(x: inout T[M, N], alpha: T) symbols(M, N) dtypes(T in {f16, bf16, f32}) '
        'consts(BLOCK = 128, eps = 1e-06, flag = true, mode = "fa\\"st\\n\\u00e9") '
        'requires(N <= 65536, N % 4 == 0, M > 1 and M < 9 or not N == 8, (M >= 0 and M <= N) and N != 3, '
        'not not M == M, and(), or(N == N)) axioms(M * N == N) checks loc("we \\"ird\\".py":3:7) {')


def test_locs_print_as_trailers_and_text_locs_do_not() -> None:
    b = Builder(ShapeSolver(("N",)))
    (x,) = b.begin_region((RefType(DType.f32, (N,), Role.IN),), ("x",))
    v = b.add(kir.Load, src=x, index=(kir.Slice(DConst(0), N),), loc=Loc("model.py", 12, 5))
    b.add(Unary, fn=UnaryFn.exp, x=v, loc=TextLoc("old.kir", 1, 1))
    b.make(Yield, values=())
    k = build_kernel("locs", (Param("x", x),), ("N",), b.end_region())
    text = assert_round_trip(k)
    assert '%0: f32[N] = load %x[0:N] loc("model.py":12:5)\n' in text
    assert "%1: f32[N] = unary exp %0\n" in text
    parsed = parse_kernel(text, "here.kir")
    assert parsed.body.ops[0].loc == Loc("model.py", 12, 5)
    assert parsed.body.ops[1].loc == TextLoc("here.kir", 3, 3)
    assert parsed.loc == TextLoc("here.kir", 1, 1)


def test_parsed_text_is_a_fixed_point_even_when_hand_written() -> None:
    text = """
    # comment
    kernel f(x: in f32[N], g: in i64[N], out: out f32[N]) requires(N>=2) symbols(N) {
      %ids:i64[N]=load %g[0:N]   # loads
      %v :f32[N] = gather %x[%ids] fill=-0.0
      %w: f32[N] = "binary" fn=add lhs=%v rhs=%v
      store %out[0:N] = %w
      yield
    }"""
    k = parse_kernel(text)
    kir.verify(k)
    assert print_kernel(k) == """\
kernel f(x: in f32[N], g: in i64[N], out: out f32[N]) symbols(N) requires(N >= 2) {
  %ids: i64[N] = load %g[0:N]
  %v: f32[N] = gather %x[%ids] fill=-0.0
  %w: f32[N] = binary add %v, %v
  store %out[0:N] = %w
  yield
}
"""
    assert isinstance(k.body.ops[1], Gather) and math.copysign(1.0, k.body.ops[1].fill) == -1.0


def test_scalar_types_accept_empty_brackets() -> None:
    a = parse_kernel("kernel f(s: f32) { %c: f32[] = constant 1.0 : f32\n yield }")
    b = parse_kernel("kernel f(s: f32[]) { %c: f32 = constant 1.0 : f32\n yield }")
    assert a == b


def test_sibling_regions_may_reuse_names() -> None:
    text = """kernel f(x: in f32[N], out: out f32[N]) symbols(N) {
  %v: f32[N] = load %x[0:N]
  %s: f32[N] = scan custom(%v) axis=0 identity=(0.0) combine=(%a: f32, %b: f32) {
    %c: f32 = binary add %a, %b
    yield %c
  }
  %m: f32 = reduce custom(%v) axes=(0) identity=(0.0) combine=(%a: f32, %b: f32) {
    %c: f32 = binary maximum %a, %b
    yield %c
  }
  store %out[0:N] = %s
  yield
}"""
    k = parse_kernel(text)
    kir.verify(k)
    assert "combine=(%a_1: f32, %b_1: f32)" in print_kernel(k)
    assert_round_trip(k)


def test_binary_names_survive_as_hints() -> None:
    k = parse_kernel("kernel f() {\n  %acc: i32 = constant 1 : i32\n  %7: i32 = constant 2 : i32\n"
                     "  %s: i32 = binary add %acc, %7\n  yield\n}")
    ops = k.body.ops
    assert [o.results[0].name for o in ops[:3]] == ["acc", None, "s"]
    assert isinstance(ops[2], Binary) and ops[2].fn is BinaryFn.add
