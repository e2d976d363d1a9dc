"""Contractions (dot / dot_general) over tile axes."""

from __future__ import annotations

from kir.contract import Precision
from kir.dtypes import DType
from physical import ops as P

from .emit import REGISTER_DTYPE, Emitter, emits, literal


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
    em.line(f"{em.define(op.result, 'acc')} = tl.dot({a}, {b}, {em.name(op.acc)}{precision})")
