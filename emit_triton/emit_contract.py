"""Contractions (dot / dot_general) over tile axes."""

from __future__ import annotations

from kir.contract import Precision
from kir.dtypes import DType
from physical import ops as P

from .emit import DEVICE_FLAG, REGISTER_DTYPE, Emitter, emits, literal


@emits(P.Contract)
def emit_contract(em: Emitter, op: P.Contract) -> None:
    # Per-lane contraction: products widened to the accumulator, masked sum over the contracted axes.
    # Whole-tensor contractions are tiled by physical/passes/tile_contract.py and reach emit_matmul.
    shape = op.lhs.type
    acc = REGISTER_DTYPE[op.acc_dtype]
    a, b = em.arg(op.lhs, shape, True), em.arg(op.rhs, shape, True)
    prod = em.fresh("prod")
    if op.precision is Precision.tf32:
        em.line("# precision tf32 requested; the per-lane form multiplies in IEEE f32")
    em.line(f"{prod} = {a}.to({acc}) * {b}.to({acc})")
    if op.member is not None:
        zero = literal(0, op.acc_dtype)
        em.line(f"{prod} = tl.where({em.arg(op.member, shape)}, {prod}, {zero})")
    for ax in sorted(op.axes, reverse=True):
        em.line(f"{prod} = tl.sum({prod}, axis={ax + int(shape.lanes)})")
    em.line(f"{em.define(op.result)} = {prod}")


_FP8_TL = {DType.f8e4m3: "tl.float8e4nv", DType.f8e5m2: "tl.float8e5"}


@emits(P.MatMul)
def emit_matmul(em: Emitter, op: P.MatMul) -> None:
    # f32 operands: IEEE products unless the author asked for tf32; 16- and 8-bit operands go to
    # tensor cores with f32 (i32) accumulation, the accumulator's dtype.
    precision = ""
    a, b = em.name(op.lhs), em.name(op.rhs)
    if op.lhs.type.dtype == DType.bf16:
        # Triton's interpreter multiplies bf16 bit patterns in tl.dot; widening to f32 is exact and
        # gives the same products on every target (FMA units on a GPU).
        a, b = f"{a}.to(tl.float32)", f"{b}.to(tl.float32)"
        precision = ", input_precision=\"ieee\""
    elif op.lhs.type.dtype == DType.f32:
        precision = f", input_precision=\"{'tf32' if op.precision is Precision.tf32 else 'ieee'}\""
    elif op.lhs.type.dtype.is_fp8:
        # fp8 values are held in f32 registers. On a GPU they reach tl.dot in their fp8 formats (the conversion
        # back is exact) with every product accumulated in f32 (max_num_imprecise_acc=0: sm_90's default would
        # keep a narrower accumulator for up to 2**30 products); Triton 3.9 then runs mma.sync on the operands
        # widened to f16 (exact), not fp8 wgmma. The interpreter multiplies the f32 values (exact).
        # The two formats may differ (f8e4m3 x f8e5m2): sm_90's fp8 tensor cores take each operand in its own.
        fa, fb = (_FP8_TL[x.type.dtype] for x in (op.lhs, op.rhs))
        result = em.define(op.result, "acc")
        em.uses_device_flag = True
        node = em.branches(DEVICE_FLAG)
        with em.into(node.then):
            em.line(f"{result} = tl.dot({a}.to({fa}), {b}.to({fb}), {em.name(op.acc)}, max_num_imprecise_acc=0)")
        with em.into(node.otherwise):
            em.line(f"{result} = tl.dot({a}, {b}, {em.name(op.acc)}, input_precision=\"ieee\")")
        return
    em.line(f"{em.define(op.result, 'acc')} = tl.dot({a}, {b}, {em.name(op.acc)}{precision})")
