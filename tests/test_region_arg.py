"""region_fold argmax/argmin: (value, position) pairs folded in element order over data-dependent
segments. The first extreme wins, NaN counts as the extreme, an empty segment gives -1 and positions
are relative to the segment's start (the oracle's rules)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import emit_triton
import oracle
import physical
from kir.text import parse_kernel

KERNEL = """kernel arg(offs: in {ot}[S + 1], vals: in {dt}[E], hi: out i64[S], lo: out i64[S]) symbols(S, E)
    requires(E >= 0) {{
  parallel (%i: i64) in (S) {{
    %b: {ot} = load %offs[%i]
    %one: i64 = constant 1 : i64
    %j: i64 = binary add %i, %one
    %e: {ot} = load %offs[%j]
    %h: i64 = region_fold argmax %vals[%b:%e]
    store %hi[%i] = %h
    %l: i64 = region_fold argmin %vals[%b:%e]
    store %lo[%i] = %l
    yield
  }}
  yield
}}"""


def _reference(vals: np.ndarray, offs: np.ndarray, largest: bool) -> list[int]:
    out = []
    for b, e in zip(offs[:-1], offs[1:]):
        seg = vals[b:e]
        if len(seg) == 0:
            out.append(-1)
        elif seg.dtype.kind == "f" and np.isnan(seg).any():
            out.append(int(np.flatnonzero(np.isnan(seg))[0]))
        else:
            out.append(int(np.argmax(seg) if largest else np.argmin(seg)))
    return out


@pytest.mark.parametrize(("dt", "ot"), [("f32", "i64"), ("i32", "i64"), ("f16", "i32")])
def test_region_fold_argmax_and_argmin_match_the_oracle_and_numpy(dt: str, ot: str) -> None:
    rng = np.random.default_rng(5)
    lengths = [0, 1, 3, 0, 300, 17, 600, 2]  # empty segments and segments longer than one chunk
    offs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64 if ot == "i64" else np.int32)
    if dt != "i32":
        vals = rng.integers(-5, 5, offs[-1]).astype(np.float32 if dt == "f32" else np.float16)  # many ties
        vals[offs[4] + 200] = np.nan  # a NaN in the second chunk of a long segment
        vals[offs[6] + 10] = np.nan
        vals[offs[6] + 500] = np.nan
    else:
        vals = rng.integers(-(2 ** 31), 2 ** 31 - 1, offs[-1]).astype(np.int32)
        vals[offs[5] + 3] = vals[offs[5] + 9] = 2 ** 31 - 1  # a tie at the extreme: the first wins
    k = parse_kernel(KERNEL.format(dt=dt, ot=ot))
    physical.lower(k, verify=True)  # every rule, after construction and after each pass
    s = len(lengths)
    want = oracle.run(k, {"offs": offs, "vals": vals, "hi": np.zeros(s, np.int64), "lo": np.zeros(s, np.int64)})
    hi, lo = torch.zeros(s, dtype=torch.int64), torch.zeros(s, dtype=torch.int64)
    emit_triton.launch(k, {"offs": torch.from_numpy(offs), "vals": torch.from_numpy(vals), "hi": hi, "lo": lo})
    assert hi.tolist() == want["hi"].tolist() == _reference(vals, offs, True)
    assert lo.tolist() == want["lo"].tolist() == _reference(vals, offs, False)
