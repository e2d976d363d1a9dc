"""`kirc build` and `intent.load`: prebuilt kernels run from their registry without the compiler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import intent
from emit_triton import compile as compile_mod
from emit_triton.exprs import encode
from intent.errors import IntentError, LaunchError
from intent.runtime import artifacts
from intent.runtime import expr as E
from kir.cli import main as kirc

ROOT = Path(__file__).resolve().parent.parent

KERNELS = '''
import intent
from intent import Out, const, dims, f32, i32, parallel

N, M = dims("N M")
T = intent.dtype_var("T", intent.f32, intent.f64)


@intent.kernel(requires=[N <= 4096])
def scale(x: T[N], alpha: T, out: Out[T[N]]):
    for i in parallel(N):
        out[i] = x[i] * alpha


@intent.kernel(checks=True)
def take(x: f32[M], idx: i32[N], out: Out[f32[N]]):
    for n in parallel(N):
        out[n] = x[idx[n]]


@intent.kernel
def rep(x: f32[N], out: Out[f32[N]], R: const[float], twice: const[bool] = False):
    for n in parallel(N):
        out[n] = x[n] * R * (2.0 if twice else 1.0)
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("aot")
    (folder / "scale.py").write_text(KERNELS)
    assert kirc(["build", str(folder / "scale.py"), "--dtype", "T=f32,f64", "--shape", "N=64", "--const", "R=2.0,3",
                 "-o", str(folder / "out")]) == 0
    return folder / "out"


def test_build_writes_one_cubin_ptx_and_source_per_specialisation(built: Path) -> None:
    registry = json.loads((built / "registry.json").read_text())
    assert registry["format"] == artifacts.FORMAT
    entries = registry["kernels"]["scale"]
    assert [e["signature"] for e in entries] == ["x:f32,alpha:f32,out:f32", "x:f64,alpha:f64,out:f64"]
    for e in entries:
        assert e["hash"] == artifacts.entry_hash(e)
        assert [r["text"] for r in e["requires"]] == ["N >= 1", "N <= 4096"]
        assert (built / e["source"]["file"]).read_text().startswith("import triton")
        (variant,) = e["variants"]
        assert variant["arch"] == 90 and variant["constexpr_values"] == {"BLOCK_I0": 64}
        assert (built / variant["cubin"]["file"]).read_bytes()[:4] == b"\x7fELF"
        assert ".entry" in (built / variant["ptx"]["file"]).read_text()
        # portable within its constexprs: no divisibility assumption about integer arguments
        types = [t for _, t in variant["signature"]]
        assert [name for name, _ in variant["signature"]] == e["arg_names"]
        assert variant["attrs"] and all(types[path[0]].startswith("*") for path, _ in variant["attrs"])


def test_loaded_kernels_run_on_cpu_and_match(built: Path) -> None:
    lib = intent.load(built)
    assert sorted(lib) == ["rep", "scale", "take"] and lib["scale"] is lib.scale
    x = torch.arange(7, dtype=torch.float32)
    assert torch.equal(lib.scale(x, 2.0), x * 2)
    out = torch.empty(7, dtype=torch.float64)
    assert lib.scale(x.double(), alpha=3, out=out) is None
    assert torch.equal(out, x.double() * 3)


@pytest.mark.parametrize("call, message", [
    (lambda k, x: k(x.int(), 2.0),
     "kernel scale: no prebuilt specialisation for x:i32 (built: x:f32,alpha:f32,out:f32; x:f64,alpha:f64,out:f64)"),
    (lambda k, x: k(torch.zeros(5000), 1.0), "requires N <= 4096 failed: N = 5000 (N from parameter x)"),
    (lambda k, x: k(torch.zeros(0), 1.0),
     "N >= 1 failed: N = 0 (N from parameter x; a shape symbol is >= 1 unless the kernel states N >= 0)"),
    (lambda k, x: k(x, 2.0, torch.empty(4)), "parameter out: axis 0 has extent 4 but N = 5 from parameter x"),
    (lambda k, x: k(x, "a"), "parameter alpha: expected a float or int (f32 scalar), got str"),
    (lambda k, x: k(x, 1e300), "parameter alpha: 1e+300 does not fit f32 (largest finite value 3.40282e+38)"),
    (lambda k, x: k(x), "missing argument alpha: expected a f32 scalar"),
    (lambda k, x: k(x, 1.0, y=1), "unexpected argument y: kernel scale has no parameter y (parameters: x, alpha, out)"),
    (lambda k, x: k(x.reshape(5, 1), 1.0), "parameter x: expected rank 1 (f32[N]), got a tensor of shape (5, 1)"),
    (lambda k, x: k([1.0], 1.0), "parameter x: expected a tensor (f32[N]), got list"),
    (lambda k, x: k(x, 1.0, x),
     "parameter out: its memory overlaps parameter x; memory the kernel writes may be reached through one "
     "parameter only (pass the tensor once, as an inout parameter, to read and write it)"),
    (lambda k, x: k(x, 1.0, torch.zeros(1).expand(5)),
     "parameter out: axis 0 has stride 0 (a broadcast view); the elements of a parameter that the kernel writes "
     "must not share memory"),
])
def test_arguments_are_checked_with_errors_naming_the_parameter(built: Path, call: object, message: str) -> None:
    lib = intent.load(built)
    with pytest.raises(LaunchError) as caught:
        call(lib.scale, torch.arange(5.0))  # type: ignore[operator]
    assert str(caught.value) == message


def _tampered(built: Path, tmp_path: Path, change: object) -> Path:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    change(copy)  # type: ignore[operator]
    return copy


def test_compile_time_parameters_choose_their_prebuilt_specialisation(built: Path) -> None:
    lib = intent.load(built)
    assert lib.rep.signatures == ["x:f32,out:f32,R=2.0,twice=False", "x:f32,out:f32,R=3,twice=False"]
    assert lib.rep.params == ["x", "out", "R", "twice"]
    x = torch.arange(4.0)
    assert torch.equal(lib.rep(x, R=2.0), x * 2) and torch.equal(lib.rep(x, R=3.0), x * 3)
    with pytest.raises(LaunchError, match=r"^missing argument R \(intent.const\[float\]\)$"):
        lib.rep(x)
    with pytest.raises(LaunchError, match=r"^kernel rep: no prebuilt specialisation for x:f32, R=2.0, twice=True "
                                          r"\(built: x:f32,out:f32,R=2.0,twice=False; "
                                          r"x:f32,out:f32,R=3,twice=False\)$"):
        lib.rep(x, R=2.0, twice=True)


def test_device_checks_of_a_prebuilt_kernel_report_the_op_and_line(built: Path) -> None:
    lib = intent.load(built)
    x = torch.arange(6.0)
    assert torch.equal(lib.take(x, torch.tensor([5, 0], dtype=torch.int32)), torch.tensor([5.0, 0.0]))
    with pytest.raises(IntentError, match=r"^device check failed: gather out of range at .*scale.py:\d+:\d+: an "
                                          r"index into x lies outside its extent$"):
        lib.take(x, torch.tensor([0, 7], dtype=torch.int32))


def test_an_entry_whose_hash_does_not_match_is_refused_never_run(built: Path, tmp_path: Path) -> None:
    def loosen(folder: Path) -> None:
        registry = json.loads((folder / "registry.json").read_text())
        registry["kernels"]["scale"][0]["requires"][1]["expr"] = ["<=", "N", 1 << 30]
        (folder / "registry.json").write_text(json.dumps(registry))

    lib = intent.load(_tampered(built, tmp_path, loosen))
    out = torch.full((5,), -1.0)
    with pytest.raises(IntentError, match=r"prebuilt kernel scale \(x:f32,alpha:f32,out:f32\) in .*: its registry "
                                          r"entry does not match its hash \(recorded [0-9a-f]{64}, computed "
                                          r"[0-9a-f]{64}\); refusing to run it \(rebuild the directory with kirc "
                                          r"build\)"):
        lib.scale(torch.arange(5.0), 2.0, out)
    assert torch.equal(out, torch.full((5,), -1.0))
    assert torch.equal(lib.scale(torch.arange(3.0).double(), 2.0), torch.arange(3.0).double() * 2)  # the other entry


def test_a_file_that_does_not_match_its_sha256_is_refused(built: Path, tmp_path: Path) -> None:
    def edit_source(folder: Path) -> None:
        entry = json.loads((folder / "registry.json").read_text())["kernels"]["scale"][0]
        path = folder / entry["source"]["file"]
        path.write_text(path.read_text().replace("tl.store", "tl.store  # changed"))

    lib = intent.load(_tampered(built, tmp_path, edit_source))
    out = torch.full((5,), -1.0)
    with pytest.raises(IntentError, match=r"the Triton source .*kernel.py does not match its recorded sha256"):
        lib.scale(torch.arange(5.0), 2.0, out)
    assert torch.equal(out, torch.full((5,), -1.0))


def test_a_consistently_rehashed_source_that_is_not_generated_code_is_refused(built: Path, tmp_path: Path) -> None:
    """Hashes catch damage, not intent: whoever can write the directory can rehash it. The stored source must
    still have the shape of generated code before it is executed."""
    import hashlib

    from intent.runtime.safety import UnsafeModule

    def inject(folder: Path) -> None:
        registry = json.loads((folder / "registry.json").read_text())
        entry = registry["kernels"]["scale"][0]
        path = folder / entry["source"]["file"]
        text = "import os\n" + path.read_text()
        path.write_text(text)
        entry["source"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
        entry["hash"] = artifacts.entry_hash(entry)
        (folder / "registry.json").write_text(json.dumps(registry))

    lib = intent.load(_tampered(built, tmp_path, inject))
    with pytest.raises(UnsafeModule, match=r"prebuilt kernel scale .*: refusing to run its Triton source .*kernel.py: "
                                           r".* contains a top-level Import statement \(line 1\)"):
        lib.scale(torch.arange(5.0), 2.0)


def test_load_refuses_what_is_not_a_build_directory(tmp_path: Path) -> None:
    with pytest.raises(IntentError, match=r"is not a kernel build directory: it has no registry.json"):
        intent.load(tmp_path)
    (tmp_path / "registry.json").write_text('{"format": "other"}')
    with pytest.raises(IntentError, match=r"is not a registry of format intent-aot/1 \(found 'other'\)"):
        intent.load(tmp_path)


def test_loading_and_running_imports_no_compiler(built: Path) -> None:
    script = textwrap.dedent(f"""
        import sys, torch, intent
        lib = intent.load({str(built)!r})
        assert torch.equal(lib.scale(torch.arange(4.0), 2.0), torch.arange(4.0) * 2)
        with intent.profile() as p:
            lib.scale(torch.arange(4.0), 2.0)
        assert len(p.launches) == 1
        compiler = ("z3", "networkx", "kir", "physical", "emit_triton", "oracle")
        print(sorted(m for m in sys.modules if m.split(".")[0] in compiler))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_import_intent_is_lazy_about_the_compiler() -> None:
    script = ("import sys, intent; assert 'z3' not in sys.modules and 'kir.frontend' not in sys.modules; "
              "intent.kernel; from intent import f32, Out; import intent.kernel as m; "
              "assert callable(intent.kernel) and 'kir.frontend' in sys.modules; "  # Z3 loads on its first query
              "print(intent.LaunchError.__module__)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "intent"


# ---------------------------------------------------------------------------------------------- variants


def test_a_cubin_covers_calls_that_satisfy_every_assumption_it_was_compiled_with() -> None:
    general = artifacts.spec_json({"p": "*fp32", "n": "i32"}, {}, {(0,): [["tt.divisibility", 16]], (1,): []})
    divisible = artifacts.spec_json({"p": "*fp32", "n": "i32"}, {},
                                    {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]})
    misaligned = artifacts.spec_json({"p": "*fp32", "n": "i32"}, {}, {(0,): [], (1,): []})
    wide = artifacts.spec_json({"p": "*fp32", "n": "i64"}, {}, {(0,): [["tt.divisibility", 16]]})
    assert artifacts._covers(general, divisible) and artifacts._covers(general, general)
    assert not artifacts._covers(divisible, general)
    assert not artifacts._covers(general, misaligned)
    assert not artifacts._covers(general, wide)
    other_tile = artifacts.spec_json({"p": "*fp32", "B": "constexpr"}, {(1,): 128}, {})
    assert not artifacts._covers(artifacts.spec_json({"p": "*fp32", "B": "constexpr"}, {(1,): 64}, {}), other_tile)


