"""Random kernel bodies from a grammar of Python statements and expressions (inside and outside the kernel
language): the frontend either builds verified KIR or raises a DiagnosticError located in the body, never
anything else (no internal errors, no tracebacks)."""

from __future__ import annotations

import itertools
import linecache
import random
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kir
from kir.errors import DiagnosticError

HEADER = """import math
import intent
from intent import Out, InOut, dims, f16, f32, i32, i64, pred, parallel

M, N = dims("M N")


@intent.func
def twice(z, k=2):
    return z * k


@intent.combine
def add2(a, b):
    return a[0] + b[0], a[1] + b[1]


@intent.kernel
def k(x: f32[M, N], y: f32[N], h: f16[N], idx: i32[M], offs: i64[M + 1], s: f32, n: i32,
      out: Out[f32[M, N]], v: Out[f32[N]], c: InOut[i32[N]]):
"""

TENSORS = ["x", "y", "h", "idx", "offs", "out", "v", "c"]
SCALARS = ["s", "n", "M", "N"]
SPELLINGS = ["exp", "sqrt", "abs", "log1p", "isnan", "maximum", "minimum", "where", "pow", "sum", "max", "min",
             "argmax", "mean", "any", "prod", "cumsum", "cummax", "dot", "einsum", "reduce", "scan", "histogram",
             "atomic_add", "atomic_cas", "store", "rand", "randint", "arange", "zeros", "ones", "zeros_like",
             "full", "empty", "broadcast_to", "reshape", "transpose", "permute", "concat", "expand_dims",
             "squeeze", "bitcast", "nothing"]
KEYWORDS = ["axis", "keepdims", "reverse", "exclusive", "identity", "acc", "dtype", "order", "unique", "bogus"]
BINOPS = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>", "@"]
CMPOPS = ["==", "!=", "<", "<=", ">", ">=", "is", "in"]
REJECTED = ["try:\n    pass\nexcept Exception:\n    pass", "with x:\n    pass", "def inner():\n    pass",
            "print(a)", "a = [q for q in y]", "a = lambda: 1", "a = {1: 2}", "a = f'{a}'", "del a",
            "global x", "import os", "assert n > 0", "raise ValueError()", "return 1", "a = (w := 1)",
            "for q in y:\n    pass", "class C:\n    pass", "a = x @ y", "a, *b = y", "a = undefined_name",
            "a = data", "a = math.nope"]


