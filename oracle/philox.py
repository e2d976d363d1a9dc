"""Bit-exact NumPy reference for Triton's counter-based RNG (``triton.language.random``).

Mirrors Triton 3.x ``tl.randint`` / ``tl.randint4x`` / ``tl.rand`` / ``tl.rand4x`` / ``tl.randn`` /
``tl.randn4x`` for a scalar seed and an integer offset block:

* The seed is what a Python int becomes as a kernel argument (i32, i64 or u64, chosen by value) and is
  then cast to uint64, i.e. the seed is taken modulo 2**64 (negative i32/i64 seeds sign-extend). Its
  low 32 bits form key word k0 and its high 32 bits key word k1.
* The offset's *dtype width* matters: the low 32 bits always form counter word c0; for offsets wider
  than 32 bits, bits 32..63 form c1, otherwise c1 = 0. c2 = c3 = 0. Narrower signed offsets
  (int8/int16) are sign-extended to 32 bits first, as Triton's integer cast does.
* ``randint`` returns uint32 (Philox is always run on 32-bit words, because ``randint4x`` always
  truncates c0 to uint32), so ``rand`` always uses the 32-bit ``uint_to_uniform_float`` path.

The integer part (randint*, rand*) is exact on any backend. ``randn`` uses float32 ``log``/``sqrt``/
``cos``/``sin``; here they are NumPy's float32 ufuncs, which is exactly what ``TRITON_INTERPRET=1``
uses, so randn is bit-exact against the interpreter on the same machine. Compiled GPU kernels use the
device's math library, which may differ from this by a few ulps.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "N_ROUNDS_DEFAULT",
    "philox",
    "philox_randint",
    "philox_randint4x",
    "philox_rand",
    "philox_rand4x",
    "philox_randn",
    "philox_randn4x",
    "result_dtype",
]

N_ROUNDS_DEFAULT = 10

_PHILOX_KEY_A = np.uint32(0x9E3779B9)
_PHILOX_KEY_B = np.uint32(0xBB67AE85)
_PHILOX_ROUND_A = np.uint64(0xD2511F53)
_PHILOX_ROUND_B = np.uint64(0xCD9E8D57)
_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)

# Triton materialises Python float literals as float32 constants before using them, so round them
# to float32 here as well.
_UNIFORM_SCALE_32 = np.float32(4.6566127342e-10)
_BOX_MULLER_MIN_U = np.float32(1.0e-7)
_TWO_PI = np.float32(6.283185307179586)
_MINUS_TWO = np.float32(-2.0)

_RESULT_DTYPES = {
    "randint": "u32",
    "randint4x": "u32",
    "rand": "f32",
    "rand4x": "f32",
    "randn": "f32",
    "randn4x": "f32",
}

U32x4 = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def result_dtype(kind: str) -> str:
    """Element dtype Triton produces for ``tl.<kind>``: 'u32' for the randint family, 'f32' otherwise."""
    try:
        return _RESULT_DTYPES[kind]
    except KeyError:
        raise ValueError(f"unknown RNG kind {kind!r}; expected one of {sorted(_RESULT_DTYPES)}") from None


def _seed_words(seed: int) -> tuple[np.uint32, np.uint32]:
    """(lo, hi) 32-bit key words of ``seed`` as Triton sees it when passed as a kernel argument."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {type(seed).__name__}")
    seed = int(seed)
    # Triton accepts exactly the values representable as i32/i64/u64 kernel arguments.
    if not -(2**63) <= seed < 2**64:
        raise ValueError(f"seed {seed} does not fit a Triton integer kernel argument (i64/u64)")
    # i32/i64 arguments are sign-extended by the cast to uint64, which equals reducing mod 2**64.
    s = seed % 2**64
    return np.uint32(s & 0xFFFFFFFF), np.uint32(s >> 32)


