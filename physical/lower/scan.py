"""Scans along one tile axis; built-ins get a synthesised combine region."""

from __future__ import annotations

from kir import scan as KS
from kir.dtypes import DType
from kir.reduce import default_acc
from kir.reduce import identity as reduce_identity

from .. import ops as P
from ..model import Fragment
from . import rule
from .context import Lowerer
from .reduce import builtin_combine, lower_combine, seeded


@rule(KS.Scan)
def lower_scan(lw: Lowerer, op: KS.Scan) -> None:
    xs = tuple(lw.get(v) for v in op.inputs)
    tile = xs[0].type.tile
    lanes = any(x.type.lanes for x in xs)
    dtypes = tuple(x.type.dtype for x in xs)
    if op.kind is KS.ScanKind.custom:
        assert op.combine is not None and op.identity is not None
        combine, identity, accs = lower_combine(lw, op.combine, dtypes), op.identity, dtypes
    else:
        # f16/bf16 sums and products accumulate in f32 unless the op names an accumulator (as the oracle)
        acc = op.acc_dtype if isinstance(op.acc_dtype, DType) else \
            default_acc(op.kind.as_reduce, dtypes[0]) or dtypes[0]
        assert isinstance(acc, DType)
        combine = builtin_combine(lw, op.kind.as_reduce, (acc,))
        identity = (reduce_identity(op.kind.as_reduce, acc),)  # an identity given is folded in after the scan
        accs = (acc,)
    outs = tuple(Fragment(d, lanes, tile) for d in dtypes)
    r = lw.emit(P.Scan, outs, names=tuple(v.name for v in op.results), inputs=xs, axis=op.axis, kind=op.kind,
                reverse=op.reverse, exclusive=op.exclusive, identity=identity, acc_dtypes=accs,
                member=lw.tile_member(tile), combine=combine)
    results = r.results
    if op.kind is not KS.ScanKind.custom and op.identity is not None:
        results = (seeded(lw, op.kind.as_reduce, accs[0], op.identity[0], results[0]),)
    for kv, pv in zip(op.results, results):
        lw.bind(kv, pv)
