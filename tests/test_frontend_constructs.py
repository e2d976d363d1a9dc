"""Each construct of the kernel body language (SPEC §4) and the KIR it becomes."""

from __future__ import annotations

import torch

import kir
from kir import (
    Alloc,
    Binary,
    BinaryFn,
    Broadcast,
    Cast,
    Compare,
    Constant,
    DimValue,
    DType,
    DynSlice,
    For,
    Gather,
    If,
    InitMode,
    Load,
    Parallel,
    Reduce,
    RegionFold,
    RegionScan,
    Reshape,
    Scatter,
    Select,
    Slice,
    SliceOp,
    Store,
    Unary,
    UnaryFn,
    While,
)
from tests.frontend_support import build, kernel, op_names, ops


def _defining(k: kir.Kernel, v: kir.Value) -> kir.Op:
    return next(o for o in k.walk() if v in o.results)


# ---------------------------------------------------------------------------------------------- assignment


def test_assignment_unpacking_and_names(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M]]):
            for i in parallel(M):
                row = x[i, :]
                hi, lo = intent.max(row), intent.min(row)
                (a, b), c = (hi, lo), 2.0
                out[i] = a - b * c
    """)
    loads = ops(k, Load)
    assert loads[0].results[0].name == "row"
    assert ops(k, Reduce)[1].results[0].name == "lo"
    muls = [o for o in ops(k, Binary) if o.fn is BinaryFn.mul]
    assert _defining(k, muls[0].rhs).value == 2.0  # the weak 2.0 met f32


def test_augmented_assignment_of_names_and_elements(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: InOut[f32[N]]):
            for n in parallel(N):
                v = x[n]
                v *= 3
                out[n] += v
    """)
    assert [o.fn for o in ops(k, Binary)] == [BinaryFn.mul, BinaryFn.add]
    assert [o.src.name for o in ops(k, Load)] == ["x", "out"]
    (st,) = ops(k, Store)
    assert st.dst.name == "out"


def test_annotated_assignment_gives_a_weak_value_its_dtype(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(out: Out[f16[N]]):
            for n in parallel(N):
                z: f16 = 1.5
                out[n] = z
    """)
    (c,) = ops(k, Constant)
    assert (c.value, c.dtype) == (1.5, DType.f16)


# ---------------------------------------------------------------------------------------------- loops


def test_parallel_over_two_axes(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M, N]]):
            for i, j in parallel(M, N):
                out[i, j] = x[i, j] + 1
    """)
    (par,) = ops(k, Parallel)
    assert [str(d) for d in par.domain] == ["M", "N"]
    assert [a.type for a in par.body.args] == [kir.scalar(DType.i64)] * 2


def test_parallel_over_a_shape_tuple(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M, N]]):
            for i, j in parallel(x.shape):
                out[i, j] = x[i, j]
    """)
    assert [str(d) for d in ops(k, Parallel)[0].domain] == ["M", "N"]


def test_range_forms_and_loop_carried_values(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M]]):
            for i in parallel(M):
                acc = f32(0.0)
                cnt = 0
                for t in range(1, N, 2):
                    acc = acc + x[i, t]
                    cnt += 1
                out[i] = acc / cnt
    """)
    (loop,) = ops(k, For)
    assert [_defining(k, v).value for v in (loop.start, loop.step)] == [1, 2]
    assert isinstance(_defining(k, loop.stop), DimValue)
    assert [v.type for v in loop.results] == [kir.scalar(DType.f32), kir.scalar(DType.i64)]
    assert [v.name for v in loop.results] == ["acc", "cnt"]
    # the weak count meets the strong f32 accumulator: an explicit cast
    assert any(isinstance(o, Cast) and o.dtype == DType.f32 for o in k.walk())


