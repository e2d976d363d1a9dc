"""The kernel object (SPEC §4): argument binding, specialisation, delegation to the other stages, the
user-facing dtype/dim objects and `kernels_in_file`."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

import intent
import kir
from kir import DType
from kir.errors import DiagnosticError, IntentError, LaunchError
from tests.frontend_support import kernel, kernels, write

GENERIC = """
    @intent.kernel
    def k(x: T[N], y: T[N], out: Out[T[N]], R: const[int] = 2):
        for n in parallel(N):
            out[n] = x[n] * R + y[n]
"""


# ---------------------------------------------------------------------------------------------- the object


def test_kernel_object_basics(tmp_path):
    k = kernel(tmp_path, '''
        @intent.kernel(requires=[N % 4 == 0], checks=True)
        def scale(x: f32[N], out: Out[f32[N]]):
            """Doubles x."""
            out[:] = x * 2
    ''')
    assert k.__name__ == "scale" and k.__doc__ == "Doubles x."
    assert isinstance(k.kir, kir.Kernel) and hasattr(k.kir, "__str__")
    assert k.kir.checks is True
    assert [str(p) for p in k.kir.requires] == ["N % 4 == 0"]
    assert repr(k) == "<intent.kernel scale(x: f32[N], out: Out[f32[N]])>"


def test_checks_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("INTENT_CHECKS", "1")
    k = kernel(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = x
    """)
    assert k.checks and k.kir.checks


def test_argument_binding(tmp_path):
    k = kernel(tmp_path, GENERIC)
    x = torch.zeros(4)
    assert k.bind_arguments((x,), {"y": x}) == {"x": x, "y": x}
    with pytest.raises(LaunchError) as e:
        k.bind_arguments((x,), {})
    assert str(e.value) == "k() is missing argument(s): y (T[N])"
    with pytest.raises(LaunchError) as e:
        k.bind_arguments((x, x), {"z": 1})
    assert str(e.value) == "k() got an unexpected argument 'z'; its parameters are x, y, out, R"
    with pytest.raises(LaunchError) as e:
        k.bind_arguments((x, x), {"x": x})
    assert str(e.value) == "k() got multiple values for argument 'x'"
    with pytest.raises(LaunchError) as e:
        k.bind_arguments((x, x, x, 2, 5), {})
    assert str(e.value) == "k() takes 4 arguments (x, y, out, R) but 5 were given"


def test_specialisation_by_dtype_and_const(tmp_path):
    k = kernel(tmp_path, GENERIC)
    generic = k.kir  # a const with a default takes it; the dtype variable stays generic
    assert generic.symbols == ("N",) and generic.consts == (("R", 2),) and [v.name for v in generic.dtype_vars] == ["T"]
    s = k.specialize({"x": torch.zeros(3, dtype=torch.float16), "y": torch.zeros(3, dtype=torch.float16)})
    assert s.param("x").type.dtype == DType.f16 and s.consts == (("R", 2),) and s.symbols == ("N",)
    assert k.specialize({"x": np.zeros(3, np.float16), "R": 2}) is s
    s3 = k.specialize({"x": torch.zeros(3, dtype=torch.float16), "R": 3})
    assert s3 is not s and s3.consts == (("R", 3),)
    assert k.specialize_with({"T": "f32"}, {"R": 2}).param("out").type.dtype == DType.f32


def test_specialisation_errors_name_the_parameter(tmp_path):
    k = kernel(tmp_path, GENERIC)
    f16, f64 = torch.zeros(2, dtype=torch.float16), torch.zeros(2, dtype=torch.float64)
    cases = [
        ({"x": f64}, "parameter x: dtype f64 is not one of T's choices (f16, bf16, f32)"),
        ({"x": f16, "y": torch.zeros(2)}, "parameter y: dtype f32, but T = f16 from parameter x"),
        ({"x": [1.0, 2.0]}, "parameter x: expected a tensor of type T[N] (a torch tensor or NumPy array), got list"),
        ({}, "cannot infer the dtype variable T: pass a tensor for x or y or out"),
        ({"x": f16, "R": 2.5}, "parameter R: expected a compile-time int (intent.const[int]), got 2.5"),
    ]
    for args, message in cases:
        with pytest.raises(LaunchError) as e:
            k.specialize(args)
        assert str(e.value) == message


