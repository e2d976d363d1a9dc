"""Safe generation: names and source locations from `.kir` files and Python sources cannot become code.

* `emit_triton.names.mangle` turns any name into a plain-ASCII identifier in the user namespace
  (`p_`, `v_`, `s_`, ... prefixes): never a keyword, builtin, dunder or emitter name;
* the `.kir` lexer rejects names that are not `[A-Za-z_][A-Za-z0-9_]*` or are Python keywords;
* hostile but well-formed names (`eval`, `__import__`, `pid`, `tl`, ...) compile and run correctly;
* a generated module that does not have the shape of generated code (an injected statement) is
  refused by `emit_triton.safety.check_generated` and never executed;
* while any of this compiles and runs, no process is started and no file is written outside the
  compile cache.
"""

from __future__ import annotations

import builtins
import keyword
import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

import emit_triton
import intent
import oracle
from emit_triton import targets
from emit_triton.names import KINDS, comment_text, is_user_name, mangle
from emit_triton.safety import UnsafeModule, check_generated
from kir.errors import DiagnosticError, IntentError
from kir.text import parse_kernel
from tests import samples

HOSTILE = ["pid", "tl", "triton", "eval", "exec", "__import__", "__builtins__", "os", "open", "print", "range",
           "float", "INDEX_64", "seg_offset", "BLOCK_I0", "_reduce_1", "x_stride_0", "self", "flat", "total"]
NOT_NAMES = ['a"b', "a\nb", "ｐid", "é", "a-b", "a b", "a;b", "__import__('os')", "1x", "x\u2028y", "ℌ"]


