"""Every `intent.*` operation spelling lowers to its KIR op; together they cover every KIR op class."""

from __future__ import annotations

from pathlib import Path

import pytest

import intent
import kir
from kir import (
    OP_CLASSES,
    Alloc,
    Atomic,
    AtomicCAS,
    AtomicKind,
    Binary,
    BinaryFn,
    Bitcast,
    Concat,
    Dot,
    DType,
    ExpandDims,
    Histogram,
    Iota,
    MemOrder,
    Random,
    Reduce,
    ReduceKind,
    Reshape,
    Scan,
    ScanKind,
    Squeeze,
    Transpose,
    Unary,
    UnaryFn,
)
from kir.frontend import CALLS
from tests.frontend_support import build, ops

SIGNATURE = ("x: f32[M, N], y: f32[N], iv: i32[N], h: f16[M, K], g: f16[K, N], b3: f32[B, M, K], c3: f32[B, K, N], "
             "seed: i64, out: Out[f32[M, N]], o1: Out[f32[N]], oi: Out[i32[N]], ol: Out[i64[N]], ob: Out[pred[N]], "
             "ou: Out[u32[N]], cnt: InOut[i32[N]], om: Out[f32[M]], o3: Out[f32[B, M, N]], ot: Out[f32[N, M]]")


def _body(tmp_path: Path, *lines: str) -> kir.Kernel:
    src = "@intent.kernel\ndef k(" + SIGNATURE + "):\n" + "".join(f"    {ln}\n" for ln in lines)
    return build(tmp_path, src)


UNARY = [fn for fn in UnaryFn if fn is not UnaryFn.not_]


@pytest.mark.parametrize("fn", UNARY, ids=[f.value for f in UNARY])
def test_unary_spellings(tmp_path, fn: UnaryFn):
    store = "ob[:]" if fn in (UnaryFn.isnan, UnaryFn.isinf) else "o1[:]"
    k = _body(tmp_path, f"{store} = intent.{fn.value}(y)")
    (u,) = ops(k, Unary)
    assert u.fn is fn


@pytest.mark.parametrize("name,fn", [("maximum", BinaryFn.maximum), ("minimum", BinaryFn.minimum),
                                     ("pow", BinaryFn.pow)])
def test_binary_spellings(tmp_path, name: str, fn: BinaryFn):
    # 2.5: a small integer exponent is written as multiplications (test_frontend_constructs)
    k = _body(tmp_path, f"o1[:] = intent.{name}(y, 2.5)")
    (bop,) = ops(k, Binary)
    assert bop.fn is fn


def test_where_and_bitcast(tmp_path):
    k = _body(tmp_path, "o1[:] = intent.where(y > 0, y, 0.0)", "oi[:] = intent.bitcast(y, i32)")
    assert len(ops(k, kir.Select)) == 1
    (bc,) = ops(k, Bitcast)
    assert bc.dtype == DType.i32


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "argmax", "argmin"])
def test_builtin_reductions_with_axis_and_keepdims(tmp_path, name: str):
    store = "ol[:]" if name.startswith("arg") else "o1[:]"
    k = _body(tmp_path, f"{store} = intent.{name}(x, axis=0)", f"om[:] = intent.{name}(x, axis=-1, keepdims=True)"
              f"[:, 0]{'.to(f32)' if name.startswith('arg') else ''}")
    r1, r2 = ops(k, Reduce)
    assert r1.kind is ReduceKind(name) and r1.axes == (0,) and not r1.keepdims
    assert r2.axes == (1,) and r2.keepdims
    if name.startswith("arg"):
        assert r1.results[0].type.dtype == DType.i64


def test_any_all_and_mean(tmp_path):
    k = _body(tmp_path, "ob[:] = intent.any(x > 0, axis=0) | intent.all(x < 1, axis=0)",
              "o1[:] = intent.mean(x, axis=0)")
    kinds = [r.kind for r in ops(k, Reduce)]
    assert kinds == [ReduceKind.any, ReduceKind.all, ReduceKind.sum]
    assert any(isinstance(o, Binary) and o.fn is BinaryFn.div for o in k.walk())


def test_reduce_over_all_axes_and_tuples_of_axes(tmp_path):
    k = _body(tmp_path, "om[0] = intent.sum(x) + intent.max(b3, axis=(0, 2))[0]")
    r1, r2 = ops(k, Reduce)
    assert r1.axes == (0, 1) and r2.axes == (0, 2)


def test_sum_accumulator_dtype(tmp_path):
    k = _body(tmp_path, "om[:] = intent.sum(h, axis=1, acc=f32).to(f32)")
    (r,) = ops(k, Reduce)
    assert r.acc_dtype == DType.f32 and r.results[0].type.dtype == DType.f16


