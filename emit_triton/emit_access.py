"""Loads, stores and atomics through their access relations."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from kir.dtypes import DType
from physical import ops as P
from physical.model import AccessRelation, Fragment, PValue

from .emit import TL_DTYPE, Emitter, emits, literal
from .names import comment_text
from .numerics import from_storage, library, to_storage
from .sanitize import SANITIZER

_ATOMIC = {"add": "tl.atomic_add", "max": "tl.atomic_max", "min": "tl.atomic_min", "and": "tl.atomic_and",
           "or": "tl.atomic_or", "xor": "tl.atomic_xor", "xchg": "tl.atomic_xchg"}
_SEM = {"relaxed": "relaxed", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
# The integer type a float atomic_xchg exchanges its bits as (f16/bf16 xchg is refused at lowering).
_XCHG_BITS = {"tl.float32": "tl.int32", "tl.float64": "tl.int64"}
# The integer type float atomic max/min swap their bits as (a compare-and-swap loop, `_emit_float_extreme`).
_FLOAT_BITS = {"tl.float32": "tl.int32", "tl.float64": "tl.int64"}


def access_shape(em: Emitter, a: AccessRelation, extra: tuple[PValue, ...] = ()) -> Fragment:
    vals = [*a.coords, *([a.mask] if a.mask is not None else []), *extra]
    if a.copy is not None:
        vals.append(a.copy)
    lanes = any(v.type.lanes for v in vals)
    tiles = [v.type.tile for v in vals if v.type.tile]
    # A 0-d buffer has no coordinates: its access is one scalar at the base pointer.
    return Fragment(vals[0].type.dtype if vals else DType.i64, lanes, tiles[0] if tiles else ())


def pointer(em: Emitter, a: AccessRelation, shape: Fragment) -> str:
    """Base pointer plus the offset of every coordinate (cast to the index width, then scaled)."""
    base, terms = _offset_terms(em, a, shape)
    ptr = f"{base} + ({' + '.join(terms)})" if terms else base
    if not any(c.type.lanes == shape.lanes and c.type.tile == shape.tile for c in (*a.coords, *(
            [a.copy] if a.copy is not None else []))) and shape.rank:
        ptr = f"tl.broadcast_to({ptr}, {em.shape(shape)})"
    return ptr


def _offset_terms(em: Emitter, a: AccessRelation, shape: Fragment) -> tuple[str, list[str]]:
    """The base pointer of the access and the terms of its element offset."""
    buf = em.buffers[a.buffer]
    terms = []
    if buf.param is not None:
        base = em.param_names[buf.param]
        for ax, c in enumerate(a.coords):
            coord = _coord(em, c, shape)
            if buf.dtype is DType.i4 and ax == len(a.coords) - 1:  # two per byte (kir.dtypes.I4_PACKING)
                coord = f"({coord} >> 1)"
            terms.append(f"{coord} * {em.stride_names[(buf.param, ax)]}")
    else:
        base = em.workspace_names[buf.storage]  # type: ignore[index]
        dims = [em.dim(d) for d in buf.shape]
        for ax, c in enumerate(a.coords):
            stride = " * ".join(dims[ax + 1:]) or "1"
            terms.append(f"{_coord(em, c, shape)} * ({stride})")
        if a.copy is not None:
            numel = " * ".join(dims) or "1"
            terms.insert(0, f"{_coord(em, a.copy, shape)} * ({numel})")
    if buf.dtype.is_fp8:  # fp8 buffers are read and written as their bits (numerics.from_storage / to_storage)
        base = f"{base}.to(tl.pointer_type(tl.uint8))"
    return base, terms


def sanitize_access(em: Emitter, op: P.POp, what: str, a: AccessRelation, shape: Fragment) -> None:
    """With the sanitizer on: every active member's coordinates lie inside the buffer (the access relation
    the physical program declared), and its element offset -- the very terms its pointer is built from --
    inside the storage span of the tensor (its parameter's extents and strides, as the launcher bound them
    from the argument) or of the workspace (its allocated size)."""
    if not em.sanitize:
        return
    buf = em.buffers[a.buffer]
    info = em.p.op_info(op.origin) if op.origin is not None else None
    where = f" at {info.loc}" if info is not None and info.loc is not None else ""
    off = em.fresh("san_off")
    base, terms = _offset_terms(em, a, shape)
    em.line(f"# sanitizer: {comment_text(f'{what} of {buf.name}')}")
    em.line(f"{off} = {' + '.join(terms) if terms else '0'}")
    full = em.shape(shape)
    inactive = "False" if a.mask is None else f"({em.arg(a.mask, shape)} == 0)"
    ok = []
    for ax, c in enumerate(a.coords):
        v = _coord(em, c, shape)
        ok.append(f"({v} >= 0) & ({v} < tl.cast({em.dim(buf.shape[ax])}, pid.dtype))")
    if a.copy is not None and buf.copies is not None:
        v = _coord(em, a.copy, shape)
        ok.append(f"({v} >= 0) & ({v} < tl.cast({em.launch(buf.copies)}, pid.dtype))")
    if buf.param is not None:
        # the parameter's own extents (as the launcher bound them from the tensor), not the buffer's
        extents = next(q.shape for q in em.p.params if q.name == buf.param)
        bytes_ = [f"tl.cast({em.dim(d)}, pid.dtype)" for d in extents]
        if packed_i4(buf):  # the last axis holds two elements a byte
            bytes_[-1] = f"(({bytes_[-1]} + 1) // 2)"
        span = " + ".join(f"({n} - 1) * {em.stride_names[(buf.param, ax)]}" for ax, n in enumerate(bytes_)) or "0"
        empty = " | ".join(f"(tl.cast({em.dim(d)}, pid.dtype) == 0)" for d in extents) or "False"
        inside = f"(({off}) >= 0) & (({off}) <= {span}) & ((({empty}) == 0))"
        storage = f"the storage of tensor {buf.param}"
    else:
        count = next(w.count for w in em.p.workspaces if w.name == buf.storage)
        inside = f"(({off}) >= 0) & (({off}) < tl.cast({em.launch(count)}, pid.dtype))"
        storage = f"its workspace ({buf.name})"
    for cond, message in ((" & ".join(ok) or "True", f"{what} outside the access relation the physical program "
                           f"declared{where}: an active lane's coordinates lie outside {buf.name}"),
                          (inside, f"{what} outside {storage}{where}: an active lane's address lies outside "
                           f"the tensor's storage span")):
        holds = f"tl.broadcast_to(tl.where({cond}, True, False) | {inactive}, {full})" if shape.rank else \
            f"tl.where({cond}, True, False) | {inactive}"
        em.line(f"tl.device_assert({holds}, \"{check_token(SANITIZER + message)}\")")


def _coord(em: Emitter, c: PValue, shape: Fragment) -> str:
    s = em.arg(c, shape)
    if c.type.index:
        return s
    return f"tl.cast({s}, pid.dtype)"


def _mask(em: Emitter, a: AccessRelation, shape: Fragment) -> str:
    return f", mask={em.arg(a.mask, shape)}" if a.mask is not None else ""


@emits(P.Load)
def emit_load(em: Emitter, op: P.Load) -> None:
    a = op.access
    t = op.result.type
    shape = access_shape(em, a)
    shape = Fragment(t.dtype, shape.lanes or t.lanes, shape.tile or t.tile)
    buf = em.buffers[a.buffer]
    fp8 = buf.dtype.is_fp8
    fill = literal(a.fill, buf.dtype) if not fp8 else "0"  # fp8: bits, with the fill selected after decoding
    if buf.dtype is DType.f64:  # a Python float would reach the load as f32 first
        fill = f"tl.full((), {fill}, tl.float64)"
    other = f", other={fill}" if a.mask is not None else ""
    sanitize_access(em, op, "load", a, shape)
    n = em.define(op.result)
    loaded = f"tl.load({pointer(em, a, shape)}{_mask(em, a, shape)}{other})"
    em.line(f"{n} = {from_storage(em, loaded, buf.dtype)}")
    if packed_i4(buf):  # the nibble of the element: low for even, high for odd last coordinates
        last = _coord(em, a.coords[-1], shape)
        em.line(f"{n} = ((({n}).to(tl.int32) >> (({last} & 1) * 4).to(tl.int32)) << 28) >> 28")
        em.line(f"{n} = {n}.to(tl.int8)")
        if a.mask is not None and int(a.fill) != 0:
            em.line(f"{n} = tl.where({em.arg(a.mask, shape)}, {n}, {int(a.fill)})")
    if fp8 and a.mask is not None and float(a.fill) != 0.0:
        em.line(f"{n} = tl.where({em.arg(a.mask, shape)}, {n}, {literal(float(a.fill), DType.f32)})")
    if shape.lanes != t.lanes or shape.tile != t.tile:
        em.line(f"{n} = tl.broadcast_to({n}, {em.shape(t)})")


@emits(P.Store)
def emit_store(em: Emitter, op: P.Store) -> None:
    a = op.access
    shape = access_shape(em, a, (op.value,))
    value = em.arg(op.value, shape, value_of=True)
    buf = em.buffers[a.buffer]
    dtype = buf.dtype
    if dtype.in_f32:
        value = to_storage(em, em.full(op.value, Fragment(op.value.type.dtype, shape.lanes, shape.tile))
                           if op.value.id in em.literals else value, dtype)
    sanitize_access(em, op, "store", a, shape)
    if packed_i4(buf):
        _store_i4(em, op, shape)
        return
    em.line(f"tl.store({pointer(em, a, shape)}, {value}{_mask(em, a, shape)})")


def packed_i4(buf) -> bool:  # buf: a physical Buffer
    """An i4 tensor parameter: two elements a byte (kir.dtypes.I4_PACKING). A local i4 buffer holds one element
    a byte (compiler-private memory that nobody else reads: no nibble to merge, no neighbour to race with)."""
    return buf.dtype is DType.i4 and buf.param is not None


def _store_i4(em: Emitter, op: P.Store, shape: Fragment) -> None:
    """A store into packed i4 memory (`_intent_store_i4`): every member's value, last-axis position and mask
    at the access's full shape, so that the helper can pair the members that own both nibbles of a byte."""
    a = op.access
    value = em.full(op.value, Fragment(DType.i32, shape.lanes, shape.tile))
    last = em.full(a.coords[-1], Fragment(DType.i64, shape.lanes, shape.tile))
    ptr = pointer(em, a, shape)
    if a.mask is not None:
        mask = em.full(a.mask, Fragment(DType.pred, shape.lanes, shape.tile))
    else:
        mask = "True" if shape.rank == 0 else f"tl.full({em.shape(shape)}, 1, tl.int1)"
    if shape.rank == 0:  # one element: merged into its byte
        merge = library(em, "merge_i4")
        em.line(f"{merge}(({ptr}).to(tl.int64), ({value}) & 15, {last}, {mask})")
        return
    library(em, "merge_i4")
    em.line(f"{library(em, 'store_i4')}({ptr}, {value}, {last}, {mask})")


