"""Worksets from whole-tensor statements: `out[:] = x + y` becomes a parallel write over its axes.

A top-level store of a tensor value is re-expressed, in KIR, as a `parallel` over (a leading part
of) its result axes: the stored value is rebuilt at the instance coordinates by composing
coordinates through its producers (loads take the coordinate as a point index, broadcasts drop
it, transposes permute it, reductions and contractions keep their reduced axes inside the
instance). Axes that cannot be bound (a scan axis, a reshape) stay inside the instance as tiles.
The rebuilt ops keep their author's locations and map to the original ops' origins.
"""

from __future__ import annotations

import itertools
from typing import Any

from kir import access as KA
from kir import atomic as KT
from kir import contract as KC
from kir import control as KCt
from kir import core as K
from kir import histogram as KH
from kir import layout as KL
from kir import pointwise as KP
from kir import reduce as KR
from kir import rng as KN
from kir import scan as KS
from kir.dims import DConst, Dim
from kir.dtypes import DType
from kir.solver import ShapeSolver

_ids = itertools.count(1 << 40)  # rebuilt values never collide with a kernel's canonical ids


class CannotBind(Exception):
    """The value cannot be rebuilt at instance coordinates for these axes."""


Coords = tuple[K.Value | None, ...]


class Rebuilder:
    def __init__(self, kernel: K.Kernel, solver: ShapeSolver, defs: dict[int, K.Op],
                 origin_of: dict[int, int]) -> None:
        self.kernel = kernel
        self.solver = solver
        self.defs = defs
        self.origin_of = origin_of  # id(new op) -> id(original op)
        self.ops: list[K.Op] = []
        self.memo: dict[tuple[int, tuple[int | None, ...]], K.Value] = {}
        self.keep: list[K.Op] = []  # rebuilt ops (kept alive so that id() stays unique)

    def make(self, cls: type[K.Op], orig: K.Op, **fields: Any) -> K.Op:
        draft = cls(loc=orig.loc, **fields)
        types = draft.infer(K.TypeContext(self.solver, orig.loc))
        names = tuple(v.name for v in orig.results) if len(orig.results) == len(types) else (None,) * len(types)
        built = draft.__class__(loc=orig.loc, results=tuple(K.Value(next(_ids), t, n) for t, n in zip(types, names)),
                                **fields)
        self.ops.append(built)
        self.keep.append(built)
        self.origin_of[id(built)] = self.origin_of.get(id(orig), id(orig))
        return built

    def value(self, orig: K.Op, cls: type[K.Op], **fields: Any) -> K.Value:
        return self.make(cls, orig, **fields).results[0]

    def i64(self, orig: K.Op, n: int) -> K.Value:
        return self.value(orig, KP.Constant, value=n, dtype=DType.i64)

    def dim(self, orig: K.Op, d: Dim) -> K.Value:
        return self.value(orig, KP.DimValue, dim=d, dtype=DType.i64)

    def offset(self, orig: K.Op, start: Dim, c: K.Value, step: int = 1) -> K.Value:
        if step != 1:
            c = self.value(orig, KP.Binary, fn=KP.BinaryFn.mul, lhs=c, rhs=self.i64(orig, step))
        if start == DConst(0):
            return c
        return self.value(orig, KP.Binary, fn=KP.BinaryFn.add, lhs=c, rhs=self.dim(orig, start))

    # ------------------------------------------------------------------ rebuild a value at coordinates
    def at(self, v: K.Value, coords: Coords) -> K.Value:
        if all(c is None for c in coords):
            return v  # nothing bound: the value itself (computed by the group's prelude)
        key = (v.id, tuple(c.id if c is not None else None for c in coords))
        if key in self.memo:
            return self.memo[key]
        op = self.defs.get(v.id)
        if op is None:
            raise CannotBind(f"{v!r} is not computed by an op")
        out = self._at(op, op.results.index(v), coords)
        self.memo[key] = out
        return out

    def _at(self, op: K.Op, k: int, c: Coords) -> K.Value:  # noqa: C901 (one case per op family)
        if isinstance(op, KA.Load):
            index: list[Any] = []
            j = 0
            for it in op.index:
                if isinstance(it, K.Slice):
                    index.append(it if c[j] is None else self.offset(op, it.start, c[j]))  # type: ignore[arg-type]
                    j += 1
                else:
                    index.append(it)
            return self.value(op, KA.Load, src=op.src, index=tuple(index))
        if isinstance(op, KA.Gather):
            return self.value(op, KA.Gather, src=op.src, indices=tuple(self.at(i, self._same(i, c))
                                                                     for i in op.indices), fill=op.fill)
        if isinstance(op, KP.Iota):
            assert c[0] is not None
            return c[0] if op.dtype == DType.i64 else self.value(op, KP.Cast, x=c[0], dtype=op.dtype)
        if isinstance(op, KP.Unary | KP.Cast | KP.Bitcast):
            fields = {f.name: getattr(op, f.name) for f in op.fields()}
            fields["x"] = self.at(op.x, c)
            return self.value(op, type(op), **fields)
        if isinstance(op, KP.Binary | KP.Compare):
            return self.value(op, type(op), fn=op.fn, lhs=self.at(op.lhs, c), rhs=self.at(op.rhs, c))
        if isinstance(op, KP.Select):
            return self.value(op, KP.Select, cond=self.at(op.cond, c), on_true=self.at(op.on_true, c),
                              on_false=self.at(op.on_false, c))
        if isinstance(op, KN.Random):
            return self.value(op, KN.Random, kind=op.kind, seed=op.seed, offset=self.at(op.offset, c))
        if isinstance(op, KL.Broadcast):
            return self._broadcast(op, c)
        if isinstance(op, KL.Transpose):
            xc: list[K.Value | None] = [None] * len(op.perm)
            for r, a in enumerate(op.perm):
                xc[a] = c[r]
            x = self.at(op.x, tuple(xc))
            kept = [a for r, a in enumerate(op.perm) if c[r] is None]
            order = sorted(kept)
            perm = tuple(order.index(a) for a in kept)
            return x if list(perm) == sorted(perm) else self.value(op, KL.Transpose, x=x, perm=perm)
        if isinstance(op, KL.ExpandDims):
            x = self.at(op.x, c[:op.axis] + c[op.axis + 1:])
            if c[op.axis] is not None:
                return x
            return self.value(op, KL.ExpandDims, x=x, axis=sum(1 for a in c[:op.axis] if a is None))
        if isinstance(op, KL.Squeeze):
            return self.at(op.x, c[:op.axis] + (self.i64(op, 0),) + c[op.axis:])
        if isinstance(op, KL.SliceOp):
            xc = [None if ci is None else self.offset(op, s, ci, st)
                  for ci, s, st in zip(c, op.starts, op.steps)]
            x = self.at(op.x, tuple(xc))
            kept = [a for a, ci in enumerate(c) if ci is None]
            if not kept:
                return x
            return self.value(op, KL.SliceOp, x=x, starts=tuple(op.starts[a] for a in kept),
                              stops=tuple(op.stops[a] for a in kept), steps=tuple(op.steps[a] for a in kept))
        if isinstance(op, KR.Reduce):
            return self._reduce(op, k, c)
        if isinstance(op, KS.Scan):
            if c[op.axis] is not None:
                raise CannotBind("the scan axis stays inside the instance")
            ins = tuple(self.at(x, c) for x in op.inputs)
            axis = sum(1 for a in c[:op.axis] if a is None)
            built = self.make(KS.Scan, op, inputs=ins, axis=axis, kind=op.kind, reverse=op.reverse,
                              exclusive=op.exclusive, acc_dtype=op.acc_dtype, identity=op.identity,
                              combine=op.combine)
            return built.results[k]
        if isinstance(op, KC.Dot):
            return self._dot(op, c)
        if isinstance(op, KH.Histogram):
            return self._histogram(op, c)
        raise CannotBind(f"{op.NAME} cannot be rebuilt per instance")

    def _same(self, v: K.Value, c: Coords) -> Coords:
        t = v.type
        return c if isinstance(t, K.TensorType) and t.rank == len(c) else tuple(None for _ in range(t.rank))  # type: ignore

    def _broadcast(self, op: KL.Broadcast, c: Coords) -> K.Value:
        xt = op.x.type
        assert isinstance(xt, K.TensorType)
        xc: list[K.Value | None] = []
        for a, d in enumerate(op.dims):
            if c[d] is None:
                xc.append(None)
            elif xt.shape[a] == DConst(1) and op.shape[d] != DConst(1):
                xc.append(self.i64(op, 0))
            else:
                xc.append(c[d])
        x = self.at(op.x, tuple(xc))
        kept = [d for d in range(len(op.shape)) if c[d] is None]
        shape = tuple(op.shape[d] for d in kept)
        dims = tuple(kept.index(d) for a, d in enumerate(op.dims) if xc[a] is None)
        xt2 = x.type
        if isinstance(xt2, K.TensorType) and xt2.shape == shape and dims == tuple(range(len(shape))):
            return x
        return self.value(op, KL.Broadcast, x=x, shape=shape, dims=dims)

    def _reduce(self, op: KR.Reduce, k: int, c: Coords) -> K.Value:
        rank = op.inputs[0].type.rank  # type: ignore[union-attr]
        xc: list[K.Value | None] = []
        j = 0
        for a in range(rank):
            if a in op.axes:
                xc.append(None)
                if op.keepdims:
                    j += 1
            else:
                xc.append(c[j])
                j += 1
        ins = tuple(self.at(x, tuple(xc)) for x in op.inputs)
        kept = [a for a in range(rank) if xc[a] is None]
        axes = tuple(kept.index(a) for a in op.axes)
        if not op.keepdims:
            built = self.make(KR.Reduce, op, inputs=ins, axes=axes, kind=op.kind, keepdims=False,
                              acc_dtype=op.acc_dtype, identity=op.identity, combine=op.combine)
            return built.results[k]
        # keepdims: a kept unit axis whose coordinate the instance binds (`out[i, 0:1]`) is dropped; the
        # others come back as unit axes of the instance's result
        built = self.make(KR.Reduce, op, inputs=ins, axes=axes, kind=op.kind, keepdims=False,
                          acc_dtype=op.acc_dtype, identity=op.identity, combine=op.combine)
        out = built.results[k]
        position = 0
        for a in range(rank):
            if c[a] is not None:
                continue
            if a in op.axes:
                out = self.value(op, KL.ExpandDims, x=out, axis=position)
            position += 1
        return out

    def _dot(self, op: KC.Dot, c: Coords) -> K.Value:
        ra, rb = op.lhs.type.rank, op.rhs.type.rank  # type: ignore[union-attr]
        nb = len(op.lhs_batch)
        a_free = [i for i in range(ra) if i not in op.lhs_batch + op.lhs_contract]
        b_free = [i for i in range(rb) if i not in op.rhs_batch + op.rhs_contract]
        ac: list[K.Value | None] = [None] * ra
        bc: list[K.Value | None] = [None] * rb
        for p, (x, y) in enumerate(zip(op.lhs_batch, op.rhs_batch)):
            ac[x], bc[y] = c[p], c[p]
        for q, x in enumerate(a_free):
            ac[x] = c[nb + q]
        for q, y in enumerate(b_free):
            bc[y] = c[nb + len(a_free) + q]
        a, b = self.at(op.lhs, tuple(ac)), self.at(op.rhs, tuple(bc))
        ka = [i for i in range(ra) if ac[i] is None]
        kb = [i for i in range(rb) if bc[i] is None]
        pairs = [(x, y) for p, (x, y) in enumerate(zip(op.lhs_batch, op.rhs_batch)) if c[p] is None]
        return self.value(op, KC.Dot, lhs=a, rhs=b, lhs_batch=tuple(ka.index(x) for x, _ in pairs),
                          rhs_batch=tuple(kb.index(y) for _, y in pairs),
                          lhs_contract=tuple(ka.index(x) for x in op.lhs_contract),
                          rhs_contract=tuple(kb.index(y) for y in op.rhs_contract), acc_dtype=op.acc_dtype,
                          precision=op.precision)

    def _histogram(self, op: KH.Histogram, c: Coords) -> K.Value:
        b = c[0]
        assert b is not None
        vt = op.values.type
        assert isinstance(vt, K.TensorType) and isinstance(vt.dtype, DType)
        bv = b if vt.dtype == DType.i64 else self.value(op, KP.Cast, x=b, dtype=vt.dtype)
        bb = self.value(op, KL.Broadcast, x=bv, shape=vt.shape, dims=())
        eq = self.value(op, KP.Compare, fn=KP.CmpFn.eq, lhs=op.values, rhs=bb)
        ones = self.value(op, KP.Cast, x=eq, dtype=DType.i32)
        return self.value(op, KR.Reduce, inputs=(ones,), axes=tuple(range(vt.rank)), kind=KR.ReduceKind.sum)