# ---------------------------------------------------------------------------------------------- the sandbox


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """Records every attempt to start a process or to write a file outside the cache and tmp_path."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("INTENT_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    attempts: list[str] = []

    def refuse(what: str):
        def call(*args, **kwargs):
            attempts.append(f"{what}{args[:1]}")
            raise PermissionError(f"{what} is not allowed while compiling")
        return call

    for mod, name in ((os, "system"), (os, "popen"), (os, "fork"), (os, "execv"), (os, "execve"),
                      (os, "posix_spawn"), (subprocess, "Popen")):
        if hasattr(mod, name):
            monkeypatch.setattr(mod, name, refuse(f"{mod.__name__}.{name}"))
    real_open = builtins.open

    def guarded_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and isinstance(file, str | Path):
            where = Path(file).resolve()
            if not (where.is_relative_to(cache.resolve()) or where.is_relative_to(Path(tmp_path).resolve() / "ok")):
                attempts.append(f"open({file!r}, {mode!r})")
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    targets.clear_loaded()
    yield attempts
    targets.clear_loaded()
    assert not (tmp_path / "PWNED").exists(), "injected code ran"


def test_the_sandbox_sees_processes_and_writes(sandbox, tmp_path) -> None:
    with pytest.raises(PermissionError):
        os.system("true")
    with open(tmp_path / "written.txt", "w") as fh:
        fh.write("x")
    assert sandbox == ["os.system('true',)", f"open({tmp_path / 'written.txt'!r}, 'w')"]
    sandbox.clear()


# ---------------------------------------------------------------------------------------------- mangling


@pytest.mark.parametrize("name", HOSTILE + NOT_NAMES + ["", "x" * 200, "class", "None", "𝔁", "\x00"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_mangled_names_are_safe_identifiers(name: str, kind: str) -> None:
    out = mangle(name, kind)
    assert out.isascii() and out.isidentifier(), out
    assert not keyword.iskeyword(out) and not hasattr(builtins, out) and not out.startswith("__"), out
    assert out.startswith(f"{KINDS[kind]}_") and is_user_name(out), out
    assert len(out) <= 60, out


def test_mangling_keeps_plain_names_readable_and_distinct_names_apart() -> None:
    assert mangle("row") == "v_row"
    assert mangle("x", "param") == "p_x"
    assert mangle("N", "symbol") == "s_N"
    assert mangle("__import__", "param") == "p___import__"
    assert mangle("a-b") == "v_a_b_xd44362d6"
    assert mangle("ｐid") == "v_pid_xd3aa9115"  # never `pid`, which Python would fold it onto
    every = HOSTILE + NOT_NAMES + ["a_b", "pid_", "v_pid"]
    assert len({mangle(n) for n in every}) == len(every)
    with pytest.raises(ValueError, match="unknown name kind 'loop'"):
        mangle("i", "loop")


def test_comment_text_is_one_line_of_ascii() -> None:
    assert comment_text("a\nimport os\x00é\u2028") == "a\\x0aimport os\\x00\\xe9\\u2028"
    assert comment_text("kernel.py:3") == "kernel.py:3"
    assert comment_text("x" * 300).endswith("...") and len(comment_text("x" * 300)) == 120


# ---------------------------------------------------------------------------------------------- the module check


def test_generated_modules_of_the_samples_pass_the_check(sandbox) -> None:
    args = {"softmax": {"x": np.zeros((2, 3), np.float32), "out": np.zeros((2, 3), np.float32)},
            "segment_sum": {"values": np.zeros(4, np.float32), "offsets": np.array([0, 2, 4]),
                            "out": np.zeros(2, np.float32)},
            "histogram": {"x": np.zeros(5, np.int32), "counts": np.zeros(7, np.int32)}}
    for name, a in args.items():
        check_generated(emit_triton.source(getattr(samples, name)(), a), name)
    assert sandbox == []


def _kernel_with(line: str) -> str:
    return f"import triton\n@triton.jit\ndef k(x):\n    {line}\n"


INJECTED = {
    "module statement": ("import triton\nimport os\n", "a top-level Import statement (line 2)"),
    "call at top level": ("import triton\nprint(1)\n", "a top-level Expr statement (line 2)"),
    "undecorated function": ("def f(x):\n    return x\n", "a top-level FunctionDef statement (line 1)"),
    "import in a kernel": (_kernel_with("import os"), "a Import inside function k (line 4)"),
    "builtin in a kernel": (_kernel_with("y = eval(x)"), "a use of the builtin eval (line 4)"),
    "dunder attribute": (_kernel_with("y = x.__class__"), "the attribute .__class__ (line 4)"),
    "string payload": (_kernel_with("y = 'rm -rf /'"), "the string constant 'rm -rf /' (line 4)"),
}


@pytest.mark.parametrize("what", sorted(INJECTED))
def test_modules_not_shaped_like_generated_code_are_refused(what: str) -> None:
    source, detail = INJECTED[what]
    with pytest.raises(UnsafeModule) as err:
        check_generated(source, "k")
    assert str(err.value) == (f"internal error: the generated module for kernel k contains {detail}, which generated "
                              f"code never does; it is not executed")


def test_a_parameter_may_shadow_a_builtin_and_a_module_that_does_not_compile_is_refused() -> None:
    check_generated("import triton\n@triton.jit\ndef k(eval, __import__):\n    y = eval + __import__\n", "k")
    with pytest.raises(UnsafeModule) as err:
        check_generated("import triton\n@triton.jit\ndef k(a, a):\n    pass\n", "k")
    assert str(err.value) == ("internal error: the generated module for kernel k does not compile (line 3: duplicate "
                              "argument 'a' in function definition); it is not executed")


# ---------------------------------------------------------------------------------------------- .kir names

TEMPLATE = """kernel {kernel}(x: in f32[{sym}], {param}: in f32[{sym}], out: out f32[{sym}]) symbols({sym}) {{
  parallel (%{index}: i64) in ({sym}) {{
    %a: f32 = load %x[%{index}]
    %{value}: f32 = load %{param}[%{index}]
    %s: f32 = binary add %a, %{value}
    store %out[%{index}] = %s
    yield
  }}
  yield
}}"""
ROLES = ("kernel", "param", "symbol", "value", "index")


def _kir(name: str, role: str) -> str:
    names = {"kernel": "k", "param": "y", "sym": "N", "value": "b", "index": "i"}
    names["sym" if role == "symbol" else role] = name
    return TEMPLATE.format(**names)


@pytest.mark.parametrize("name", NOT_NAMES + ["class", "for", "None", "lambda"])
@pytest.mark.parametrize("role", ROLES)
def test_kir_names_that_are_not_identifiers_are_rejected(name: str, role: str) -> None:
    with pytest.raises(DiagnosticError) as err:
        parse_kernel(_kir(name, role), "hostile.kir")
    assert err.value.file == "hostile.kir" and err.value.line is not None and err.value.col is not None


def test_kir_keyword_names_get_a_clear_message() -> None:
    with pytest.raises(DiagnosticError) as err:
        parse_kernel(_kir("class", "value"), "hostile.kir")
    assert err.value.message == "bad value name %class: 'class' is a Python keyword and cannot be used as a name"


# User names reach generated code through `emit_triton.names.mangle` (a kind prefix), so they never meet
# the emitter's own names (`seg_offset`, the constexpr `BLOCK_I0`, `pid`).


def _hostile_params() -> list:
    out = []
    for name in HOSTILE:
        for role in ROLES:
            out.append(pytest.param(name, role, id=f"{role}-{name}"))
    return out


@pytest.mark.parametrize(("name", "role"), _hostile_params())
def test_hostile_identifiers_compile_and_run_correctly(name: str, role: str, sandbox) -> None:
    kernel = parse_kernel(_kir(name, role), "hostile.kir")
    param = name if role == "param" else "y"
    args = {"x": np.arange(6, dtype=np.float32), param: np.full(6, 0.5, np.float32), "out": np.zeros(6, np.float32)}
    want = oracle.run(kernel, args)["out"]
    emit_triton.launch(kernel, args)
    assert np.array_equal(args["out"], want)
    assert sandbox == []


def test_user_names_reach_generated_code_mangled() -> None:
    # a kernel equal to this one up to value names may already be emitted in this process (value names do
    # not take part in kernel equality): the names checked here must come from this kernel
    emit_triton.compile.clear_emitted()
    kernel = parse_kernel(_kir("eval", "param").replace("%b", "%row"), "hostile.kir")
    args = {"x": np.zeros(3, np.float32), "eval": np.zeros(3, np.float32), "out": np.zeros(3, np.float32)}
    source = emit_triton.source(kernel, args)
    assert "p_eval" in source and "v_row" in source and "p_x" in source and "s_N" in source


# ---------------------------------------------------------------------------------------------- locations

PAYLOAD = "a\nimport os\nos.system('touch PWNED')\nif True:\n #"
LOC_KERNEL = """kernel add(x: in f32[N], out: out f32[N]) symbols(N) {
  %v: f32[N] = load %x[0:N] loc(%s:3:1)
  store %out[0:N] = %v
  yield
}"""

def _loc_kernel():
    import json

    return parse_kernel(LOC_KERNEL.replace("%s", json.dumps(PAYLOAD), 1), "loc.kir")


def test_a_location_with_code_in_it_never_runs(sandbox) -> None:
    args = {"x": np.ones(4, np.float32), "out": np.zeros(4, np.float32)}
    try:
        emit_triton.launch(_loc_kernel(), args)
    except UnsafeModule:
        pass  # refused before anything is executed
    else:
        assert np.array_equal(args["out"], np.ones(4, np.float32))
    assert sandbox == []


def test_a_location_with_a_newline_is_escaped_in_the_comment(sandbox) -> None:
    args = {"x": np.ones(4, np.float32), "out": np.zeros(4, np.float32)}
    emit_triton.launch(_loc_kernel(), args)
    assert np.array_equal(args["out"], np.ones(4, np.float32))
    source = emit_triton.source(_loc_kernel(), args)
    assert "os.system" in source and "\nimport os" not in source  # escaped inside one comment line
    assert all(line.lstrip().startswith("#") for line in source.splitlines() if "os.system" in line)


# ---------------------------------------------------------------------------------------------- Python sources

PY_KERNEL = """
import intent
from intent import Out, dims, f32, parallel