@emits(P.AtomicRMW)
def emit_atomic(em: Emitter, op: P.AtomicRMW) -> None:
    a = op.access
    shape = access_shape(em, a, (op.value,))
    buf = em.buffers[a.buffer]
    sanitize_access(em, op, f"atomic {op.kind}", a, shape)
    value = em.arg(op.value, shape, value_of=True)
    if op.value.type.rank < shape.rank:
        value = f"tl.cast(tl.broadcast_to({value}, {em.shape(shape)}), {TL_DTYPE[buf.dtype]})"
    ptr, dt = pointer(em, a, shape), TL_DTYPE[buf.dtype]
    bits = _XCHG_BITS.get(dt) if str(op.kind) == "xchg" else None
    if bits is not None:
        # Triton's interpreter has no float atomic_xchg ('Unsupported data type'): exchange the bits
        # through a same-width integer pointer, which means the same and is what the GPU does anyway.
        ptr = f"({ptr}).to(tl.pointer_type({bits}))"
        value = f"tl.cast(tl.cast({value}, {dt}), {bits}, bitcast=True)"
    if str(op.kind) in ("max", "min") and dt in _FLOAT_BITS:
        _emit_float_extreme(em, op, shape, ptr, value, dt)
        return
    if str(op.kind) == "add" and buf.dtype is DType.bf16:
        _emit_bf16_add(em, op, shape, ptr, value)
        return
    n = em.define(op.result, "old")
    em.line(f"{n} = {_ATOMIC[str(op.kind)]}({ptr}, {value}{_mask(em, a, shape)}, "
            f"sem=\"{_SEM[str(op.order)]}\", scope=\"{op.scope}\")")
    if bits is not None:
        em.line(f"{n} = {n}.to({dt}, bitcast=True)")
    if a.mask is not None:  # a masked-off member's old value is whatever Triton leaves; KIR's is the fill (0)
        em.line(f"{n} = tl.where({em.arg(a.mask, shape)}, {n}, {literal(a.fill or 0, buf.dtype)})")
    _to_register(em, n, op.result, dt)


