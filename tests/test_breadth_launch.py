"""Ported-kernel forms around memory and control: disjoint views of one tensor, strided-slice stores as
affine writes, data-dependent indices into computed values, and branch-local types."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import intent
from emit_triton.arguments import views_share_memory
from intent import InOut, Out, dims, f32, i32, i64, parallel
from kir.errors import LaunchError
from tests.breadth_support import three_ways
from tests.frontend_support import diagnostic

M, N, D = dims("M N D")
g = torch.Generator().manual_seed(3)


def rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


# ---------------------------------------------------------------------------------------------- overlap


@intent.kernel
def two_outputs(x: f32[M, N], a: Out[f32[M, N]], b: Out[f32[M, N]]):
    for i in parallel(M):
        a[i, :] = x[i, :] * 2.0
        b[i, :] = x[i, :] + 1.0


def test_disjoint_views_of_one_tensor_are_accepted() -> None:
    x = rand(3, 4)
    y = torch.zeros(3, 8)
    two_outputs(x, y[:, :4], y[:, 4:])
    torch.testing.assert_close(y[:, :4], x * 2)
    torch.testing.assert_close(y[:, 4:], x + 1)
    z = torch.zeros(3, 8)
    two_outputs(x, z[:, 0::2], z[:, 1::2])  # interleaved columns: never the same element
    torch.testing.assert_close(z[:, 0::2], x * 2)
    torch.testing.assert_close(z[:, 1::2], x + 1)


def test_overlapping_views_are_refused() -> None:
    x = rand(3, 4)
    y = torch.zeros(3, 8)
    with pytest.raises(LaunchError) as info:
        two_outputs(x, y[:, :4], y[:, 3:7])
    assert str(info.value) == ("parameter b: its memory overlaps parameter a; memory the kernel writes may be "
                               "reached through one parameter only (pass the tensor once, as an inout parameter, to "
                               "read and write it)")
    with pytest.raises(LaunchError):
        two_outputs(y[:, 4:], y[:, :4], y[:, 0::2][:, :4])


def test_views_share_memory_is_exact() -> None:
    y = torch.zeros(6, 10)
    assert not views_share_memory(y[:, :5], y[:, 5:])
    assert views_share_memory(y[:, :5], y[:, 4:9])
    assert not views_share_memory(y[0::2], y[1::2])
    assert views_share_memory(y[0::2], y[2::2])
    assert not views_share_memory(y[:, 0::3], y[:, 1::3])
    assert views_share_memory(y.T[:3], y[:, :1])
    b = torch.zeros(8, dtype=torch.int16)
    bytes_ = b.view(torch.int8)
    assert views_share_memory(b[1:2], bytes_[3:4])  # byte 3 is the high byte of element 1
    assert not views_share_memory(b[1:2], bytes_[4:5])


# ---------------------------------------------------------------------------------------------- strided stores


@intent.kernel(requires=[D % 2 == 0])
def rope(q: f32[M, D], c: f32[M, D // 2], s: f32[M, D // 2], out: Out[f32[M, D]]):
    for i in parallel(M):
        x1 = q[i, 0:D:2]
        x2 = q[i, 1:D:2]
        out[i, 0:D:2] = x1 * c[i, :] - x2 * s[i, :]
        out[i, 1:D:2] = x1 * s[i, :] + x2 * c[i, :]


def test_strided_slice_stores_are_affine_writes() -> None:
    """A constant-step slice store writes `2 * k + 1`: an affine function of the element position, so different
    rows provably write different elements and the rows run in parallel (they ran in one program, in order)."""
    q, c, s = rand(4, 8), rand(4, 4), rand(4, 4)
    got = three_ways(rope, {"q": q, "c": c, "s": s, "out": torch.empty(4, 8)}, ("out",), rtol=1e-6, atol=1e-6)
    x1, x2 = q[:, 0::2], q[:, 1::2]
    np.testing.assert_allclose(got["out"][:, 0::2], (x1 * c - x2 * s).numpy(), rtol=1e-6)
    np.testing.assert_allclose(got["out"][:, 1::2], (x1 * s + x2 * c).numpy(), rtol=1e-6)
    plan = rope.explain(q, c, s, torch.empty(4, 8))
    assert "group 0 (parallel at" in plan and "workset over (M)" in plan
    assert "may conflict" not in plan and "a single instance" not in plan


# ---------------------------------------------------------------------------------------------- computed values


@intent.kernel
def pick(x: f32[M, N], t: i64[M], w: f32[M, N, D], u: i32[M], out: Out[f32[M]], rows: Out[f32[M, D]],
         ints: Out[i32[M]]):
    for i in parallel(M):
        row = intent.exp(x[i, :])
        out[i] = row[t[i]]
        m = w[i, :, :] * 2.0
        rows[i, :] = m[t[i], :]
        k = (x[i, :] * 4.0).to(i32)
        ints[i] = k[u[i]]


def test_data_dependent_index_into_a_computed_value() -> None:
    m, n, d = 5, 6, 3
    x, w = rand(m, n), rand(m, n, d)
    x[1, 2] = float("nan")
    x[3, 0] = -float("inf")
    t = torch.tensor([0, 2, 5, 0, 9])       # 9 is out of range: 0, as a gather reads
    u = torch.tensor([1, 0, 5, -1, 3], dtype=torch.int32)
    args = {"x": x, "t": t, "w": w, "u": u, "out": torch.empty(m), "rows": torch.empty(m, d),
            "ints": torch.empty(m, dtype=torch.int32)}
    # exp is correctly rounded nowhere: NumPy, torch and XLA may each be an ulp apart (2.4e-7 relative)
    got = three_ways(pick, args, ("out", "rows", "ints"), rtol=2.5e-7, atol=0)
    r = torch.arange(m)
    inside = t < n
    want = torch.where(inside, x.exp()[r, t.clamp(max=n - 1)], 0.0)
    np.testing.assert_allclose(got["out"], want.numpy(), rtol=2.5e-7, atol=0)
    assert np.isnan(got["out"][1]) and got["out"][3] == 0.0 and got["out"][4] == 0.0
    want_rows = torch.where(inside[:, None], (w * 2)[r, t.clamp(max=n - 1)], 0.0)
    np.testing.assert_array_equal(got["rows"], want_rows.numpy())
    ku = (x * 4).nan_to_num(0.0).to(torch.int32)
    ok = (u >= 0) & (u < n)
    want_ints = torch.where(ok, ku[r, u.clamp(0, n - 1).long()], 0)
    np.testing.assert_array_equal(got["ints"][[0, 1, 3, 4]], want_ints.numpy()[[0, 1, 3, 4]])


def test_tensor_index_into_a_computed_value_is_refused(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[N], idx: i64[N], out: Out[f32[N]]):
            for _ in parallel(1):
                v = intent.exp(x[:])
                out[:] = v[idx[:]]
        """, "idx[:]]", "a computed value can be indexed with scalar indices and slices only; index the tensor "
                        "parameter itself (x[idx]) or store the value into a buffer (buf = intent.empty(...)) and "
                        "index that")