def test_a_weak_carry_takes_the_type_its_updates_give_it(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f16[M, N], out: Out[f16[M, N]]):
            for i in parallel(M):
                acc = 0.0
                for t in range(N):
                    acc = acc + x[i, :]
                out[i, :] = acc
    """)
    (loop,) = ops(k, For)
    assert loop.results[0].type == kir.TensorType(DType.f16, (kir.DSym("N"),))
    init = _defining(k, loop.inits[0])
    assert isinstance(init, Broadcast)
    assert _defining(k, init.x).dtype == DType.f16


def test_while_with_carried_values(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: i32[N], out: Out[i32[N]]):
            for n in parallel(N):
                v = x[n]
                steps = 0
                while v > 1:
                    v = intent.where(v % 2 == 0, v // 2, 3 * v + 1)
                    steps += 1
                out[n] = steps
    """)
    (loop,) = ops(k, While)
    assert [v.name for v in loop.results] == ["v", "steps"]
    assert loop.cond.yielded[0].type == kir.scalar(DType.pred)
    assert [a.type for a in loop.cond.args] == [kir.scalar(DType.i32), kir.scalar(DType.i64)]


def test_if_else_results(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                v = x[n]
                w = 1.0
                if v > 0:
                    r = v * 2
                else:
                    r = -v
                    w = 3.0
                out[n] = r + w
    """)
    (branch,) = ops(k, If)
    assert [v.name for v in branch.results] == ["r", "w"]
    assert [v.type for v in branch.results] == [kir.scalar(DType.f32)] * 2
    assert branch.then_.yielded[1] != branch.else_.yielded[1]


def test_if_with_effects_and_no_else(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                if x[n] > 0:
                    out[n] = x[n]
    """)
    (branch,) = ops(k, If)
    assert branch.results == ()
    assert any(isinstance(o, Store) for o in branch.then_.ops)
    assert branch.else_.ops[-1].NAME == "yield"


def test_elif_chains_and_logical_operators(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[i32[N]]):
            for n in parallel(N):
                v = x[n]
                if v > 0 and not intent.isnan(v):
                    c = 1
                elif v < 0 or v == 0:
                    c = -1
                else:
                    c = 0
                out[n] = c
    """)
    assert len(ops(k, If)) == 2
    assert {o.fn for o in ops(k, Binary)} >= {BinaryFn.and_, BinaryFn.or_}
    assert any(isinstance(o, Unary) and o.fn is UnaryFn.not_ for o in k.walk())
    # both branches assign weak integers: the result stays weak (i64) and takes i32 where it is stored
    assert ops(k, If)[0].results[0].type == kir.scalar(DType.i64)
    assert any(isinstance(o, Cast) and o.dtype == DType.i32 for o in k.walk())


def test_static_if_on_a_const_parameter_keeps_one_branch(tmp_path):
    kobj = kernel(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]], square: const[bool] = False):
            for n in parallel(N):
                if square:
                    out[n] = x[n] * x[n]
                else:
                    out[n] = x[n]
    """)
    assert "Binary" not in op_names(kobj.kir) and "If" not in op_names(kobj.kir)
    sq = kobj.specialize_with(consts={"square": True})
    assert "Binary" in op_names(sq) and sq.consts == (("square", True),)


# ---------------------------------------------------------------------------------------------- indexing


def test_indexing_with_ints_negative_ints_dims_and_loop_indices(tmp_path):
    k = build(tmp_path, """
        @intent.kernel(requires=[N >= 4])
        def k(x: f32[M, N], out: Out[f32[M]]):
            for i in parallel(M):
                out[i] = x[i, 0] + x[i, -1] + x[i, N - 2] + x[i, 1:3][0]
    """)
    loads = ops(k, Load)
    second = [_defining(k, ld.index[1]) for ld in loads[:3]]
    assert isinstance(second[0], Constant) and second[0].value == 0
    assert [str(d.dim) for d in second[1:]] == ["N - 1", "N - 2"]
    assert loads[3].index[1] == Slice(kir.DConst(1), kir.DConst(3))
    assert "SliceOp" in op_names(k) and "Reshape" in op_names(k)


def test_runtime_scalar_and_data_indices_become_gathers(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], idx: i32[M], j: i64, out: Out[f32[M, N]], o2: Out[f32[M]]):
            for i in parallel(M):
                out[i, :] = x[idx[i], :]
                o2[i] = x[i, j]
    """)
    g1, g2 = ops(k, Gather)
    assert g1.results[0].type.shape == (kir.DSym("N"),) and "Iota" in op_names(k)
    assert g2.results[0].type.shape == ()


def test_integer_tensor_indices_gather(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[N], idx: i32[K], out: Out[f32[K]]):
            out[:] = x[idx]
    """)
    (g,) = ops(k, Gather)
    assert g.results[0].type.shape == (kir.DSym("K"),)


