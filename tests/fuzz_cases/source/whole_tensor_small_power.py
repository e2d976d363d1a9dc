"""A generated kernel (tests/srcgen.py) and its torch reference."""
import intent
from intent import Out, InOut, dims, parallel, pred, f16, bf16, f32, f64
from intent import i4, i8, i16, i32, i64, u8, u16, u32, u64, f8e4m3, f8e5m2

import numpy as _np
import torch as _torch

# significand bits (with the implicit one), smallest normal exponent, largest finite value
_FLOAT = {"f16": (11, -14, 65504.0), "bf16": (8, -126, 3.3895313892515355e38),
          "f32": (24, -126, 3.4028234663852886e38), "f8e4m3": (4, -6, 448.0), "f8e5m2": (3, -14, 57344.0)}
_INT = {"i4": (4, True), "i8": (8, True), "i16": (16, True), "i32": (32, True), "i64": (64, True),
        "u8": (8, False), "u16": (16, False), "u32": (32, False), "u64": (64, False)}


def rnd(x, dt):
    """float64 `x` rounded to the nearest `dt` value (ties to even, subnormals, overflow to inf; f8e4m3 has
    no infinities: overflow and infinities give NaN)."""
    x = _torch.as_tensor(x, dtype=_torch.float64)
    if dt == "f64":
        return x
    p, emin, big = _FLOAT[dt]
    a = x.numpy()
    with _np.errstate(all="ignore"):
        _, e = _np.frexp(a)
        q = _np.maximum(e, emin + 1) - p
        r = _np.ldexp(_np.rint(_np.ldexp(a, -q)), q)
        r = _np.where(_np.abs(r) > big, _np.copysign(_np.nan if dt == "f8e4m3" else _np.inf, a), r)
        # infinities stay, but f8e4m3 has none: its arithmetic (non-saturating) rounding gives NaN
        r = _np.where(_np.isfinite(a), r, _np.nan if dt == "f8e4m3" else a)
    return _torch.from_numpy(_np.asarray(r, dtype=_np.float64))


def wrap(x, dt):
    """int64 `x` wrapped to the integer dtype `dt` (u64 is kept as its int64 bit pattern)."""
    bits, signed = _INT[dt]
    x = _torch.as_tensor(x, dtype=_torch.int64)
    if bits == 64:
        return x
    x = x & ((1 << bits) - 1)
    return _torch.where(x >= (1 << (bits - 1)), x - (1 << bits), x) if signed else x


def cast(x, src, dst):
    """`x.to(dst)` by the documented rules, on the reference's representations."""
    x = _torch.as_tensor(x)
    if dst == "pred":
        return x != 0
    if src == "pred":
        return rnd(x.double(), dst) if dst in _FLOAT or dst == "f64" else x.long()
    if dst == "f8e4m3":  # torch's conversion saturates (infinities too); NaN stays NaN
        return rnd(x.double().clamp(-448.0, 448.0), dst)
    if dst in _FLOAT or dst == "f64":
        return rnd(x.double(), dst)
    if src in _INT:
        return wrap(x.long(), dst)
    bits, signed = _INT[dst]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    t = _torch.trunc(_torch.nan_to_num(x, nan=0.0, posinf=_np.inf, neginf=-_np.inf))
    mid = wrap(t.clamp(-2.0 ** 62, 2.0 ** 62).long(), dst)
    top = _torch.full_like(mid, hi if hi < 2 ** 63 else -1)
    return _torch.where(t >= float(hi), top, _torch.where(t <= float(lo), _torch.full_like(mid, lo), mid))


def gather(v, j, fill=0):
    """`v[j]` along the first axis, `fill` where `j` is out of range."""
    n = v.shape[0]
    ok = (j >= 0) & (j < n)
    picked = v[j.clamp(0, max(n - 1, 0))] if n else _torch.zeros(j.shape, dtype=v.dtype)
    return _torch.where(ok, picked, _torch.as_tensor(fill, dtype=v.dtype))


def scatter(o, j, val):
    """`o[j] = val` for the in-range entries of the (unique) indices `j`; others are dropped."""
    o = o.clone()
    ok = (j >= 0) & (j < o.shape[0])
    o[j[ok]] = val[ok] if _torch.as_tensor(val).dim() else val
    return o


def scatter_add(o, j, val):
    """Integer atomic add of `val` at indices `j` (repeats accumulate; out of range dropped)."""
    ok = (j >= 0) & (j < o.shape[0])
    val = _torch.as_tensor(val, dtype=o.dtype).expand(j.shape)
    return o.clone().index_add_(0, j[ok], val[ok])


def scatter_reduce(o, j, val, how):
    """Integer atomic max/min of `val` at indices `j`."""
    ok = (j >= 0) & (j < o.shape[0])
    val = _torch.as_tensor(val, dtype=o.dtype).expand(j.shape)
    return o.clone().scatter_reduce_(0, j[ok], val[ok], reduce=how, include_self=True)

M, N, E, S = dims('M N E S')


@intent.kernel(requires=[E >= 0])
def k(v1: f32[E], offs2: i64[S + 1], o3: Out[f32[S]], o4: InOut[f32[E]], x5: f16[M, N], y6: f16[M, N], o8: Out[f16[M, N]]):
    for q in parallel(S):
        b = offs2[q]
        e = offs2[q + 1]
        o3[q] = intent.sum(v1[b:e])
        o4[b:e] = intent.cumsum(v1[b:e], reverse=True)
    r7 = intent.max(y6, axis=0, keepdims=True)
    o8[:, :] = ((y6 ** 3) + y6)


def reference(a):
    """The outputs from the arguments `a` (floats as float64, integers as int64, preds as bool)."""
    out = {}
    out['o3'] = _torch.zeros(5, dtype=a['v1'].dtype)
    for q in range(5):
        seg = a['v1'][int(a['offs2'][q]):int(a['offs2'][q + 1])]
        out['o3'][q] = rnd(seg.sum(), 'f32')
    out['o4'] = a['o4'].clone()
    for q in range(5):
        b, e = int(a['offs2'][q]), int(a['offs2'][q + 1])
        seg = a['v1'][b:e]
        out['o4'][b:e] = rnd(seg.flip(0).cumsum(0).flip(0), 'f32')
    r7 = a['y6'].amax(0, keepdim=True)
    out['o8'] = _torch.broadcast_to(rnd(rnd(rnd(a['y6'] * a['y6'], 'f16') * a['y6'], 'f16') + a['y6'], 'f16'), a['x5'].shape).clone()
    return out
