"""The helpers of the torch reference that `tests/srcgen.py` writes next to each generated kernel.

`PRELUDE` is pasted verbatim at the top of every generated file, so a saved case is one
self-contained Python file: the `@intent.kernel` and a plain-torch `reference(a)` computing the same
outputs. The reference never imports Intent: floats are float64 tensors rounded to the kernel's
dtype after each correctly rounded operation (`rnd`, written here with NumPy's `frexp`/`rint`, not
with the oracle's rounding), integers are int64 tensors wrapped to the kernel's width (`wrap`), and
casts follow the documented rules (float -> integer truncates toward zero and saturates, NaN -> 0).
"""

from __future__ import annotations

PRELUDE = '''
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
'''