def test_affine_index_expressions_load_and_the_verifier_proves_bounds(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[S + 1], out: Out[f32[S]]):
            for s in parallel(S):
                out[s] = x[s + 1] - x[s]
    """)
    assert "Gather" not in op_names(k) and len(ops(k, Load)) == 2


def test_stepped_and_static_slices(tmp_path):
    k = build(tmp_path, """
        @intent.kernel(requires=[N == 2 * K])
        def k(x: f32[N], out: Out[f32[K]]):
            out[:] = x[::2]
    """)
    (sl,) = ops(k, SliceOp)
    assert sl.steps == (2,)


def test_stores_to_slices_and_gathered_positions(tmp_path):
    k = build(tmp_path, """
        @intent.kernel(requires=[M >= 2])
        def k(x: f32[N], idx: i32[N], out: Out[f32[N]], o2: Out[f32[M, N]]):
            for n in parallel(N):
                out[idx[n]] = x[n]
            o2[0, :] = 0.0
            o2[1:2, :] = x
    """)
    (sc,) = ops(k, Scatter)
    assert sc.unique is False
    st = ops(k, Store)
    assert [type(o).__name__ for o in st] == ["Store", "Store"]
    assert isinstance(_defining(k, st[0].value), Broadcast)


def test_intent_store_states_uniqueness(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[N], perm: i32[N], out: Out[f32[N]], o2: Out[f32[N]]):
            for n in parallel(N):
                intent.store(out, perm[n], x[n], unique=True)
                intent.store(o2, n, x[n])
    """)
    (sc,) = ops(k, Scatter)
    (st,) = ops(k, Store)
    assert sc.unique and st.unique


def test_runtime_slices_reduced_become_region_folds_with_a_map(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(v: f32[E], offs: i64[S + 1], out: Out[f32[S]]):
            for s in parallel(S):
                b = offs[s]
                e = offs[s + 1]
                out[s] = intent.sum(intent.abs(v[b:e]) * 2) + intent.mean(v[b:e])
    """)
    f1, f2 = ops(k, RegionFold)
    assert f1.map is not None and f2.map is None
    assert [type(o).__name__ for o in f1.map.ops] == ["Unary", "Constant", "Binary", "Yield"]
    assert isinstance(f1.index[0], DynSlice)


def test_region_scan_store(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(v: f32[E], offs: i64[S + 1], out: Out[f32[E]]):
            for s in parallel(S):
                out[offs[s]:offs[s + 1]] = intent.cumsum(v[offs[s]:offs[s + 1]], reverse=True)
    """)
    (rs,) = ops(k, RegionScan)
    assert rs.reverse and not rs.exclusive and rs.dst.name == "out" and rs.src.name == "v"


# ---------------------------------------------------------------------------------------------- typing


def test_weak_numbers_take_the_dtype_of_the_tensor_they_meet(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f16[N], p: f32, out: Out[f16[N]], o2: Out[f32[N]]):
            for n in parallel(N):
                out[n] = x[n] * 2
                o2[n] = 1.0 - p
    """)
    consts = ops(k, Constant)
    assert [(c.value, c.dtype) for c in consts] == [(2.0, DType.f16), (1.0, DType.f32)]


def test_dims_as_values_are_weak_ints(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M]], o2: Out[i32[M]]):
            for i in parallel(M):
                out[i] = intent.sum(x[i, :]) / N
                o2[i] = N - i
    """)
    dims = ops(k, DimValue)
    assert [d.dtype for d in dims] == [DType.i64, DType.i64]
    # N - i is weak (a dim and a loop index): it becomes i32 only where it is stored
    assert [c.dtype for c in ops(k, Cast)] == [DType.f32, DType.i32]


