"""End to end: lower, emit, launch under Triton's interpreter, compare with NumPy references."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import emit_triton
from oracle.philox import philox_rand
from tests import samples as S

RNG = np.random.default_rng(0)


def run(kernel, args):
    emit_triton.launch(kernel, args)
    return args


@pytest.mark.parametrize("m,n", [(1, 1), (5, 37), (3, 300)])
def test_softmax(m: int, n: int) -> None:
    x = torch.tensor(RNG.standard_normal((m, n)) * 4, dtype=torch.float32)
    out = run(S.softmax(), {"x": x, "out": torch.empty(m, n)})["out"]
    e = np.exp(x.numpy() - x.numpy().max(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_softmax_propagates_nan_per_row() -> None:
    x = torch.tensor([[0.0, float("-inf"), 1.0], [float("nan"), 0.0, 0.0]])
    out = run(S.softmax(), {"x": x, "out": torch.empty(2, 3)})["out"]
    assert torch.isnan(out[1]).all()
    np.testing.assert_allclose(out[0].numpy(), torch.softmax(x[0], 0).numpy(), rtol=1e-6)


@pytest.mark.parametrize("n", [1, 7, 1500])
def test_vector_add(n: int) -> None:
    x, y = torch.randn(n), torch.randn(n)
    assert torch.equal(run(S.vector_add(), {"x": x, "y": y, "out": torch.empty(n)})["out"], x + y)


def test_vector_add_non_contiguous_and_broadcast_strides() -> None:
    base = torch.randn(2 * 99)
    x = base[::2]
    y = torch.randn(1).expand(99)  # stride 0
    assert torch.equal(run(S.vector_add(), {"x": x, "y": y, "out": torch.empty(99)})["out"], x + y)


@pytest.mark.parametrize("lengths", [[1], [3, 0, 5], [0, 0, 1], [700, 1, 300, 0]])
def test_segment_sum(lengths: list[int]) -> None:
    offs = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int64)
    vals = torch.randn(max(int(offs[-1]), 1))
    out = run(S.segment_sum(), {"values": vals, "offsets": offs, "out": torch.empty(len(lengths))})["out"]
    ref = [vals[offs[i]:offs[i + 1]].double().sum().item() for i in range(len(lengths))]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_recurrence() -> None:
    a, x = torch.rand(6, 40), torch.randn(6, 40)
    h = run(S.recurrence(), {"a": a, "x": x, "h": torch.empty(6, 40)})["h"].numpy()
    acc = np.zeros(6, np.float32)
    for t in range(40):
        acc = a[:, t].numpy() * acc + x[:, t].numpy()
        np.testing.assert_allclose(h[:, t], acc, rtol=1e-5, atol=1e-6)


def test_histogram_drops_out_of_range_bins() -> None:
    x = torch.tensor(RNG.integers(-2, 9, 3000), dtype=torch.int32)
    start = torch.tensor(RNG.integers(0, 5, 7), dtype=torch.int32)
    got = run(S.histogram(), {"x": x, "counts": start.clone()})["counts"]
    ref = start.numpy() + np.bincount(x.numpy()[(x.numpy() >= 0) & (x.numpy() < 7)], minlength=7)
    assert got.tolist() == ref.tolist()


def test_two_groups_in_one_launch() -> None:
    x, v = torch.randn(7, 30), torch.randn(500)
    r = run(S.two_groups(), {"x": x, "v": v, "s": 3.0, "sums": torch.empty(7), "scaled": torch.empty(500)})
    np.testing.assert_allclose(r["sums"].numpy(), x.numpy().sum(1), rtol=1e-5, atol=1e-5)
    assert torch.equal(r["scaled"], v * 3.0)


def test_two_groups_with_an_empty_group() -> None:
    v = torch.randn(5)
    r = run(S.two_groups(allow_empty=True), {"x": torch.empty(0, 3), "v": v, "s": 2.0, "sums": torch.empty(0),
                             "scaled": torch.empty(5)})
    assert torch.equal(r["scaled"], v * 2.0)


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (9, 5, 33)])
def test_matmul_f16_accumulates_in_f32(m: int, n: int, k: int) -> None:
    a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
    c = run(S.matmul(), {"a": a, "b": b, "c": torch.empty(m, n)})["c"]
    ref = a.double().numpy() @ b.double().numpy()
    np.testing.assert_allclose(c.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, False), (False, True), (True, True)])
def test_scans(reverse: bool, exclusive: bool) -> None:
    x = torch.randn(3, 50)
    out = run(S.cumsum_rows(reverse, exclusive), {"x": x, "out": torch.empty(3, 50)})["out"].numpy()
    xs = x.numpy()[:, ::-1] if reverse else x.numpy()
    ref = np.cumsum(xs.astype(np.float64), 1)
    if exclusive:
        ref = np.concatenate([np.zeros((3, 1)), ref[:, :-1]], 1)
    ref = ref[:, ::-1] if reverse else ref
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_integer_reverse_exclusive_scan_is_exact() -> None:
    x = torch.tensor(RNG.integers(-50, 50, (4, 77)), dtype=torch.int32)
    out = run(S.cumsum_rows(True, True, S.DType.i32), {"x": x, "out": torch.empty(4, 77, dtype=torch.int32)})["out"]
    ref = torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1]) - x
    assert torch.equal(out, ref.to(torch.int32))


@pytest.mark.parametrize("seed", [0, 42, 2**40 + 3])
def test_dropout_is_bit_exact_with_philox(seed: int) -> None:
    n, p = 700, 0.25
    x = torch.randn(n)
    out = run(S.dropout(), {"x": x, "p": p, "seed": seed, "out": torch.empty(n)})["out"]
    r = philox_rand(seed, np.arange(n, dtype=np.int64))
    p32 = np.float32(p)
    ref = np.where(r >= p32, x.numpy() / (np.float32(1.0) - p32), np.float32(0.0))
    assert np.array_equal(out.numpy(), ref)


def test_serial_fallback_runs_instances_in_order() -> None:
    x = torch.randn(50)
    out = run(S.racy_store(), {"x": x, "out": torch.empty(1)})["out"]
    assert out.item() == x[-1].item()  # in order: the last instance's write stands


# ---------------------------------------------------------------------------------------------- fuzzer findings


def _agrees_with_the_oracle(text: str, args: dict) -> dict:
    """Launch the KIR kernel under the interpreter and compare every output with the oracle's (signed
    zeros compare equal, as in the differential fuzzer)."""
    import oracle
    from kir.text import parse_kernel

    k = parse_kernel(text)
    want = oracle.run(k, {n: (a.copy() if isinstance(a, np.ndarray) else a) for n, a in args.items()})
    got = {n: (a.copy() if isinstance(a, np.ndarray) else a) for n, a in args.items()}
    emit_triton.launch(k, got)
    for name, w in want.items():
        assert np.array_equal(got[name], w, equal_nan=True), (name, got[name], w)
    return got


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_float_atomic_xchg_returns_the_old_value(dt: str) -> None:
    """Found by the differential fuzzer: Triton's interpreter has no float atomic_xchg."""
    got = _agrees_with_the_oracle(f"""kernel xchg(acc: inout {dt}[K], out: out {dt}[K]) symbols(K) {{
  parallel (%i: i64) in (K) {{
    %v: {dt} = constant -2.5 : {dt}
    %old: {dt} = atomic xchg %acc[%i], %v order=acq_rel
    store %out[%i] = %old
    yield
  }}
  yield
}}""", {"acc": np.array([1.5, -0.0, np.inf], dt.replace("f", "float")),
        "out": np.zeros(3, dt.replace("f", "float"))})
    assert got["acc"].tolist() == [-2.5] * 3
    assert got["out"].tobytes() == np.array([1.5, -0.0, np.inf], got["out"].dtype).tobytes()  # the bits exchanged


