"""`kirc`: exit codes, messages and the commands that do not need the later pipeline stages."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import kir
from kir import cli
from kir.text import parse_file, print_kernel

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples" / "kir").glob("*.kir"))
GOOD = """kernel add(x: in f32[N], y: in f32[N], out: out f32[N]) symbols(N) requires(N % 4 == 0) {
  %a: f32[N] = load %x[0:N]
  %b: f32[N] = load %y[0:N]
  %c: f32[N] = binary add %a, %b
  store %out[0:N] = %c
  yield
}
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, text: str | bytes, name: str = "k.kir") -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_passes_check(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    code, out, err = run(capsys, "check", str(path))
    assert (code, err) == (0, "")
    assert out == "".join(f"{k.name}: ok\n" for k in parse_file(str(path)))


def test_examples_cover_every_op() -> None:
    # The examples are also the corpus every later stage runs; `concat` is left out while physical
    # construction refuses it (its syntax is covered by the round-trip tests and docs/kir.md).
    used = {o.NAME for path in EXAMPLES for k in parse_file(str(path)) for o in k.walk()}
    assert used == set(kir.OP_CLASSES) - {"concat"}


MALFORMED = [
    ("truncated", GOOD[:120], "k.kir:2:28: error: unexpected end of file: the region opened at line 1, column 89 "
                              "is not closed with '}'"),
    ("unknown op", GOOD.replace("binary add", "binray add"), "k.kir:4:16: error: unknown op 'binray'; did you mean "
                                                             "'binary'?"),
    ("bad type", GOOD.replace("%b: f32[N]", "%b: f31[N]"), "k.kir:3:7: error: unknown dtype 'f31'"),
    ("undefined value", GOOD.replace("add %a, %b", "add %a, %d"), "k.kir:4:31: error: undefined value %d"),
    ("wrong arity", GOOD.replace("add %a, %b", "add %a"), "k.kir:4:29: error: expected ',' in binary, found the end "
                                                          "of the line"),
    ("dashed name", GOOD.replace("kernel add(", "kernel add-one("), "k.kir:1:8: error: kernel name 'add-one' is not "
                                                                    "an identifier"),
    ("keyword", GOOD.replace("y: in", "class: in"), "k.kir:1:26: error: bad parameter name: 'class' is a Python "
                                                    "keyword"),
    ("unicode", GOOD.replace("%c", "%ç"), "k.kir:4:4: error: unexpected character 'ç' (U+00E7)"),
    ("deep", "kernel f() {\n  %c: pred = constant true : pred\n" + "if %c {\n" * 120 + "}\n" * 121,
     "k.kir:102:7: error: regions nested more than 100 levels deep"),
    ("type error", GOOD.replace("%b: f32[N] = load %y[0:N]", "%b: f16[N] = load %y[0:N]"),
     "k.kir:3:3: error: load results are (f16[N]) but its typing rule gives (f32[N])"),
    ("unsatisfiable", GOOD.replace("N % 4 == 0", "N < 0"),
     "k.kir:1:1: error: kernel add: requires is unsatisfiable; these refinements cannot all hold: "),
]


@pytest.mark.parametrize("name,text,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_exits_1_with_a_located_message(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                        name: str, text: str, message: str) -> None:
    path = write(tmp_path, text)
    code, out, err = run(capsys, "check", path)
    assert code == 1 and out == ""
    assert err.startswith(str(tmp_path) + "/" + message)
    lines = err.splitlines()
    assert lines[2].strip() == "^"  # the caret line under the source line
    assert "Traceback" not in err


def test_non_utf8_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.encode() + b"# \xff\xfe\n")
    code, _, err = run(capsys, "check", path)
    assert code == 1
    assert err.splitlines()[0] == f"{path}:8:3: error: the file is not valid UTF-8 (byte 0xff)"


def test_check_reports_every_failing_kernel(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = GOOD.replace("kernel add", "kernel bad").replace("%b: f32[N] = load", "%b: f16[N] = load")
    path = write(tmp_path, GOOD + bad + GOOD.replace("kernel add", "kernel other"))
    code, out, err = run(capsys, "check", path)
    assert code == 1
    assert out == "add: ok\nother: ok\n"
    assert err.startswith(f"{path}:10:3: error: load results are (f16[N])")
    code, out, _ = run(capsys, "check", path, "--kernel", "other")
    assert (code, out) == (0, "other: ok\n")


def test_missing_file_and_unknown_kernel(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "check", str(tmp_path / "nope.kir"))
    assert (code, err) == (1, f"kirc: cannot read or write {tmp_path / 'nope.kir'}: No such file or directory\n")
    code, _, err = run(capsys, "check", str(tmp_path / "nope.py"))
    assert code == 1 and "No such file" in err
    path = write(tmp_path, GOOD)
    code, _, err = run(capsys, "check", path, "--kernel", "mul")
    assert (code, err) == (2, f"kirc check: error: {path} has no kernel mul (kernels: add)\n")  # usage: exit 2
    code, _, err = run(capsys, "check", write(tmp_path, GOOD, "k.txt"))
    assert (code, err) == (1, f"{tmp_path / 'k.txt'}: expected a .kir or a .py file\n")
    code, _, err = run(capsys, "check", write(tmp_path, "# nothing\n", "empty.kir"))
    assert (code, err) == (1, f"{tmp_path / 'empty.kir'} holds no kernel\n")


@pytest.mark.parametrize("argv", [["--help"], ["check", "--help"], ["lower", "--help"], ["run", "--help"],
                                  ["explain", "--help"], ["-h"]])
def test_help_exits_0(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert out.startswith("usage: kirc")


@pytest.mark.parametrize("argv,message", [
    ([], "the following arguments are required: COMMAND"),
    (["compile", "k.kir"], "invalid choice: 'compile'"),
    (["check"], "the following arguments are required: FILE"),
    (["lower", "k.kir"], "the following arguments are required: --emit"),
    (["lower", "k.kir", "--emit=llvm"], "argument --emit: invalid choice: 'llvm'"),
    (["run", "k.kir", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["run", "k.kir", "--seed", "x"], "argument --seed: invalid int value: 'x'"),
])
def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err


def test_bad_assignments_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    for argv, message in [(["--shape", "N"], "--shape expects NAME=VALUE, got 'N'"),
                          (["--shape", "N=x"], "--shape N=x: the value must be an integer"),
                          (["--shape", "N=4", "N=8"], "--shape N is given twice"),
                          (["--dtype", "T=f8"], "--dtype T=f8: unknown dtype 'f8'")]:
        code, _, err = run(capsys, "lower", path, "--emit=triton", *argv)
        assert code == 2
        assert err.startswith(f"kirc lower: error: {message}")


def test_lower_to_kir(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    code, out, _ = run(capsys, "lower", path, "--emit=kir")
    assert (code, out) == (0, GOOD)
    target = tmp_path / "out.kir"
    code, out, _ = run(capsys, "lower", path, "--emit", "kir", "-o", str(target))
    assert (code, out) == (0, "")
    assert target.read_text(encoding="utf-8") == GOOD


def test_lower_specialises_dtype_variables(capsys: pytest.CaptureFixture[str]) -> None:
    generic = str(ROOT / "examples" / "kir" / "generic.kir")
    code, out, _ = run(capsys, "lower", generic, "--emit=kir", "--dtype", "T=bf16")
    assert code == 0
    assert out.splitlines()[0] == "kernel scaled_row_max(x: in bf16[M, N], out: out bf16[M]) symbols(M, N) {"
    assert "%two: bf16 = constant 2 : bf16" in out
    kir.verify(kir.text.parse_kernel(out))
    code, _, err = run(capsys, "lower", generic, "--emit=kir", "--dtype", "T=i32")
    # What the command line names (a kernel, dtype variables) is a usage error when it does not fit: exit 2.
    assert (code, err) == (2, "kirc lower: error: dtype variable T of kernel scaled_row_max is one of f16, bf16, "
                              "f32, not i32\n")
    code, _, err = run(capsys, "lower", generic, "--emit=kir", "--dtype", "U=f16")
    assert (code, err) == (2, "kirc lower: error: kernel scaled_row_max has no dtype variable U (its dtype "
                              "variables: T)\n")
    code, _, err = run(capsys, "lower", generic, "--emit=triton", "--shape", "M=2", "N=3")
    assert (code, err) == (2, "kirc lower: error: kernel scaled_row_max is generic in T; choose with --dtype "
                              "T=...\n")


def test_lower_and_run_need_one_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(ROOT / "examples" / "kir" / "segment_sum.kir")
    code, _, err = run(capsys, "lower", path, "--emit=kir")
    assert code == 2
    assert err == f"kirc lower: error: {path} holds several kernels (segment_sum, segment_sumsq, segment_cumsum); " \
                  "choose one with --kernel\n"
    code, out, _ = run(capsys, "lower", path, "--emit=kir", "--kernel", "segment_sumsq")
    assert code == 0 and out.startswith("kernel segment_sumsq(")


def test_random_inputs_errors_are_diagnostics(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    code, _, err = run(capsys, "run", path, "--shape", "N=1001")
    assert (code, err) == (1, "the shapes do not satisfy kernel add's refinements: N % 4 == 0 failed: N = 1001\n")
    # Missing and unknown shape symbols are usage errors (exit 2), every one named at once.
    code, _, err = run(capsys, "run", path)
    assert (code, err) == (2, "kirc run: error: kernel add needs a value for shape symbol N (--shape N=...)\n")
    code, _, err = run(capsys, "lower", path, "--emit=stablehlo", "--shape", "N=4", "M=2")
    assert (code, err) == (2, "kirc lower: error: kernel add has no shape symbol M (its symbols: N)\n")


def test_run_compares_with_the_oracle(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison logic of `run`, with stand-ins for the oracle and the launcher."""
    path = write(tmp_path, GOOD)

    def oracle_run(k, args):
        return {"out": args["x"] + args["y"]}

    def launch(k, args, bias=0.0):
        args["out"].copy_(args["x"] + args["y"] + bias)

    stages = {("oracle", "run"): oracle_run, ("emit_triton", "launch"): launch}
    monkeypatch.setattr(cli, "_stage", lambda module, attr, stage: stages[(module, attr)])
    code, out, _ = run(capsys, "run", path, "--shape", "N=8", "--seed", "3")
    assert code == 0
    assert out == "out: max abs error 0 (f32, atol 0.0001, rtol 0.0001)  PASS\nPASS\n"
    stages[("emit_triton", "launch")] = lambda k, args: launch(k, args, bias=0.5)
    code, out, _ = run(capsys, "run", path, "--shape", "N=8")
    assert code == 1
    assert out == "out: max abs error 0.5 (f32, atol 0.0001, rtol 0.0001)  FAIL\nFAIL\n"

    def unavailable(module, attr, stage):
        if module == "emit_triton":
            raise cli.StageUnavailable(stage)
        return stages[(module, attr)]

    monkeypatch.setattr(cli, "_stage", unavailable)
    code, out, _ = run(capsys, "run", path, "--shape", "N=8")
    assert code == 0
    assert out == "Triton emission (emit_triton.launch) is not available yet: ran the oracle only\n" \
                  "out: oracle result float32[8]\n"


def test_compare_integers_exactly_and_nan_aware_floats() -> None:
    k = kir.text.parse_kernel("kernel f(a: out i32[N], b: out f32[N]) symbols(N) {\n  yield\n}")
    a, b = k.params
    assert cli._compare(a, np.array([1, 2, 3], np.int32), np.array([1, 2, 4], np.int32)) == (
        "a: max abs error 1, 1 mismatching elements (i32, exact)  FAIL", False)
    nan = np.float32("nan")
    line, ok = cli._compare(b, np.array([nan, 1.0], np.float32), np.array([nan, 1.0], np.float32))
    assert ok and line == "b: max abs error 0 (f32, atol 0.0001, rtol 0.0001)  PASS"
    line, ok = cli._compare(b, np.array([nan, 1.0], np.float32), np.array([0.0, 1.0], np.float32))
    assert not ok and line == "b: max abs error inf (f32, atol 0.0001, rtol 0.0001)  FAIL"


def test_tf32_contractions_compare_with_the_tf32_tolerance() -> None:
    k = kir.text.parse_kernel("kernel f(b: out f32[N]) symbols(N) {\n  yield\n}")
    (b,) = k.params
    got, want = np.array([1.01], np.float32), np.array([1.0], np.float32)
    assert cli._compare(b, got, want) == ("b: max abs error 0.01 (f32, atol 0.0001, rtol 0.0001)  FAIL", False)
    assert cli._compare(b, got, want, tf32=True) == ("b: max abs error 0.01 (f32, atol 0.02, rtol 0.02)  PASS", True)


def test_stage_not_available_yet() -> None:
    with pytest.raises(cli.StageUnavailable) as info:
        cli._stage("no_such_package_for_kirc", "lower", "the thing (no_such_package_for_kirc.lower)")
    assert str(info.value) == "the thing (no_such_package_for_kirc.lower) is not available yet"
    with pytest.raises(cli.StageUnavailable):
        cli._stage("kir", "no_such_function", "kir.no_such_function")


def test_python_files_use_the_frontend(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    k = kir.text.parse_kernel(GOOD)
    generic = parse_file(str(ROOT / "examples" / "kir" / "generic.kir"))[0]
    seen: dict[str, object] = {}

    class KernelObject:
        def __init__(self, kernel: kir.Kernel) -> None:
            self.kir = kernel

        def specialize_dtypes(self, assignment):
            seen["assignment"] = assignment
            return KernelObject(cli.specialize_dtypes(self.kir, assignment))

    fake = types.ModuleType("intent")
    fake.kernels_in_file = lambda path: {"add": KernelObject(k), "scaled_row_max": KernelObject(generic)}
    monkeypatch.setitem(sys.modules, "intent", fake)
    path = write(tmp_path, "# kernels\n", "kernels.py")
    code, out, _ = run(capsys, "check", path)
    assert (code, out) == (0, "add: ok\nscaled_row_max: ok\n")
    code, out, _ = run(capsys, "lower", path, "--kernel", "scaled_row_max", "--emit=kir", "--dtype", "T=f16")
    assert code == 0 and "x: in f16[M, N]" in out
    assert seen["assignment"] == {"T": kir.DType.f16}
    monkeypatch.setitem(sys.modules, "intent", types.ModuleType("intent"))
    code, _, err = run(capsys, "check", path)
    assert (code, err) == (1, "reading kernels from Python files (intent.kernels_in_file) is not available yet\n")


def test_internal_errors_exit_3_without_a_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(opts):
        raise RuntimeError("boom")

    monkeypatch.setitem(cli.COMMANDS, "check", boom)
    path = write(tmp_path, GOOD)
    code, _, err = run(capsys, "check", path)
    assert (code, err) == (3, "kirc: internal error: RuntimeError: boom\n")
    monkeypatch.setenv("KIRC_DEBUG", "1")
    code, _, err = run(capsys, "check", path)
    assert code == 3
    assert err.startswith("Traceback (most recent call last):") and err.endswith("kirc: internal error: "
                                                                                 "RuntimeError: boom\n")


def test_specialize_dtypes_keeps_everything_else() -> None:
    generic = parse_file(str(ROOT / "examples" / "kir" / "generic.kir"))[0]
    k = cli.specialize_dtypes(generic, {"T": kir.DType.f32})
    assert k.dtype_vars == ()
    kir.verify(k)
    assert print_kernel(k) == print_kernel(generic).replace("T", "f32").replace(
        " dtypes(f32 in {f16, bf16, f32})", "")


def test_subprocess_check(tmp_path: Path) -> None:
    bad = write(tmp_path, GOOD.replace("add %a, %b", "add %a; %b"))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-m", "kir.cli", "check", bad], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == f"{bad}:4:29: error: unexpected character ';'\n" \
                         "      %c: f32[N] = binary add %a; %b\n" \
                         "                                ^\n"
    assert "Traceback" not in res.stderr
    res = subprocess.run([sys.executable, "-m", "kir.cli", "check", str(ROOT / "examples" / "kir" / "softmax.kir")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert (res.returncode, res.stdout, res.stderr) == (0, "softmax: ok\n", "")