def parallel_store(rb: Rebuilder, st: KA.Store, bound: int) -> KCt.Parallel:
    """`dst[s0, s1, ...] = v` -> `parallel (i0..i{bound-1}): dst[s0.start + i0, ...] = v at (i0, ...)`."""
    slices = [k for k, it in enumerate(st.index) if isinstance(it, K.Slice)]
    bind = slices[:bound]
    domain = tuple(st.index[k].extent for k in bind)  # type: ignore[union-attr]
    args = tuple(K.Value(next(_ids), K.scalar(KCt.INDEX_DTYPE), f"i{n}") for n in range(len(bind)))
    rb.ops = []
    vt = st.value.type
    assert isinstance(vt, K.TensorType)
    coords: list[K.Value | None] = [None] * vt.rank
    for n in range(len(bind)):
        coords[n] = args[n]
    value = rb.at(st.value, tuple(coords))
    index: list[Any] = []
    for k, it in enumerate(st.index):
        if k in bind:
            index.append(rb.offset(st, it.start, args[bind.index(k)]))  # type: ignore[union-attr]
        else:
            index.append(it)
    rb.make(KA.Store, st, dst=st.dst, index=tuple(index), value=value, unique=st.unique)
    rb.make(KCt.Yield, st, values=())
    body = K.Region(args, tuple(rb.ops))
    par = KCt.Parallel(loc=st.loc, domain=domain, body=body)
    rb.keep.append(par)
    rb.origin_of[id(par)] = rb.origin_of.get(id(st), id(st))
    return par


