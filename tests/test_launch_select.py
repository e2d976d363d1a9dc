"""`LSelect`: a launch-time choice between two launch expressions (a flag selects a form's block, a split
count, a segment length), in every place a launch expression is read: its evaluator, the explain text, the
runtime expression format of prebuilt kernels, the kernel's Triton and the torch.compile launcher."""

from __future__ import annotations

import pytest

from emit_triton.exprs import encode
from intent.runtime import expr as R
from kir.dims import DSym
from kir.errors import LaunchError
from physical.launch_expr import LBin, LConst, LConstexpr, LDim, LNextPow2, LSelect, LTileBlock, lselect
from physical.launch_text import simplify, text

N = LDim(DSym("N"))
FLAG = LConstexpr("F")


def test_only_the_chosen_side_is_evaluated():
    too_big = LTileBlock(N, limit=1024)
    choice = LSelect(FLAG, LConst(64), too_big)
    assert choice.evaluate({"F": 1, "N": 5000}) == 64  # the tile the other form would need is never asked for
    assert choice.evaluate({"F": 0, "N": 1000}) == 1024
    with pytest.raises(LaunchError, match="needs a tile of 8192 elements"):
        choice.evaluate({"F": 0, "N": 5000})
    assert LSelect(LBin("-", N, LConst(3)), LConst(1), LConst(2)).evaluate({"N": 3}) == 2  # zero is false


def test_a_choice_that_is_fixed_is_no_choice():
    assert lselect(LConst(1), N, LConst(7)) == N and lselect(LConst(0), N, LConst(7)) == LConst(7)
    assert lselect(FLAG, N, N) == N
    assert lselect(FLAG, N, LConst(7)) == LSelect(FLAG, N, LConst(7))
    assert simplify(LSelect(LBin("-", LConst(1), LConst(1)), N, LConst(7))) == LConst(7)


def test_the_text_reads_as_python_writes_it():
    block = LSelect(FLAG, LConst(1), LNextPow2(N))
    assert text(block) == "1 if F else next_pow2(N)"
    assert text(LBin("*", LConstexpr("B"), block)) == "B * (1 if F else next_pow2(N))"
    assert text(LSelect(FLAG, LBin("+", N, LConst(1)), N)) == "(N + 1) if F else N"
    assert str(block) == "(1 if F else next_pow2(N))"


def test_prebuilt_kernels_evaluate_it_with_the_same_meaning():
    choice = LSelect(FLAG, LConst(64), LTileBlock(N, limit=1024))
    data = encode(choice)
    assert data == ["select", "F", 64, ["tile_block", "N", 1024, ""]]
    R.validate(data, "grid")
    assert R.evaluate(data, {"F": 1, "N": 5000}) == 64 and R.evaluate(data, {"F": 0, "N": 100}) == 128
    assert list(R.names(data)) == ["F", "N"]
    assert R.render(data) == "64 if F else tile_block(N)"
    assert R.render(["+", data, 1]) == "(64 if F else tile_block(N)) + 1"
    with pytest.raises(ValueError, match="select takes 3 operand"):
        R.validate(["select", "F", 1], "grid")


def test_the_kernel_and_the_torch_launcher_read_it():
    import physical
    from emit_triton.emit import Emitter
    from intent.torch_triton import symbolic
    from tests import samples

    em = Emitter(physical.lower(samples.softmax()))
    assert em.launch(LSelect(LConstexpr("BLOCK_N_LOOPED"), LConst(2), LConst(3))) == "(2 if BLOCK_N_LOOPED else 3)"
    assert symbolic(LSelect(FLAG, LConst(64), N), {"F": 0, "N": 300}) == 300
    assert symbolic(LSelect(FLAG, LConst(64), N), {"F": 1, "N": 300}) == 64