@emits(P.Ticket)
def emit_ticket(em: Emitter, op: P.Ticket) -> None:
    a = op.access
    shape = access_shape(em, a)
    sanitize_access(em, op, "ticket", a, shape)
    n = em.define(op.result, "ticket")
    em.line(f"{n} = tl.atomic_add({pointer(em, a, shape)}, 1{_mask(em, a, shape)}, sem=\"acq_rel\", scope=\"gpu\")")
    if a.mask is not None:  # a member outside the mask draws no ticket; its value is 0, as documented
        em.line(f"{n} = tl.where({em.arg(a.mask, shape)}, {n}, 0)")


def _emit_float_extreme(em: Emitter, op: P.AtomicRMW, shape: Fragment, ptr: str, value: str, dt: str) -> None:
    """Float atomic max/min as a compare-and-swap loop on the bits (`_emit_cas_loop`). Triton's own are
    integer atomics on the bit pattern, under which a NaN (in memory or as the operand) wins or loses by
    its sign bit; KIR's max/min propagate NaN whatever its sign."""
    ints = _FLOAT_BITS[dt]
    wins = ">" if str(op.kind) == "max" else "<"
    old = _emit_cas_loop(
        em, op, shape, ptr, f"tl.cast({value}, {dt})", ints,
        to_value=lambda bits: f"{bits}.to({dt}, bitcast=True)",
        to_bits=lambda v: f"{v}.to({ints}, bitcast=True)",
        propose=lambda seen, want: f"tl.where({seen} != {seen}, {seen}, tl.where({want} != {want}, {want}, "
                                   f"tl.where({want} {wins} {seen}, {want}, {seen})))")
    n = em.define(op.result, "old")
    em.line(f"{n} = {old}")
    _to_register(em, n, op.result, dt)


