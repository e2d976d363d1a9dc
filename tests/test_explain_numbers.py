"""`explain` speaks numbers: launch formulas simplified and named once, `kirc explain --shape` evaluates the
plan, `kirc lower` names every missing shape symbol at once (a usage error), and `--emit=triton
--standalone` prints a module that runs on its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import physical
from kir.cli import main
from kir.dims import DSym
from physical.launch_expr import LBin, LConst, LConstexpr, LDim, LMinMax, LNextPow2, LSum
from physical.launch_text import name_parts, simplify, text
from tests import acceptance, samples

ACCEPTANCE = acceptance.HERE
M, N = LDim(DSym("M")), LDim(DSym("N"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------------------- formulas


def test_constant_parts_and_identities_fold() -> None:
    assert simplify(LMinMax("max", (LConst(1), LBin("//", LConst(4096), LConst(4096))))) == LConst(1)
    assert simplify(LBin("*", LConst(1), M)) == M and simplify(LBin("+", M, LConst(0))) == M
    assert simplify(LBin("cdiv", N, LConst(1))) == N and simplify(LBin("*", N, LConst(0))) == LConst(0)
    # min/max nest and dedupe; a power of two is at least 1
    nested = LMinMax("min", (LMinMax("min", (M, N)), M, LConst(9), LConst(4)))
    assert simplify(nested) == LMinMax("min", (LConst(4), M, N))
    assert simplify(LMinMax("min", (LConst(1), LNextPow2(M)))) == LConst(1)
    assert simplify(LMinMax("max", (LConst(1), LNextPow2(M)))) == LNextPow2(M)
    assert simplify(LSum((LConst(0), M))) == M


def test_text_uses_precedence() -> None:
    e = LBin("*", LBin("+", M, LConst(1)), LBin("-", N, LBin("-", M, LConst(2))))
    assert text(e) == "(M + 1) * (N - (M - 2))"
    assert text(LBin("//", LBin("*", M, N), LConst(4))) == "M * N // 4"
    assert text(LBin("cdiv", M, LConstexpr("BLOCK"))) == "cdiv(M, BLOCK)"


def test_named_parts_replace_the_formula_they_equal() -> None:
    block = LNextPow2(N)
    flag = LMinMax("min", (LConst(1), LBin("//", block, LConst(65536))))
    named = name_parts(LBin("*", flag, block), {"BLOCK_N": block, "FLAG": flag})
    assert text(named) == "FLAG * BLOCK_N"


def test_explain_defines_each_constexpr_once() -> None:
    out = physical.explain(samples.softmax())
    assert "BLOCK_N_LOOPED = min(1, BLOCK_N // 65536)" in out
    assert "grid = cdiv(M, BLOCK_I0) programs" in out
    assert out.count("next_pow2(N)") == 1 and out.count("65536") == 1
    assert "4096 // 4096" not in out and "max(1, 1)" not in out


# ---------------------------------------------------------------------------------------------- kirc explain --shape


def test_explain_with_shapes_evaluates_the_plan(capsys) -> None:
    path = str(ACCEPTANCE / "softmax.py")
    code, out, err = run(capsys, "explain", path, "--shape", "M=4096", "N=1000")
    assert (code, err) == (0, "")
    at = out[out.index("at M = 4096, N = 1000"):].splitlines()
    assert at == ["at M = 4096, N = 1000, on a device of 132 multiprocessors:",
                  "  grid = 1,024 programs, num_warps = 8",
                  "  constexprs: BLOCK_I0 = 4, BLOCK_N = 1024, BLOCK_N_LOOPED = 0, BLOCK_N_CHUNK = 4096",
                  "  group 0 (parallel): programs [0, 1,024) (1,024 programs); one block of BLOCK_I0 = 4 instances "
                  "per program (looped form off at these shapes)",
                  "  memory: 32,768,000 bytes moved, ideal 32,768,000 (1.00x the ideal)",
                  "  float operations: 20,480,000"]
    code, out, _ = run(capsys, "explain", path, "--shape", "M=8", "N=65536", "--sms", "0")
    assert code == 0
    assert "at M = 8, N = 65536, on Triton's interpreter, one program at a time:" in out
    assert "looped (BLOCK_N_LOOPED = 1: the row in chunks of BLOCK_N_CHUNK = 4096)" in out


def test_explain_shows_tiled_and_persistent_forms(capsys) -> None:
    code, out, _ = run(capsys, "explain", str(ACCEPTANCE / "matmul.py"), "--kernel", "matmul",
                       "--shape", "M=512", "N=256", "K=64")
    assert code == 0
    assert "; tiled: each program owns one tile " in out
    memory = next(line for line in out.splitlines() if line.startswith("  memory: "))
    # a: f16[512, 64] and b: f16[64, 256] read once, c: f32[512, 256] written once
    assert memory.endswith("x the ideal)") and "ideal 622,592 " in memory


def test_explain_shape_errors(capsys) -> None:
    path = str(ACCEPTANCE / "softmax.py")
    code, _, err = run(capsys, "explain", path, "--shape", "M=4", "N=100000")
    assert (code, err) == (1, "the shapes do not satisfy kernel softmax's refinements: N <= 65536 failed: "
                              "N = 100000\n")
    code, _, err = run(capsys, "explain", path, "--shape", "Q=3", "R=1")
    assert code == 2
    assert err == ("kirc explain: error: kernel softmax needs values for shape symbols M, N (--shape M=... N=...); "
                   "kernel softmax has no shape symbols Q, R (its symbols: M, N)\n")
    code, _, err = run(capsys, "explain", path, "--sms", "4")
    assert (code, err) == (2, "kirc explain: error: --sms goes with --shape\n")


# ---------------------------------------------------------------------------------------------- kirc lower


def test_lower_names_every_missing_symbol_at_once_with_exit_2(capsys) -> None:
    path = str(ACCEPTANCE / "segment_sum.py")
    code, out, err = run(capsys, "lower", path, "--kernel", "segment_sum", "--emit=triton")
    assert (code, out) == (2, "")
    assert err == "kirc lower: error: kernel segment_sum needs values for shape symbols E, S (--shape E=... S=...)\n"
    code, _, err = run(capsys, "lower", path, "--kernel", "segment_sum", "--emit=kir", "--standalone")
    assert (code, err) == (2, "kirc lower: error: --standalone goes with --emit=triton\n")


@pytest.mark.parametrize("module,kernel,shapes", [
    ("segment_sum", "segment_max", ["S=6", "E=50"]),
    ("histogram", "histogram", ["E=300", "B=9"]),
    ("layernorm", "layernorm", ["M=3", "N=70"]),
])
def test_a_standalone_module_runs_alone_and_matches_the_oracle(capsys, tmp_path: Path, module, kernel, shapes) -> None:
    mod = acceptance.load(acceptance.path_of(module))
    target = tmp_path / f"{kernel}_standalone.py"
    code, _, err = run(capsys, "lower", str(acceptance.path_of(module)), "--kernel", kernel, "--emit=triton",
                       "--standalone", "--shape", *shapes, "-o", str(target))
    assert (code, err) == (0, "")
    source = target.read_text(encoding="utf-8")
    assert "import intent" not in source and "from kir" not in source and "emit_triton" not in source
    driver = tmp_path / "driver.py"
    driver.write_text(f'''
import sys
import torch
sys.path.insert(0, {str(tmp_path)!r})
import {kernel}_standalone as m
args = m.make_inputs("cpu")
inputs = {{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}}
m.launch(args)
torch.save({{"inputs": inputs, "outputs": {{n: args[n] for n in m.OUTPUTS}}}}, {str(tmp_path / "result.pt")!r})
assert not any(name.split(".")[0] in ("intent", "kir", "physical", "emit_triton", "oracle") for name in sys.modules)
''', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of Intent is importable
    env["TRITON_INTERPRET"] = "1"
    done = subprocess.run([sys.executable, str(driver)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    saved = torch.load(tmp_path / "result.pt")
    want = getattr(mod, kernel).oracle(**saved["inputs"])
    for name, got in saved["outputs"].items():
        np.testing.assert_allclose(got.numpy(), np.asarray(want[name]), rtol=1e-4, atol=1e-4)


def test_the_kernel_object_explains_a_call_at_its_shapes() -> None:
    softmax = acceptance.load(acceptance.path_of("softmax")).softmax
    plan = softmax.explain(torch.randn(64, 1000), torch.empty(64, 1000))
    assert "at M = 64, N = 1000, on Triton's interpreter, one program at a time:" in plan  # CPU tensors
    assert "  grid = 16 programs, num_warps = 8" in plan
    assert softmax.explain(torch.randn(64, 1000)) == plan  # the output may be omitted
    assert "at M =" not in softmax.explain()  # no inputs: the formulas only


def test_one_program_is_singular(capsys) -> None:
    code, out, _ = run(capsys, "explain", str(ACCEPTANCE / "softmax.py"), "--shape", "M=1", "N=1")
    assert code == 0 and "  grid = 1 program, num_warps = 4" in out and "(1 program);" in out



@pytest.mark.parametrize("segments, values", [(65536, 131072), (64, 1 << 24), (65536, 2048)])
def test_a_fold_over_segments_counts_each_value_once(segments: int, values: int) -> None:
    """A segment sum reads each value once, whatever the segments' lengths: a chunk of BLOCK_C elements per
    segment (most of it masked off when segments are short, one of many when they are long) is not what it
    moves. The rest, where programs cooperate (SPLIT_0 = 1: split-segments' pieces or balanced segments'
    helpers), is per lane of a program sharing a segment (a helper's lanes are those of the block it joins):
    its two offsets, its head and tail partials written and read back, its helper-chunk partial, its ticket
    (read and written), the counter's reset, the result and the probes of the two binary searches for its whole
    chunks (counted for each, though a subregion with one participant skips the workspace and one without whole
    chunks does not search: an upper bound), and per program the helper's own search probe and the last
    participant's chunk slots; where one program holds each segment and no helper joins (SPLIT_0 = 0) only the
    offsets and the result."""
    from physical.counts import operation_counts
    from physical.explain import launch_environment

    program = physical.lower(samples.segment_sum())
    counts = operation_counts(program)
    env = launch_environment(program, {"S": segments, "E": values}, 132)
    assert not counts.exact
    assert env["SPLIT_0"] == int(values >= 4096)  # 2048 values give neither pieces nor a helper's chunk
    if env["SPLIT_0"] == 0:
        assert counts.bytes.evaluate(env) == 4 * values + (2 * 8 + 4) * segments
        return
    per_instance = 2 * 8 + 3 * 4 + 8 + 2 * 4 + 4 + 4 + 2 * 8
    programs = program.grid.evaluate(env)
    lanes = env["SPLITS_0"] * segments + env["HELPERS_0"] * env["BLOCK_I0"]  # a helper's: the block it joins
    assert counts.bytes.evaluate(env) == 4 * values + per_instance * lanes + 8 * programs + 4 // env["SPLITS_0"]


def test_a_scan_over_segments_counts_each_value_once_read_and_once_written() -> None:
    """A segment scan over CSR offsets (its segments run at once, split over programs by split-region-scans): with one
    piece a segment (no piece folds: SPLIT_0 = 0) the scans read and write each value once, whatever the segments
    hold, not a chunk per segment; each segment's piece adds a fixed 16 bytes (its two offsets, each loaded once:
    the blocks publish no slot, as no one folds it), each program 28 (its ticket, its one flag, its retirement and
    the reset of its flag: a program holds a block of BLOCK_I0 segments) and the last one the two counters. With
    several pieces a segment each program holds the first BLOCK_HELD_0 elements of its piece from their load to
    their write: only what the held tiles leave is read twice (its fold, then its scan). On a device the data
    balances the segments over helpers instead: each value is still read once by the scan that writes it and written
    once; a helper's chunk past its held tiles (one in each lane of the block it joins) is read once more (taken to
    be every value past the helpers' held tiles); per lane of every program (a helper's lanes are the block it
    joins) two offsets and the probes of two searches, per program its ticket, its helper search's probe, its flag,
    its retirement and the reset, per helper a slot, and the slots of a subregion's earlier helpers each helper
    folds (taken to be H (H - 1) / 2)."""
    from physical.counts import operation_counts
    from physical.explain import launch_environment
    from tests.perf_reduce_kernels import seg_last_nz_scan

    program = physical.lower(seg_last_nz_scan.kir)
    counts = operation_counts(program)
    for segments, values in ((65536, 131072), (64, 1 << 24)):
        env = launch_environment(program, {"S": segments, "E": values}, 0)  # the interpreter: a piece a segment
        assert env["SPLITS_0"] == 1 and env["BLOCK_I0"] == 16
        assert counts.bytes.evaluate(env) == (4 + 4) * values + 16 * segments + 28 * (segments // 16) + 8
    # one offsets tensor bounds the scan: blocks of BLOCK_I0 segments and HELPERS_0 helpers past them, each
    # scanning a chunk of the values (balance_region_scan.py)
    for segments, values, block in ((64, 1 << 24, 1), (65536, 1 << 21, 16)):
        env = launch_environment(program, {"S": segments, "E": values}, 132)
        h, held = env["HELPERS_0"], env["BLOCK_HELD_0"]
        programs = -(-segments // block) + h
        assert env["BLOCK_I0"] == block and env["SPLITS_0"] == 1 and env["SPLIT_0"] == 1 and h > 64
        assert program.grid.evaluate(env) == programs
        rest = max(0, values - h * held * block)  # the helpers' chunks past their lanes' tiles: folded, then scanned
        lanes = segments + h * block
        assert counts.bytes.evaluate(env) == (4 + 4) * values + 4 * rest + (2 + 2) * 8 * lanes + 36 * programs + \
            8 + 4 * h + 8 * (h * (h - 1) // 2)
    plan = physical.explain(seg_last_nz_scan.kir)
    assert "SPLITS_0" not in plan.split("bytes moved = ")[1].split("\n")[0]  # SPLITS_0 is 1: no pieces
    assert "\n  group 0, balanced by the data: every value is read once by the scan that writes it (the held tile " \
        "of its instance, BLOCK_HELD_0 elements, or of its helper, BLOCK_HELD_0 in each of the BLOCK_I0 lanes of the " \
        "block it joins, then the rest) and written once; where SPLIT_0 = 1 a helper's chunk past its held tiles is " \
        "read once more, by the fold of its aggregate (taken to be every value past the HELPERS_0 helpers' held " \
        "tiles); the workspace: each program's ticket, flag and retirement, each " \
        "helper's slots (the blocks write none), and the slots of a subregion's earlier helpers each helper folds " \
        "(taken to be HELPERS_0 * (HELPERS_0 - 1) / 2, all helpers in one subregion); the offsets each lane of " \
        "every program reads (a helper's lanes are the block it joins) and the probes of the binary searches\n" \
        "  ideal = " in plan