def test_const_parameter_without_a_default(tmp_path):
    k = kernel(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]], alpha: const[float]):
            for n in parallel(N):
                out[n] = x[n] * alpha
    """)
    with pytest.raises(DiagnosticError) as e:
        _ = k.kir
    assert e.value.message.startswith("kernel k has the compile-time parameter `alpha` (intent.const[float]) "
                                      "without a default")
    s = k.specialize({"x": torch.zeros(2), "alpha": 0.5})
    assert s.consts == (("alpha", 0.5),)
    with pytest.raises(LaunchError) as e2:
        k.specialize({"x": torch.zeros(2)})
    assert str(e2.value) == "missing argument alpha (intent.const[float])"


# ---------------------------------------------------------------------------------------------- delegation


def _fake(monkeypatch, name: str, **attrs) -> list:
    calls: list = []
    mod = types.ModuleType(name)
    for attr, result in attrs.items():
        def fn(*args, _attr=attr, _result=result, **kwargs):
            calls.append((_attr, args, kwargs))
            return _result
        setattr(mod, attr, fn)
    monkeypatch.setitem(sys.modules, name, mod)
    return calls


def test_call_launches_the_specialised_kernel_without_const_arguments(tmp_path, monkeypatch):
    calls = _fake(monkeypatch, "emit_triton", launch="launched", source="src", ptx=".entry")
    k = kernel(tmp_path, GENERIC)
    x = torch.zeros(3, dtype=torch.bfloat16)
    assert k(x, x, R=5) == "launched"
    (_, (spec, args), kwargs) = calls[-1]
    assert isinstance(spec, kir.Kernel) and spec.consts == (("R", 5),) and spec.param("x").type.dtype == DType.bf16
    assert set(args) == {"x", "y"} and kwargs == {}
    assert k.triton_source(x=x, y=x) == "src"
    assert k.ptx(x, x, arch=80) == ".entry"
    assert calls[-1][1][2] == 80


def test_oracle_stablehlo_and_explain_delegate(tmp_path, monkeypatch):
    oracle_calls = _fake(monkeypatch, "oracle", run={"out": 1})
    shlo_calls = _fake(monkeypatch, "oracle.stablehlo", emit="module", run={"out": 2})
    phys_calls = _fake(monkeypatch, "physical", explain="plan")
    k = kernel(tmp_path, """
        @intent.kernel(checks=True)
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = x
    """)
    x = np.zeros(3, np.float32)
    assert k.oracle(x=x) == {"out": 1}
    assert oracle_calls[-1][2] == {"checks": True}
    assert k.stablehlo(x) == "module" and k.stablehlo_run(x) == {"out": 2}
    assert [c[0] for c in shlo_calls] == ["emit", "run"]
    assert k.explain() == "plan" and phys_calls[-1][1] == (k.kir,)


def test_missing_stages_are_clear_not_implemented_errors(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "emit_triton", types.ModuleType("emit_triton"))
    monkeypatch.setitem(sys.modules, "physical", None)
    k = kernel(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = x
    """)
    with pytest.raises(NotImplementedError) as e:
        k(torch.zeros(2))
    assert str(e.value) == "launching is not available: emit_triton.launch does not exist yet"
    with pytest.raises(NotImplementedError) as e:
        k.explain()
    assert str(e.value) == "the physical plan is not available: the module physical does not exist yet"


# ---------------------------------------------------------------------------------------------- surface objects


def test_operations_outside_kernels_raise():
    with pytest.raises(IntentError) as e:
        intent.exp(1.0)
    assert str(e.value) == ("intent.exp(...) is a kernel operation: it can only be used inside the body of an "
                            "@intent.kernel or @intent.func function")
    with pytest.raises(IntentError):
        intent.parallel(3)
    with pytest.raises(IntentError) as e:
        intent.f32(0.0)
    assert "inside a kernel body only" in str(e.value)

    @intent.func
    def helper(v):
        return v

    with pytest.raises(IntentError) as e:
        helper(1)
    assert str(e.value) == ("`helper` is an @intent.func function: it is inlined into kernel bodies and cannot be "
                            "called from Python")