# ---------------------------------------------------------------------------------------------- expressions


def _softmax():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from softmax import softmax
    finally:
        sys.path.pop(0)
    return softmax


def test_encoded_launch_expressions_evaluate_like_the_originals() -> None:
    kernel = _softmax().specialize({"x": torch.zeros(2, 2)})
    emitted = compile_mod.emitted_for(kernel)
    exprs = [c.expr for c in emitted.constexprs] + [emitted.grid, emitted.num_warps] + [e for _, e in emitted.counts]
    for m in (1, 3, 64, 1000):
        for n in (1, 7, 1000, 4096, 70000):
            env = {"M": m, "N": n, "@sms": 132}
            for c in emitted.constexprs:
                env[c.name] = c.expr.evaluate(env)
            for e in exprs:
                assert E.evaluate(encode(e), env) == e.evaluate(env), str(e)


def test_expression_errors_and_rendering() -> None:
    assert E.evaluate(["cdiv", "N", 4], {"N": 9}) == 3
    assert E.evaluate(["and", ["<=", "N", 4], ["not", ["==", "N", 3]]], {"N": 4}) is True
    assert E.evaluate(["resident_programs", 4], {"@sms": 0}) == 1
    assert E.render(["<=", ["+", "M", ["*", 2, "N"]], 65536]) == "M + 2 * N <= 65536"
    with pytest.raises(LaunchError, match=r"N = 5000 needs a tile of 8192 elements \(row\), more than the 4096"):
        E.evaluate(["tile_block", "N", 4096, "row"], {"N": 5000})
    with pytest.raises(ZeroDivisionError):
        E.evaluate(["//", "N", 0], {"N": 1})
    with pytest.raises(KeyError, match="M is not bound"):
        E.evaluate(["+", "M", 1], {})
    for bad in (["pow", 2, 3], [], {"a": 1}, ["+", 1], ["tile_block", "N", "x", 1]):
        with pytest.raises(ValueError):
            E.validate(bad, "here")


