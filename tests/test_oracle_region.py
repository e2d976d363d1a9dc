"""Region folds and scans over data-dependent subregions: empty segments, ties, NaN, maps, custom combines,
out-of-range subregions with and without checks."""

import numpy as np
import pytest
import torch

import oracle
from kir import (
    Binary,
    BinaryFn,
    Builder,
    CmpFn,
    Compare,
    DynSlice,
    Load,
    ReduceKind,
    RegionFold,
    RegionScan,
    ScanKind,
    Select,
    Store,
    Yield,
)
from kir import scalar as scalar_type
from kir.dims import DSym, dim_bin
from kir.dtypes import DType
from kir.errors import IntentError
from tests.oracle_kit import LOC, const, inout, kernel, out, parallel, tensor
from tests.test_oracle_reduce import welford_combine

f16, f32, i32, i64, pred = DType.f16, DType.f32, DType.i32, DType.i64, DType.pred
S, E = DSym("S"), DSym("E")


def bounds(b, p, s):
    beg = b.add(Load, src=p["begin"], index=(s,))
    end = b.add(Load, src=p["end"], index=(s,))
    return beg, end


def fold_kernel(kind: ReduceKind, dtype: DType = f32, result: DType | None = None, checks: bool = False, **attrs):
    """out[s] = fold(values[begin[s]:end[s]])."""
    res = result or (i64 if kind in (ReduceKind.argmax, ReduceKind.argmin) else dtype)

    def body(b, p):
        def inst(b, s):
            beg, end = bounds(b, p, s)
            r = b.make(RegionFold, src=p["values"], index=(DynSlice(beg, end),), kind=kind, loc=LOC,
                       **attrs).results[0]
            b.make(Store, dst=p["out"], index=(s,), value=r)
        parallel(b, [S], inst)

    return kernel({"values": tensor(dtype, "E"), "begin": tensor(i64, "S"), "end": tensor(i64, "S"),
                   "out": out(res, "S")}, body, symbols=("S", "E"), checks=checks)


def segments(lengths):
    offs = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return offs[:-1], offs[1:]


LENGTHS = [3, 0, 5, 1, 0, 4]
rng = np.random.default_rng(5)
V = rng.standard_normal(13).astype(np.float32)
V[4] = V[6]  # a tie inside segment 2
BEGIN, END = segments(LENGTHS)


def fold(kind, values=V, begin=BEGIN, end=END, **kw):
    return oracle.run(fold_kernel(kind, **kw), {"values": values, "begin": begin, "end": end})["out"]


def reference(fn, values=V, begin=BEGIN, end=END, empty=0.0):
    return np.array([fn(torch.from_numpy(values[b:e])).item() if e > b else empty for b, e in zip(begin, end)])


def test_sum_max_min_prod_with_empty_segments() -> None:
    np.testing.assert_allclose(fold(ReduceKind.sum), reference(torch.sum), rtol=1e-6)
    np.testing.assert_array_equal(fold(ReduceKind.max), reference(torch.max, empty=-np.inf))
    np.testing.assert_array_equal(fold(ReduceKind.min), reference(torch.min, empty=np.inf))
    np.testing.assert_allclose(fold(ReduceKind.prod), reference(torch.prod, empty=1.0), rtol=1e-6)


def test_argmax_argmin_first_index_relative_to_begin_and_minus_one_when_empty() -> None:
    v = np.array([1.0, 5.0, 5.0, 2.0, np.nan, 3.0, np.nan, -1.0, -1.0], np.float32)
    begin, end = np.array([0, 3, 3, 7, 0]), np.array([3, 7, 3, 9, 9])
    am = fold(ReduceKind.argmax, v, begin, end)
    an = fold(ReduceKind.argmin, v, begin, end)
    assert am.tolist() == [1, 1, -1, 0, 4]
    assert an.tolist() == [0, 1, -1, 0, 4]
    for k in (0, 1, 3, 4):
        seg = torch.from_numpy(v[begin[k]:end[k]])
        assert am[k] == seg.argmax().item() and an[k] == seg.argmin().item()


