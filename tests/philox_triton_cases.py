"""Bit-exact comparison of oracle.philox against Triton's own tl.rand* run by the Triton interpreter.

Run by tests/test_philox.py in a fresh process: the interpreter must be selected before Triton is first
imported, which a shared test process cannot guarantee.
"""

import os

# The interpreter has to be selected before any @triton.jit below is decorated (and it is consulted
# again at run time), so set it before importing triton.
os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from oracle.philox import (  # noqa: E402
    philox_rand,
    philox_rand4x,
    philox_randint,
    philox_randint4x,
    philox_randn,
    philox_randn4x,
    result_dtype,
)

BLOCK = 1024
N_INT_ROWS = 5  # randint, randint4x[0..3]
N_FLOAT_ROWS = 10  # rand, randn, rand4x[0..3], randn4x[0..3]


@triton.jit
def _all_rng_kernel(offs_ptr, ints_ptr, floats_ptr, seed, n, N_ROUNDS: tl.constexpr, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    offs = tl.load(offs_ptr + idx, mask=mask, other=0)

    r = tl.randint(seed, offs, N_ROUNDS)
    tl.static_assert(r.dtype == tl.uint32)
    a, b, c, d = tl.randint4x(seed, offs, N_ROUNDS)
    # Storing uint32 into the int32 buffer keeps the bit pattern.
    tl.store(ints_ptr + 0 * n + idx, r, mask=mask)
    tl.store(ints_ptr + 1 * n + idx, a, mask=mask)
    tl.store(ints_ptr + 2 * n + idx, b, mask=mask)
    tl.store(ints_ptr + 3 * n + idx, c, mask=mask)
    tl.store(ints_ptr + 4 * n + idx, d, mask=mask)

    u = tl.rand(seed, offs, N_ROUNDS)
    g = tl.randn(seed, offs, N_ROUNDS)
    tl.static_assert(u.dtype == tl.float32)
    tl.static_assert(g.dtype == tl.float32)
    tl.store(floats_ptr + 0 * n + idx, u, mask=mask)
    tl.store(floats_ptr + 1 * n + idx, g, mask=mask)
    u1, u2, u3, u4 = tl.rand4x(seed, offs, N_ROUNDS)
    tl.store(floats_ptr + 2 * n + idx, u1, mask=mask)
    tl.store(floats_ptr + 3 * n + idx, u2, mask=mask)
    tl.store(floats_ptr + 4 * n + idx, u3, mask=mask)
    tl.store(floats_ptr + 5 * n + idx, u4, mask=mask)
    n1, n2, n3, n4 = tl.randn4x(seed, offs, N_ROUNDS)
    tl.store(floats_ptr + 6 * n + idx, n1, mask=mask)
    tl.store(floats_ptr + 7 * n + idx, n2, mask=mask)
    tl.store(floats_ptr + 8 * n + idx, n3, mask=mask)
    tl.store(floats_ptr + 9 * n + idx, n4, mask=mask)


@triton.jit
def _scalar_offset_rand_kernel(out_ptr, seed, offset):
    # A scalar offset passed as a kernel argument: its type (i32 or i64) comes from its value.
    tl.store(out_ptr, tl.rand(seed, offset))


def _run_triton(seed: int, offsets: np.ndarray, n_rounds: int = 10) -> tuple[np.ndarray, np.ndarray]:
    n = offsets.size
    offs_t = torch.from_numpy(np.ascontiguousarray(offsets))
    ints = torch.zeros((N_INT_ROWS, n), dtype=torch.int32)
    floats = torch.zeros((N_FLOAT_ROWS, n), dtype=torch.float32)
    grid = (triton.cdiv(n, BLOCK),)
    _all_rng_kernel[grid](offs_t, ints, floats, seed, n, N_ROUNDS=n_rounds, BLOCK=BLOCK)
    return ints.numpy().view(np.uint32), floats.numpy().view(np.uint32)


def _run_oracle(seed: int, offsets: np.ndarray, n_rounds: int = 10) -> tuple[np.ndarray, np.ndarray]:
    ints = [philox_randint(seed, offsets, n_rounds), *philox_randint4x(seed, offsets, n_rounds)]
    floats = [
        philox_rand(seed, offsets, n_rounds),
        philox_randn(seed, offsets, n_rounds),
        *philox_rand4x(seed, offsets, n_rounds),
        *philox_randn4x(seed, offsets, n_rounds),
    ]
    for x in ints:
        assert x.dtype == np.uint32
    for x in floats:
        assert x.dtype == np.float32
    return np.stack(ints).view(np.uint32), np.stack(floats).view(np.uint32)


def _offsets(dtype: str, size: int) -> np.ndarray:
    rng = np.random.default_rng(size)
    if dtype == "int32":
        specials = np.array([0, 7, 2**31 - 1, -(2**31), -1, 123456789], dtype=np.int32)
        body = rng.integers(-(2**31), 2**31, size=size, dtype=np.int64).astype(np.int32)
    elif dtype == "int64":
        i = np.arange(size, dtype=np.int64)
        specials = np.array([2**33, 2**63 - 1, -(2**63), -1, 2**32 - 1, 2**32, 5], dtype=np.int64)
        body = np.where(i % 2 == 0, 2**33 + i, rng.integers(-(2**62), 2**62, size=size, dtype=np.int64))
    elif dtype == "uint32":
        specials = np.array([0, 2**32 - 1, 2**31], dtype=np.uint32)
        body = rng.integers(0, 2**32, size=size, dtype=np.uint64).astype(np.uint32)
    elif dtype == "uint64":
        specials = np.array([2**64 - 1, 2**63, 2**33 + 1], dtype=np.uint64)
        body = rng.integers(0, 2**64 - 1, size=size, dtype=np.uint64, endpoint=True)
    elif dtype == "int16":
        specials = np.array([-1, -(2**15), 2**15 - 1], dtype=np.int16)
        body = rng.integers(-(2**15), 2**15, size=size).astype(np.int16)
    else:
        raise AssertionError(dtype)
    out = body.astype(dtype)
    k = min(size, specials.size)
    out[:k] = specials[:k]
    return out


SEEDS = [0, 42, 2**31 - 1, 2**32 + 5, 2**40 + 3]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("size", [1, 7, 1000])
def test_matches_triton(seed: int, dtype: str, size: int) -> None:
    offsets = _offsets(dtype, size)
    t_ints, t_floats = _run_triton(seed, offsets)
    o_ints, o_floats = _run_oracle(seed, offsets)
    assert np.array_equal(t_ints, o_ints)
    assert np.array_equal(t_floats, o_floats)


@pytest.mark.parametrize(
    "seed,dtype",
    [
        (1, "int32"),  # Triton specialises the value 1; the result must not change
        (-1, "int64"),  # i32 seed sign-extends into all 64 key bits
        (-(2**40), "int32"),
        (2**31, "int64"),  # smallest seed passed as i64
        (2**63 + 11, "int64"),  # passed as u64
        (2**64 - 1, "int32"),
        (12345, "uint32"),
        (12345, "uint64"),
        (2**33 + 7, "int16"),
    ],
)
def test_matches_triton_edge_seeds_and_dtypes(seed: int, dtype: str) -> None:
    offsets = _offsets(dtype, 300)
    t_ints, t_floats = _run_triton(seed, offsets)
    o_ints, o_floats = _run_oracle(seed, offsets)
    assert np.array_equal(t_ints, o_ints)
    assert np.array_equal(t_floats, o_floats)


@pytest.mark.parametrize("n_rounds", [0, 1, 7])
def test_matches_triton_n_rounds(n_rounds: int) -> None:
    offsets = _offsets("int64", 100)
    t_ints, t_floats = _run_triton(2**40 + 3, offsets, n_rounds)
    o_ints, o_floats = _run_oracle(2**40 + 3, offsets, n_rounds)
    assert np.array_equal(t_ints, o_ints)
    assert np.array_equal(t_floats, o_floats)


# The interpreter stores Python ints in [2**31, 2**32) as uint32 data typed i64, so its `offset >> 32`
# runs on 32-bit data and yields c1 = 0xFFFFFFFF instead of the compiled kernel's 0. The oracle follows
# the compiled semantics (a genuine i64 offset), hence the strict xfail documenting that divergence.
_INTERPRETER_U32_ARG_QUIRK = pytest.mark.xfail(strict=True, reason="interpreter narrows i64 args < 2**32")


@pytest.mark.parametrize(
    "offset", [3, -3, 2**40 + 1, -(2**40), pytest.param(2**31 + 9, marks=_INTERPRETER_U32_ARG_QUIRK)]
)
def test_scalar_offset_argument(offset: int) -> None:
    # A Python int offset becomes i32 or i64 by value, which decides whether c1 is used; the oracle gets
    # the same width through the array dtype.
    out = torch.zeros(1, dtype=torch.float32)
    _scalar_offset_rand_kernel[(1,)](out, 42, offset)
    dtype = np.int32 if -(2**31) <= offset < 2**31 else np.int64
    expected = philox_rand(42, np.array(offset, dtype=dtype))
    assert expected.shape == ()
    assert out.numpy().view(np.uint32)[0] == expected.view(np.uint32)


def test_offset_width_matters() -> None:
    # The same numeric offset gives different streams for i32 and i64 once bit 31 is involved (c1 =
    # 0xFFFFFFFF for negative i64 but 0 for i32), and the same stream for small non-negative offsets.
    neg = np.array([-5, -1], dtype=np.int64)
    assert not np.array_equal(philox_randint(7, neg), philox_randint(7, neg.astype(np.int32)))
    pos = np.arange(10)
    assert np.array_equal(philox_randint(7, pos.astype(np.int64)), philox_randint(7, pos.astype(np.int32)))


def test_shapes_and_ranges() -> None:
    offs = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    for fn in (philox_randint, philox_rand, philox_randn):
        assert fn(3, offs).shape == (2, 3, 4)
        assert np.array_equal(fn(3, offs).reshape(-1), fn(3, offs.reshape(-1)))
        assert fn(3, np.int64(5)).shape == ()
        assert fn(3, np.zeros(0, np.int32)).shape == (0,)
    u = philox_rand(9, np.arange(100_000, dtype=np.int64))
    assert u.min() >= 0.0 and u.max() < 1.0
    g = philox_randn(9, np.arange(100_000, dtype=np.int64))
    assert abs(float(g.mean())) < 0.02 and abs(float(g.std()) - 1.0) < 0.02


def test_result_dtype() -> None:
    assert result_dtype("randint") == "u32"
    assert result_dtype("rand") == "f32"
    assert result_dtype("randn") == "f32"
    with pytest.raises(ValueError):
        result_dtype("bogus")


def test_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError):
        philox_rand(2**64, np.arange(3))
    with pytest.raises(ValueError):
        philox_rand(-(2**63) - 1, np.arange(3))
    with pytest.raises(TypeError):
        philox_rand(1.5, np.arange(3))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        philox_rand(1, np.arange(3, dtype=np.float32))