def test_kirc_build_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "k.py").write_text(KERNELS)
    assert kirc(["build", str(tmp_path / "k.py"), "--dtype", "T=f32,f7", "-o", str(tmp_path / "o")]) == 2
    assert "--dtype T=f32,f7:" in capsys.readouterr().err
    assert kirc(["build", str(tmp_path / "k.py"), "--shape", "N=a", "-o", str(tmp_path / "o")]) == 2
    assert "kirc build: error: --shape N=a: the values must be integers" in capsys.readouterr().err
    assert kirc(["build", str(tmp_path / "k.py"), "--dtype", "T=i32", "-o", str(tmp_path / "o")]) == 1
    assert "dtype variable T of kernel scale is one of f32, f64, not i32" in capsys.readouterr().err
    assert kirc(["build", str(tmp_path / "k.py"), "--dtype", "U=f32", "-o", str(tmp_path / "o")]) == 1
    assert "--dtype U: no kernel built has a dtype variable U (dtype variables: T)" in capsys.readouterr().err
    assert kirc(["build", str(tmp_path / "k.py"), "--kernel", "scale", "--shape", "N=5000", "-o",
                 str(tmp_path / "o")]) == 1
    assert "kernel scale: the shapes do not satisfy kernel scale's refinements: N <= 4096 failed: N = 5000" \
        in capsys.readouterr().err
    assert kirc(["build", str(tmp_path / "k.py"), "--kernel", "rep", "-o", str(tmp_path / "o")]) == 1
    assert "kernel rep has the compile-time parameter R (intent.const[float]) without a default: give --const R=..." \
        in capsys.readouterr().err
    assert kirc(["build", str(tmp_path / "k.py"), "--const", "Q=1", "-o", str(tmp_path / "o")]) == 1
    assert "--const Q: no kernel built has a compile-time parameter Q (intent.const parameters: R, twice)" \
        in capsys.readouterr().err
    assert kirc(["build", str(tmp_path / "k.py"), "--const", "R=x", "-o", str(tmp_path / "o")]) == 2
    assert "--const R=x: the values must be Python literals (2, 0.5, True)" in capsys.readouterr().err
    assert kirc(["build", str(tmp_path / "k.py"), "--arch", "75", "-o", str(tmp_path / "o")]) == 1
    assert "--arch: expected one of 80, 90, got 75" in capsys.readouterr().err