def _emit_bf16_add(em: Emitter, op: P.AtomicRMW, shape: Fragment, ptr: str, value: str) -> None:
    """bf16 atomic add as a compare-and-swap loop on the 16-bit pattern (`_emit_cas_loop`): the sum is
    computed in f32 and rounded to the nearest bf16, as every bf16 op here and in the oracle is (Triton's
    interpreter has no bf16 atomics at all, and the device's own rounds the exact sum once instead)."""
    load, store, rounded = library(em, "load_bf16"), library(em, "store_bf16"), library(em, "round_bf16")
    old = _emit_cas_loop(
        em, op, shape, ptr, f"tl.cast({value}, tl.float32)", "tl.int16",
        to_value=lambda bits: f"{load}({bits})",
        to_bits=lambda v: f"{store}({v}).to(tl.int16, bitcast=True)",
        propose=lambda seen, want: f"{rounded}({seen} + {want})")
    n = em.define(op.result, "old")
    em.line(f"{n} = {old}")


def _emit_cas_loop(em: Emitter, op: P.AtomicRMW, shape: Fragment, ptr: str, operand: str, ints: str,
                   to_value: Callable[[str], str], to_bits: Callable[[str], str],
                   propose: Callable[[str, str], str]) -> str:
    """A read-modify-write as a compare-and-swap loop on the element's bits (`ints`); returns the name of
    the old value. Each round every active member proposes `propose(current, operand)` and keeps the old
    value when its swap succeeds; a member that lost the race retries with what it saw, so the loop ends
    when every member has swapped once."""
    a = op.access
    buf = em.buffers[a.buffer]
    base = em.param_names[buf.param] if buf.param is not None else em.workspace_names[buf.storage]  # type: ignore
    sem, scope = _SEM[str(op.order)], op.scope
    p, want, active, cur, old = (em.fresh(x) for x in ("cas_ptr", "operand", "pending", "seen", "old"))
    full = em.shape(shape)
    em.line(f"{p} = ({ptr}).to(tl.pointer_type({ints}))")
    em.line(f"{want} = {operand}" if shape.rank == 0 else f"{want} = tl.broadcast_to({operand}, {full})")
    mask = em.arg(a.mask, shape) if a.mask is not None else "True"
    em.line(f"{active} = tl.full((), True, tl.int1) & {mask}" if shape.rank == 0 else
            f"{active} = tl.broadcast_to(tl.full((), True, tl.int1) & {mask}, {full})")
    em.line(f"{cur} = tl.load({p}, mask={active}, other=0)")
    em.line(f"{old} = {to_value(cur)}")
    with em.block(f"while {active if shape.rank == 0 else f'tl.max({active}.to(tl.int32)) > 0'}"):
        cf, nf, prev, hit = (em.fresh(x) for x in ("seen_value", "proposed", "prev", "swapped"))
        em.line(f"{cf} = {to_value(cur)}")
        em.line(f"{nf} = {propose(cf, want)}")
        em.line(f"{prev} = tl.atomic_cas(tl.where({active}, {p}, ({base}).to(tl.pointer_type({ints}))), "
                f"tl.where({active}, {cur}, 0), tl.where({active}, {to_bits(nf)}, 0), "
                f"sem=\"{sem}\", scope=\"{scope}\")")
        em.line(f"{hit} = {active} & ({prev} == {cur})")
        em.line(f"{old} = tl.where({hit}, {cf}, {old})")
        em.line(f"{cur} = tl.where({active}, {prev}, {cur})")
        em.line(f"{active} = {active} & ({hit} == 0)")
    return old