def test_nan_propagates_through_max() -> None:
    v = np.array([1.0, np.nan, 3.0, 4.0], np.float32)
    got = fold(ReduceKind.max, v, np.array([0, 2]), np.array([3, 4]))
    assert np.isnan(got[0]) and got[1] == 4.0


def test_overlapping_unsorted_segments_and_several_ending_at_the_end() -> None:
    begin, end = np.array([10, 0, 2, 5, 12, 7]), np.array([13, 13, 13, 9, 13, 7])
    np.testing.assert_allclose(fold(ReduceKind.sum, V, begin, end), reference(torch.sum, V, begin, end), rtol=1e-5)
    np.testing.assert_array_equal(fold(ReduceKind.max, V, begin, end),
                                  reference(torch.max, V, begin, end, empty=-np.inf))


def test_any_all_and_integer_wrap() -> None:
    flags = np.array([True, False, False, True, True])
    begin, end = np.array([0, 1, 3, 2]), np.array([2, 3, 5, 2])
    assert fold(ReduceKind.any, flags, begin, end, dtype=pred).tolist() == [True, False, True, False]
    assert fold(ReduceKind.all, flags, begin, end, dtype=pred).tolist() == [False, False, True, True]
    big = np.array([2**31 - 1, 1, 5], np.int32)
    assert fold(ReduceKind.sum, big, np.array([0]), np.array([2]), dtype=i32).tolist() == [-2**31]


def test_f16_segment_sum_accumulates_in_f32() -> None:
    ones = np.ones(3000, np.float16)
    assert fold(ReduceKind.sum, ones, np.array([0]), np.array([3000]), dtype=f16).tolist() == [3000.0]


def test_out_of_range_subregions_are_clipped_or_raise_with_checks() -> None:
    begin, end = np.array([-2, 11, 20, 3]), np.array([2, 16, 25, 1])
    got = fold(ReduceKind.sum, V, begin, end)
    np.testing.assert_allclose(got, [V[0:2].sum(), V[11:13].sum(), 0.0, 0.0], rtol=1e-6)
    with pytest.raises(IntentError) as e:
        fold(ReduceKind.sum, V, begin, end, checks=True)
    assert str(e.value) == "region_fold out of range at kernel.py:12:5: subregion [-2, 2) on axis 0 of values with " \
                           "extent 13"
    # an empty subregion never reads, whatever its bounds
    assert fold(ReduceKind.sum, V, np.array([50]), np.array([40]), checks=True).tolist() == [0.0]


def test_rows_of_a_matrix_with_a_point_index_and_a_map() -> None:
    def square(b: Builder):
        (x,) = b.begin_region((scalar_type(f32),))
        b.make(Yield, values=(b.add(Binary, fn=BinaryFn.mul, lhs=x, rhs=x),))
        return b.end_region()

    def body(b, p):
        def inst(b, s):
            beg, end = bounds(b, p, s)
            r = b.add(Load, src=p["row"], index=(s,))
            tot = b.add(RegionFold, src=p["values"], index=(r, DynSlice(beg, end)), kind=ReduceKind.sum,
                        map=square(b))
            b.make(Store, dst=p["out"], index=(s,), value=tot)
        parallel(b, [S], inst)

    k = kernel({"values": tensor(f32, "R", "E"), "row": tensor(i64, "S"), "begin": tensor(i64, "S"),
                "end": tensor(i64, "S"), "out": out(f32, "S")}, body, symbols=("S", "E", "R"))
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    rows, begin, end = np.array([0, 3, 3, 1]), np.array([1, 0, 4, 2]), np.array([4, 5, 4, 3])
    got = oracle.run(k, {"values": x, "row": rows, "begin": begin, "end": end})["out"]
    np.testing.assert_array_equal(got, [(x[r, b:e] ** 2).sum() for r, b, e in zip(rows, begin, end)])


