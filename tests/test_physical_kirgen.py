"""Property: for random valid KIR, construction succeeds and the program keeps every verifier rule, or
construction refuses the kernel with a located diagnostic about the input. Never another exception,
never an internal diagnostic, never a program the verifier rejects."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings

import physical
from kir.core import Kernel
from kir.errors import DiagnosticError
from kir.text.parser import parse_kernel
from physical import ops as P
from physical.verifier import check
from tests.kirgen import kernels


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernels(generic=False))
def test_random_kernels_construct_and_verify_or_are_refused(kernel: Kernel):
    try:
        program = physical.lower(kernel)
    except DiagnosticError as exc:
        assert not exc.message.startswith("internal"), exc.message
        return
    violations = [str(v) for v in check(program, kernel)]
    assert violations == [], "\n".join(violations) + "\n" + str(kernel)


# Found by the property above: a segment sum whose fold result is unused, in a kernel with many parameters.
# The group's facts include the balanced-segment helper's nonlinear block bounds, and with all of them the
# solver spent its budget before `0 <= flat < S + 1` followed from `flat >= 0` and the mask `flat < S`.
UNUSED_SEGMENT_FOLD = (
    'kernel A(x: in bf16[M, N], y: in bf16[M, N], xi: in u16[N], idx: in i64[N], '
    'offsets: in i64[S + 1], values: in f32[E], seed: i64, alpha: bf16, out: out bf16[M, N], '
    'outi: out u16[N], outv: out f32[S], segout: out f32[E], counts: inout i32[B], '
    'facc: inout f32[B]) symbols(M, N, S, E, B) requires(not S == 3, '
    'B <= 1024 and not (E < 0 or E > 1099511627776)) axioms(M * N == N * M) {'
    "\n"
    """\
  parallel (%11: i64) in (S) {
    %row_1: i64 = load %offsets[%11]
    %12: i64 = load %offsets[%11]
    %13: i64 = constant 1 : i64
    %14: i64 = binary add %11, %13
    %15: i64 = load %offsets[%14] loc("kernel.py":3:5)
    %16: f32 = region_fold sum %values[%12:%15] loc("\u00fcn\u00efcode.py":999:80)
    %17: f16 = cast %11 to f16
    yield
  }
  yield
}
""")


def test_a_bound_that_two_linear_facts_decide_is_proven_beside_nonlinear_helper_facts():
    kernel = parse_kernel(UNUSED_SEGMENT_FOLD)
    assert [str(v) for v in check(physical.lower(kernel), kernel)] == []


# Found by the property above: a reverse row scan whose result is unused, in a kernel with many parameters.
# The split-rows form stores chunk S - 1 - s of a row, a nonlinear coordinate; with every fact of the group
# the solver spent its budget.
UNUSED_REVERSE_ROW_SCAN = (
    'kernel A(x: in f16[M, N], y: in f16[M, N], xi: in i8[N], idx: in i64[N], '
    'offsets: in i64[S + 1], values: in f32[E], seed: i64, alpha: f16, out: out f16[M, N], '
    'outi: out i8[N], outv: out f32[S], segout: out f32[E], counts: inout i32[B], '
    'facc: inout f32[B]) symbols(M, N, S, E, '
    'B) requires(B <= 1024 and not (E < 0 or E > 1099511627776)) {'
    "\n"
    """\
  parallel (%0: i64) in (M) {
    %1: f16[N] = load %x[%0, 0:N]
    %2: f16[N] = scan sum(%1) axis=0 reverse=true
    %3: i64 = unary neg %0
    store %out[%0, 0:N] = %1
    yield
  }
  yield
}
""")


def test_a_reverse_row_scan_chunk_is_proven_within_its_row():
    kernel = parse_kernel(UNUSED_REVERSE_ROW_SCAN)
    assert [str(v) for v in check(physical.lower(kernel), kernel)] == []


# Found by the property above: a custom region fold whose identity holds a NaN, in a kernel with a dot. Split over
# programs, the fold of the workspace slots pads the slot tile with the identity, NaN included; narrowing-explicit
# compared the fill with the identity by `!=`, under which a NaN is never equal to itself.
NAN_IDENTITY_REGION_FOLD = (
    'kernel A0(x: in f16[M, N], y: in f16[M, N], xi: in i8[N], idx: in i64[N], offsets: in i64[S + 1], '
    'values: in f32[E], seed: i64, alpha: f16, out: out f16[M, N], outi: out i8[N], outv: out f32[S], '
    'segout: out f32[E], counts: inout i32[B], facc: inout f32[B]) symbols(M, N, S, E, B) {'
    "\n"
    """\
  parallel (%class_: i64) in (S) {
    %x_1: i64 = load %offsets[%class_]
    %3: i64 = constant 1 : i64
    %4: i64 = binary add %class_, %3
    %row_1: i64 = load %offsets[%4]
    %5: f64, %6: f32 = region_fold custom %values[%x_1:%row_1] identity=(-2, nan) map=(%for_: f32) {
      %__2: f64 = cast %for_ to f64
      %7: f32 = unary abs %for_
      yield %__2, %7
    } combine=(%8: f64, %9: f32, %t: f64, %10: f32) {
      %11: f64 = binary add %8, %t
      %t_1: f32 = binary add %9, %10
      yield %11, %t_1
    }
    %acc_1: f32 = cast %5 to f32
    store %outv[%class_] = %acc_1
    yield
  }
  %v_1: f16[M, N] = load %x[0:M, 0:N]
  %acc_2: f16[M, N] = load %y[0:M, 0:N]
  %16: f32[M] = dot %v_1, %acc_2 lhs_batch=(0) rhs_batch=(0) lhs_contract=(1) rhs_contract=(1) acc_dtype=f32
  yield
}
""")


def test_a_slot_fold_whose_identity_is_nan_may_fold_slot_padding_filled_with_nan():
    kernel = parse_kernel(NAN_IDENTITY_REGION_FOLD)
    program = physical.lower(kernel)
    slot_folds = [op for op in program.walk() if isinstance(op, P.Reduce) and math.isnan(op.identity[1])]
    assert slot_folds, "the split form's fold of the slots"
    assert [str(v) for v in check(program, kernel)] == []