def _offset_words(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counter words (c0, c1) exactly as ``randint4x`` forms them from the offset block."""
    offsets = np.asarray(offsets)
    shape = offsets.shape
    offsets = offsets.reshape(-1)
    if offsets.dtype == np.bool_ or not np.issubdtype(offsets.dtype, np.integer):
        raise TypeError(f"offsets must have an integer dtype, got {offsets.dtype}")
    if offsets.dtype.itemsize > 4:
        # `offset.to(uint32)` truncates and `(offset >> 32).to(uint32)` keeps bits 32..63 whatever
        # the shift's signedness, so work on the unsigned bit pattern.
        bits = offsets.astype(np.int64 if offsets.dtype.kind == "i" else np.uint64).view(np.uint64)
        c0 = (bits & _MASK32).astype(np.uint32)
        c1 = (bits >> _SHIFT32).astype(np.uint32)
    else:
        # Narrow offsets extend by their own signedness (int8 -1 -> 0xFFFFFFFF), and c1 is zero even
        # for negative offsets because no shift happens.
        wide = offsets.astype(np.int64) if offsets.dtype.kind == "i" else offsets.astype(np.uint64)
        c0 = (wide & 0xFFFFFFFF).astype(np.uint32)
        c1 = np.zeros(offsets.shape, dtype=np.uint32)
    return c0.reshape(shape), c1.reshape(shape)


def _mulhilo(a: np.uint64, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # A 32x32-bit product always fits in uint64, so the high word needs no wider type.
    prod = a * b.astype(np.uint64)
    return (prod >> _SHIFT32).astype(np.uint32), (prod & _MASK32).astype(np.uint32)


def philox(
    seed: int,
    c0: np.ndarray,
    c1: np.ndarray,
    c2: np.ndarray,
    c3: np.ndarray,
    n_rounds: int = N_ROUNDS_DEFAULT,
) -> U32x4:
    """``tl.random.philox`` on 32-bit counter words (the only width ``randint4x`` ever uses).

    The counters are reinterpreted as uint32 (Triton bitcasts them) and broadcast together.
    """
    k0, k1 = _seed_words(seed)
    words = np.broadcast_arrays(*(np.asarray(c) for c in (c0, c1, c2, c3)))
    for w in words:
        if w.dtype.itemsize != 4 or not np.issubdtype(w.dtype, np.integer):
            raise TypeError(f"32-bit philox needs 32-bit integer counters, got {w.dtype}")
    shape = words[0].shape
    # Work on flat buffers: 0-d inputs would otherwise decay to NumPy scalars along the way.
    c0, c1, c2, c3 = (np.array(w, copy=True).reshape(-1).view(np.uint32) for w in words)
    if n_rounds < 0:
        raise ValueError("n_rounds must be non-negative")
    # Key additions wrap modulo 2**32; keep the keys as Python ints to avoid NumPy scalar overflow warnings.
    key0, key1 = int(k0), int(k1)
    for _ in range(n_rounds):
        hi_b, lo_b = _mulhilo(_PHILOX_ROUND_B, c2)
        hi_a, lo_a = _mulhilo(_PHILOX_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ np.uint32(key0), lo_b, hi_a ^ c3 ^ np.uint32(key1), lo_a
        key0 = (key0 + int(_PHILOX_KEY_A)) & 0xFFFFFFFF
        key1 = (key1 + int(_PHILOX_KEY_B)) & 0xFFFFFFFF
    return c0.reshape(shape), c1.reshape(shape), c2.reshape(shape), c3.reshape(shape)


def philox_randint4x(seed: int, offsets: np.ndarray, n_rounds: int = N_ROUNDS_DEFAULT) -> U32x4:
    """Same as ``tl.randint4x(seed, offsets, n_rounds)``: four uint32 arrays shaped like ``offsets``."""
    c0, c1 = _offset_words(offsets)
    zero = np.zeros_like(c0)
    return philox(seed, c0, c1, zero, zero, n_rounds)


def philox_randint(seed: int, offsets: np.ndarray, n_rounds: int = N_ROUNDS_DEFAULT) -> np.ndarray:
    """Same as ``tl.randint(seed, offsets, n_rounds)``: a uint32 array shaped like ``offsets``.

    Storing Triton's uint32 result into an int32 tensor keeps the bits, so ``.view(np.int32)`` gives
    what torch sees in that case.
    """
    return philox_randint4x(seed, offsets, n_rounds)[0]


def _uint32_to_uniform_float(x: np.ndarray) -> np.ndarray:
    # Triton folds the sign bit away (x < 0 -> ~x) so that the int32 -> float32 rounding can never
    # reach 2**31, which keeps max * scale strictly below 1.0.
    xi = np.asarray(x).view(np.int32)
    xi = np.where(xi < 0, ~xi, xi)
    return np.asarray(xi.astype(np.float32) * _UNIFORM_SCALE_32, dtype=np.float32)


def philox_rand(seed: int, offsets: np.ndarray, n_rounds: int = N_ROUNDS_DEFAULT) -> np.ndarray:
    """Same as ``tl.rand(seed, offsets, n_rounds)``: float32 in [0, 1), shaped like ``offsets``."""
    return _uint32_to_uniform_float(philox_randint(seed, offsets, n_rounds))


def philox_rand4x(
    seed: int, offsets: np.ndarray, n_rounds: int = N_ROUNDS_DEFAULT
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Same as ``tl.rand4x(seed, offsets, n_rounds)``."""
    i1, i2, i3, i4 = philox_randint4x(seed, offsets, n_rounds)
    return tuple(_uint32_to_uniform_float(i) for i in (i1, i2, i3, i4))  # type: ignore[return-value]


def _pair_uniform_to_normal(u1: np.ndarray, u2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # The interpreter evaluates log/sqrt/cos/sin with NumPy's float32 ufuncs on contiguous buffers;
    # use the same ufuncs on contiguous 1-D buffers so that any SIMD dispatch matches.
    shape = u1.shape
    u1 = np.ascontiguousarray(u1, dtype=np.float32).reshape(-1)
    u2 = np.ascontiguousarray(u2, dtype=np.float32).reshape(-1)
    u1 = np.maximum(_BOX_MULLER_MIN_U, u1)
    th = _TWO_PI * u2
    r = np.sqrt(_MINUS_TWO * np.log(u1))
    return (r * np.cos(th)).reshape(shape), (r * np.sin(th)).reshape(shape)


def philox_randn(seed: int, offsets: np.ndarray, n_rounds: int = N_ROUNDS_DEFAULT) -> np.ndarray:
    """Same as ``tl.randn(seed, offsets, n_rounds)``: float32 N(0, 1) shaped like ``offsets``.

    Uses the first two Philox outputs as the Box-Muller pair and keeps only the cosine branch.
    """
    i1, i2, _, _ = philox_randint4x(seed, offsets, n_rounds)
    n1, _ = _pair_uniform_to_normal(_uint32_to_uniform_float(i1), _uint32_to_uniform_float(i2))
    return n1


def philox_randn4x(
    seed: int, offsets: np.ndarray, n_rounds: int = N_ROUNDS_DEFAULT
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Same as ``tl.randn4x(seed, offsets, n_rounds)``."""
    u1, u2, u3, u4 = philox_rand4x(seed, offsets, n_rounds)
    n1, n2 = _pair_uniform_to_normal(u1, u2)
    n3, n4 = _pair_uniform_to_normal(u3, u4)
    return n1, n2, n3, n4
