"""The bench kernels and their cases (bench/kernels.py)."""

from __future__ import annotations

import pytest
import torch

from bench import kernels as bk


def test_ideal_bytes_reads_inputs_once_and_in_out_twice():
    args = bk.histogram_case(1000, 16).build(torch.device("cpu"), torch.Generator().manual_seed(0))
    assert bk.ideal_bytes(bk.histogram, args) == 1000 * 4 + 2 * 16 * 4
    args = bk.layernorm_case(3, 10).build(torch.device("cpu"), torch.Generator().manual_seed(0))
    assert bk.ideal_bytes(bk.layernorm, args) == (30 + 10 + 10 + 30 + 3 + 3) * 4  # eps is a scalar


def test_output_names_are_out_and_in_out_parameters():
    assert bk.output_names(bk.layernorm) == ["out", "mean", "rstd"]
    assert bk.output_names(bk.histogram) == ["counts"]


def test_scales_hold_the_issue_sizes():
    names = [c.name for c in bk.traffic_cases("full")]
    assert names[:8] == ["vector_add 1M", "softmax 64x4096", "softmax 8x32768", "layernorm 64x4096",
                         "cumsum 64x4096", "welford 64x4096", "segment_sum 128seg/128k", "histogram 1M->256"]
    assert {c.family for c in bk.one_per_kernel("tiny")} == {
        "vector_add", "softmax", "layernorm", "cumsum", "welford", "segment_sum", "histogram", "dropout", "matmul"}
    assert len(bk.gpu_cases()) == 10
    assert [c.name for c in bk.model_cases("full")] == [
        "sum 4M", "max 4M", "argmax 4M", "cumsum_1d 4M", "cumsum_exclusive_1d 4M", "cummax_1d 4M",
        "column_sums 65536x64", "column_sums 8192x1000", "row_sums 4x1048576", "row_cumsums 4x1048576",
        "row_cumsums_symbolic 2x2097152", "transpose 1024x1024",
        "head_split 8x512x1024", "flatten 8x512x1024", "permute_3d 64x48x256", "nhwc_to_nchw 8x32x32x64",
        "sub_row_max 4096x1024", "segment_sum_skewed 64seg/2M", "segment_sum_skewed 65536seg/2M",
        "segment_cumsum_skewed 64seg/2M", "segment_cumsum_skewed 65536seg/2M", "histogram 4M->256",
        "segment_stats_skewed 64seg/2M", "jagged_cumsum_skewed 64seg/32768x40", "jagged_cumsum_skewed 64seg/131072x16",
        "jagged_mean_skewed 64seg/131072x16", "jagged_mean_skewed 64seg/32768x40",
        "jagged_mean_skewed 64seg/65536x7/big2", "span_cumsum 131072x16", "span_cumsum 2097152x1",
        "segment_argmax_skewed 64seg/2M", "segment_argmax_skewed 65536seg/2M", "jagged_argmax_skewed 64seg/131072x16",
        "segment_cumsums_skewed 64seg/2M"]


def test_skewed_segment_case_puts_half_the_values_in_segment_zero():
    args = bk.skewed_segment_sum_case(1 << 14, 1 << 10).build(torch.device("cpu"), torch.Generator().manual_seed(0))
    lengths = (args["offsets"][1:] - args["offsets"][:-1]).tolist()
    assert len(lengths) == 1 << 10 and sum(lengths) == args["values"].numel() == 1 << 14
    assert lengths[0] >= (1 << 13) and set(lengths[1:]) == {(1 << 13) // ((1 << 10) - 1)}


def test_unknown_scale_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^scale: expected one of tiny, quick, full, got 'huge'$"):
        bk.traffic_cases("huge")


def test_segment_case_has_empty_segments_and_consistent_offsets():
    args = bk.segment_sum_case(16, 10).build(torch.device("cpu"), torch.Generator().manual_seed(0))
    offsets = args["offsets"]
    assert offsets[0] == 0 and int(offsets[-1]) == args["values"].numel()
    assert bool((offsets[1:] == offsets[:-1]).any())


@pytest.mark.parametrize("case", bk.traffic_cases("tiny") + bk.model_cases("tiny"), ids=lambda c: c.name)
def test_tiny_cases_run_and_match_torch(case):
    args = case.build(torch.device("cpu"), torch.Generator().manual_seed(0))
    expected = case.eager(bk.clone_args(args))
    case.kernel(**args)
    if not case.eager_is_reference:  # dropout: each element is dropped or scaled, and about p are dropped
        kept = args["out"] != 0
        scale = torch.tensor(1.0 - args["p"], dtype=torch.float32)
        assert torch.equal(args["out"][kept], args["x"][kept] / scale)
        assert abs((~kept).float().mean().item() - args["p"]) < 0.05
        return
    for name, want in expected.items():
        got = args[name]
        if want.dtype.is_floating_point:
            torch.testing.assert_close(got, want, **case.tol)
        else:
            assert torch.equal(got, want)