@pytest.mark.parametrize("kind", ["max", "min"])
def test_float_atomic_max_min_run_under_the_interpreter(kind: str) -> None:
    _agrees_with_the_oracle(f"""kernel mm(v: in f32[K], acc: inout f32[K], out: out f32[K]) symbols(K) {{
  parallel (%i: i64) in (K) {{
    %x: f32 = load %v[%i]
    %old: f32 = atomic {kind} %acc[%i], %x order=relaxed
    store %out[%i] = %old
    yield
  }}
  yield
}}""", {"v": np.array([1.0, -3.0, 0.5, -0.0], np.float32), "acc": np.array([-1.0, -2.0, 0.25, 0.0], np.float32),
        "out": np.zeros(4, np.float32)})


@pytest.mark.parametrize("kind", ["add", "or", "xchg", "max"])
def test_an_out_of_range_atomic_returns_zero(kind: str) -> None:
    """Found while documenting atomics: masked-off members returned what Triton left (1 for add), not 0."""
    got = _agrees_with_the_oracle(f"""kernel scatter_atomic(idx: in i32[N], acc: inout i32[K], out: out i32[N])
    symbols(N, K) {{
  parallel (%i: i64) in (N) {{
    %j: i32 = load %idx[%i]
    %one: i32 = constant 1 : i32
    %old: i32 = atomic {kind} %acc[%j], %one order=acq_rel
    store %out[%i] = %old
    yield
  }}
  yield
}}""", {"idx": np.array([0, 5, -1, 1], np.int32), "acc": np.array([7, 9], np.int32), "out": np.full(4, 3, np.int32)})
    assert got["out"].tolist()[1:3] == [0, 0]


