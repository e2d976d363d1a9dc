"""Constructs outside the kernel language: a DiagnosticError at the author's line and column whose message
says what to write instead."""

from __future__ import annotations

import re

import pytest

import intent
from kir.errors import DiagnosticError
from tests.frontend_support import diagnostic, write

# (source, marker where the error points, exact message)
CASES = {
    "comprehension": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[0] = intent.sum([v for v in x])
    """, "[v for v in x]", "comprehensions are not supported in kernel bodies; use a parallel loop "
                           "(for i in parallel(N): ...) or whole-tensor operations"),
    "global_list": ("""
        weights = [1.0, 2.0]

        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = x * weights
    """, "weights\n", "`weights` from the module is a list (kernels use only immutable values from outside; use a "
                      "tuple); a kernel body can use only numbers, dims, dtypes, strings, tuples, intent operations "
                      "and @intent.func helpers from its enclosing scope; pass tensors and other data as kernel "
                      "parameters"),
    "closure_array": ("""
        import numpy as np

        def make():
            w = np.ones(3)

            @intent.kernel
            def k(x: f32[N], out: Out[f32[N]]):
                out[:] = x * w
            return k

        k = make()
    """, "w\n", "`w` from the enclosing function is a ndarray object; a kernel body can use only numbers, dims, "
                "dtypes, strings, tuples, intent operations and @intent.func helpers from its enclosing scope; pass "
                "tensors and other data as kernel parameters"),
    "plain_function": ("""
        def helper(v):
            return v

        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = helper(x)
    """, "helper(x)", "`helper` from the module is a plain Python function (decorate helpers with @intent.func); a "
                      "kernel body can use only numbers, dims, dtypes, strings, tuples, intent operations and "
                      "@intent.func helpers from its enclosing scope; pass tensors and other data as kernel "
                      "parameters"),
    "print": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            print(x)
    """, "print", "print is not available in a kernel body: the body is compiled, not run; inspect values with "
                  "kernel.oracle(...) instead"),
    "try_except": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            try:
                out[:] = x
            except ValueError:
                pass
    """, "try:", "try/except is not supported in kernel bodies: a compiled kernel cannot catch errors; remove the "
                 "try block (out-of-range accesses are checked with checks=True)"),
    "return_value": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            return x + 1
    """, "return", "a kernel returns nothing: write its results into Out[...] parameters, e.g. `out[i] = value`"),
    "mixed_dtypes": ("""
        @intent.kernel
        def k(x: f32[N], h: f16[N], out: Out[f32[N]]):
            for n in parallel(N):
                out[n] = x[n] + h[n]
    """, "x[n] + h[n]", "`+` mixes f32 and f16 operands; KIR never promotes implicitly: convert one side "
                        "explicitly, e.g. `h[n].to(f32)`"),
    "store_dtype": ("""
        @intent.kernel
        def k(h: f16[N], out: Out[f32[N]]):
            out[:] = h
    """, "out[:] = h", "store to `out`: the value is f16 but f32 is expected; KIR never converts implicitly: write "
                       "`h.to(f32)`"),
    "undefined_name": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                out[n] = xx[n]
    """, "xx[n]", "undefined name `xx`; did you mean `x`?"),
    "float_index": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                out[n] = x[n * 0.5]
    """, "n * 0.5", "reading `x`: the index on axis 0 is an f32 value; indices must be integers: convert with "
                    "`.to(i64)`"),
    "float_literal_index": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[0] = x[1.5]
    """, "1.5", "reading `x`: the index on axis 0 is the float 1.5; indices must be integers"),
    "store_to_input": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                x[n] = 0.0
    """, "x[n] = 0.0", "cannot write to `x`: it is an input parameter; declare it Out[...] or InOut[...] in the "
                       "kernel signature"),
    "int_true_division": ("""
        @intent.kernel
        def k(a: i32[N], out: Out[i32[N]]):
            for n in parallel(N):
                out[n] = a[n] / 2
    """, "a[n] / 2", "`/` is true division but the operands are i32; write `//` for integer division (truncating "
                     "toward zero), or convert with `.to(f32)`"),
    "float_literal_with_int": ("""
        @intent.kernel
        def k(a: i32[N], out: Out[i32[N]]):
            for n in parallel(N):
                out[n] = a[n] * 0.5
    """, "0.5", "`*` combines an i32 value with a floating-point number 0.5; convert explicitly, e.g. "
                "`(...).to(f32)`, or use an integer"),
    "and_on_tensors": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[pred[N]]):
            out[:] = (x > 0) and (x < 1)
    """, "x > 0) and", "`and` needs a scalar condition, got a pred[N] value; use intent.any(...) or intent.all(...), "
                        "or intent.where(...) for elementwise choices"),
    "break": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for t in range(N):
                break
    """, "break", "break is not supported in kernel bodies; use a while loop whose condition stops it"),
    "nested_def": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            def inner(v):
                return v
    """, "def inner", "nested function definitions are not supported in kernel bodies; define a helper at module "
                      "level and decorate it with @intent.func"),
    "lambda": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            f = lambda v: v
    """, "lambda", "lambdas are not supported in kernel bodies; define a helper at module level with @intent.func"),
    "assert": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            assert N > 1
    """, "assert", "assert is not supported in kernel bodies; state conditions on shapes in requires=[...] "
                   "(checked at launch), or use checks=True to check indices at run time"),
    "matmul_operator": ("""
        @intent.kernel
        def k(a: f32[M, K], b: f32[K, N], out: Out[f32[M, N]]):
            out[:, :] = a @ b
    """, "a @ b", "the `@` operator is not supported; write intent.dot(a, b) for matrix products"),
    "used_before_assignment": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = y
            y = x
    """, "y\n", "`y` is used before it is assigned"),
    "defined_in_loop_only": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                v = x[n]
            out[0] = v
    """, "v\n", "`v` has no value here: it is first assigned inside the parallel loop at line 8 and has no value "
                "after the loop; assign it before the loop to carry it"),
    "one_branch_only": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                if x[n] > 0:
                    v = x[n]
                out[n] = v
    """, "v\n", "`v` has no value here: it is assigned in only one branch of the if at line 9; assign it before the "
                "if or in both branches"),
    "carry_changes_dtype": ("""
        @intent.kernel
        def k(x: f32[N], h: f16[N], out: Out[f32[N]]):
            for n in parallel(N):
                acc = x[n]
                for t in range(N):
                    acc = h[t]
                out[n] = acc
    """, "for t in", "`acc` is f32 before the for loop but f16 inside it; a loop-carried value keeps its dtype: "
                     "convert with `.to(f32)`, or use another name"),
    "subregion_outside_reduction": ("""
        @intent.kernel
        def k(v: f32[E], offs: i64[S + 1], out: Out[f32[E]]):
            for s in parallel(S):
                w = v[offs[s]:offs[s + 1]]
    """, "offs[s]:", "`v[b:e]` with runtime bounds is a data-dependent subregion: reduce it (intent.sum(v[b:e])) or "
                     "scan it into a matching subregion (out[b:e] = intent.cumsum(v[b:e])); to read a window of "
                     "fixed size, index with a vector: v[b + intent.arange(K)]"),
    "parallel_outside_for": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            p = parallel(N)
    """, "parallel(N)", "parallel(...) is only valid as the iterable of a for loop: `for i in parallel(N):`"),
    "runtime_parallel_extent": ("""
        @intent.kernel
        def k(x: f32[N], n: i32, out: Out[f32[N]]):
            for i in parallel(n):
                out[i] = 0.0
    """, "n):", "parallel extents are shape expressions (dims or integer constants), got an i32 value; for a trip "
                "count known only at run time use `for t in range(n)`"),
    "missing_identity": ("""
        @intent.combine
        def add(a, b):
            return a + b

        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[0] = intent.reduce(x, add)
    """, "intent.reduce", "intent.reduce() with a combine function needs identity=(...), one literal per component "
                          "(1), e.g. identity=(0.0)"),
    "undecorated_combine": ("""
        def add(a, b):
            return a + b

        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[0] = intent.reduce(x, add, identity=0.0)
    """, "add, identity", "`add` from the module is a plain Python function (decorate helpers with @intent.func); a "
                          "kernel body can use only numbers, dims, dtypes, strings, tuples, intent operations and "
                          "@intent.func helpers from its enclosing scope; pass tensors and other data as kernel "
                          "parameters"),
    "combine_arity": ("""
        @intent.combine
        def add(a, b):
            return a + b, a * b

        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[0] = intent.reduce(x, add, identity=0.0)
    """, "intent.reduce", "intent.reduce: the combine function `add` must return 1 value(s), one per component, but "
                          "returns 2 value(s)"),
    "recursive_helper": ("""
        @intent.func
        def f(v):
            return v + f(v)

        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = f(x)
    """, "f(v)\n", "recursive call to `f`: helpers are inlined, so they cannot call themselves; write the recursion as "
                 "a loop"),
    "region_fold_of_two_subregions": ("""
        @intent.kernel
        def k(v: f32[E], cols: i32[E], offs: i64[S + 1], x: f32[N], out: Out[f32[S]]):
            for s in parallel(S):
                out[s] = intent.sum(v[offs[s]:offs[s + 1]] * x[cols[0:offs[s + 1]]])
    """, "cols[0", "intent.sum reads two data-dependent subregions, `v[offs[s]:offs[s + 1]]` and "
                  "`cols[0:offs[s + 1]]`; a region fold reads one subregion and maps each of its elements. "
                     "To combine several arrays over one range (a CSR row's values and column indices), write an "
                     "ordered loop: `for k in range(b, e): acc += ...`"),
    "tensor_method": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[0] = x.sum()
    """, "x.sum", "tensor values have no attribute `sum` (they have .shape, .dtype, .ndim, .T and .to(dtype)); "
                  "write `intent.sum(x, ...)`"),
    "unknown_keyword": ("""
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M]]):
            out[:] = intent.sum(x, axes=1)
    """, "intent.sum(x", "intent.sum(): got an unexpected keyword argument 'axes'; the signature is "
                         "intent.sum(x, axis=None, keepdims=False, acc=None)"),
    "axis_out_of_range": ("""
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M]]):
            out[:] = intent.max(x, axis=3)
    """, "3)\n", "intent.max(): axis 3 is out of range for a rank-2 value"),
    "max_of_two_tensors": ("""
        @intent.kernel
        def k(x: f32[N], y: f32[N], out: Out[f32[N]]):
            out[:] = intent.max(x, y)
    """, "y)", "intent.max(): `axis` must be None, an integer or a tuple of integers, got the tensor `y` (in f32[N]); "
               "for the elementwise maximum of two tensors write intent.maximum(a, b)"),
    "empty_as_value": ("""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = x + intent.empty((N,), f32)
    """, "intent.empty", "intent.empty(...) is uninitialised memory and is only useful as a buffer you write before "
                         "reading (`buf = intent.empty(...)`, then `buf[i] = ...`); for a value use intent.zeros or "
                         "intent.full"),
    "missing_annotation": ("""
        @intent.kernel
        def k(x, out: Out[f32[N]]):
            pass
    """, "x, out", "parameter `x` needs an annotation: a tensor type like f32[M, N] (Out[...] / InOut[...] for "
                   "outputs), a scalar dtype like f32, or intent.const[int]"),
    "python_int_annotation": ("""
        @intent.kernel
        def k(x: f32[N], n: int, out: Out[f32[N]]):
            pass
    """, "int,", "parameter `n` is annotated `int`; write intent.const[int] for a compile-time value or a dtype such "
                 "as i64 for a runtime scalar"),
    "requires_not_a_predicate": ("""
        @intent.kernel(requires=[N <= 4, True])
        def k(x: f32[N], out: Out[f32[N]]):
            pass
    """, "True]", "requires item 2 is True, not a shape predicate; write a comparison of dims such as N <= 65536 or "
                  "N % 4 == 0"),
    "non_pred_condition": ("""
        @intent.kernel
        def k(a: i32[N], out: Out[i32[N]]):
            for n in parallel(N):
                if a[n]:
                    out[n] = 1
    """, "a[n]:", "an if condition needs a condition (pred), got an i32 value; compare it, e.g. `x != 0`"),
    "runtime_index_of_value": ("""
        @intent.kernel
        def k(x: f32[M, N], j: i64[N], out: Out[f32[M, N]]):
            for i in parallel(M):
                row = x[i, :] * 2
                out[i, :] = row[j[:]]
    """, "j[:]]", "a computed value can be indexed with scalar indices and slices only; index the tensor parameter "
                  "itself (x[idx]) or store the value into a buffer (buf = intent.empty(...)) and index that"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rejected_construct(tmp_path, case: str):
    source, marker, message = CASES[case]
    diagnostic(tmp_path, source, marker, message)


def test_the_message_shows_the_source_line_and_a_caret(tmp_path):
    err = diagnostic(tmp_path, *CASES["print"])
    assert str(err).splitlines()[1:] == ["        print(x)", "        ^"]
    assert str(err).startswith(f"{err.file}:{err.line}:{err.col}: error: print is not available")


def test_diagnostic_positions_are_the_real_file_positions(tmp_path):
    err = diagnostic(tmp_path, *CASES["mixed_dtypes"])
    assert (err.line, err.col) == (9, 18)  # 5 header lines; `x[n] + h[n]` starts at column 18 of line 9


def test_shape_mismatch_shows_a_counterexample(tmp_path):
    path = write(tmp_path, """
        @intent.kernel
        def k(x: f32[N], z: f32[M], out: Out[f32[N]]):
            out[:] = x + z
    """)
    with pytest.raises(DiagnosticError) as info:
        intent.kernels_in_file(str(path))
    err = info.value
    assert (err.line, err.col) == (8, 14)
    # Z3 picks the counterexample; any model with M != N is a right answer
    m = re.fullmatch(r"shape mismatch in `\+`: \[N\] and \[M\] do not broadcast \(cannot prove N == M: "
                     r"counterexample M = (\d+), N = (\d+)\); index or reshape the operands so their shapes agree, "
                     r"or state the equality in requires=\[\.\.\.\]", err.message)
    assert m is not None, err.message
    assert m.group(1) != m.group(2)


def test_unprovable_bounds_report_the_verifier_message(tmp_path):
    path = write(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                out[n] = x[n + 1]
    """)
    with pytest.raises(DiagnosticError) as info:
        intent.kernels_in_file(str(path))
    err = info.value
    assert (err.line, err.col) == (9, 18)
    assert err.message.startswith("load index on axis 0 may be out of bounds: cannot prove ")
    assert "< N" in err.message and "counterexample" in err.message


def test_unsatisfiable_requires(tmp_path):
    path = write(tmp_path, """
        @intent.kernel(requires=[N < 1])
        def k(x: f32[N], out: Out[f32[N]]):
            pass
    """)
    with pytest.raises(DiagnosticError) as info:
        intent.kernels_in_file(str(path))
    head = "kernel k: requires is unsatisfiable; these refinements cannot all hold: "
    assert info.value.message.startswith(head)
    assert set(info.value.message[len(head):].split(", ")) == {"N >= 1", "N < 1"}
    assert info.value.line == 7


def test_errors_inside_helpers_point_into_the_helper(tmp_path):
    diagnostic(tmp_path, """
        @intent.func
        def bad(v):
            return v + undefined_thing

        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = bad(x)
    """, "undefined_thing", "undefined name `undefined_thing`")