def test_custom_reduce_and_scan(tmp_path):
    src = """
        @intent.combine
        def add_pair(a, b):
            return a[0] + b[0], a[1] + b[1]

        @intent.combine
        def mul(a, b):
            return a * b

        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M, N]], om: Out[f32[M]]):
            s, c = intent.reduce((x, intent.ones_like(x)), add_pair, axis=1, identity=(0.0, 0.0))
            om[:] = s / c
            out[:, :] = intent.scan(x, mul, axis=1, reverse=True, exclusive=True, identity=1)
    """
    k = build(tmp_path, src)
    (red,) = ops(k, Reduce)
    assert red.kind is ReduceKind.custom and red.identity == (0.0, 0.0) and red.axes == (1,)
    (sc,) = ops(k, Scan)
    assert sc.kind is ScanKind.custom and sc.reverse and sc.exclusive and sc.identity == (1.0,)
    assert len(sc.combine.args) == 2


@pytest.mark.parametrize("name,kind", [("cumsum", ScanKind.sum), ("cumprod", ScanKind.prod),
                                       ("cummax", ScanKind.max), ("cummin", ScanKind.min)])
def test_builtin_scans(tmp_path, name: str, kind: ScanKind):
    k = _body(tmp_path, f"out[:, :] = intent.{name}(x, axis=0, exclusive=True)")
    (sc,) = ops(k, Scan)
    assert (sc.kind, sc.axis, sc.exclusive, sc.reverse) == (kind, 0, True, False)


def test_dot_forms(tmp_path):
    k = _body(tmp_path, "out[:, :] = intent.dot(h, g)", "o3[:, :, :] = intent.dot(b3, c3, precision='tf32')",
              "om[:] = intent.dot(x, y)", "om[:] = intent.dot(y, x.T)", "om[0] = intent.dot(y, y)")
    d = ops(k, Dot)
    assert [(o.lhs_batch, o.lhs_contract, o.rhs_contract) for o in d] == [
        ((), (1,), (0,)), ((0,), (2,), (1,)), ((), (1,), (0,)), ((), (0,), (0,)), ((), (0,), (0,))]
    assert d[1].precision is kir.Precision.tf32 and d[0].acc_dtype == DType.f32


def test_einsum_contracts_and_permutes(tmp_path):
    k = _body(tmp_path, "ot[:, :] = intent.einsum('mk,kn->nm', h, g)",
              "o3[:, :, :] = intent.einsum('bmk,bkn->bmn', b3, c3)")
    d = ops(k, Dot)
    assert d[1].lhs_batch == (0,) and d[1].rhs_batch == (0,)
    (tr,) = ops(k, Transpose)
    assert tr.perm == (1, 0)


def test_histogram(tmp_path):
    k = _body(tmp_path, "cnt[:] = intent.histogram(iv, N)")
    (hist,) = ops(k, Histogram)
    assert str(hist.bins) == "N"


@pytest.mark.parametrize("name,kind", [("atomic_add", AtomicKind.add), ("atomic_max", AtomicKind.max),
                                       ("atomic_min", AtomicKind.min), ("atomic_and", AtomicKind.and_),
                                       ("atomic_and_", AtomicKind.and_), ("atomic_or_", AtomicKind.or_),
                                       ("atomic_xor", AtomicKind.xor), ("atomic_xchg", AtomicKind.xchg)])
def test_atomics_return_the_old_value(tmp_path, name: str, kind: AtomicKind):
    k = _body(tmp_path, "for n in parallel(N):", f"    oi[n] = intent.{name}(cnt, iv[n], 1, order='relaxed')")
    (at,) = ops(k, Atomic)
    assert at.kind is kind and at.order is MemOrder.relaxed and at.results[0].type == kir.scalar(DType.i32)


def test_atomic_cas_and_tuple_indices(tmp_path):
    k = _body(tmp_path, "for n in parallel(N):", "    oi[n] = intent.atomic_cas(cnt, (n,), 0, 1)",
              "    intent.atomic_add(out, (0, n), y[n])")
    (cas,) = ops(k, AtomicCAS)
    assert cas.order is MemOrder.acq_rel
    assert len(ops(k, Atomic)[0].indices) == 2


@pytest.mark.parametrize("name,dtype", [("rand", DType.f32), ("randn", DType.f32), ("randint", DType.u32)])
def test_random(tmp_path, name: str, dtype: DType):
    store = "ou[n]" if dtype == DType.u32 else "o1[n]"
    k = _body(tmp_path, "for n in parallel(N):", f"    {store} = intent.{name}(seed, n)")
    (r,) = ops(k, Random)
    assert r.results[0].type == kir.scalar(dtype)


