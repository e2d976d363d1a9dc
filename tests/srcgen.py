"""Random `@intent.kernel` Python *source* with an independent torch reference written alongside it.

`tests/diffgen.py` builds KIR directly; what the frontend and whole-tensor planning make of real
Python escapes it. Here each case is the text of a Python module, written the way authors write
kernels, that the runner (`tests/srcrun.py`) writes to a file and imports, so the real frontend
parses it. The same module holds `reference(a)`: plain torch code, generated from the same random
choices but written independently of the oracle, computing every output in float64 (rounded to
the kernel's dtype after each correctly rounded operation) or in exact int64 (wrapped to the
kernel's width). A mistake shared by the oracle and the emitter is caught by the reference.

Kernels are one to three blocks:

Blocks (`tests/srcblocks.py`): *rows* (`parallel(M)`: pointwise chains, reductions broadcast back
over the row, scans, argmax), *points* (2-D and nested `parallel`, transposed and reversed indices,
`if`/`else` with compound predicates over runtime scalars, casts among all dtypes), *tensor*
(whole-tensor expressions at top level, `keepdims` reductions broadcast back), *loop* (ordered loops
with carries and `if`, local `zeros`/`full`/`empty` buffers against many short rows), *elements*
(gathers through computed indices, scatters through permutations with `unique=True`, integer atomics
at computed indices, old values of unique atomics, stream compaction through an atomic counter) and
*segments* (folds and scans over `v[offs[q]:offs[q + 1]]`, empty segments included). Arguments are
sometimes passed as non-contiguous views; shapes are boundary sizes (1, primes, 2^k +- 1, 1025 rows
of one or two elements, empty element sets).

The generator keeps the differential generator's discipline: discontinuous operations (compares,
floor/ceil/round, float -> integer casts, float `//` and `%`, argmax) only see *exact* values, and
it records for every output whether it is exact, so the runner compares exactly or within the
documented tolerance.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from tests.diffinputs import InputSpec
from tests.srcref import PRELUDE

# Known wrong-result patterns (issue 18) that the generator steers clear of while this set names them.
# Remove a name once its fix is on main: the generator then produces the pattern.
AVOID: frozenset[str] = frozenset()
# Every name the generator understands, each a known wrong-result pattern of issue 18 whose fix has landed
# (the generator produces them all while AVOID is empty): float `//` and `%` (one fmod-based rule for every
# width), float `x ** n` for small integers n (through exp2/log2), `~` of a 0-d compare and atomics at a
# constant index (masks that were not boolean), zeros/full local buffers in many short rows
# (initialisation tiles over Triton's numel limit).
KNOWN_PATTERNS = ("float_floordiv_mod", "float_pow_small_int", "not_of_0d_compare", "local_init_tile")

FLOATS = ("f32", "f16", "bf16", "f64")
FP8 = ("f8e4m3", "f8e5m2")  # computed in f32, rounded to the format after every op
ALL_FLOATS = FLOATS + FP8
INTS = ("i32", "i64", "i8", "u8", "i16", "u16", "u32", "u64")
SIGNED = {"i4", "i8", "i16", "i32", "i64"}
DTYPES = FLOATS + INTS + ("pred",) + FP8
SIZES = (1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 33, 64, 65)
EXACT_CONSTS = ("0.5", "2.0", "1.5", "-3.0", "0.25")



def multiplied_power(ref: str, n: int, dt: str) -> str:
    """The reference of float `x ** n` for a constant `1 <= |n| <= 4`: `x * x`, `(x * x) * x`, `(x * x) * (x * x)`
    and `1 / x ** -n`, each product and the quotient rounded to `dt` as the kernel rounds them (one rounding of
    the exact power differs where a rounded square lands on a subnormal or overflows: fp8 `x ** -2`)."""
    square = f"rnd({ref} * {ref}, {dt!r})"
    power = {1: ref, 2: square, 3: f"rnd({square} * {ref}, {dt!r})", 4: f"rnd({square} * {square}, {dt!r})"}[abs(n)]
    return f"rnd(1.0 / {power}, {dt!r})" if n < 0 else power

@dataclass(frozen=True)
class SrcParam:
    """A kernel parameter: `shape` None for a runtime scalar; `view` how the launch passes it
    ("" contiguous, "t" a transposed view of other storage, "s" a strided slice of larger storage)."""

    name: str
    dtype: str
    shape: tuple[str, ...] | None
    role: str = "in"
    spec: InputSpec = InputSpec("values")
    view: str = ""

    def annotation(self) -> str:
        if self.shape is None:
            return self.dtype
        body = f"{self.dtype}[{', '.join(self.shape)}]"
        return {"out": f"Out[{body}]", "inout": f"InOut[{body}]"}.get(self.role, body)


@dataclass(frozen=True)
class SourceCase:
    """One generated kernel: the module text, its shapes, parameters, input seed and comparison facts."""

    name: str
    source: str
    shapes: tuple[tuple[str, int], ...]
    params: tuple[SrcParam, ...]
    seed: int
    exact: frozenset[str]  # outputs every correct implementation computes bit for bit
    unordered: frozenset[str]  # outputs compared as multisets (stream compaction)
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def env(self) -> dict[str, int]:
        return dict(self.shapes)

    @property
    def specs(self) -> dict[str, InputSpec]:
        return {p.name: p.spec for p in self.params}


@dataclass(frozen=True)
class Val:
    """A value in both languages: the kernel's expression, the reference's, its dtype and whether it is
    exact; `scalar`: 0-d in the kernel (a per-instance value); `bounded`: |value| <= ~1."""

    src: str
    ref: str
    dt: str
    exact: bool = True
    scalar: bool = False
    bounded: bool = False


def _indent(lines: list[str], n: int = 1) -> list[str]:
    return ["    " * n + ln for ln in lines]


class Gen:
    """The random choices of one kernel: parameters, kernel body, reference body, output facts."""

    def __init__(self, rng: random.Random, avoid: frozenset[str], small: bool = False) -> None:
        self.r = rng
        self.avoid = avoid
        # `small`: boundary sizes up to 17 and no rows longer than a tile (the CI campaign's budget)
        self.sizes = tuple(n for n in SIZES if n <= 17) if small else SIZES
        self.small = small
        self.params: dict[str, SrcParam] = {}
        self.body: list[str] = []
        self.ref: list[str] = []
        self.exact: set[str] = set()
        self.unordered: set[str] = set()
        self.shapes: dict[str, int] = {}
        self.notes: list[str] = []
        self.requires: list[str] = []  # the kernel's `requires=[...]` facts
        self.counter = 0

    # ------------------------------------------------------------------ names, shapes, parameters

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def symbol(self, name: str, value: int) -> str:
        self.shapes.setdefault(name, value)
        return name

    def param(
        self, stem: str, dtype: str, shape: tuple[str, ...] | None, role: str = "in", spec: InputSpec | None = None
    ) -> str:
        name = self.fresh(stem)
        if spec is None:
            wide = dtype in INTS and dtype != "u64" and self.r.random() < 0.2
            spec = InputSpec("values", None, wide, False)
        view = ""
        if shape is not None and self.r.random() < 0.35:
            view = self.r.choice(("t", "s")) if len(shape) == 2 else "s"
            self.notes.append(f"view {view}")
        self.params[name] = SrcParam(name, dtype, shape, role, spec, view)
        if role == "inout":
            self.ref.append(f"out[{name!r}] = a[{name!r}].clone()")
        return name

    def output(self, name: str, exact: bool) -> None:
        if exact:
            self.exact.add(name)

    # ------------------------------------------------------------------ expressions

    def const(self, dt: str) -> tuple[str, str]:
        """A weakly typed constant (kernel text, reference text) for a `dt` operand."""
        if dt in ALL_FLOATS:
            c = self.r.choice(EXACT_CONSTS + ("0.1",))
            return c, f"rnd({c}, {dt!r})"
        c = str(self.r.choice((1, 2, 3, 5) + ((-1, -4) if dt in SIGNED else ())))
        return c, f"wrap({c}, {dt!r})"

    def expr(self, leaves: list[Val], dt: str, depth: int, exact: bool = False) -> Val:
        """A random expression of dtype `dt` over `leaves`; `exact`: only exact operations."""
        own = [v for v in leaves if v.dt == dt and (v.exact or not exact)]
        if depth <= 0 or not own or self.r.random() < 0.2:
            if own and self.r.random() < 0.8:
                return self.leaf(own)
            return self.cast_leaf(leaves, dt, exact) or self.r.choice(own or leaves)
        if dt in ALL_FLOATS:
            return self.float_op(leaves, dt, depth, exact)
        if dt == "pred":
            return self.pred_op(leaves, depth)
        return self.int_op(leaves, dt, depth)

    def leaf(self, pool: list[Val]) -> Val:
        """A leaf, preferring the values computed last (so that what a block computes reaches its outputs)."""
        return self.r.choices(pool, weights=[(k + 1) ** 2 for k in range(len(pool))])[0]

    def cast_leaf(self, leaves: list[Val], dt: str, exact: bool) -> Val | None:
        pool = [v for v in leaves if v.dt != dt and v.exact and castable(v.dt, dt)]
        if not pool:
            return None
        v = self.r.choice(pool)
        self.notes.append(f"cast {v.dt}->{dt}")
        return Val(f"{v.src}.to({dt})", f"cast({v.ref}, {v.dt!r}, {dt!r})", dt, True, v.scalar)

    def float_op(self, leaves: list[Val], dt: str, depth: int, exact: bool) -> Val:
        a = self.expr(leaves, dt, depth - 1, exact)
        roll = self.r.random()
        if roll < 0.35:  # correctly rounded binary
            op = self.r.choice("+-*")
            if self.r.random() < 0.3:
                c, cref = self.const(dt)
                return Val(f"({a.src} {op} {c})", f"rnd({a.ref} {op} {cref}, {dt!r})", dt, a.exact, a.scalar)
            b = self.expr(leaves, dt, depth - 1, exact)
            return Val(
                f"({a.src} {op} {b.src})",
                f"rnd({a.ref} {op} {b.ref}, {dt!r})",
                dt,
                a.exact and b.exact,
                a.scalar and b.scalar,
            )
        if roll < 0.45:
            b = self.expr(leaves, dt, depth - 1, exact)
            fn = self.r.choice(("maximum", "minimum", "clamp", "lerp"))
            self.notes.append(fn)
            if fn == "clamp":  # torch.clamp: NaN stays NaN
                return Val(
                    f"intent.clamp({a.src}, -1.5, 2.0)",
                    f"_torch.clamp({a.ref}, -1.5, 2.0)",
                    dt,
                    a.exact,
                    a.scalar,
                    a.bounded,
                )
            if fn == "lerp":  # torch's formula for a weight below one half
                d = f"rnd({b.ref} - {a.ref}, {dt!r})"
                return Val(
                    f"intent.lerp({a.src}, {b.src}, 0.25)",
                    f"rnd({a.ref} + rnd(0.25 * {d}, {dt!r}), {dt!r})",
                    dt,
                    False,
                    a.scalar and b.scalar,
                )
            return Val(
                f"intent.{fn}({a.src}, {b.src})",
                f"_torch.{fn}({a.ref}, {b.ref})",
                dt,
                a.exact and b.exact,
                a.scalar and b.scalar,
            )
        if roll < 0.55 and a.exact:
            b = self.expr(leaves, dt, depth - 1, True)
            c = self.expr(leaves, dt, depth - 1, exact)
            p = self.compare(a, b) if self.r.random() < 0.5 else self.pred_op([a, b, *leaves], 1)
            self.notes.append("where")
            return Val(
                f"intent.where({p.src}, {a.src}, {c.src})",
                f"_torch.where({p.ref}, {a.ref}, {c.ref})",
                dt,
                c.exact,
                p.scalar and a.scalar and c.scalar,  # the operands it has (b may be only in p, or not at all)
            )
        if roll < 0.65:
            fn = self.r.choice(("abs", "neg") + (("floor", "ceil", "round") if a.exact else ()))
            self.notes.append(fn)
            if fn == "neg":
                return Val(f"(-{a.src})", f"(-{a.ref})", dt, a.exact, a.scalar, a.bounded)
            ref = {
                "abs": f"{a.ref}.abs()",
                "floor": f"_torch.floor({a.ref})",
                "ceil": f"_torch.ceil({a.ref})",
                "round": f"_torch.round({a.ref})",
            }[fn]
            return Val(f"intent.{fn}({a.src})", ref, dt, a.exact, a.scalar, a.bounded)
        if roll < 0.72 and "float_floordiv_mod" not in self.avoid and a.exact:
            op = self.r.choice(("//", "%"))
            self.notes.append(f"float {op}")
            c = self.r.choice(("0.75", "-1.5", "3.0", "0.1"))
            fn = "_torch.div({}, {}, rounding_mode='floor')" if op == "//" else "_torch.remainder({}, {})"
            return Val(
                f"({a.src} {op} {c})", f"rnd({fn.format(a.ref, f'rnd({c}, {dt!r})')}, {dt!r})", dt, True, a.scalar
            )
        if roll < 0.78:
            self.notes.append("pow")
            small = ("2", "3", "4", "-1", "-2", "2.0")
            exps = ("0.5", "1.5", "2.5") + (() if "float_pow_small_int" in self.avoid else small)
            e = self.r.choice(exps)
            if e in small:
                self.notes.append("float ** small int")
            base, bref = (f"intent.abs({a.src})", f"{a.ref}.abs()") if "." in e and e != "2.0" else (a.src, a.ref)
            e_src = f"({e})" if e.startswith("-") else e
            if e in small:  # the language's multiplications, each rounded to the dtype (docs/language.md, Powers)
                return Val(f"({a.src} ** {e_src})", multiplied_power(a.ref, int(float(e)), dt),
                           dt, a.exact and e in ("2", "2.0", "3", "4"), a.scalar)
            return Val(f"({base} ** {e_src})", f"rnd({bref} ** {float(e)}, {dt!r})", dt, False, a.scalar)
        if roll < 0.85:  # division by something away from zero
            b = self.expr(leaves, dt, depth - 1, exact)
            den, dref = (
                (b.src, b.ref)
                if b.exact and self.r.random() < 0.3
                else (f"(intent.abs({b.src}) + 1.0)", f"rnd({b.ref}.abs() + 1.0, {dt!r})")
            )
            self.notes.append("div")
            return Val(f"({a.src} / {den})", f"rnd({a.ref} / {dref}, {dt!r})", dt, False, a.scalar and b.scalar)
        # transcendental functions: arguments exact or bounded, so an ulp stays an ulp
        if not (a.exact or a.bounded):
            return a
        fn = self.r.choice(
            ("exp", "exp2", "sqrt", "rsqrt", "log", "log2", "log1p", "tanh", "sigmoid", "sin", "cos", "erf")
        )
        self.notes.append(fn)
        arg, aref = a.src, a.ref
        if fn in ("sqrt", "log1p"):
            arg, aref = f"intent.abs({a.src})", f"{a.ref}.abs()"
        if fn in ("rsqrt", "log", "log2"):  # away from zero
            arg, aref = f"(intent.abs({a.src}) + 1.0)", f"rnd({a.ref}.abs() + 1.0, {dt!r})"
        if fn in ("exp", "exp2"):
            arg, aref = f"intent.minimum({a.src}, 8.0)", f"_torch.clamp_max({a.ref}, 8.0)"
        tfn = {"erf": "_torch.special.erf"}.get(fn, f"_torch.{fn}")
        return Val(
            f"intent.{fn}({arg})",
            f"rnd({tfn}({aref}), {dt!r})",
            dt,
            False,
            a.scalar,
            fn in ("tanh", "sigmoid", "sin", "cos", "erf"),
        )

    def int_op(self, leaves: list[Val], dt: str, depth: int) -> Val:
        a = self.expr(leaves, dt, depth - 1)
        roll = self.r.random()
        ordered = dt != "u64"  # u64 lives as its int64 bit pattern in the reference: no order there
        if roll < 0.35 or not ordered:
            op = self.r.choice("+-*&|^")
            if self.r.random() < 0.3:
                c, cref = self.const(dt)
                return Val(f"({a.src} {op} {c})", f"wrap({a.ref} {op} {cref}, {dt!r})", dt, True, a.scalar)
            b = self.expr(leaves, dt, depth - 1)
            return Val(
                f"({a.src} {op} {b.src})", f"wrap({a.ref} {op} {b.ref}, {dt!r})", dt, True, a.scalar and b.scalar
            )
        if roll < 0.5:
            op = self.r.choice(("//", "%"))
            c = self.r.choice((3, 7, 1) + ((-2,) if dt in SIGNED else ()))
            self.notes.append(f"int {op}")
            ref = f"_torch.div({a.ref}, {c}, rounding_mode='trunc')" if op == "//" else f"_torch.fmod({a.ref}, {c})"
            return Val(f"({a.src} {op} {c})", f"wrap({ref}, {dt!r})", dt, True, a.scalar)
        if roll < 0.6:
            k = self.r.choice((1, 2, 3))
            if self.r.random() < 0.5:
                return Val(f"({a.src} << {k})", f"wrap({a.ref} << {k}, {dt!r})", dt, True, a.scalar)
            return Val(f"({a.src} >> {k})", f"({a.ref} >> {k})", dt, True, a.scalar)
        if roll < 0.75:
            b = self.expr(leaves, dt, depth - 1)
            fn = self.r.choice(("maximum", "minimum"))
            return Val(
                f"intent.{fn}({a.src}, {b.src})", f"_torch.{fn}({a.ref}, {b.ref})", dt, True, a.scalar and b.scalar
            )
        if roll < 0.85:
            e = self.r.choice((2, 3))
            ref = (
                f"wrap({a.ref} * {a.ref}, {dt!r})"
                if e == 2
                else f"wrap(wrap({a.ref} * {a.ref}, {dt!r}) * {a.ref}, {dt!r})"
            )
            self.notes.append("int pow")
            return Val(f"({a.src} ** {e})", ref, dt, True, a.scalar)
        if roll < 0.92 and dt in SIGNED:
            return Val(f"intent.abs({a.src})", f"wrap({a.ref}.abs(), {dt!r})", dt, True, a.scalar)
        b = self.expr(leaves, dt, depth - 1)
        c = self.expr(leaves, dt, depth - 1)
        p = self.compare(a, b) if self.r.random() < 0.5 else self.pred_op([a, b, *leaves], 1)
        return Val(
            f"intent.where({p.src}, {b.src}, {c.src})",
            f"_torch.where({p.ref}, {b.ref}, {c.ref})",
            dt,
            True,
            p.scalar and b.scalar and c.scalar,
        )

    def compare(self, a: Val, b: Val) -> Val:
        op = self.r.choice(("<", "<=", ">", ">=", "==", "!="))
        return Val(f"({a.src} {op} {b.src})", f"({a.ref} {op} {b.ref})", "pred", True, a.scalar and b.scalar)

    def pred_op(self, leaves: list[Val], depth: int) -> Val:
        """A compound predicate: compares of exact values joined by `&`, `|`, `^`, `~`."""
        ordered = [v for v in leaves if v.exact and v.dt not in ("pred", "u64")]
        preds = [v for v in leaves if v.dt == "pred"]
        roll = self.r.random()
        floats = [v for v in leaves if v.exact and v.dt in ALL_FLOATS]
        if floats and roll < 0.1:
            v = self.r.choice(floats)
            fn = self.r.choice(("isnan", "isinf"))
            self.notes.append(fn)
            p = Val(f"intent.{fn}({v.src})", f"_torch.{fn}({v.ref})", "pred", True, v.scalar)
        elif ordered and (roll < 0.5 or not preds or depth <= 0):
            a = self.r.choice(ordered)
            other = [v for v in ordered if v.dt == a.dt]
            if self.r.random() < 0.5:
                c, cref = self.const(a.dt)
                b = Val(c, cref, a.dt, True, True)
            else:
                b = self.r.choice(other)
            p = self.compare(a, b)
        elif preds:
            p = self.r.choice(preds)
        else:
            v = leaves[0]
            p = Val(f"({v.src} == {v.src})", f"({v.ref} == {v.ref})", "pred", True, v.scalar)
        if depth > 0 and self.r.random() < 0.6:
            q = self.pred_op(leaves, depth - 1)
            op = self.r.choice("&|^")
            p = Val(f"({p.src} {op} {q.src})", f"({p.ref} {op} {q.ref})", "pred", True, p.scalar and q.scalar)
        if self.r.random() < 0.3 and not (p.scalar and "not_of_0d_compare" in self.avoid):
            self.notes.append("~0-d pred" if p.scalar else "~pred")
            p = Val(f"(~{p.src})", f"(~{p.ref})", "pred", True, p.scalar)
        return p


def castable(src: str, dst: str) -> bool:
    """Casts the reference models exactly (u64 lives as int64 bits: only to other integers)."""
    if src == "u64":
        return dst in INTS
    return src != dst


def random_source_case(
    rng: random.Random,
    blocks: tuple[str, ...] | None = None,
    avoid: frozenset[str] = AVOID,
    small: bool = False,
    name: str = "k",
) -> SourceCase:
    """One random kernel module (kernel and torch reference); deterministic for the state of `rng`."""
    from tests.srcblocks import BLOCKS
    from tests.srclayout import EXTRA_BLOCKS, EXTRA_SHARE

    g = Gen(rng, avoid, small)
    kinds = [k for k in blocks or BLOCKS if k in BLOCKS]
    # the extra blocks draw from a stream of their own: the other blocks' kernel for a seed stays as it was
    extra = random.Random(hashlib.sha1(repr(rng.getstate()).encode()).hexdigest())
    chosen = [rng.choice(kinds) for _ in range(rng.choice((1, 1, 2, 2, 3)))] if kinds else []
    # one block per symbol family: blocks sharing M/N or E would fight over their sizes
    seen: set[str] = set()
    for kind in chosen:
        family = {"rows": "MN", "points": "MN", "tensor": "MN", "loop": "MN", "elements": "E", "segments": "E"}[kind]
        if family in seen:
            continue
        seen.add(family)
        BLOCKS[kind](g)
        g.notes.append(f"block {kind}")
    wanted = [k for k in blocks or EXTRA_BLOCKS if k in EXTRA_BLOCKS]
    if wanted and (blocks or extra.random() < EXTRA_SHARE):
        kind, g.r = extra.choice(wanted), extra
        EXTRA_BLOCKS[kind](g)
        g.r = rng
        g.notes.append(f"block {kind}")
    return assemble(g, name, rng.randrange(1 << 30))


def assemble(g: Gen, name: str, seed: int) -> SourceCase:
    symbols = [s for s in ("M", "N", "E", "K", "S", "B", "T", "H", "D", "C") if s in g.shapes]
    requires = (["E >= 0"] if "E" in g.shapes else []) + g.requires
    params = tuple(g.params.values())
    sig = ", ".join(f"{p.name}: {p.annotation()}" for p in params)
    ref_body = ["out = {}", *g.ref, "return out"]
    text = "\n".join(
        [
            '"""A generated kernel (tests/srcgen.py) and its torch reference."""',
            "import intent",
            "from intent import Out, InOut, dims, parallel, pred, f16, bf16, f32, f64",
            "from intent import i4, i8, i16, i32, i64, u8, u16, u32, u64, f8e4m3, f8e5m2",
            PRELUDE,
            f"{', '.join(symbols)}{',' if len(symbols) == 1 else ''} = dims({' '.join(symbols)!r})",
            "",
            "",
            f"@intent.kernel(requires=[{', '.join(requires)}])" if requires else "@intent.kernel",
            f"def {name}({sig}):",
            *_indent(g.body),
            "",
            "",
            "def reference(a):",
            '    """The outputs from the arguments `a` (floats as float64, integers as int64, preds as bool)."""',
            *_indent(ref_body),
            "",
        ]
    )
    return SourceCase(
        name,
        text,
        tuple((s, g.shapes[s]) for s in symbols),
        params,
        seed,
        frozenset(g.exact),
        frozenset(g.unordered),
        tuple(g.notes),
    )
