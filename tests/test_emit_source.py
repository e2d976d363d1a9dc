"""Emitted Triton source: structure, masks with explicit `other=`, ABI, registry completeness, PTX."""

from __future__ import annotations

import ast
import re

import pytest

import emit_triton
import physical
from emit_triton.abi import ArgKind
from emit_triton.emit import EMIT, load_emitters
from physical.model import OP_CLASSES
from tests import samples as S


def emitted(make):
    return emit_triton.emit(physical.lower(make()))


def jit_functions(source: str) -> list[str]:
    tree = ast.parse(source)
    return [f.name for f in tree.body if isinstance(f, ast.FunctionDef)
            and any("jit" in ast.unparse(d) for d in f.decorator_list)]


def test_every_physical_op_has_an_emitter() -> None:
    # as `emit` does first: the emitter modules register on import of emit_triton.emit only when no module
    # they import was loaded before it (else on the first emit)
    load_emitters()
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

_SELECT_OF_LITERALS_BITS = """kernel select_bits(x: in i64[N], out: out u64[N]) symbols(N) {
  parallel (%i: i64) in (N) {
    %v: i64 = load %x[%i]
    %zero: i64 = constant 0 : i64
    %neg: pred = compare lt %v, %zero
    %two: i64 = constant 2 : i64
    %three: i64 = constant 3 : i64
    %k: i64 = if %neg {
      yield %two
    } else {
      yield %three
    }
    %one: i64 = constant 1 : i64
    %c: i64 = for (%it: i64, %acc: i64) in range(%one, %one, %one) init(%k) {
      %m: i64 = binary minimum %acc, %one
      yield %m
    }
    %f: f64 = bitcast %c to f64
    %b: u64 = bitcast %f to u64
    store %out[%i] = %b
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
    # an `if` yielding two i64 constants was tl.where(m, 2, 3), int32 in Triton: the loop carrying it and the
    # bitcast to f64 met 32 bits (campaign case 9401035/41); the select now takes typed literals
    (_SELECT_OF_LITERALS_BITS, {"x": [-1, 4, 0], "out": ("uint64", 3)}),
], ids=["region_scan_i8", "for_index_bitcast", "xchg_f32", "select_of_literals_bitcast"])
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
    if "select_bits" in text:
        typed = r"tl\.full\(\(\), \w+, tl\.int64\)"
        assert re.search(rf"tl\.where\(\w+, {typed}, {typed}\)", src), src
        out = torch.zeros(3, dtype=torch.uint64)
        emit_triton.launch(k, {"x": tensors["x"], "out": out})
        assert out.tolist() == [2, 3, 3]
    assert ".entry" in emit_triton.ptx(k, tensors, arch=90)


# ---------------------------------------------------------------------------------------------- the printer


def test_render_nests_blocks_and_drops_what_cannot_run() -> None:
    from emit_triton.source import Block, IfElse, render

    body = ["x = 1", Block("for k in range(0, n)", ["y = k"]), Block("for k in range(0, n)", ["# nothing"]),
            IfElse("c", [], ["z = 2"]), IfElse("d", ["u = 3"], ["# only a comment"]), IfElse("True", ["t = 4"], ["f"]),
            IfElse("False", ["t = 5"], [Block("while w", ["w = 0"])]), IfElse("e", [], [])]
    assert render(body, 1) == [
        "    x = 1", "    for k in range(0, n):", "        y = k", "    if not (c):", "        z = 2",
        "    if d:", "        u = 3", "    t = 4", "    while w:", "        w = 0"]
    with pytest.raises(AssertionError, match="an empty while loop: while w"):
        render([Block("while w", [])])


@pytest.mark.parametrize("make", S.ALL, ids=lambda f: f.__name__)
def test_source_has_no_placeholder_statements(make) -> None:
    src = emitted(make).source
    lines = [s.strip() for s in src.split("\n")]
    assert "pass" not in lines and "if True:" not in lines and "seg_offset" not in src


def test_a_form_fixed_for_every_launch_is_the_only_body() -> None:
    import dataclasses

    from emit_triton.emit import static_flag
    from physical.launch_expr import LConst

    program = physical.lower(S.softmax())
    looped = next(c.flag for c in map(physical.ops.looped_rows, (g.body for g in program.groups)) if c is not None)
    assert static_flag(program, looped) is None  # N is a launch symbol: either body may run
    src = emit_triton.emit(program).source
    assert f"if {looped}:" in src and "else:" in src and src.count("tl.sum(") == 2
    for value, loops in ((0, 0), (1, 3)):
        fixed = dataclasses.replace(program, constexprs=tuple((n, LConst(value) if n == looped else e)
                                                              for n, e in program.constexprs))
        assert static_flag(fixed, looped) == value
        src = emit_triton.emit(fixed).source
        assert f"if {looped}" not in src and "else:" not in src and src.count("tl.sum(") == 1
        assert src.count("for chunk_index") == loops


# Decisions the physical program makes, and the emitter must only read (each pattern is what the emitter
# once did itself): checked in the emitter's sources, since a decision hidden there changes no output.
EMITTER_DECIDES_NOTHING = {
    r"num_stages\s*=\s*\d": "the launch's num_stages comes from Program.num_stages",
    r"native_(reduce|scan)\(": "native vs tree folds are Reduce/Scan/RegionFold/RegionScan.native",
    r"UnaryFn\.(tanh|log1p|round)\b": "tanh, log1p and round are decomposed by physical.lower.decompose",
    r"\bin_f32 or\b|_F16_IN_F32|\.to\(tl\.float64\)\" if": "float widening is done by physical.lower.decompose",
    r"ReduceKind\.(sum|prod), ReduceKind\.": "which folds accumulate per position is RegionFold.per_position",
    r"1\s*/\s*3\b|2\s*/\s*15\b": "series coefficients belong to physical.lower.decompose",
}


def test_the_emitter_makes_no_numeric_decision() -> None:
    from pathlib import Path

    found = []
    for path in sorted(Path(emit_triton.__file__).parent.glob("emit*.py")):
        for n, text in enumerate(path.read_text().split("\n"), 1):
            for pattern, why in EMITTER_DECIDES_NOTHING.items():
                if re.search(pattern, text):
                    found.append(f"{path.name}:{n}: {text.strip()}  ({why})")
    assert found == []


def unary_kernel(fn, dt):
    from kir import Builder, DConst, Load, RefType, Role, Slice, Store, Unary, Yield, build_kernel
    from kir.solver import ShapeSolver

    b = Builder(ShapeSolver(("N",)))
    full = (Slice(DConst(0), S.N),)
    x, out = S._params(b, [("x", RefType(dt, (S.N,), Role.IN)), ("out", RefType(dt, (S.N,), Role.OUT))])
    b.make(Store, dst=out.value, index=full, value=b.add(Unary, fn=fn, x=b.add(Load, src=x.value, index=full)))
    b.make(Yield, values=())
    return build_kernel(f"unary_{fn}", (x, out), ("N",), b.end_region())


def test_tanh_log1p_and_round_reach_the_emitter_as_ordinary_ops() -> None:
    from kir.dtypes import DType
    from kir.pointwise import UnaryFn
    from physical import ops as P

    for fn in (UnaryFn.tanh, UnaryFn.log1p, UnaryFn.round, UnaryFn.exp):
        for dt in (DType.f16, DType.bf16, DType.f32, DType.f64):
            program = physical.lower(unary_kernel(fn, dt))
            unary = [op for op in program.walk() if isinstance(op, P.Unary)]
            assert {op.fn for op in unary} <= {UnaryFn.abs, UnaryFn.exp, UnaryFn.log, UnaryFn.floor}, (fn, dt)
            assert all(op.x.type.dtype in (DType.f32, DType.f64) for op in unary), (fn, dt)
            emitted_source = emit_triton.emit(program).source
            assert ("tl.div_rn(" in emitted_source) == (fn in (UnaryFn.tanh, UnaryFn.log1p) and dt is not DType.f64)