# ---------------------------------------------------------------------------------------------- branch-local types


@intent.kernel
def branch_local(x: f32[N], flag: i32, out: Out[f32[N]]):
    for i in parallel(N):
        if flag > 0:
            v = x[i] * 2.0
            out[i] = v
        else:
            v = (x[i] > 0.0).to(i32)
            out[i] = v.to(f32)


def test_branch_local_types() -> None:
    x = rand(6)
    for flag in (1, 0):
        got = three_ways(branch_local, {"x": x, "flag": flag, "out": torch.empty(6)}, ("out",), rtol=0, atol=0)
        want = x * 2 if flag else (x > 0).float()
        np.testing.assert_array_equal(got["out"], want.numpy())


def test_a_branch_local_value_read_after_the_if(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[N], flag: i32, out: Out[f32[N]]):
            for i in parallel(N):
                if flag > 0:
                    v = x[i]
                else:
                    v = (x[i] > 0.0).to(i32)
                out[i] = v
        """, "v\n", "`v` has no value here: it is f32 in one branch and i32 in the other of the if at line 9; "
                    "convert one with `.to(f32)` to use it after the if")


# ---------------------------------------------------------------------------------------------- loops in place


@intent.kernel
def repeated_in_place(y: f32[M, N], g: InOut[f32[M, N]]):
    for i in parallel(M):
        for _ in range(3):
            g[i, :] = g[i, :] * y[i, :]


def test_a_loop_reading_what_its_last_iteration_wrote_gets_a_barrier() -> None:
    """Construction orders iteration k's write before iteration k + 1's read with a barrier; the physical
    verifier (`[buffer-visibility]`) used to reject the kernel, which launched right."""
    import physical

    y, gr = rand(3, 8), rand(3, 8)
    got = three_ways(repeated_in_place, {"y": y, "g": gr}, ("g",), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["g"], (gr * y ** 3).numpy(), rtol=1e-6, atol=1e-6)
    assert repeated_in_place.explain(y, gr).startswith("kernel repeated_in_place: one launch")
    program = physical.lower(repeated_in_place.kir, verify=True)
    assert "barrier" in physical.print_program(program)


# ---------------------------------------------------------------------------------------------- windows


B, S, H = dims("B S H")


@intent.kernel(requires=[D % H == 0])
def split_heads(x: f32[B, S, D], out: Out[f32[B, H, S, D // H]]):
    for b, s, h in parallel(B, S, H):
        out[b, h, s, :] = x[b, s, h * (D // H):(h + 1) * (D // H)]


@intent.kernel(requires=[D % H == 0])
def merge_heads(y: f32[B, H, S, D // H], out: Out[f32[B, S, D]]):
    for b, s, h in parallel(B, S, H):
        out[b, s, h * (D // H):(h + 1) * (D // H)] = y[b, h, s, :]


@intent.kernel
def chunk_sums(x: f32[M, N], off: i64[M], out: Out[f32[M, N // 4]], pairs: Out[f32[M]]):
    for i, c in parallel(M, N // 4):
        out[i, c] = intent.sum(x[i, 4 * c:4 * c + 4])
    for i in parallel(M):
        pairs[i] = intent.sum(x[i, off[i]:off[i] + 2])  # a window at a data-dependent start


def test_windows_of_launch_known_length_are_affine_views() -> None:
    """`h * (D // H):(h + 1) * (D // H)` has the launch-known length `D // H` (the bounds expanded as
    polynomials): a window, read and written at `begin + arange(D // H)`; the writes of different heads are
    proven disjoint (Z3 with the launch-known factor), so the instances run in parallel."""
    x = rand(2, 3, 8)
    heads = three_ways(split_heads, {"x": x, "out": torch.empty(2, 4, 3, 2)}, ("out",), rtol=0, atol=0)
    np.testing.assert_array_equal(heads["out"], x.view(2, 3, 4, 2).permute(0, 2, 1, 3).numpy())
    y = torch.from_numpy(heads["out"].copy())
    merged = three_ways(merge_heads, {"y": y, "out": torch.empty(2, 3, 8)}, ("out",), rtol=0, atol=0)
    np.testing.assert_array_equal(merged["out"], x.numpy())
    plan = merge_heads.explain(y, torch.empty(2, 3, 8))
    assert "workset over (B, S, H)" in plan and "a single instance" not in plan
    xs = rand(3, 12)
    off = torch.tensor([0, 5, 10])
    sums = three_ways(chunk_sums, {"x": xs, "off": off, "out": torch.empty(3, 3), "pairs": torch.empty(3)},
                      ("out", "pairs"), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sums["out"], xs.view(3, 3, 4).sum(-1).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sums["pairs"], [xs[r, o:o + 2].sum().item() for r, o in enumerate(off.tolist())],
                               rtol=1e-6, atol=1e-6)


def test_a_window_stored_into_a_target_of_another_extent(tmp_path) -> None:
    from kir.errors import DiagnosticError
    from tests.frontend_support import kernels

    with pytest.raises(DiagnosticError) as info:
        kernels(tmp_path, """
            @intent.kernel
            def k(x: f32[M, N], out: Out[f32[M, K]]):
                for i, c in parallel(M, K):
                    out[i, :] = x[i, c * 2:c * 2 + 3]
            """)
    assert info.value.message == ("shape mismatch in store to `out`: cannot broadcast [3] to [K] (cannot prove 3 == "
                                  "K: counterexample K = 1, M = 1, N = 1)")


# ---------------------------------------------------------------------------------------------- sparse rows


R, E, C = dims("R E C")


@intent.kernel
def spmv(data: f32[E], indices: i64[E], indptr: i64[R + 1], x: f32[C], y: Out[f32[R]], m: Out[f32[R]],
         mu: Out[f32[R]]):
    for r in parallel(R):
        b = indptr[r]
        e = indptr[r + 1]
        y[r] = intent.sum(data[b:e] * x[indices[b:e]])
        m[r] = intent.max(data[b:e] + x[indices[b:e]])
        mu[r] = intent.mean(data[b:e] * 2.0 + data[b:e])


def test_sparse_rows_as_written() -> None:
    """Several subregions with the same bounds, one read through the other (CSR SpMV), fold as an ordered loop
    over the range; an empty row gives the identity (0, -inf, NaN for the mean)."""
    indptr = torch.tensor([0, 3, 3, 7, 8])
    indices = torch.tensor([0, 2, 4, 1, 2, 3, 4, 0])
    data, x = rand(8), rand(5)
    args = {"data": data, "indices": indices, "indptr": indptr, "x": x, "y": torch.empty(4), "m": torch.empty(4),
            "mu": torch.empty(4)}
    got = three_ways(spmv, args, ("y", "m", "mu"), rtol=1e-6, atol=1e-6)
    dense = torch.zeros(4, 5)
    for r in range(4):
        for k in range(int(indptr[r]), int(indptr[r + 1])):
            dense[r, indices[k]] = data[k]
    np.testing.assert_allclose(got["y"], (dense @ x).numpy(), rtol=1e-6, atol=1e-6)
    want_m = [max((data[k] + x[indices[k]]).item() for k in range(int(indptr[r]), int(indptr[r + 1])))
              if indptr[r + 1] > indptr[r] else -np.inf for r in range(4)]
    np.testing.assert_allclose(got["m"], want_m, rtol=1e-6)
    assert np.isnan(got["mu"][1])
    np.testing.assert_allclose(got["mu"][[0, 2, 3]], [3 * data[0:3].mean().item(), 3 * data[3:7].mean().item(),
                                                      3 * data[7:8].mean().item()], rtol=1e-5)


def test_subregions_with_different_bounds_are_refused(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(a: f32[N], off: i64[M], out: Out[f32[M]]):
            for i in parallel(M):
                out[i] = intent.sum(a[1:off[i]] * a[0:off[i]])
        """, "a[0:off[i]]", "intent.sum reads two data-dependent subregions, `a[1:off[i]]` and "
                            "`a[0:off[i]]`; a region fold reads one subregion and maps each of its elements. To "
                            "combine several arrays over one range (a CSR row's values and column indices), write "
                            "an ordered loop: `for k in range(b, e): acc += ...`")


