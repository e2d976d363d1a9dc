"""dot_general inside an instance: align both operands on (batch, lhs free, rhs free, contracted)
tile axes, then one `Contract` sums the products in the accumulator dtype.

This per-lane form is the initial mapping; physical/passes/tile_contract.py gives whole-tensor
contractions tile ownership of their free axes and a K loop of tile matrix multiplies (tl.dot).
"""

from __future__ import annotations

from kir import contract as KC
from kir.dtypes import DType

from .. import ops as P
from ..model import Fragment, PValue
from . import rule
from .context import Lowerer


def _align(lw: Lowerer, x: PValue, order: tuple[int, ...], target_axes: tuple[int, ...],
           tile_out: tuple, lanes: bool) -> PValue:
    """Permute x's tile to `order`, then broadcast it into `tile_out` at positions `target_axes`."""
    if list(order) != list(range(len(order))):
        x = lw.add(P.Permute, x.type.with_tile(tuple(x.type.tile[a] for a in order)), x=x, perm=order)
    if x.type.tile == tile_out and x.type.lanes == lanes:
        return x
    return lw.add(P.Broadcast, Fragment(x.type.dtype, lanes, tile_out), x=x, dims=target_axes)


@rule(KC.Dot)
def lower_dot(lw: Lowerer, op: KC.Dot) -> None:
    a, b = lw.get(op.lhs), lw.get(op.rhs)
    ra, rb = len(a.type.tile), len(b.type.tile)
    a_free = tuple(i for i in range(ra) if i not in op.lhs_batch + op.lhs_contract)
    b_free = tuple(i for i in range(rb) if i not in op.rhs_batch + op.rhs_contract)
    nb, nl, nr, nc = len(op.lhs_batch), len(a_free), len(b_free), len(op.lhs_contract)
    result_tile = lw.tile(op.result.type.shape)
    contract_tile = tuple(a.type.tile[i] for i in op.lhs_contract)
    tile_out = result_tile + contract_tile
    lanes = a.type.lanes or b.type.lanes
    a_al = _align(lw, a, op.lhs_batch + a_free + op.lhs_contract,
                  tuple(range(nb)) + tuple(range(nb, nb + nl)) + tuple(range(nb + nl + nr, nb + nl + nr + nc)),
                  tile_out, lanes)
    b_al = _align(lw, b, op.rhs_batch + b_free + op.rhs_contract,
                  tuple(range(nb)) + tuple(range(nb + nl, nb + nl + nr)) +
                  tuple(range(nb + nl + nr, nb + nl + nr + nc)), tile_out, lanes)
    acc = op.acc_dtype
    if not isinstance(acc, DType):
        raise lw.fail(f"dtype variable {acc} reached physical construction; specialise the kernel first")
    axes = tuple(range(nb + nl + nr, nb + nl + nr + nc))
    r = lw.add(P.Contract, Fragment(acc, lanes, result_tile), name=op.result.name, lhs=a_al, rhs=b_al, axes=axes,
               acc_dtype=acc, precision=op.precision, member=lw.tile_member(tile_out))
    lw.bind(op.result, r)
