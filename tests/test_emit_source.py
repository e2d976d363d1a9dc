"""Emitted Triton source: structure, masks with explicit `other=`, ABI, registry completeness, PTX."""

from __future__ import annotations

import ast
import re

import pytest

import emit_triton
import physical
from emit_triton.abi import ArgKind
from emit_triton.emit import EMIT
from physical.model import OP_CLASSES
from tests import samples as S


def emitted(make):
    return emit_triton.emit(physical.lower(make()))


def jit_functions(source: str) -> list[str]:
    tree = ast.parse(source)
    return [f.name for f in tree.body if isinstance(f, ast.FunctionDef)
            and any("jit" in ast.unparse(d) for d in f.decorator_list)]


def test_every_physical_op_has_an_emitter() -> None:
    assert [name for name, cls in OP_CLASSES.items() if cls not in EMIT and name != "yield"] == []


@pytest.mark.parametrize("make", S.ALL, ids=lambda f: f.__name__)
def test_source_is_one_kernel_with_explicit_masks(make) -> None:
    ek = emitted(make)
    src = ek.source
    ast.parse(src)
    assert src.startswith("import triton\nimport triton.language as tl\n")
    kernels = [n for n in jit_functions(src) if not n.startswith("_")]
    assert kernels == [ek.name]
    assert src.count("tl.program_id(0)") == 1
    for call in re.findall(r"tl\.load\((?:[^()]|\([^()]*(?:\([^()]*\))*[^()]*\))*\)", src):
        if "mask=" in call:
            assert "other=" in call, call
    assert "INDEX_64: tl.constexpr" in src and "pid = pid.to(tl.int64)" in src


def test_abi_lists_pointers_strides_symbols_and_constexprs() -> None:
    ek = emitted(S.softmax)
    kinds = [(a.kind, a.name) for a in ek.args]
    # user names reach the source mangled: p_ for parameters, s_ for shape symbols
    assert kinds == [(ArgKind.TENSOR, "p_x"), (ArgKind.STRIDE, "p_x_stride_0"), (ArgKind.STRIDE, "p_x_stride_1"),
                     (ArgKind.TENSOR, "p_out"), (ArgKind.STRIDE, "p_out_stride_0"),
                     (ArgKind.STRIDE, "p_out_stride_1"), (ArgKind.SYMBOL, "s_M"), (ArgKind.SYMBOL, "s_N")]
    assert [c.name for c in ek.constexprs] == ["BLOCK_I0", "BLOCK_N", "BLOCK_N_LOOPED", "BLOCK_N_CHUNK"]
    env = {"M": 64, "N": 1000}
    assert {c.name: c.expr.evaluate(env) for c in ek.constexprs} == {"BLOCK_I0": 4, "BLOCK_N": 1024,
                                                                      "BLOCK_N_LOOPED": 0, "BLOCK_N_CHUNK": 4096}
    assert ek.grid.evaluate(env) == 16
    assert ek.num_warps.evaluate(env) == 8  # 4 rows x 1024 elements


def test_two_groups_dispatch_on_segment_offsets() -> None:
    ek = emitted(S.two_groups)
    syms = {a.name: a.expr for a in ek.args if a.kind is ArgKind.SYMBOL}
    assert {"seg0_offset", "seg0_length", "seg1_offset", "seg1_length"} <= set(syms)
    assert "if (pid >= seg0_offset) & (pid < seg0_offset + seg0_length):" in ek.source
    assert "if (pid >= seg1_offset) & (pid < seg1_offset + seg1_length):" in ek.source
    env = {"M": 7, "N": 300, "P": 5000, "s": 0}
    assert syms["seg1_offset"].evaluate(env) == syms["seg0_length"].evaluate(env)


def test_softmax_source_reads_like_the_kernel() -> None:
    src = emitted(S.softmax).source
    assert "v_row = tl.load(" in src  # values are named after (mangled) KIR names
    assert "# reduce max" in src and "# reduce sum" in src
    assert 'float("nan")' in src  # max propagates NaN explicitly
    assert "tl.div_rn(" in src  # IEEE division


def test_atomics_keep_order_and_scope() -> None:
    src = emitted(S.histogram).source
    assert re.search(r'tl\.atomic_add\(.*mask=.*sem="acq_rel", scope="gpu"\)', src)


def test_rng_offsets_keep_their_kir_width() -> None:
    src = emitted(S.dropout).source
    assert re.search(r"tl\.rand\(v_seed\w*, tl\.cast\(\w+, tl\.int64\)\)", src)