def test_the_call_specialisation_chooses_a_cubin_by_triton_rules(built: Path) -> None:
    """What a CUDA launch decides, checked with host tensors: Triton's binder only reads types, pointers
    and integer values."""
    from intent.runtime import triton_adapter as adapter

    entry = intent.load(built).scale.entries[0]
    fn = entry._function(adapter.Mode.COMPILED)

    def variant(x: torch.Tensor) -> object:
        _, _, geometry, positional, _ = entry.prepare({"x": x, "alpha": 2.0})
        return entry.find_variant(fn, 90, positional, geometry.keywords)

    base = torch.zeros(2000)
    assert variant(base[:64]) is not None
    assert variant(base[:50]) is not None  # another size with the same tile: no divisibility assumed
    assert variant(base[1:65]) is None  # a view that is not 16-byte aligned
    assert variant(base[:1000]) is None  # another tile size
    assert variant(base[:64]) is entry.data["variants"][0]


def test_the_cuda_launch_decision_with_host_tensors(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Entry._variant` as on an sm_90 device: a covered call gets Triton's kernel object for the stored cubin
    (made without a GPU; launching it needs one), an uncovered one the JIT with a warning, or an error."""
    from intent.runtime import triton_adapter as adapter

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    lib = intent.load(built)
    entry = lib.scale.entries[0]
    fn = entry._function(adapter.Mode.COMPILED)
    _, _, geometry, positional, _ = entry.prepare({"x": torch.zeros(64), "alpha": 2.0})
    compiled, path = entry._variant(fn, "cuda:0", positional, geometry)
    assert path == "cubin sm_90" and compiled.name == entry.data["abi"]["name"]
    assert compiled.kernel == (built / entry.data["variants"][0]["cubin"]["file"]).read_bytes()
    _, _, geometry, positional, _ = entry.prepare({"x": torch.zeros(1000), "alpha": 2.0})
    with pytest.warns(UserWarning, match=r"no prebuilt cubin for sm_90 with \{'BLOCK_I0': 1024\} \(built: sm_90 "
                                         r"\{'BLOCK_I0': 64\}\); compiling the stored Triton source"):
        assert entry._variant(fn, "cuda:0", positional, geometry) == (None, "jit")
    strict = intent.load(built, jit_fallback=False).scale.entries[0]
    with pytest.raises(LaunchError, match=r"no prebuilt cubin for sm_90 with \{'BLOCK_I0': 1024\}"):
        strict._variant(fn, "cuda:0", positional, geometry)
    entry.triton_version = "0.0"
    _, _, geometry, positional, _ = entry.prepare({"x": torch.zeros(32), "alpha": 2.0})
    with pytest.warns(UserWarning, match=r"built: cubins of Triton 0.0, this is Triton "):
        assert entry._variant(fn, "cuda:0", positional, geometry) == (None, "jit")