class BodyGen:
    """Random statements and expressions; names already assigned are preferred so that bodies go deep."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.locals: list[str] = []

    def pick(self, *options: str) -> str:
        return self.r.choice(options)

    def name(self) -> str:
        pool = self.locals + TENSORS + SCALARS
        return self.r.choice(pool) if self.r.random() < 0.95 else self.pick("i", "zz", "intent", "math", "range")

    def number(self) -> str:
        return self.pick("0", "1", "2", "3", "-1", "0.5", "2.0", "1e30", "True", "None", "'acq_rel'", "N", "M - 1")

    def index(self, depth: int) -> str:
        def one() -> str:
            roll = self.r.random()
            if roll < 0.3:
                return self.pick(":", "1:3", "::2", ":N", "b0:e0", "offs[i]:offs[i + 1]")
            if roll < 0.6:
                return self.pick("i", "j", "t", "0", "-1", "i + 1", "idx[i]", "N - 1")
            return self.expr(depth + 1)
        return ", ".join(one() for _ in range(self.r.choice([1, 1, 2, 2, 3])))

    def expr(self, depth: int = 0) -> str:
        if depth > 3 or self.r.random() < 0.25:
            return self.name() if self.r.random() < 0.7 else self.number()
        roll = self.r.random()
        e = lambda: self.expr(depth + 1)  # noqa: E731
        if roll < 0.22:
            return f"({e()} {self.r.choice(BINOPS)} {e()})"
        if roll < 0.30:
            return f"({e()} {self.r.choice(CMPOPS)} {e()})"
        if roll < 0.34:
            return f"({self.pick('-', '~', 'not ', '+')}{e()})"
        if roll < 0.37:
            return f"({e()} {self.pick('and', 'or')} {e()})"
        if roll < 0.39:
            return f"({e()} if {e()} else {e()})"
        if roll < 0.62:
            args = [e() for _ in range(self.r.choice([1, 1, 2, 3]))]
            if self.r.random() < 0.3:
                args.append(f"{self.r.choice(KEYWORDS)}={self.pick(e(), '0', '-1', 'True', '(0.0, 0)', 'f32')}")
            fn = self.r.choice([f"intent.{self.r.choice(SPELLINGS)}"] * 6 + ["twice", "f32", "i32", "len", "abs",
                                                                             "min", "float", "range", "add2"])
            if fn == "intent.reduce" and self.r.random() < 0.5:
                return f"intent.reduce(({e()}, {e()}), add2, identity=(0.0, 0.0))"
            return f"{fn}({', '.join(args)})"
        if roll < 0.82:
            return f"{self.r.choice(TENSORS + self.locals or TENSORS)}[{self.index(depth)}]"
        if roll < 0.88:
            return f"{e()}.{self.pick('shape', 'dtype', 'T', 'ndim', 'foo')}"
        if roll < 0.94:
            return f"{e()}.to({self.pick('f32', 'i32', 'f16', 'pred', 'x')})"
        return f"({e()}, {e()})"

    def target(self) -> str:
        roll = self.r.random()
        if roll < 0.55:
            name = self.pick("a", "b", "acc", "q", "row")
            if name not in self.locals:
                self.locals.append(name)
            return name
        if roll < 0.65:
            return "a, b"
        return f"{self.pick('out', 'v', 'c', 'x', 'a', 'buf')}[{self.index(1)}]"

    def block(self, depth: int, n: int) -> list[str]:
        return [line for _ in range(n) for line in self.stmt(depth)]

    def stmt(self, depth: int) -> list[str]:
        roll = self.r.random()
        indent = lambda lines: ["    " + ln for ln in lines]  # noqa: E731
        if depth < 3 and roll < 0.10:
            return ["for i in parallel(M):", *indent(self.block(depth + 1, self.r.randint(1, 3)))]
        if depth < 3 and roll < 0.16:
            bound = self.pick("N", "3", "n", "idx[i]", "offs[i], offs[i + 1]", "0, N, 2")
            return [f"for t in range({bound}):", *indent(self.block(depth + 1, self.r.randint(1, 3)))]
        if depth < 3 and roll < 0.24:
            out = [f"if {self.expr(1)}:", *indent(self.block(depth + 1, self.r.randint(1, 2)))]
            if self.r.random() < 0.6:
                out += ["else:", *indent(self.block(depth + 1, self.r.randint(1, 2)))]
            return out
        if depth < 3 and roll < 0.27:
            return [f"while {self.expr(1)}:", *indent(self.block(depth + 1, 1))]
        if roll < 0.32:
            return [f"buf = intent.{self.pick('zeros', 'empty', 'full')}((N,), {self.pick('f32', 'i32', '0.0')})"]
        if roll < 0.37:
            return self.r.choice(REJECTED).splitlines()
        if roll < 0.45:
            return [f"{self.target()} {self.r.choice(BINOPS)}= {self.expr()}"]
        if roll < 0.50:
            return [self.expr()]
        return [f"{self.target()} = {self.expr()}"]


_counter = itertools.count()


def _source(rng: random.Random) -> str:
    gen = BodyGen(rng)
    if rng.random() < 0.5:  # the way kernels are usually written: locals inside a parallel loop
        gen.locals += ["row", "j", "b0", "e0"]
        body = ["for i in parallel(M):", "    row = x[i, :]", "    j = idx[i]", "    b0 = offs[i]",
                "    e0 = offs[i + 1]", *["    " + ln for ln in gen.block(1, rng.randint(1, 5))]]
    else:
        body = gen.block(0, rng.randint(1, 5))
    return HEADER + "".join(f"    {line}\n" for line in body)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_random_bodies_build_or_raise_located_diagnostics(rng: random.Random) -> None:
    src = _source(rng)
    name = f"<intent-fuzz-{next(_counter)}>"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = compile(src, name, "exec")
    except SyntaxError:
        return  # only syntactically valid bodies are in scope
    nlines = src.count("\n")
    linecache.cache[name] = (len(src), None, src.splitlines(keepends=True), name)
    try:
        namespace: dict[str, object] = {"__name__": "intent_fuzz", "data": [1, 2]}
        try:
            exec(code, namespace)
        except DiagnosticError as err:
            assert not err.message.startswith("internal error"), f"{err}\n--- source ---\n{src}"
            assert err.file == name and err.line is not None and 1 <= err.line <= nlines, f"{err}\n{src}"
            assert err.col is not None and err.col >= 1, f"{err}\n{src}"
            return
        kir.verify(namespace["k"].kir)  # type: ignore[attr-defined]
    finally:
        linecache.cache.pop(name, None)


def test_the_grammar_reaches_both_outcomes() -> None:
    """The generator is useful only if bodies both compile and fail in many different ways."""
    rng = random.Random(7)
    ok, messages = 0, set()
    for n in range(120):
        src = _source(rng)
        name = f"<intent-fuzz-stats-{n}>"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                code = compile(src, name, "exec")
        except SyntaxError:
            continue
        linecache.cache[name] = (len(src), None, src.splitlines(keepends=True), name)
        try:
            exec(code, {"__name__": "intent_fuzz", "data": [1]})
            ok += 1
        except DiagnosticError as err:
            messages.add(err.message.split(":")[0][:40])
        finally:
            linecache.cache.pop(name, None)
    assert ok >= 3, ok
    assert len(messages) >= 25, sorted(messages)