def test_broadcasting_follows_numpy_rules(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], w: f32[N], c: f32[M, 1], out: Out[f32[M, N]]):
            out[:, :] = x * w + c
    """)
    bs = ops(k, Broadcast)
    assert [b.dims for b in bs] == [(1,), (0, 1)]


def test_comparisons_give_pred_and_conditional_expressions_select(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                v = x[n]
                out[n] = v if 0 < v < 1 else 0.0
    """)
    assert len(ops(k, Compare)) == 2 and len(ops(k, Select)) == 1


def test_to_shape_and_typed_constants(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], out: Out[i32[M]]):
            for i in parallel(M):
                rows, cols = x.shape
                out[i] = (intent.sum(x[i, :]) * cols).to(i32) + i32(7)
    """)
    assert any(isinstance(o, Cast) and o.dtype == DType.i32 for o in k.walk())
    assert any(isinstance(o, Constant) and o.value == 7 and o.dtype == DType.i32 for o in k.walk())


def test_every_operator(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(a: i32[N], b: i32[N], f: f32[N], out: Out[i32[N]], o2: Out[f32[N]], o3: Out[pred[N]]):
            for n in parallel(N):
                x = a[n]
                y = b[n]
                out[n] = ((x + y - x * y) // 3 % 5 ** 2 & 7 | 8 ^ 9) << 1 >> 1
                o2[n] = -f[n] / 2 + +f[n] ** 2 + f[n] ** 2.5
                o3[n] = (~(x != y)) & (x <= y) | (x >= y) ^ (x < y)
    """)
    fns = {o.fn for o in ops(k, Binary)}
    assert fns >= {BinaryFn.add, BinaryFn.sub, BinaryFn.mul, BinaryFn.floordiv, BinaryFn.mod, BinaryFn.pow,
                   BinaryFn.and_, BinaryFn.or_, BinaryFn.xor, BinaryFn.shl, BinaryFn.shr, BinaryFn.div}
    assert {o.fn.value for o in ops(k, Unary)} >= {"neg", "not"}
    # 5 ** 2 folded at compile time
    assert any(isinstance(o, Constant) and o.value == 25 for o in k.walk())
    # f ** 2 is a multiplication (exact); f ** 2.5 the one float pow
    assert len([o for o in ops(k, Binary) if o.fn is BinaryFn.pow and o.results[0].type.dtype == DType.f32]) == 1


def test_small_integer_float_powers_are_multiplications(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(f: f32[N], o: Out[f32[N]]):
            for n in parallel(N):
                o[n] = f[n] ** 3 + f[n] ** -2 + intent.pow(f[n], 4.0) + f[n] ** 1 + f[n] ** 5 + f[n] ** 0
    """)
    fns = [o.fn for o in ops(k, Binary)]
    # 3: two muls; -2: a mul and a div; 4: two muls; 1: nothing; 5 and 0: pow (5 is beyond the limit)
    assert fns.count(BinaryFn.pow) == 2
    assert fns.count(BinaryFn.div) == 1
    assert fns.count(BinaryFn.mul) == 5


def test_small_integer_powers_of_whole_tensors_are_multiplications(tmp_path):
    """`y ** 3` of a whole parameter at top level (a reference, not yet a loaded value) was a C `pow`, one
    rounding, where `y[i, :] ** 3` was two rounded multiplications: f16 -1.433 ** 3 + -1.433 gave -4.371 and
    -4.375 (source campaign seed 9800041, case 57)."""
    kobj = kernel(tmp_path, """
        @intent.kernel
        def k(y: f16[M, N], o: Out[f16[M, N]], p: Out[f16[M, N]]):
            o[:, :] = (y ** 3) + y
            p[:, :] = intent.pow(y, -2) + y ** 0.5
    """)
    fns = [o.fn for o in ops(kobj.kir, Binary)]
    assert fns.count(BinaryFn.pow) == 1  # only the 0.5
    assert fns.count(BinaryFn.div) == 1 and fns.count(BinaryFn.mul) == 3
    y = torch.tensor([[-1.433, 2.5, 0.3]], dtype=torch.float16)
    o, p = torch.empty_like(y), torch.empty_like(y)
    kobj(y, o, p)
    assert o.tolist() == ((y * y) * y + y).tolist() and o[0, 0].item() == -4.375


# ---------------------------------------------------------------------------------------------- helpers


def test_func_helpers_are_inlined_at_each_call(tmp_path):
    k = build(tmp_path, """
        @intent.func
        def axpy(a, x, y=1.0):
            t = a * x
            return t + y

        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                out[n] = axpy(2.0, x[n]) + axpy(3.0, x[n], y=x[n])
    """)
    assert len([o for o in ops(k, Binary) if o.fn is BinaryFn.mul]) == 2
    assert {o.loc.line for o in ops(k, Binary) if o.fn is BinaryFn.mul} == {8}  # the helper's own line


def test_func_helpers_may_write_memory(tmp_path):
    k = build(tmp_path, """
        @intent.func
        def put(dst, i, value):
            dst[i] = value

        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                put(out, n, x[n])
    """)
    assert len(ops(k, Store)) == 1


def test_local_buffers_are_allocs_when_written(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            buf = intent.zeros((N,), f32)
            tmp = intent.zeros((N,), f32)
            for n in parallel(N):
                buf[n] = x[n] * 2
            out[:] = buf + tmp
    """)
    (al,) = ops(k, Alloc)
    assert al.init is InitMode.full and al.fill == 0.0 and al.results[0].name == "buf"
    assert any(isinstance(o, Broadcast) for o in k.walk())  # tmp is a value: a broadcast constant