def parallel_indexed(rb: Rebuilder, op: KA.Scatter | KT.Atomic | KT.AtomicCAS) -> KCt.Parallel:
    """An indexed write over a tensor of indices becomes a parallel over the indices' shape."""
    shape: tuple[Dim, ...] = ()
    operands = list(op.indices) + [getattr(op, n) for n in ("value", "expected") if hasattr(op, n)]
    for v in operands:
        t = v.type
        if isinstance(t, K.TensorType) and t.rank:
            shape = t.shape
    args = tuple(K.Value(next(_ids), K.scalar(KCt.INDEX_DTYPE), f"i{n}") for n in range(len(shape)))
    rb.ops = []

    def at(v: K.Value) -> K.Value:
        t = v.type
        return rb.at(v, args) if isinstance(t, K.TensorType) and t.rank else v

    fields = {f.name: getattr(op, f.name) for f in op.fields()}
    fields["indices"] = tuple(at(v) for v in op.indices)
    for n in ("value", "expected"):
        if n in fields:
            fields[n] = at(fields[n])
    rb.make(type(op), op, **fields)
    rb.make(KCt.Yield, op, values=())
    par = KCt.Parallel(loc=op.loc, domain=shape, body=K.Region(args, tuple(rb.ops)))
    rb.keep.append(par)
    rb.origin_of[id(par)] = rb.origin_of.get(id(op), id(op))
    return par


__all__ = ["Rebuilder", "CannotBind", "parallel_store", "parallel_indexed"]
