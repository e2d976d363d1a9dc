"""Suggestions that are right: every known torch/NumPy/Triton name and misspelling gets its Intent equivalent
(exact messages, one case per table entry), foreign functions name the intent operation, fuzzy matching stays
the fallback, and the formulas the table suggests compute what the names they replace compute."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import intent
from kir.frontend.suggest import EQUIVALENTS, METHODS
from tests.frontend_support import diagnostic, kernels

# (name written as intent.NAME(...), the clause after "module `intent` has no attribute `NAME`; ")
INTENT_NAMES = [
    ("cast", "convert values with `x.to(dtype)` (`intent.bitcast(x, dtype)` reinterprets bits instead)"),
    ("astype", "convert values with `x.to(dtype)` (`intent.bitcast(x, dtype)` reinterprets bits instead)"),
    ("convert", "convert values with `x.to(dtype)` (`intent.bitcast(x, dtype)` reinterprets bits instead)"),
    ("float32", "the dtype is `intent.f32`"),
    ("float", "the dtype is `intent.f32`"),
    ("float16", "the dtype is `intent.f16`"),
    ("half", "the dtype is `intent.f16`"),
    ("bfloat16", "the dtype is `intent.bf16`"),
    ("float64", "the dtype is `intent.f64`"),
    ("double", "the dtype is `intent.f64`"),
    ("int8", "the dtype is `intent.i8`"),
    ("int16", "the dtype is `intent.i16`"),
    ("int32", "the dtype is `intent.i32`"),
    ("int", "the dtype is `intent.i32`"),
    ("int64", "the dtype is `intent.i64`"),
    ("long", "the dtype is `intent.i64`"),
    ("uint8", "the dtype is `intent.u8`"),
    ("uint16", "the dtype is `intent.u16`"),
    ("uint32", "the dtype is `intent.u32`"),
    ("uint64", "the dtype is `intent.u64`"),
    ("bool", "the dtype is `intent.pred`"),
    ("bool_", "the dtype is `intent.pred`"),
    ("relu", "write `intent.maximum(x, 0.0)`"),
    ("gelu", "write `0.5 * x * (1.0 + intent.erf(x * 0.7071067811865476))`"),
    ("silu", "write `x * intent.sigmoid(x)`"),
    ("softmax", "write `e = intent.exp(x - intent.max(x))`, then `e / intent.sum(e)`"),
    ("logsumexp", "write `m = intent.max(x)`, then `m + intent.log(intent.sum(intent.exp(x - m)))`"),
    ("clip", "write `intent.clamp(x, lo, hi)`"),
    ("softplus", "write `intent.where(x > 20.0, x, intent.log1p(intent.exp(x)))`"),
    ("leaky_relu", "write `intent.where(x >= 0.0, x, 0.01 * x)` (0.01 is torch's default slope)"),
    ("hardtanh", "write `intent.clamp(x, -1.0, 1.0)`"),
    ("square", "write `x * x`"),
    ("reciprocal", "write `1.0 / x`"),
    ("tan", "write `intent.sin(x) / intent.cos(x)`"),
    ("log10", "write `intent.log(x) * 0.4342944819032518`"),
    ("isfinite", "write `~(intent.isnan(x) | intent.isinf(x))`"),
    ("var", "write `d = x - intent.mean(x)`, then `intent.mean(d * d)` (or a Welford `intent.reduce`)"),
    ("std", "write `d = x - intent.mean(x)`, then `intent.sqrt(intent.mean(d * d))`"),
    ("add", "write `a + b`"),
    ("subtract", "write `a - b`"),
    ("multiply", "write `a * b`"),
    ("divide", "write `a / b`"),
    ("true_divide", "write `a / b`"),
    ("floor_divide",
     "write `a // b` (floored for floats, as in torch; integer `//` truncates toward zero, as in C)"),
    ("fmod", "Intent's `a % b` is torch.remainder (the sign of `b`); there is no C fmod (the sign of `a`)"),
    ("remainder", "write `a % b` (the sign of `b`, as torch.remainder)"),
    ("power", "write `a ** b` or `intent.pow(a, b)`"),
    ("logical_and", "write `a & b` on preds (`and` on scalar preds)"),
    ("logical_or", "write `a | b` on preds (`or` on scalar preds)"),
    ("logical_not", "write `~a` on preds (`not` on a scalar pred)"),
    ("logical_xor", "write `a ^ b` on preds"),
    ("bitwise_and", "write `a & b`"),
    ("bitwise_or", "write `a | b`"),
    ("bitwise_xor", "write `a ^ b`"),
    ("bitwise_not", "write `~a`"),
    ("amax", "write `intent.max(x, axis)`"),
    ("amin", "write `intent.min(x, axis)`"),
    ("average", "write `intent.mean(x, axis)`"),
    ("matmul", "write `intent.dot(a, b)`"),
    ("mm", "write `intent.dot(a, b)`"),
    ("bmm", "write `intent.dot(a, b)`"),
    ("tensordot", "write `intent.einsum(spec, a, b)`"),
    ("outer", "write `intent.expand_dims(a, 1) * intent.expand_dims(b, 0)`"),
    ("bincount", "write `intent.histogram(values, bins)`"),
    ("cat", "write `intent.concat((a, b), axis)`"),
    ("concatenate", "write `intent.concat((a, b), axis)`"),
    ("stack", "write `intent.concat((intent.expand_dims(a, 0), intent.expand_dims(b, 0)), 0)`"),
    ("unsqueeze", "write `intent.expand_dims(x, axis)`"),
    ("view", "write `intent.reshape(x, shape)`"),
    ("flatten", "write `intent.reshape(x, (-1,))`"),
    ("swapaxes", "write `intent.permute(x, dims)`"),
    ("moveaxis", "write `intent.permute(x, dims)`"),
    ("expand", "write `intent.broadcast_to(x, shape)`"),
    ("atomic_sub", "write `intent.atomic_add(dst, index, -value)`"),
    ("scatter", "assign through the index (`out[idx[n]] = v`) or write `intent.store(dst, index, value, unique=True)`"),
    ("program_id", "write `for i in parallel(N):` (each instance is one `i`)"),
    ("cdiv", "write `(a + b - 1) // b`"),
    ("uniform", "write `intent.rand(seed, offset)`"),
    ("normal", "write `intent.randn(seed, offset)`"),
    ("dropout", "write `intent.where(intent.rand(seed, offset) >= p, x / (1.0 - p), 0.0)`"),
]

# (method written as x[n].NAME(), the clause after the list of what tensor values have)
METHOD_NAMES = [
    ("astype", "convert values with `x.to(dtype)` (`intent.bitcast(x, dtype)` reinterprets bits instead)"),
    ("type", "convert values with `x.to(dtype)` (`intent.bitcast(x, dtype)` reinterprets bits instead)"),
    ("cast", "convert values with `x.to(dtype)` (`intent.bitcast(x, dtype)` reinterprets bits instead)"),
    ("float", "write `x.to(intent.f32)`"),
    ("half", "write `x.to(intent.f16)`"),
    ("bfloat16", "write `x.to(intent.bf16)`"),
    ("double", "write `x.to(intent.f64)`"),
    ("int", "write `x.to(intent.i32)`"),
    ("long", "write `x.to(intent.i64)`"),
    ("bool", "write `x.to(intent.pred)`"),
    ("reshape", "write `intent.reshape(x, shape)`"),
    ("size", "write `x.shape`"),
    ("dim", "write `x.ndim`"),
    ("t", "write `x.T`"),
    ("item", "a kernel body computes on values: use the value itself"),
    ("tolist", "a kernel body computes on values: use the value itself"),
    ("numpy", "a kernel body computes on values: use the value itself"),
    ("contiguous", "a kernel body computes on values: use the value itself"),
    ("clone", "a kernel body computes on values: use the value itself"),
]

_HAVE = "tensor values have no attribute `{}` (they have .shape, .dtype, .ndim, .T and .to(dtype)); {}"


@pytest.mark.parametrize(("name", "clause"), INTENT_NAMES, ids=[n for n, _ in INTENT_NAMES])
def test_intent_name(tmp_path, name: str, clause: str) -> None:
    diagnostic(tmp_path, f"""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                out[n] = intent.{name}(x[n])
    """, f"intent.{name}", f"module `intent` has no attribute `{name}`; {clause}")


@pytest.mark.parametrize(("name", "clause"), METHOD_NAMES, ids=[n for n, _ in METHOD_NAMES])
def test_tensor_method(tmp_path, name: str, clause: str) -> None:
    diagnostic(tmp_path, f"""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                out[n] = x[n].{name}()
    """, "x[n].", _HAVE.format(name, clause))


def test_every_entry_has_a_case() -> None:
    assert [n for n, _ in INTENT_NAMES] == list(EQUIVALENTS)
    assert [n for n, _ in METHOD_NAMES] == list(METHODS)


def test_no_entry_shadows_an_intent_name() -> None:
    assert not [n for n in EQUIVALENTS if hasattr(intent, n)]


def test_the_intent_names_an_entry_mentions_exist() -> None:
    named = {m for clause in [*EQUIVALENTS.values(), *METHODS.values()] for m in re.findall(r"intent\.(\w+)", clause)}
    assert named and not [n for n in named if not hasattr(intent, n)]


FOREIGN = [
    ("torch.tanh(x[n])", "torch.tanh", "`torch.tanh` is torch's, not Intent's; write `intent.tanh(x)`"),
    ("np.exp(x[n])", "np.exp", "`numpy.exp` is numpy's, not Intent's; write `intent.exp(x)`"),
    ("math.exp(x[n])", "math.exp", "`math.exp` is math's, not Intent's; write `intent.exp(x)`"),
    ("torch.where(x[n] > 0.0, x[n], 0.0)", "torch.where",
     "`torch.where` is torch's, not Intent's; write `intent.where(cond, ...)`"),
    ("torch.clamp(x[n], 0.0, 1.0)", "torch.clamp",
     "`torch.clamp` is torch's, not Intent's; write `intent.clamp(x, ...)`"),
    ("np.clip(x[n], 0.0, 1.0)", "np.clip",
     "`numpy.clip` is numpy's, not Intent's; write `intent.clamp(x, lo, hi)`"),
    ("torch.nn.functional.relu(x[n])", "torch.nn",
     "`torch.nn.functional.relu` is torch's, not Intent's; write `intent.maximum(x, 0.0)`"),
    ("torch.sigmoid(x[n])", "torch.sigmoid", "`torch.sigmoid` is torch's, not Intent's; write `intent.sigmoid(x)`"),
    ("x[n].to(torch.float32)", "torch.float32", "`torch.float32` is torch's, not Intent's; the dtype is `intent.f32`"),
    ("x[n].to(np.float32)", "np.float32", "`numpy.float32` is numpy's, not Intent's; the dtype is `intent.f32`"),
    ("torch.mean(x)", "torch.mean", "`torch.mean` is torch's, not Intent's; write `intent.mean(x, ...)`"),
    ("torch.amax(x)", "torch.amax", "`torch.amax` is torch's, not Intent's; write `intent.max(x, axis)`"),
    ("np.cumsum(x)[n]", "np.cumsum", "`numpy.cumsum` is numpy's, not Intent's; write `intent.cumsum(x, ...)`"),
    ("torch.arange(N)[n]", "torch.arange",
     "`torch.arange` is torch's, not Intent's; write `intent.arange(start, ...)`"),
    ("torch.matmul(x, x)", "torch.matmul", "`torch.matmul` is torch's, not Intent's; write `intent.dot(a, b)`"),
    ("torch.softmax(x, 0)[n]", "torch.softmax",
     "`torch.softmax` is torch's, not Intent's; write `e = intent.exp(x - intent.max(x))`, then `e / intent.sum(e)`"),
    ("tanh(x[n])", "tanh(", "`tanh` is torch's, not Intent's; write `intent.tanh(x)`"),
]


@pytest.mark.parametrize(("expr", "marker", "message"), FOREIGN, ids=[m for _, m, _ in FOREIGN])
def test_foreign_names(tmp_path, expr: str, marker: str, message: str) -> None:
    diagnostic(tmp_path, f"""
        import numpy as np
        import torch
        from torch import tanh

        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                out[n] = {expr}
    """, marker, message)


BARE = [
    ("relu(x[n])", "relu", "undefined name `relu`; write `intent.maximum(x, 0.0)`"),
    ("exp(x[n])", "exp", "undefined name `exp`; write `intent.exp(x)`"),
    ("x[n].to(float32)", "float32", "undefined name `float32`; the dtype is `intent.f32`"),
    ("xx[n]", "xx", "undefined name `xx`; did you mean `x`?"),
    ("sum(x)", "sum", "the Python builtin `sum` cannot be used in a kernel body; write `intent.sum(x, ...)`"),
    ("round(x[n])", "round", "the Python builtin `round` cannot be used in a kernel body; write `intent.round(x)`"),
    ("x[n].to(float)", "float", ".to() needs a dtype such as f32 or i32, got the builtin `float`; the dtype is "
                                "`intent.f32`"),
    ("x[n].to('bf16')", "'bf16'", ".to() needs a dtype such as f32 or i32, got the string 'bf16'; the dtype is "
                                  "`intent.bf16`"),
    ("intent.expp(x[n])", "intent.expp", "module `intent` has no attribute `expp`; did you mean `exp`?"),
    ("intent.sqrtt(x[n])", "intent.sqrtt", "module `intent` has no attribute `sqrtt`; did you mean `sqrt`?"),
]


@pytest.mark.parametrize(("expr", "marker", "message"), BARE, ids=[m for _, m, _ in BARE])
def test_bare_names_and_fuzzy_fallback(tmp_path, expr: str, marker: str, message: str) -> None:
    diagnostic(tmp_path, f"""
        @intent.kernel
        def k(x: f32[N], out: Out[f32[N]]):
            for n in parallel(N):
                out[n] = {expr}
    """, marker, message)


def test_the_suggested_formulas_compute_what_they_replace(tmp_path) -> None:
    ks = kernels(tmp_path, """
        @intent.kernel
        def pointwise(x: f32[N], relu: Out[f32[N]], gelu: Out[f32[N]], silu: Out[f32[N]], clamp: Out[f32[N]],
                      square: Out[f32[N]], recip: Out[f32[N]], tan: Out[f32[N]], log10: Out[f32[N]],
                      finite: Out[pred[N]], softplus: Out[f32[N]], leaky: Out[f32[N]],
                      hardtanh: Out[f32[N]], rem: Out[f32[N]], fdiv: Out[f32[N]]):
            for n in parallel(N):
                v = x[n]
                relu[n] = intent.maximum(v, 0.0)
                gelu[n] = 0.5 * v * (1.0 + intent.erf(v * 0.7071067811865476))
                silu[n] = v * intent.sigmoid(v)
                clamp[n] = intent.clamp(v, -0.5, 0.5)
                softplus[n] = intent.where(v > 20.0, v, intent.log1p(intent.exp(v)))
                leaky[n] = intent.where(v >= 0.0, v, 0.01 * v)
                hardtanh[n] = intent.clamp(v, -1.0, 1.0)
                square[n] = v * v
                recip[n] = 1.0 / v
                tan[n] = intent.sin(v) / intent.cos(v)
                log10[n] = intent.log(intent.abs(v)) * 0.4342944819032518
                big = v * 1e38 * 10.0
                finite[n] = ~(intent.isnan(big) | intent.isinf(big))
                rem[n] = v % 0.75
                fdiv[n] = v // 0.75

        @intent.kernel
        def rows(x: f32[M, N], y: f32[N], soft: Out[f32[M, N]], lse: Out[f32[M]], var: Out[f32[M]],
                 std: Out[f32[M]], outer: Out[f32[N, N]], stacked: Out[f32[2, N]], flat: Out[f32[M * N]],
                 big: Out[f32[M]]):
            for i in parallel(M):
                row = x[i, :]
                e = intent.exp(row - intent.max(row))
                soft[i, :] = e / intent.sum(e)
                m = intent.max(row)
                lse[i] = m + intent.log(intent.sum(intent.exp(row - m)))
                d = row - intent.mean(row)
                var[i] = intent.mean(d * d)
                std[i] = intent.sqrt(intent.mean(d * d))
            outer[:, :] = intent.expand_dims(y, 1) * intent.expand_dims(y, 0)
            stacked[:, :] = intent.concat((intent.expand_dims(y, 0), intent.expand_dims(-y, 0)), 0)
            flat[:] = intent.reshape(x, (-1,))
            big[:] = intent.max(x, 1)
    """)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, generator=g) * 3
    x[0] = 1.5  # an exact multiple of 0.75
    got = ks["pointwise"].oracle(x)
    fn = torch.nn.functional
    want = {"relu": torch.relu(x), "gelu": fn.gelu(x), "silu": fn.silu(x), "clamp": torch.clamp(x, -0.5, 0.5),
            "softplus": fn.softplus(x), "leaky": fn.leaky_relu(x), "hardtanh": fn.hardtanh(x),
            "square": torch.square(x), "recip": torch.reciprocal(x), "tan": torch.tan(x),
            "log10": torch.log10(x.abs()), "finite": torch.isfinite(x * 1e38 * 10.0),
            "rem": torch.remainder(x, 0.75), "fdiv": torch.floor_divide(x, 0.75)}
    for name, ref in want.items():
        torch.testing.assert_close(torch.from_numpy(got[name]), ref, rtol=1e-5, atol=1e-5, msg=name)
    x2, y = torch.randn(3, 7, generator=g), torch.randn(7, generator=g)
    got = ks["rows"].oracle(x2, y)
    want = {"soft": torch.softmax(x2, 1), "lse": torch.logsumexp(x2, 1), "var": x2.var(1, unbiased=False),
            "std": x2.std(1, unbiased=False), "outer": torch.outer(y, y), "stacked": torch.stack([y, -y]),
            "flat": x2.flatten(), "big": torch.amax(x2, 1)}
    for name, ref in want.items():
        torch.testing.assert_close(torch.from_numpy(np.asarray(got[name])), ref, rtol=1e-5, atol=1e-5, msg=name)