def test_exclusive_scan_uses_a_generated_combine_for_floats() -> None:
    src = emitted(lambda: S.cumsum_rows(exclusive=True)).source
    # floats: no `inclusive - x`; the exclusive prefixes come from even/odd halving, never a per-element scan
    assert "tl.join(" in src and "tl.associative_scan(" not in src
    src_int = emitted(lambda: S.cumsum_rows(exclusive=True, dtype=S.DType.i32)).source
    assert "tl.cumsum(" in src_int  # integer sums: inclusive minus own is exact


@pytest.mark.parametrize("make,args", [
    (S.softmax, {"M": 4, "N": 100}),
    (S.segment_sum, {"S": 3, "E": 10}),
    (S.recurrence, {"C": 3, "T": 5}),
])
def test_source_compiles_to_ptx(make, args) -> None:
    import torch

    k = make()
    tensors = {}
    for p in k.params:
        t = p.type
        shape = tuple(d.evaluate(args) for d in t.shape) if hasattr(t, "role") else ()
        tensors[p.name] = torch.zeros(shape, dtype=t.dtype.torch) if hasattr(t, "role") else 1.0
    if "offsets" in tensors:
        tensors["offsets"] = torch.tensor([0, 2, 5, 10])
    text = emit_triton.ptx(k, tensors, arch=90)
    assert ".entry" in text


_REGION_SCAN_I8 = """kernel scan_i8(offs: in i64[S + 1], vals: in i8[E], out: out i8[E]) symbols(S, E) {
  parallel (%s: i64) in (S) {
    %b: i64 = load %offs[%s]
    %one: i64 = constant 1 : i64
    %s1: i64 = binary add %s, %one
    %e: i64 = load %offs[%s1]
    region_scan sum %out[%b:%e] = %vals[%b:%e]
    yield
  }
  yield
}"""

_LOOP_INDEX_BITS = """kernel loop_bits(out: out u64[N]) symbols(N) {
  parallel (%i: i64) in (N) {
    %0: i64 = constant 0 : i64
    %1: i64 = constant 1 : i64
    %2: i64 = constant 4 : i64
    %z: u64 = constant 0 : u64
    %r: u64 = for (%j: i64, %c: u64) in range(%0, %2, %1) init(%z) {
      %b: u64 = bitcast %j to u64
      %d: u64 = binary add %c, %b
      yield %d
    }
    store %out[%i] = %r
    yield
  }
  yield
}"""

_XCHG_F32 = """kernel xchg(acc: inout f32[K], out: out f32[K]) symbols(K) {
  parallel (%i: i64) in (K) {
    %v: f32 = constant -2.5 : f32
    %old: f32 = atomic xchg %acc[%i], %v order=acq_rel
    store %out[%i] = %old
    yield
  }
  yield
}"""


@pytest.mark.parametrize("text,args", [
    # tl.cumsum/tl.sum widen 8-bit sums to int32: the chunk loop's carry changed type ('Loop-carried variable
    # carry has initial type int8 but is re-assigned to int32'); they now keep the accumulator's dtype
    (_REGION_SCAN_I8, {"offs": [0, 3, 6], "vals": ("int8", 6), "out": ("int8", 6)}),
    # range() over literal bounds gives an int32 induction variable on the GPU: the i64 index's bitcast
    # failed ('Cannot bitcast data-type of size 32 to data-type of size 64')
    (_LOOP_INDEX_BITS, {"out": ("uint64", 3)}),
    # float xchg goes through an int32 pointer (the interpreter has none for floats): the GPU takes it too
    (_XCHG_F32, {"acc": ("float32", 3), "out": ("float32", 3)}),
], ids=["region_scan_i8", "for_index_bitcast", "xchg_f32"])
def test_narrow_sums_and_loop_indices_keep_their_kir_dtype_on_the_gpu(text: str, args: dict) -> None:
    import torch

    from kir.text import parse_kernel

    tensors = {n: torch.tensor(a) if isinstance(a, list) else torch.zeros(a[1], dtype=getattr(torch, a[0]))
               for n, a in args.items()}
    k = parse_kernel(text)
    src = emit_triton.source(k, tensors)
    if "region_scan" in text:
        assert "dtype=tl.int8)" in src
    if "xchg" in text:
        assert "tl.atomic_xchg((" in src and ".to(tl.pointer_type(tl.int32))" in src
    assert ".entry" in emit_triton.ptx(k, tensors, arch=90)
