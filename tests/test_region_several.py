"""Region folds over several subregions with the same bounds (`intent.sum(data[b:e] * x[indices[b:e]])`, a CSR
row times a vector): one region fold whose map reads the other subregions at the element's position, run in
chunks of the row (vectorised masked loads) with several rows per program, not an ordered loop per element."""

from __future__ import annotations

import numpy as np
import torch

import intent
import physical
from intent import Out, dims, f32, i32, i64, parallel
from physical import ops as P
from physical.lowering import run_pipeline
from physical.verifier import check
from tests.breadth_support import three_ways

R, E, C = dims("R E C")
# empty rows, rows ending exactly at a chunk edge (256) and just beyond it, long rows, single elements
LENGTHS = [0, 1, 255, 256, 257, 3, 0, 600, 2, 513, 0, 7, 1, 300, 256, 5, 0, 40, 1]


@intent.func
def add(p, q):
    return p + q


@intent.kernel
def rows(data: f32[E], indices: i64[E], indptr: i64[R + 1], x: f32[C], y: Out[f32[R]], top: Out[f32[R]],
         at: Out[i64[R]], hits: Out[i32[R]]):
    for r in parallel(R):
        b = indptr[r]
        e = indptr[r + 1]
        y[r] = intent.sum(data[b:e] * x[indices[b:e]])
        top[r] = intent.max(data[b:e] + x[indices[b:e]])
        at[r] = intent.argmax(data[b:e] * x[indices[b:e]])
        hits[r] = intent.reduce((data[b:e] * x[indices[b:e]] > 0.0).to(i32), add, identity=0)


@intent.kernel(checks=True)
def checked(data: f32[E], indices: i32[E], indptr: i64[R + 1], x: f32[C], y: Out[f32[R]]):
    for r in parallel(R):
        y[r] = intent.sum(data[indptr[r]:indptr[r + 1]] * x[indices[indptr[r]:indptr[r + 1]]])


def csr(lengths: list[int], cols: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    indptr = torch.tensor([0] + list(np.cumsum(lengths)), dtype=torch.int64)
    nnz = int(indptr[-1])
    return {"data": torch.randn(nnz, generator=g), "indices": torch.randint(0, cols, (nnz,), generator=g),
            "indptr": indptr, "x": torch.randn(cols, generator=g)}


def test_rows_agree_with_the_oracle_torch_and_stablehlo() -> None:
    a = csr(LENGTHS, 37, 1)
    n = len(LENGTHS)
    args = dict(a, y=torch.empty(n), top=torch.empty(n), at=torch.empty(n, dtype=torch.int64),
                hits=torch.empty(n, dtype=torch.int32))
    got = three_ways(rows, args, ("y", "top", "at", "hits"), rtol=1e-5, atol=1e-5)
    dense = torch.sparse_csr_tensor(a["indptr"], a["indices"], a["data"], (n, 37)).to_dense()
    np.testing.assert_allclose(got["y"], (dense @ a["x"]).numpy(), rtol=1e-5, atol=1e-5)
    for r, (lo, hi) in enumerate(zip(a["indptr"][:-1].tolist(), a["indptr"][1:].tolist())):
        prod = a["data"][lo:hi] * a["x"][a["indices"][lo:hi]]
        if hi == lo:
            assert got["top"][r] == -np.inf and got["at"][r] == -1 and got["hits"][r] == 0
            continue
        assert got["top"][r] == (a["data"][lo:hi] + a["x"][a["indices"][lo:hi]]).max().item()
        assert got["at"][r] == int(torch.argmax(prod))
        assert got["hits"][r] == int((prod > 0).sum())


def test_rows_are_bitwise_reproducible() -> None:
    a = csr(LENGTHS, 37, 2)
    n = len(LENGTHS)
    runs = []
    for _ in range(2):
        out = dict(a, y=torch.empty(n), top=torch.empty(n), at=torch.empty(n, dtype=torch.int64),
                   hits=torch.empty(n, dtype=torch.int32))
        rows(**out)
        runs.append(out["y"].numpy().tobytes())
    assert runs[0] == runs[1]


def test_checks_see_only_the_rows_elements() -> None:
    """With checks on, the reads past a row's end inside its last chunk are not members: the column indices
    there (out of range for x here) are neither loaded nor checked; a bad index inside a row is reported."""
    lengths = [3, 0, 260, 1]
    a = csr(lengths, 11, 3)
    nnz = int(a["indptr"][-1])
    indices = torch.full((nnz + 300,), 10**6, dtype=torch.int32)  # garbage past the last row
    indices[:nnz] = a["indices"].to(torch.int32)
    data = torch.cat([a["data"], torch.randn(300)])
    y = torch.empty(4)
    checked(data, indices, a["indptr"], a["x"], y)
    want = torch.sparse_csr_tensor(a["indptr"], a["indices"], a["data"], (4, 11)).to_dense() @ a["x"]
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    indices[5] = 11
    try:
        checked(data, indices, a["indptr"], a["x"], y)
    except intent.IntentError as e:
        assert "out of range" in str(e) and "x" in str(e)
    else:
        raise AssertionError("an out-of-range column index inside a row was not reported")


def test_the_plan_is_one_chunked_region_fold_per_reduction() -> None:
    a = csr(LENGTHS, 37, 4)
    n = len(LENGTHS)
    args = dict(a, y=torch.empty(n), top=torch.empty(n), at=torch.empty(n, dtype=torch.int64),
                hits=torch.empty(n, dtype=torch.int32))
    k = rows.specialize(args)
    program = physical.construct(k)
    assert check(program, k) == []
    assert sum(isinstance(o, P.RegionFold) for o in program.walk()) == 4
    program, _ = run_pipeline(program, verify_with=k)  # the split passes add the pieces' and helpers' folds
    ops = list(program.walk())
    assert not any(isinstance(o, P.For) for o in ops)  # no ordered loop over the row's elements
    from kir.text import parse_kernel, print_kernel

    text = print_kernel(rows.kir)  # the map's position argument prints and parses back
    assert "map=(%elem: f32, %pos: i64)" in text and print_kernel(parse_kernel(text)) == text
    plan = rows.explain(*args.values())
    assert plan.count("in chunks of BLOCK_C256") == 4  # the whole form's folds; the pieces' fold BLOCK_PARTS_0


@intent.kernel
def segment_sum(values: f32[E], offsets: i64[R + 1], out: Out[f32[R]]):
    for s in parallel(R):
        out[s] = intent.sum(values[offsets[s]:offsets[s + 1]])


def test_few_segments_spread_over_the_device() -> None:
    """A program runs to its longest lane: segments take one program each while there are fewer than the
    device keeps busy, and pack 16 per program beyond that (and under the interpreter, one program at a time)."""
    from physical.launch_expr import DEVICE_SMS

    k = segment_sum.specialize({"values": torch.randn(10), "offsets": torch.tensor([0, 4, 10]),
                                "out": torch.empty(2)})
    block = physical.lower(k).constexpr("BLOCK_I0")
    assert block.evaluate({"R": 128, "E": 1 << 17, DEVICE_SMS: 132}) == 1
    assert block.evaluate({"R": 1 << 20, "E": 1 << 24, DEVICE_SMS: 132}) == 16
    assert block.evaluate({"R": 128, "E": 1 << 17, DEVICE_SMS: 0}) == 16