# ---------------------------------------------------------------------------------------------- topk


@intent.kernel(requires=[N >= 4])
def top4(x: f32[M, N], v: Out[f32[M, 4]], ix: Out[i64[M, 4]], iv: Out[i32[M, 2]]):
    for i in parallel(M):
        vals, idx = intent.topk(x[i, :], 4)
        v[i, :] = vals
        ix[i, :] = idx
        ints, _ = intent.topk((x[i, :] * 4.0).to(i32), 2)
        iv[i, :] = ints


def test_topk_values_and_indices() -> None:
    x = rand(5, 9)
    x[1, :] = 1.0                       # ties: index order
    x[2, 3] = float("nan")              # NaN counts as the largest, as torch.topk
    x[3, :] = -float("inf")
    x[3, 5] = 0.0
    args = {"x": x, "v": torch.empty(5, 4), "ix": torch.empty(5, 4, dtype=torch.int64),
            "iv": torch.empty(5, 2, dtype=torch.int32)}
    got = three_ways(top4, args, ("v", "ix", "iv"), rtol=0, atol=0)
    tv, ti = torch.topk(x, 4)
    np.testing.assert_array_equal(got["v"], tv.numpy())
    np.testing.assert_array_equal(got["ix"][[0, 4]], ti.numpy()[[0, 4]])  # distinct values: torch's indices
    np.testing.assert_array_equal(got["ix"][1], [0, 1, 2, 3])
    np.testing.assert_array_equal(got["ix"][3], [5, 0, 1, 2])
    assert got["ix"][2][0] == 3
    np.testing.assert_array_equal(got["iv"][[0, 4]], torch.topk((x * 4).to(torch.int32), 2).values.numpy()[[0, 4]])