N = dims("N")


@intent.kernel
def k(x: f32[N], {param}: f32[N], out: Out[f32[N]]):
    for {index} in parallel(N):
        {local} = x[{index}] + {param}[{index}]
        out[{index}] = {local}
"""
PY_NAMES = ["ｐid", "eval", "__import__", "tl", "triton", "é", "ℌ", "INDEX_64", "open", "print", "range"]


@pytest.mark.parametrize("name", PY_NAMES)
@pytest.mark.parametrize("role", ("param", "index", "local"))
def test_hostile_python_names_compile_and_run_correctly(name: str, role: str, sandbox, tmp_path) -> None:
    names = {"param": "y", "index": "i", "local": "s"}
    names[role] = name
    ok = tmp_path / "ok"
    ok.mkdir()
    path = ok / "hostile_kernels.py"
    path.write_text(textwrap.dedent(PY_KERNEL.format(**names)), encoding="utf-8")
    try:
        kernel = intent.kernels_in_file(str(path))["k"]
    except DiagnosticError as err:  # the frontend may reject a name; it must say where
        assert err.file == str(path) and err.line is not None
        return
    param = [p.name for p in kernel.kir.params][1]
    args = {"x": np.arange(5, dtype=np.float32), param: np.full(5, 2.0, np.float32), "out": np.zeros(5, np.float32)}
    want = oracle.run(kernel.kir, args)["out"]
    emit_triton.launch(kernel.kir, args)
    assert np.array_equal(args["out"], want)
    assert sandbox == []


@pytest.mark.parametrize("escape", [True, False])
def test_a_python_file_name_with_code_in_it_never_runs(sandbox, tmp_path, escape) -> None:
    ok = tmp_path / "ok"
    ok.mkdir()
    path = ok / ("k\nimport os\nos.system('touch PWNED')\nif True:\n #.py" if escape else "plain.py")
    path.write_text(textwrap.dedent(PY_KERNEL.format(param="y", index="i", local="s")), encoding="utf-8")
    kernel = intent.kernels_in_file(str(path))["k"]
    args = {"x": np.ones(4, np.float32), "y": np.ones(4, np.float32), "out": np.zeros(4, np.float32)}
    try:
        emit_triton.launch(kernel.kir, args)
    except IntentError as err:
        assert escape and isinstance(err, UnsafeModule), err
    else:
        assert np.array_equal(args["out"], np.full(4, 2.0, np.float32))
    assert sandbox == []


# ---------------------------------------------------------------------------------------------- no eval

# Where the code base may compile or execute a string: only the generated module, after its checks.
ALLOWED_EXECUTION = {("intent/runtime/triton_adapter.py", "compile"), ("emit_triton/aot_worker.py", "exec"),
                     ("emit_triton/aot_worker.py", "compile"), ("intent/runtime/safety.py", "compile")}


def test_no_eval_or_exec_of_strings_outside_the_generated_module_loader() -> None:
    import ast

    root = Path(__file__).resolve().parents[1]
    found = set()
    for package in ("kir", "physical", "emit_triton", "oracle", "intent"):
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                    continue
                name = node.func.id
                dynamic_import = name == "__import__" and not (node.args and isinstance(node.args[0], ast.Constant))
                if name in ("eval", "exec", "compile") or dynamic_import:
                    found.add((str(path.relative_to(root)), name))
    assert found <= ALLOWED_EXECUTION, sorted(found - ALLOWED_EXECUTION)


POSTPONED = '''from __future__ import annotations

import intent
from intent import Out, dims, f32, parallel

N = dims("N")


@intent.kernel
def k(x: f32[N + 1], out: Out[f32[N + 1]], scale: intent.const[int] = 2):
    for i in parallel(N + 1):
        out[i] = x[i] * scale
'''


def test_postponed_annotations_are_read_as_type_expressions_only(sandbox, tmp_path) -> None:
    ok = tmp_path / "ok"
    ok.mkdir()
    good = ok / "postponed.py"
    good.write_text(POSTPONED, encoding="utf-8")
    kernel = intent.kernels_in_file(str(good))["k"]
    assert [str(p.type) for p in kernel.kir.params] == ["in f32[N + 1]", "out f32[N + 1]"]
    hostile = ok / "hostile_annotation.py"
    hostile.write_text(POSTPONED.replace("x: f32[N + 1]", "x: __import__('os').system('touch PWNED')"),
                       encoding="utf-8")
    with pytest.raises(DiagnosticError) as err:
        intent.kernels_in_file(str(hostile))
    assert err.value.message == ("cannot evaluate the annotation `__import__('os').system('touch PWNED')`: "
                                 "ValueError: __import__('os').system('touch PWNED') is not a type expression "
                                 "(names, [], attributes, dim arithmetic and `| None`)")
    assert sandbox == []
