"""The KIR verifier: SSA scoping, terminators, result types, roles and in-bounds affine accesses."""

from __future__ import annotations

import dataclasses
import re

import pytest

import kir
from kir import DType, Kernel, Parallel, Region, TensorType, Unary, Value
from kir.errors import VerifyError
from kir.text import parse_kernel
from tests import samples


def verify_error(k: Kernel) -> VerifyError:
    with pytest.raises(VerifyError) as info:
        kir.verify(k)
    return info.value


def with_ops(k: Kernel, ops: tuple) -> Kernel:
    return dataclasses.replace(k, body=Region(k.body.args, ops))


def parallel_body(k: Kernel) -> tuple[Parallel, Region]:
    par = next(o for o in k.body.ops if isinstance(o, Parallel))
    return par, par.body


def test_valid_samples_verify() -> None:
    for make in samples.ALL:
        kir.verify(make())


def test_use_before_def() -> None:
    k = samples.vector_add()
    ops = list(k.body.ops)
    ops[1], ops[2] = ops[2], ops[1]  # the add now comes before the load of its rhs
    err = verify_error(with_ops(k, tuple(ops)))
    assert err.message == f"binary uses {ops[1].rhs!r} before it is defined"
    assert err.message == "binary uses %v#4: f32[N] before it is defined"


def test_missing_terminator() -> None:
    k = samples.softmax()
    par, body = parallel_body(k)
    cut = dataclasses.replace(par, body=Region(body.args, body.ops[:-1]))
    err = verify_error(with_ops(k, (cut, *k.body.ops[1:])))
    assert err.message == "parallel region does not end with yield"


def test_terminator_not_last() -> None:
    k = samples.vector_add()
    ops = k.body.ops
    err = verify_error(with_ops(k, (ops[-1], *ops[:-1])))
    assert err.message == "yield must be the last op of its region"


def test_kernel_body_yields_nothing() -> None:
    k = samples.vector_add()
    ops = k.body.ops
    err = verify_error(with_ops(k, (*ops[:-1], dataclasses.replace(ops[-1], values=(ops[0].result,)))))
    assert err.message == "the kernel body yields no values"


def test_wrong_result_type() -> None:
    k = samples.softmax()
    par, body = parallel_body(k)
    exp_at = next(n for n, o in enumerate(body.ops) if isinstance(o, Unary))
    e = body.ops[exp_at]
    wrong = dataclasses.replace(e, results=(Value(e.result.id, TensorType(DType.f16, e.result.type.shape)),))
    new_body = Region(body.args, body.ops[:exp_at] + (wrong,) + body.ops[exp_at + 1:])
    err = verify_error(with_ops(k, (dataclasses.replace(par, body=new_body), *k.body.ops[1:])))
    assert err.message == "unary results are (f16[N]) but its typing rule gives (f32[N])"


def test_provably_equal_result_types_are_accepted() -> None:
    text = """kernel f(x: in f32[N], out: out f32[N]) symbols(N) requires(N >= 2) {
  %v: f32[N] = load %x[0:N]
  %tail: f32[1] = slice %v starts=(N - 1) stops=(N) steps=(1)
  %both: f32[N + 1] = concat (%v, %tail) axis=0
  %again: f32[1 + N] = concat (%tail, %v) axis=0
  yield
}"""
    kir.verify(parse_kernel(text))
    err = verify_error(parse_kernel(text.replace("%tail: f32[1]", "%tail: f32[2]"), "t.kir"))
    assert err.message == "slice results are (f32[2]) but its typing rule gives (f32[N - (N - 1)])"
    assert (err.line, err.col) == (3, 3)


def test_store_to_an_in_parameter() -> None:
    k = samples.vector_add()
    store = k.body.ops[3]
    bad = dataclasses.replace(store, dst=k.params[0].value)
    err = verify_error(with_ops(k, (*k.body.ops[:3], bad, k.body.ops[4])))
    assert err.message == "store to an `in` parameter; declare it Out[...] or InOut[...]"


def test_out_of_bounds_affine_load_has_a_counterexample() -> None:
    text = """kernel f(x: in f32[M, N], out: out f32[M, N]) symbols(M, N) {
  parallel (%i: i64) in (M) {
    %one: i64 = constant 1 : i64
    %next: i64 = binary add %i, %one
    %row: f32[N] = load %x[%next, 0:N]
    store %out[%i, 0:N] = %row
    yield
  }
  yield
}"""
    err = verify_error(parse_kernel(text, "oob.kir"))
    # The loop index is named as the kernel names it (%i), not by an internal symbol.
    m = re.fullmatch(r"load index on axis 0 may be out of bounds: cannot prove (i) \+ 1 < M: "
                     r"counterexample M = (\d+), N = \d+, (i) = (\d+)", err.message)
    assert m and m.group(1) == m.group(3), err.message
    assert int(m.group(4)) + 1 >= int(m.group(2)) >= 1  # the counterexample is out of bounds
    assert (err.file, err.line, err.col) == ("oob.kir", 5, 5)
    kir.verify(parse_kernel(text.replace("binary add %i, %one", "binary mul %i, %one")))


def test_loop_ranges_bound_for_indices() -> None:
    kir.verify(samples.recurrence())
    text = str(samples.recurrence()).replace("%2: i64 = dim T : i64", "%2: i64 = dim T + 1 : i64")
    err = verify_error(parse_kernel(text))
    assert err.message.startswith("load index on axis 1 may be out of bounds: cannot prove ")


def test_non_affine_load_index() -> None:
    text = """kernel f(x: in f32[N], idx: in i64[N], out: out f32[N]) symbols(N) {
  parallel (%i: i64) in (N) {
    %j: i64 = load %idx[%i]
    %v: f32 = load %x[%j]
    store %out[%i] = %v
    yield
  }
  yield
}"""
    err = verify_error(parse_kernel(text))
    assert err.message == ("load index on axis 0 is not affine in loop indices and shape symbols; use a gather/scatter "
                           "for data-dependent indices")
    kir.verify(parse_kernel(text.replace("%v: f32 = load %x[%j]", "%v: f32 = gather %x[%j]")))


def test_parameter_checks() -> None:
    k = samples.vector_add()
    dup = dataclasses.replace(k, params=(k.params[0], dataclasses.replace(k.params[1], name="x"), k.params[2]))
    assert verify_error(dup).message == "duplicate parameter names in ['x', 'x', 'out']"
    swapped = dataclasses.replace(k, params=(k.params[1], k.params[0], k.params[2]))
    assert verify_error(swapped).message == "kernel parameters and body arguments differ"
    local = parse_kernel("kernel f(b: local f32[]) {\n  yield\n}")
    assert verify_error(local).message == "parameter b cannot have role local"


def test_value_defined_twice() -> None:
    k = samples.vector_add()
    ops = k.body.ops
    twice = dataclasses.replace(ops[1], results=ops[0].results)
    err = verify_error(with_ops(k, (ops[0], twice, *ops[2:])))
    assert err.message == f"{ops[0].result!r} is defined twice"