def test_const_int_parameters_are_symbols_generically_and_constants_when_specialised(tmp_path):
    kobj = kernel(tmp_path, """
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]], R: const[int]):
            for n in parallel(N):
                acc = f32(0.0)
                for r in range(R):
                    acc = acc + x[n]
                out[n] = acc
    """)
    assert kobj.kir.symbols == ("N", "R")
    s4 = kobj.specialize({"x": torch.zeros(3), "R": 4})
    assert s4.symbols == ("N",) and s4.consts == (("R", 4),)
    (loop,) = ops(s4, For)
    assert _defining(s4, loop.stop).value == 4
    assert kobj.specialize({"x": torch.zeros(3), "R": 4}) is s4
    assert kobj.specialize({"x": torch.zeros(3), "R": 5}) is not s4


def test_dtype_variables_reach_scalars_and_casts(tmp_path):
    kobj = kernel(tmp_path, """
        @intent.kernel
        def k(x: T[N], scale: T, out: Out[f32[N]]):
            for n in parallel(N):
                out[n] = (x[n] * scale + T(1)).to(f32)
    """)
    assert kobj.kir.param("scale").type == kir.scalar(kobj.kir.dtype_vars[0])
    spec = kobj.specialize({"x": torch.zeros(2, dtype=torch.bfloat16), "scale": 2.0})
    assert spec.param("scale").type == kir.scalar(DType.bf16)


def test_reshape_value_subscripts(tmp_path):
    k = build(tmp_path, """
        @intent.kernel
        def k(x: f32[M, N], out: Out[f32[M]]):
            for i in parallel(M):
                out[i] = intent.sum(x[i, :], keepdims=True)[0]
    """)
    assert len(ops(k, Reshape)) == 1


def test_string_annotations_and_kernels_made_inside_functions(tmp_path):
    import intent as intent_pkg

    path = tmp_path / "future_kernels.py"
    path.write_text('''from __future__ import annotations

import intent
from intent import Out, dims, f32, parallel


def make(scale):
    N = dims("N")

    @intent.kernel(requires=[N <= 1024])
    def scaled(x: f32[N], out: Out[f32[N]]):
        for n in parallel(N):
            out[n] = x[n] * scale
    return scaled


k = make(3)
''')
    built = intent_pkg.kernels_in_file(str(path))["k"].kir
    assert str(built.param("x").type) == "in f32[N]" and [str(p) for p in built.requires] == ["N <= 1024"]
    (c,) = ops(built, Constant)
    assert (c.value, c.dtype) == (3.0, DType.f32)
    assert (c.loc.line, c.loc.col) == (13, 29)  # `scale` in the indented source, at its real column