_LOOP_BITCAST = """kernel loop_bits(n: in i64[N], out: out u64[N]) symbols(N) {
  parallel (%i: i64) in (N) {
    %0: i64 = constant 0 : i64
    %1: i64 = constant 1 : i64
    %stop: i64 = STOP
    %z: u64 = constant 0 : u64
    %r: u64 = for (%j: i64, %c: u64) in range(%0, %stop, %1) init(%z) {
      %b: u64 = bitcast %j to u64
      %d: u64 = binary add %c, %b
      yield %d
    }
    store %out[%i] = %r
    yield
  }
  yield
}"""


@pytest.mark.parametrize("stop", ["constant 4 : i64", "load %n[%i]"], ids=["uniform", "per_lane"])
def test_bitcast_of_a_for_index_sees_its_i64_value(stop: str) -> None:
    """A loop index over literal bounds was an int32 (GPU) or a Python int (interpreter): bitcasting it
    to u64 failed with 'Cannot bitcast data-type of size 32 to data-type of size 64' / no attribute 'to'."""
    got = _agrees_with_the_oracle(_LOOP_BITCAST.replace("STOP", stop),
                                  {"n": np.array([0, 3, 5], np.int64), "out": np.zeros(3, np.uint64)})
    assert got["out"].tolist() == ([6, 6, 6] if stop.startswith("constant") else [0, 3, 10])


def test_region_fold_map_reads_a_value_from_outside_the_fold() -> None:
    """Found by the differential fuzzer: the map's result (one per lane, no chunk tile) met the chunk's
    membership mask ('Cannot make_shape_compatible: 256 and 16')."""
    got = _agrees_with_the_oracle("""kernel fold_outer(offs: in i64[S + 1], vals: in f32[E], out: out i64[S])
    symbols(S, E) {
  parallel (%s: i64) in (S) {
    %b: i64 = load %offs[%s]
    %one: i64 = constant 1 : i64
    %s1: i64 = binary add %s, %one
    %e: i64 = load %offs[%s1]
    %n: i64 = region_fold sum %vals[%b:%e] map=(%v: f32) {
      %w: i64 = binary add %s, %s
      yield %w
    }
    store %out[%s] = %n
    yield
  }
  yield
}""", {"offs": np.array([0, 2, 2, 5], np.int64), "vals": np.zeros(5, np.float32), "out": np.zeros(3, np.int64)})
    assert got["out"].tolist() == [0, 0, 12]  # (e - b) * 2s


def test_region_fold_with_uniform_bounds_and_a_map_reading_the_lane() -> None:
    got = _agrees_with_the_oracle("""kernel fold_lane(vals: in f32[E], out: out f32[S]) symbols(S, E) {
  parallel (%s: i64) in (S) {
    %b: i64 = constant 1 : i64
    %e: i64 = dim E : i64
    %n: f32 = region_fold sum %vals[%b:%e] map=(%v: f32) {
      %w: f32 = cast %s to f32
      %x: f32 = binary mul %w, %v
      yield %x
    }
    store %out[%s] = %n
    yield
  }
  yield
}""", {"vals": np.array([100.0, 1.0, 2.0], np.float32), "out": np.zeros(3, np.float32)})
    assert got["out"].tolist() == [0.0, 3.0, 6.0]