def test_custom_combine_fold_with_a_map_to_three_components() -> None:
    def to_stats(b: Builder):
        (x,) = b.begin_region((scalar_type(f32),))
        b.make(Yield, values=(x, const(b, 0.0, f32), const(b, 1.0, f32)))
        return b.end_region()

    def body(b, p):
        def inst(b, s):
            beg, end = bounds(b, p, s)
            mu, m2, n = b.make(RegionFold, src=p["values"], index=(DynSlice(beg, end),), kind=ReduceKind.custom,
                               identity=(0.0, 0.0, 0.0), map=to_stats(b), combine=welford_combine(b)).results
            b.make(Store, dst=p["mean"], index=(s,), value=mu)
            b.make(Store, dst=p["m2"], index=(s,), value=m2)
            b.make(Store, dst=p["n"], index=(s,), value=n)
        parallel(b, [S], inst)

    k = kernel({"values": tensor(f32, "E"), "begin": tensor(i64, "S"), "end": tensor(i64, "S"),
                "mean": out(f32, "S"), "m2": out(f32, "S"), "n": out(f32, "S")}, body, symbols=("S", "E"))
    r = oracle.run(k, {"values": V, "begin": BEGIN, "end": END})
    assert r["n"].tolist() == LENGTHS
    for k_, (b_, e_) in enumerate(zip(BEGIN, END)):
        seg = V[b_:e_].astype(np.float64)
        assert r["mean"][k_] == pytest.approx(seg.mean() if seg.size else 0.0, rel=1e-5, abs=1e-6)
        assert r["m2"][k_] == pytest.approx(((seg - seg.mean()) ** 2).sum() if seg.size else 0.0, rel=1e-4,
                                            abs=1e-5)


# ---------------------------------------------------------------------------------------------- region scan


def scan_kernel(kind=ScanKind.sum, dtype=f32, checks=False, **attrs):
    def body(b, p):
        def inst(b, s):
            beg, end = bounds(b, p, s)
            b.make(RegionScan, dst=p["out"], dst_index=(DynSlice(beg, end),), src=p["values"],
                   src_index=(DynSlice(beg, end),), kind=kind, loc=LOC, **attrs)
        parallel(b, [S], inst)

    return kernel({"values": tensor(dtype, "E"), "begin": tensor(i64, "S"), "end": tensor(i64, "S"),
                   "out": inout(dtype, "E")}, body, symbols=("S", "E"), checks=checks)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
def test_segmented_cumsum(reverse: bool, exclusive: bool) -> None:
    v = np.random.default_rng(2).integers(-9, 9, 13).astype(np.int32)
    got = oracle.run(scan_kernel(dtype=i32, reverse=reverse, exclusive=exclusive),
                     {"values": v, "begin": BEGIN, "end": END, "out": np.full(13, 99, np.int32)})["out"]
    want = np.full(13, 99, np.int32)
    for b_, e_ in zip(BEGIN, END):
        seg = v[b_:e_][::-1] if reverse else v[b_:e_]
        inc = np.cumsum(seg)
        res = inc - seg if exclusive else inc
        want[b_:e_] = res[::-1] if reverse else res
    np.testing.assert_array_equal(got, want)


