"""Worksets from whole-tensor statements: `out[:] = x + y` becomes a parallel write over its axes.

A top-level store of a tensor value is re-expressed, in KIR, as a `parallel` over (a leading part
of) its result axes: the stored value is rebuilt at the instance coordinates by composing
coordinates through its producers (loads take the coordinate as a point index, broadcasts drop
it, transposes permute it, reductions and contractions keep their reduced axes inside the
instance). Axes that cannot be bound (a scan axis, a reshape) stay inside the instance as tiles.
The rebuilt ops keep their author's locations and map to the original ops' origins.
"""

from __future__ import annotations

import dataclasses
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
from kir import sort as KSo
from kir.dims import DConst, Dim, dim_bin
from kir.dtypes import DType
from kir.solver import ShapeSolver

from .analysis import effects_of

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
        self.loads: dict[tuple[Any, ...], K.Value] = {}  # (buffer, index, coordinates) -> rebuilt load
        written = effects_of(kernel.body.ops)
        self.written = written.writes | set(written.atomics)

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
            raise CannotBind(f"%{v.name or v.id} is not computed by an op")
        out = self._at(op, op.results.index(v), coords)
        self.memo[key] = out
        return out

    def _at(self, op: K.Op, k: int, c: Coords) -> K.Value:  # noqa: C901 (one case per op family)
        if isinstance(op, KA.Load):
            # two loads of the same elements of a buffer the kernel never writes read the same data:
            # the author's `x - max(x, ...)` reads x once per instance
            if op.src.id in self.written:
                return self._load(op, c)
            key = (op.src.id, tuple(it.id if isinstance(it, K.Value) else it for it in op.index),
                   tuple(ci.id if ci is not None else None for ci in c))
            if key not in self.loads:
                self.loads[key] = self._load(op, c)
            return self.loads[key]
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
        if isinstance(op, KL.Reshape):
            return self._reshape(op, c)
        if isinstance(op, KR.Reduce):
            return self._reduce(op, k, c)
        if isinstance(op, KS.Scan):
            if c[op.axis] is not None:
                raise CannotBind("a scan along a written axis stays inside one instance")
            ins = tuple(self.at(x, c) for x in op.inputs)
            axis = sum(1 for a in c[:op.axis] if a is None)
            built = self.make(KS.Scan, op, inputs=ins, axis=axis, kind=op.kind, reverse=op.reverse,
                              exclusive=op.exclusive, acc_dtype=op.acc_dtype, identity=op.identity,
                              combine=op.combine)
            return built.results[k]
        if isinstance(op, KSo.Sort):
            if c[op.axis] is not None:
                raise CannotBind("a sort along a written axis stays inside one instance")
            x = self.at(op.x, c)
            axis = sum(1 for a in c[:op.axis] if a is None)
            built = self.make(KSo.Sort, op, x=x, axis=axis, descending=op.descending, k=op.k)
            return built.results[k]
        if isinstance(op, KC.Dot):
            return self._dot(op, c)
        if isinstance(op, KH.Histogram):
            return self._histogram(op, c)
        raise CannotBind(f"{op.NAME} cannot be rebuilt per instance")

    def _load(self, op: KA.Load, c: Coords) -> K.Value:
        index: list[Any] = []
        j = 0
        for it in op.index:
            if isinstance(it, K.Slice):
                index.append(it if c[j] is None else self.offset(op, it.start, c[j]))  # type: ignore[arg-type]
                j += 1
            else:
                index.append(it)
        return self.value(op, KA.Load, src=op.src, index=tuple(index))

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

    def _reshape(self, op: KL.Reshape, c: Coords) -> K.Value:
        """A reshape is an index map: within each group of axes whose sizes multiply to the same count,
        bound result coordinates linearise (row-major) and delinearise into the operand's coordinates
        with `//` and `%` by the group's sizes. A group is bound whole or left whole to the instance."""
        xt = op.x.type
        assert isinstance(xt, K.TensorType)
        groups = reshape_groups(self.solver, xt.shape, op.shape)
        if groups is None:
            raise CannotBind("the reshape's axes do not group into equal element counts")
        xc: list[K.Value | None] = []
        for (i0, i1), (j0, j1) in groups:
            if j0 == j1:  # unit axes of the operand that the result drops: their one coordinate
                xc += [self.i64(op, 0) for _ in range(i0, i1)]
                continue
            bound = [c[j] is not None for j in range(j0, j1)]
            if not any(bound):
                xc += [None] * (i1 - i0)
                continue
            if not all(bound):
                raise CannotBind("a reshape group is only partly bound by the instance")
            flat: K.Value | None = None
            for j in range(j0, j1):
                cj = c[j]
                assert cj is not None
                flat = cj if flat is None else self.value(op, KP.Binary, fn=KP.BinaryFn.add, rhs=cj, lhs=self.value(
                    op, KP.Binary, fn=KP.BinaryFn.mul, lhs=flat, rhs=self.dim(op, op.shape[j])))
            assert flat is not None
            for i in range(i0, i1):
                inner = _product(xt.shape[i + 1:i1])
                v = flat if inner == DConst(1) else self.value(op, KP.Binary, fn=KP.BinaryFn.floordiv, lhs=flat,
                                                                  rhs=self.dim(op, inner))
                if i > i0:
                    v = self.value(op, KP.Binary, fn=KP.BinaryFn.mod, lhs=v, rhs=self.dim(op, xt.shape[i]))
                xc.append(v)
        x = self.at(op.x, tuple(xc))
        kept = tuple(op.shape[j] for j in range(len(op.shape)) if c[j] is None)
        if not kept:
            return x
        xt2 = x.type
        if isinstance(xt2, K.TensorType) and xt2.shape == kept:
            return x
        return self.value(op, KL.Reshape, x=x, shape=kept)

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


