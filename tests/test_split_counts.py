"""How many programs share a subregion: split-segments' count is at most the chunks of the subregion axis (the
columns beside it are other lanes' subregions), and a top-level region scan cuts its span into pieces of at least
one held tile unless that leaves multiprocessors idle (each piece more costs every later piece one more slot to
fold). Counts are exact at the sizes given; the shapes that split agree with the oracle and repeat bit for bit."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import physical
from emit_triton.compile import clear_emitted
from emit_triton.targets import simulated_multiprocessors
from physical.launch_expr import DEVICE_SMS, LSelect
from tests.breadth_support import three_ways
from tests.launch_fixtures import isolated_cache  # noqa: F401  (fixture)
from tests.test_jagged_region_folds import check_stats, stats, stats_args
from tests.test_toplevel_region_scans import expected, inputs, running


def constexprs(kernel, args, sms: int = 132) -> dict[str, int]:
    with simulated_multiprocessors(sms):
        text = kernel.explain(*args.values())
    line = re.findall(r"constexprs: (.*)", text)[-1]
    return {k: int(v) for k, v in re.findall(r"(\w+) = (\d+)", line)}


def test_a_jagged_split_never_outnumbers_the_chunks_of_its_rows() -> None:
    """120 (segment, column) lanes in blocks of 16 over 1000 rows of 40 columns: the average block's values
    (40000 / 8) would allow 9 programs of two 256-element chunks, but a lane's segment holds at most the 1000 rows,
    4 chunks; a fifth piece would be empty in every lane. The bounds are one offsets tensor's, and the 40000 values
    give 9 helpers a chunk, at least the 4 pieces: the data decides (3 chunks of rows, a helper per block a
    segment's 40 columns may span), and the capped shape split is the launch's other side."""
    args = stats_args([600, 0, 400], 40)
    got = constexprs(stats, args)
    assert (got["BLOCK_I0"], got["SPLITS_0"], got["HELPERS_0"], got["CHUNKS_0"]) == (16, 1, 9, 3)
    k = stats.specialize(args)
    splits = physical.lower(k).constexpr("SPLITS_0")
    assert isinstance(splits, LSelect)
    env = {"J": 3, "JE": 1000, "JD": 40, "BLOCK_I0": 16, DEVICE_SMS: 132}
    assert splits.otherwise.evaluate(env) == 4


def test_a_capped_jagged_split_agrees_with_the_oracle_and_repeats(isolated_cache) -> None:  # noqa: F811
    args = stats_args([600, 0, 400], 40, seed=5)
    outs = []
    with simulated_multiprocessors(132):
        got = three_ways(stats, args, ("total", "top", "low", "avg", "prod"), rtol=1e-4, atol=1e-3,
                         stablehlo=False)
        for _ in range(2):
            run = {k: v.clone() for k, v in args.items()}
            stats(**run)
            outs.append([run[k].numpy().tobytes() for k in ("total", "top", "low", "avg", "prod")])
    check_stats(args, got)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("rows,cols,held,pieces", [
    (131072, 16, 512, 256),   # one held tile (512 rows of 16 columns) a piece, not two programs a resident slot
    (2097152, 1, 8192, 256),  # the same for one column: 1056 pieces before
    (16384, 1, 8192, 32),     # two held tiles would leave 130 multiprocessors idle: the device count stands
])
def test_a_top_level_span_is_cut_into_held_tiles(rows: int, cols: int, held: int, pieces: int) -> None:
    got = constexprs(running, inputs("running", rows, cols, 0, rows))
    assert (got["BLOCK_HELD_0"], got["SPLITS_0"]) == (held, pieces)


@pytest.fixture
def fresh(isolated_cache):  # noqa: F811
    clear_emitted()
    yield
    clear_emitted()


def test_a_span_capped_at_its_held_tiles_agrees_with_the_oracle_and_repeats(fresh) -> None:
    """On 4 multiprocessors a 20000-row span would take 32 pieces (two a resident slot); its held tiles of 8192
    rows give 3, and the 4 multiprocessors one piece each: 4 pieces, the last one shorter."""
    args = inputs("running", 20000, 1, 5, 19990, seed=8)
    assert constexprs(running, args, sms=4)["SPLITS_0"] == 4
    runs = []
    with simulated_multiprocessors(4):
        got = three_ways(running, args, ("out",), rtol=1e-4, atol=2e-2, stablehlo=False)
        for _ in range(2):
            run = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
            running(**run)
            runs.append(run["out"].numpy().tobytes())
    want = expected("running", args["values"].numpy(), 5, 19990, args["out"].numpy())
    np.testing.assert_allclose(got["out"], want, rtol=1e-4, atol=2e-2)
    assert runs[0] == runs[1]
