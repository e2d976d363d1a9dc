"""The sm_90 code of a balanced segmented scan keeps its held tile in registers across the look-back.

A piece (or a helper's lane) holds the scan of its held tile, BLOCK_HELD_0 values, while it waits for the earlier
helpers' flags and folds their slots, so each look-back step reads a small tile of slots (split-region-scans'
REGION_SLOT_BLOCK). At 1024 slots a step the model's segment_cumsum plan (64 segments over 2M values: BLOCK_I0 = 1,
BLOCK_HELD_0 = 8192, 8 warps) used 255 registers and spilled 548 bytes. No GPU is needed: Triton compiles for
sm_90 with the specialisation a launch at these sizes gets, and Triton's own ptxas reports registers and spills.
"""

from __future__ import annotations

import re

import torch

from bench.kernels import skewed_segment_cumsum_case
from bench.ptx import gpu_name_of, ptxas_info
from emit_triton.targets import simulated_multiprocessors


def test_the_model_plan_of_a_segmented_cumsum_does_not_spill() -> None:
    case = skewed_segment_cumsum_case(1 << 21)
    args = case.build(torch.device("cpu"), torch.Generator().manual_seed(0))
    with simulated_multiprocessors(132):
        source = case.kernel.triton_source(**args)
        ptx = case.kernel.ptx(arch=90, **args)
    # the look-back reads 256 slots a step across the program's lanes
    assert re.search(r"for fold_step in range\(0, fold_count, \(\(256 \+ BLOCK_I0 - 1\) // BLOCK_I0\)\)", source)
    info = ptxas_info(ptx, gpu_name_of(ptx))
    assert (info.spill_stores, info.spill_loads) == (0, 0), info