def _product(dims: tuple[Dim, ...]) -> Dim:
    out: Dim = DConst(1)
    for d in dims:
        out = d if out == DConst(1) else dim_bin("*", out, d)
    return out


def reshape_groups(solver: ShapeSolver, src: tuple[Dim, ...], dst: tuple[Dim, ...]
                   ) -> list[tuple[tuple[int, int], tuple[int, int]]] | None:
    """Consecutive axis ranges of `src` and `dst` whose sizes multiply to provably equal counts, the
    shortest first (`[B, S, D] -> [B * S, D]`: `(B, S) | (B * S)`, `(D) | (D)`); None if none fit."""
    out: list[tuple[tuple[int, int], tuple[int, int]]] = []
    i = j = 0
    while i < len(src) or j < len(dst):
        found = None
        for size in range(2, len(src) - i + len(dst) - j + 1):
            for a in range(max(1, size - (len(dst) - j)), min(size, len(src) - i + 1)):
                b = size - a
                if b < 1:
                    continue
                if solver.equal(_product(src[i:i + a]), _product(dst[j:j + b])) is None:
                    found = (a, b)
                    break
            if found:
                break
        if found is None:
            if i == len(src) and all(d == DConst(1) for d in dst[j:]):
                out.append(((i, i), (j, len(dst))))
                return out
            if j == len(dst) and all(d == DConst(1) for d in src[i:]):
                out.append(((i, len(src)), (j, j)))
                return out
            return None
        a, b = found
        out.append(((i, i + a), (j, j + b)))
        i, j = i + a, j + b
    return out


def recomputed_per_instance(ops: list[K.Op], args: tuple[K.Value, ...]) -> K.Op | None:
    """A structured op of the rebuilt body that does not depend on every instance index: each of the
    instances that differ only in the others would recompute it (`x - max(x, axis=1)` bound per element
    reduces each row once per element)."""
    deps: dict[int, frozenset[int]] = {a.id: frozenset([n]) for n, a in enumerate(args)}
    full = frozenset(range(len(args)))
    for o in ops:
        used = [v for v in o.operands()]
        for r in o.regions():
            used += [v for inner in r.walk() for v in inner.operands()]
        d = frozenset().union(*(deps.get(v.id, frozenset()) for v in used))
        if o.has(K.OpTrait.STRUCTURED) and d != full:
            return o
        for v in o.results:
            deps[v.id] = d
    return None


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