def test_dims_and_predicates():
    M, N = intent.dims("M N")
    one = intent.dims("S")
    assert isinstance(one, intent.Dim) and str(one) == "S"
    assert str(N + 1) == "N + 1" and str(2 * N) == "2 * N" and str(N // 4) == "N // 4" and str(N % 4) == "N % 4"
    assert str(3 - N) == "3 - N" and str(-N) == "0 - N"
    assert str(N == M) == "N == M" and str(N != 4) == "N != 4" and str(4 >= N) == "N <= 4"
    assert str((N <= 8) & (M > 1)) == "N <= 8 and M > 1" and str(~(N < 2) | (M == 1)) == "not N < 2 or M == 1"
    assert hash(N + 1) == hash(N + 1) and len({N, N}) == 1
    with pytest.raises(IntentError):
        bool(N == 4)
    with pytest.raises(IntentError):
        bool(N)


def test_type_objects():
    N = intent.dims("N")
    assert repr(intent.f32[N, 4]) == "f32[N, 4]"
    assert repr(intent.Out[intent.f16[N]]) == "Out[f16[N]]" and repr(intent.InOut[intent.i32[N]]) == "InOut[i32[N]]"
    T = intent.dtype_var("T", intent.f16, intent.f32)
    assert T.choices == (DType.f16, DType.f32) and repr(T[N]) == "T[N]"
    assert repr(intent.const[int]) == "intent.const[int]"
    with pytest.raises(DiagnosticError) as e:
        intent.Out[intent.f32]
    assert e.value.message == "Out[...] wraps a tensor type like f32[N], got intent.f32"
    assert e.value.file == __file__
    with pytest.raises(DiagnosticError) as e:
        intent.const[str]
    assert e.value.message == "intent.const[...] takes int, float or bool, got <class 'str'>"
    with pytest.raises(DiagnosticError) as e:
        intent.dtype_var("U")
    assert e.value.message == "dtype_var('U') needs at least one dtype choice, e.g. dtype_var('U', f16, f32)"
    with pytest.raises(DiagnosticError) as e:
        intent.f32[N, 1.5]
    assert e.value.message == "f32[...]: a shape lists dims or integers, got 1.5"


def test_exports():
    for name in ["kernel", "func", "combine", "dims", "Dim", "parallel", "const", "dtype_var", "Out", "InOut",
                 "pred", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64",
                 "IntentError", "DiagnosticError", "LaunchError", "NotExpressible", "kernels_in_file"]:
        assert hasattr(intent, name), name
    assert issubclass(intent.DiagnosticError, intent.IntentError)
    assert issubclass(intent.LaunchError, intent.IntentError)


# ---------------------------------------------------------------------------------------------- kernels_in_file


def test_kernels_in_file_returns_the_kernels_defined_there(tmp_path):
    found = kernels(tmp_path, """
        @intent.kernel
        def first(x: f32[N], out: Out[f32[N]]):
            out[:] = x

        second = intent.kernel(first.__wrapped__)

        @intent.func
        def not_a_kernel(v):
            return v
    """)
    assert set(found) == {"first", "second"}
    assert found["first"].__name__ == "first"


def test_kernels_in_file_locates_import_failures(tmp_path):
    with pytest.raises(DiagnosticError) as e:
        intent.kernels_in_file(str(tmp_path / "missing.py"))
    assert e.value.message == f"cannot read {tmp_path / 'missing.py'}: no such file"
    path = write(tmp_path, "x = 1\ny = (\n")
    with pytest.raises(DiagnosticError) as e:
        intent.kernels_in_file(str(path))
    assert e.value.message.startswith("syntax error: ") and e.value.file == str(path) and e.value.line == 7
    path = write(tmp_path, "x = 1\ny = 1 / 0\n")
    with pytest.raises(DiagnosticError) as e:
        intent.kernels_in_file(str(path))
    assert e.value.message == f"importing {path} failed: ZeroDivisionError: division by zero"
    assert (e.value.file, e.value.line) == (str(path), 7)


# ---------------------------------------------------------------------------------------------- kirc on .py files


def test_kirc_reads_python_files(tmp_path, capsys):
    from kir.cli import main

    path = write(tmp_path, GENERIC)
    assert main(["check", str(path), "--kernel", "k"]) == 0
    assert main(["lower", str(path), "--kernel", "k", "--emit=kir", "--dtype", "T=bf16"]) == 0
    out = capsys.readouterr().out
    assert "kernel k(x: in bf16[N]" in out
    bad = write(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            out[:] = x + nope
    """)
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:8:18: error: undefined name `nope`" in err