def test_random_with_a_tensor_offset(tmp_path):
    k = _body(tmp_path, "o1[:] = intent.rand(seed, intent.arange(N))")
    (r,) = ops(k, Random)
    assert r.results[0].type.shape == (kir.DSym("N"),)


def test_creation_spellings(tmp_path):
    k = _body(tmp_path, "o1[:] = intent.arange(N) + intent.arange(2, N + 2, dtype=f32)",
              "out[:, :] = intent.zeros((M, N)) + intent.ones(x.shape, f32) + intent.full((M, N), 2.0)",
              "o1[:] += intent.zeros_like(y) + intent.ones_like(y) + intent.full_like(y, 3.0)")
    assert len(ops(k, Iota)) == 2
    assert "Alloc" not in {type(o).__name__ for o in k.walk()}


def test_buffer_creation(tmp_path):
    k = _body(tmp_path, "acc = intent.empty((N,), i32)", "tot = intent.full((N,), 5, i32)",
              "ones = intent.ones_like(y)", "for n in parallel(N):", "    acc[n] = iv[n]", "    tot[n] += acc[n]",
              "    ones[n] = 2.0", "oi[:] = tot")
    allocs = ops(k, Alloc)
    assert [(a.init.value, a.fill, a.dtype) for a in allocs] == [("empty", 0, DType.i32), ("full", 5, DType.i32),
                                                                 ("full", 1.0, DType.f32)]


def test_layout_spellings(tmp_path):
    k = _body(tmp_path, "out[:, :] = intent.broadcast_to(y, (M, N))",
              "ot[:, :] = intent.transpose(x) + intent.permute(x, (1, 0))",
              "o1[:] = intent.reshape(intent.expand_dims(y, 0), (N,)) + intent.squeeze(intent.expand_dims(y, -1), 1)",
              "om[:] = intent.reshape(x, (-1, N))[:, 0]",
              "o1[:] = intent.concat((y[0:1], y[1:N]), axis=0)")
    names = {type(o).__name__ for o in k.walk()}
    assert {"Broadcast", "Transpose", "Reshape", "ExpandDims", "Squeeze", "Concat"} <= names
    assert len(ops(k, Transpose)) == 2 and len(ops(k, ExpandDims)) == 2 and len(ops(k, Squeeze)) == 1
    assert len(ops(k, Concat)) == 1 and len(ops(k, Reshape)) >= 2


def test_every_spelling_has_a_lowering_and_every_lowering_a_spelling():
    spellings = set(intent.SPELLINGS) - {"parallel"}
    assert spellings == set(CALLS)


def test_the_spellings_cover_every_kir_op_class(tmp_path):
    """Each KIR op class is produced by some kernel written in the Python surface."""
    corpus = [
        _body(tmp_path, "out[:, :] = intent.where(x > 0, x, 0.0) - intent.exp(x)", "oi[:] = intent.bitcast(y, i32)",
              "o1[:] = intent.sum(x, axis=0) + N + intent.arange(N)",
              "o1[0:1] = y[::2][0:1]",
              "ot[:, :] = intent.transpose(intent.reshape(x, (M, N)))",
              "o1[:] = intent.concat((y[0:1], intent.squeeze(intent.expand_dims(y, 0), 0)[1:N]))",
              "out[:, :] = intent.dot(h, g) + intent.cumsum(x) + intent.sort(x) + y",
              "cnt[:] = intent.histogram(iv, N)",
              "buf = intent.zeros((N,), f32)",
              "for n in parallel(N):",
              "    ob[n] = intent.rand(seed, n) > 0.5",
              "    buf[iv[n]] = y[iv[n]]",
              "    oi[n] = intent.atomic_add(cnt, iv[n], 1) + intent.atomic_cas(cnt, iv[n], 0, 1)",
              "    t = 0",
              "    while t < 3:",
              "        t += 1",
              "    for r in range(N):",
              "        if y[r] > 0:",
              "            t = t + 1",
              "    oi[n] += t",
              "o1[:] = buf"),
        build(tmp_path, """
            @intent.kernel
            def seg(v: f32[E], offs: i64[S + 1], out: Out[f32[S]], sc: Out[f32[E]]):
                for s in parallel(S):
                    out[s] = intent.sum(v[offs[s]:offs[s + 1]])
                    sc[offs[s]:offs[s + 1]] = intent.cumsum(v[offs[s]:offs[s + 1]])
        """),
    ]
    produced = {type(o) for k in corpus for o in k.walk()}
    missing = {name for name, cls in OP_CLASSES.items() if cls not in produced}
    assert not missing, f"KIR ops no spelling produced: {sorted(missing)}"