def flatten_nest(rb: Rebuilder, par: KCt.Parallel) -> KCt.Parallel:
    """`parallel(A): parallel(B): body` -> `parallel(A, B): body` when the nest is perfect.

    The outer body may hold pure ops before its one inner `parallel` (index arithmetic, loads of
    buffers the nest does not write); they move into the combined body, where each instance
    recomputes them. Anything with effects beside the inner loop keeps the nest as it is. Several inner
    loops over the same domain, none touching a buffer another writes, are first one loop (`fuse_siblings`:
    each instance runs their bodies in order), as the frontend writes a body of jagged scans.
    """
    ops = par.body.ops[:-1] if par.body.terminator is not None else par.body.ops
    inner = [o for o in ops if isinstance(o, KCt.Parallel)]
    if len(inner) > 1:
        fused = fuse_siblings(rb, inner)
        if fused is None:
            return par
        kept = [o for o in ops if not isinstance(o, KCt.Parallel)]
        tail = (par.body.terminator,) if par.body.terminator is not None else ()
        par = KCt.Parallel(loc=par.loc, domain=par.domain, body=K.Region(par.body.args, (*kept, fused, *tail)))
        rb.keep.append(par)
        ops = [*kept, fused]
        inner = [fused]
    if len(inner) != 1:
        return par
    others = [o for o in ops if o is not inner[0]]
    if any(o.has_effects() for o in others):
        return par
    nested = flatten_nest(rb, inner[0])
    written = effects_of([nested])
    if effects_of(others).reads & (written.writes | set(written.atomics)):
        return par  # the outer body reads what the nest writes: its reads happen before all inner writes
    body = K.Region(par.body.args + nested.body.args, tuple(others) + nested.body.ops)
    flat = KCt.Parallel(loc=par.loc, domain=par.domain + nested.domain, body=body)
    rb.keep.append(flat)
    rb.origin_of[id(flat)] = rb.origin_of.get(id(par), id(par))
    return flat


def fuse_siblings(rb: Rebuilder, loops: list[KCt.Parallel]) -> KCt.Parallel | None:
    """`parallel(B): X; parallel(B): Y` -> `parallel(B): X; Y` (the second loop's index read as the first's), or
    None: the domains differ, or a loop touches a buffer another writes (an instance of the fused loop would see
    another instance's writes that the separate loops order before or after it)."""
    first = loops[0]
    if any(o.domain != first.domain or len(o.body.args) != len(first.body.args) for o in loops[1:]):
        return None
    effects = [effects_of([o]) for o in loops]
    for i, a in enumerate(effects):
        written = a.writes | set(a.atomics)
        for j, b in enumerate(effects):
            if i != j and written & (b.reads | b.writes | set(b.atomics)):
                return None
    body: list[K.Op] = []
    for o in loops:
        env = {a.id: f for a, f in zip(o.body.args, first.body.args)}
        body += [_substituted(rb, op, env) for op in o.body.ops if not op.TERMINATOR]
    tail = (first.body.terminator,) if first.body.terminator is not None else ()
    fused = KCt.Parallel(loc=first.loc, domain=first.domain, body=K.Region(first.body.args, (*body, *tail)))
    rb.keep.append(fused)
    rb.origin_of[id(fused)] = rb.origin_of.get(id(first), id(first))
    return fused


def _substituted(rb: Rebuilder, op: K.Op, env: dict[int, K.Value]) -> K.Op:
    """`op` reading `env[v]` for each value v it (or a nested region) reads; its results stay."""
    if not env:
        return op

    def sub(x: Any) -> Any:
        if isinstance(x, K.Value):
            return env.get(x.id, x)
        if isinstance(x, tuple):
            return tuple(sub(y) for y in x)
        if isinstance(x, K.Region):
            return K.Region(x.args, tuple(_substituted(rb, o, env) for o in x.ops))
        if dataclasses.is_dataclass(x) and not isinstance(x, type) and any(
                isinstance(getattr(x, f.name), K.Value | tuple) for f in dataclasses.fields(x)):
            return dataclasses.replace(x, **{f.name: sub(getattr(x, f.name)) for f in dataclasses.fields(x)})
        return x

    new = type(op)(loc=op.loc, results=op.results, **{f.name: sub(getattr(op, f.name)) for f in op.fields()})
    rb.keep.append(new)
    rb.origin_of[id(new)] = rb.origin_of.get(id(op), id(op))
    return new


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


__all__ = ["Rebuilder", "CannotBind", "parallel_store", "parallel_indexed", "flatten_nest", "reshape_groups",
           "recomputed_per_instance"]