def _to_register(em: Emitter, name: str, result: PValue, element: str) -> None:
    """An atomic returns the old value in the buffer's element type (`element`, a tl dtype); the
    register holding the result may be wider (bf16 values live in f32 registers)."""
    reg = em.dtype(result.type)
    if reg != element:
        em.line(f"{name} = {name}.to({reg})")


@emits(P.AtomicCAS)
def emit_atomic_cas(em: Emitter, op: P.AtomicCAS) -> None:
    a = op.access
    shape = access_shape(em, a, (op.value, op.expected))
    buf = em.buffers[a.buffer]
    sanitize_access(em, op, "atomic cas", a, shape)
    dt = TL_DTYPE[buf.dtype]
    exp = f"tl.cast(tl.broadcast_to({em.arg(op.expected, shape, True)}, {em.shape(shape)}), {dt})"
    val = f"tl.cast(tl.broadcast_to({em.arg(op.value, shape, True)}, {em.shape(shape)}), {dt})"
    ptr = pointer(em, a, shape)
    n = em.define(op.result, "old")
    if a.mask is None:
        em.line(f"{n} = tl.atomic_cas({ptr}, {exp}, {val}, sem=\"{_SEM[str(op.order)]}\", scope=\"{op.scope}\")")
        _to_register(em, n, op.result, dt)
        return
    # atomic_cas has no mask: inactive members compare-and-swap the first element with itself.
    m = em.arg(a.mask, shape)
    base = em.param_names[buf.param] if buf.param is not None else em.workspace_names[buf.storage]  # type: ignore
    p2, e2 = em.fresh("cas_ptr"), em.fresh("cas_expected")
    em.line(f"{p2} = tl.where({m}, {ptr}, {base})")
    em.line(f"{e2} = tl.where({m}, {exp}, {val})")
    em.line(f"{n} = tl.atomic_cas({p2}, {e2}, {val}, sem=\"{_SEM[str(op.order)]}\", scope=\"{op.scope}\")")
    em.line(f"{n} = tl.where({m}, {n}, {literal(a.fill or 0, buf.dtype)})")
    _to_register(em, n, op.result, dt)


# Generated source holds no free text: a device check carries a token, and a failed launch maps the
# token back to the check's message (the op and its source line).
CHECK_MESSAGES: dict[str, str] = {}


def check_token(message: str) -> str:
    token = "intent_check_" + hashlib.sha256(message.encode("utf-8")).hexdigest()[:16]
    CHECK_MESSAGES[token] = message
    return token


@emits(P.Check)
def emit_check(em: Emitter, op: P.Check) -> None:
    # Compiled in only under Triton's debug option, which the launcher sets for kernels with checks.
    em.line("# device check: every active index lies inside the buffer")
    em.line(f"tl.device_assert({em.name(op.cond)}, \"{check_token(op.message)}\")")