def test_region_scan_max_and_custom_combine() -> None:
    got = oracle.run(scan_kernel(kind=ScanKind.max), {"values": V, "begin": BEGIN, "end": END,
                                                      "out": np.zeros(13, np.float32)})["out"]
    want = np.concatenate([np.maximum.accumulate(V[b_:e_]) for b_, e_ in zip(BEGIN, END)])
    np.testing.assert_array_equal(got, want)

    def add(b: Builder):
        x, y = b.begin_region((scalar_type(f32),) * 2)
        b.make(Yield, values=(b.add(Binary, fn=BinaryFn.add, lhs=x, rhs=y),))
        return b.end_region()

    def body(b, p):
        def inst(b, s):
            beg, end = bounds(b, p, s)
            b.make(RegionScan, dst=p["out"], dst_index=(DynSlice(beg, end),), src=p["values"],
                   src_index=(DynSlice(beg, end),), kind=ScanKind.custom, identity=(0.0,), combine=add(b),
                   exclusive=True)
        parallel(b, [S], inst)

    k = kernel({"values": tensor(f32, "E"), "begin": tensor(i64, "S"), "end": tensor(i64, "S"),
                "out": inout(f32, "E")}, body, symbols=("S", "E"))
    got = oracle.run(k, {"values": V, "begin": BEGIN, "end": END, "out": np.zeros(13, np.float32)})["out"]
    want = np.concatenate([np.cumsum(V[b_:e_]) - V[b_:e_] for b_, e_ in zip(BEGIN, END)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_region_scan_into_a_shifted_target_and_length_mismatch() -> None:
    def body(b, p):
        def inst(b, s):
            beg, end = bounds(b, p, s)
            two = const(b, 2, i64)
            tb, te = (b.add(Binary, fn=BinaryFn.add, lhs=v, rhs=two) for v in (beg, end))
            te = b.add(Binary, fn=BinaryFn.add, lhs=te, rhs=b.add(Load, src=p["extra"], index=(s,)))
            b.make(RegionScan, dst=p["out"], dst_index=(DynSlice(tb, te),), src=p["values"],
                   src_index=(DynSlice(beg, end),), kind=ScanKind.sum, loc=LOC)
        parallel(b, [S], inst)

    k = kernel({"values": tensor(i64, "E"), "begin": tensor(i64, "S"), "end": tensor(i64, "S"),
                "extra": tensor(i64, "S"), "out": inout(i64, dim_bin("+", E, 1))}, body, symbols=("S", "E"))
    v = np.arange(1, 6)
    args = {"values": v, "begin": np.array([0, 3]), "end": np.array([3, 5]), "extra": np.zeros(2, np.int64),
            "out": np.zeros(6, np.int64)}
    # the second segment's target [5, 7) runs past the end: its writes outside are dropped
    assert oracle.run(k, args)["out"].tolist() == [0, 0, 1, 3, 6, 4]
    with pytest.raises(IntentError) as e:
        oracle.run(k, args, checks=True)
    assert str(e.value) == "region_scan target out of range at kernel.py:12:5: subregion [5, 7) on axis 0 of out " \
                           "with extent 6"
    with pytest.raises(IntentError) as e:
        oracle.run(k, dict(args, extra=np.array([0, 1])))
    assert str(e.value) == "region_scan at kernel.py:12:5: the source subregion has 2 elements but the target has 3"


def test_a_custom_fold_reading_a_value_of_its_instance() -> None:
    # Instances with mode > 0 sum their segment, the others take its max.
    def body(b, p):
        def inst(b, s):
            beg, end = bounds(b, p, s)
            positive = b.add(Compare, fn=CmpFn.gt, lhs=b.add(Load, src=p["mode"], index=(s,)), rhs=const(b, 0, i64))
            x, y = b.begin_region((scalar_type(f32),) * 2)
            b.make(Yield, values=(b.add(Select, cond=positive, on_true=b.add(Binary, fn=BinaryFn.add, lhs=x, rhs=y),
                                        on_false=b.add(Binary, fn=BinaryFn.maximum, lhs=x, rhs=y)),))
            combine = b.end_region()
            (r,) = b.make(RegionFold, src=p["values"], index=(DynSlice(beg, end),), kind=ReduceKind.custom,
                          identity=(0.0,), combine=combine).results
            b.make(Store, dst=p["out"], index=(s,), value=r)
        parallel(b, [S], inst)

    k = kernel({"values": tensor(f32, "E"), "begin": tensor(i64, "S"), "end": tensor(i64, "S"),
                "mode": tensor(i64, "S"), "out": out(f32, "S")}, body, symbols=("S", "E"))
    v = np.arange(1, 9, dtype=np.float32)
    got = oracle.run(k, {"values": v, "begin": np.array([0, 0, 3, 5]), "end": np.array([4, 4, 3, 8]),
                         "mode": np.array([1, 0, 1, 0])})["out"]
    assert got.tolist() == [10.0, 4.0, 0.0, 8.0]