def test_topk_needs_k_within_the_row(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M, 4]]):
            for i in parallel(M):
                vals, _ = intent.topk(x[i, :], 4)
                out[i, :] = vals
        """, "4)", "intent.topk(): k = 4 must be at least 1 and at most the extent N of axis 0 (state it with "
                   "requires=[...])")


# ---------------------------------------------------------------------------------------------- jagged rows


J, JE = dims("J JE")


@intent.kernel
def jagged(values: f32[JE, D], offsets: i64[J + 1], total: Out[f32[J, D]], top: Out[f32[J, D]],
           avg: Out[f32[J, D]]):
    for s in parallel(J):
        b = offsets[s]
        e = offsets[s + 1]
        total[s, :] = intent.sum(values[b:e, :], axis=0)
        top[s, :] = intent.max(values[b:e, :] * 2.0, axis=0)
        avg[s, :] = intent.mean(values[b:e, :], axis=0)


def test_jagged_folds_keep_whole_axes() -> None:
    """`values[b:e, :]` reduced along its data-dependent axis: stored whole, each column is a region fold of its
    own (one (segments, columns) workset, a segment's columns in one program); an empty segment gives the
    identity."""
    v = rand(9, 5)
    off = torch.tensor([0, 3, 3, 9])
    args = {"values": v, "offsets": off, "total": torch.empty(3, 5), "top": torch.empty(3, 5),
            "avg": torch.empty(3, 5)}
    got = three_ways(jagged, args, ("total", "top", "avg"), rtol=1e-6, atol=1e-6)
    segs = [v[0:3], v[3:3], v[3:9]]
    np.testing.assert_allclose(got["total"], torch.stack([s.sum(0) for s in segs]).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got["top"][[0, 2]], torch.stack([(segs[i] * 2).amax(0) for i in (0, 2)]).numpy())
    assert (got["top"][1] == -np.inf).all() and np.isnan(got["avg"][1]).all()
    np.testing.assert_allclose(got["avg"][[0, 2]], torch.stack([segs[i].mean(0) for i in (0, 2)]).numpy(),
                               rtol=1e-6, atol=1e-6)
    plan = jagged.explain(v, off, torch.empty(3, 5), torch.empty(3, 5), torch.empty(3, 5))
    assert "workset over (J, D)" in plan and "region fold max" in plan and "ordered for loop" not in plan


def test_jagged_fold_along_a_kept_axis_is_refused(tmp_path) -> None:
    diagnostic(tmp_path, """
        @intent.kernel
        def k(values: f32[E, N], offsets: i64[S + 1], out: Out[f32[S]]):
            for s in parallel(S):
                out[s] = intent.sum(values[offsets[s]:offsets[s + 1], :])
        """, "intent.sum(values", "intent.sum: a jagged subregion `x[b:e, :]` is reduced along its data-dependent "
                                  "axis: write axis=0 (no keepdims)")


@intent.kernel
def jagged_scan(values: f32[JE, D], offsets: i64[J + 1], run: Out[f32[JE, D]], best: Out[f32[JE, D]]):
    for s in parallel(J):
        b = offsets[s]
        e = offsets[s + 1]
        run[b:e, :] = intent.cumsum(values[b:e, :], axis=0)
        best[b:e, :] = intent.cummax(values[b:e, :], axis=0, exclusive=True)


def test_jagged_region_scans_keep_whole_axes() -> None:
    v = rand(7, 4)
    off = torch.tensor([0, 3, 3, 7])
    args = {"values": v, "offsets": off, "run": torch.zeros(7, 4), "best": torch.zeros(7, 4)}
    got = three_ways(jagged_scan, args, ("run", "best"), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["run"], torch.cat([v[0:3].cumsum(0), v[3:7].cumsum(0)]).numpy(), rtol=1e-6,
                               atol=1e-6)
    for lo, hi in ((0, 3), (3, 7)):
        assert (got["best"][lo] == -np.inf).all()
        np.testing.assert_array_equal(got["best"][lo + 1:hi], v[lo:hi - 1].cummax(0).values.numpy())
