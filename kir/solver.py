"""Z3 over shape symbols: satisfiability of `requires`, typing obligations, launch-time evaluation."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .dims import DBin, DConst, Dim, DSym, PAnd, PCmp, Pred, dim_to_z3, pred_to_z3

if TYPE_CHECKING:
    import z3
else:
    class _Z3:
        """Z3 on first use (importing it costs more than the rest of `import intent`); then the module itself."""

        def __getattr__(self, name: str) -> Any:
            import z3 as module

            globals()["z3"] = module
            return getattr(module, name)

    z3 = _Z3()


# Every query gets a budget of Z3's own resource count, never a wall-clock timeout: the same kernel must
# get the same verdict on an idle laptop and on a loaded CI machine (a timeout turned proofs into "the
# solver could not decide" under load). Two million units are about two seconds of one idle core and
# some seventy times what the hardest query of the test suite uses.
RESOURCE_LIMIT = 2_000_000


def limited(solver: Any) -> Any:
    """`solver` (a z3 Solver or Optimize) with the deterministic resource budget every query runs under."""
    solver.set("rlimit", RESOURCE_LIMIT)
    return solver


def _only_lower_bounds(hyps: Iterable[Pred]) -> bool:
    return all(isinstance(h, PCmp) and h.op == ">=" and isinstance(h.lhs, DSym) and isinstance(h.rhs, DConst)
               for h in hyps)


def default_lower_bounds(symbols: Iterable[str], requires: Iterable[Pred]) -> tuple[Pred, ...]:
    """Every symbol is `>= 1` unless the kernel states `S >= 0` itself."""
    stated_nonneg = {p.lhs.name for p in requires
                     if isinstance(p, PCmp) and p.op == ">=" and isinstance(p.lhs, DSym) and p.rhs == DConst(0)}
    return tuple(PCmp(">=", DSym(s), DConst(0 if s in stated_nonneg else 1)) for s in symbols)


# Answers of `ShapeSolver.prove`, process-wide: (assumptions, goal) -> None or a counterexample. The same
# obligations recur across specialisations of one kernel, physical construction and verification.
_MEMO: dict[tuple[tuple[Pred, ...], Pred], dict[str, int] | None] = {}
_UNSAT_MEMO: dict[tuple[Pred, ...], str | None] = {}
MEMO_LIMIT = 200_000  # entries; the memo starts again rather than grow without bound
_MISSING = object()


def clear_memo() -> None:
    """Forget every remembered answer (for measurements that must start cold)."""
    _MEMO.clear()
    _UNSAT_MEMO.clear()


@dataclass
class ShapeSolver:
    """Discharges obligations `pred` under the kernel's refinements and axioms.

    An obligation is first tried by linear reasoning (`linear_proves`), which only ever answers
    "proven"; everything else goes to Z3 exactly as stated, so counterexamples are Z3's own.
    """

    symbols: tuple[str, ...]
    requires: tuple[Pred, ...] = ()
    axioms: tuple[Pred, ...] = ()
    facts: list[Pred] = field(default_factory=list)  # extra local facts (loop ranges) pushed by callers

    def __post_init__(self) -> None:
        self._vars: dict[str, z3.ArithRef] = {}  # made on first use: many kernels never need Z3 at all
        self._terms: dict[Pred, z3.BoolRef] = {}

    def var(self, name: str) -> z3.ArithRef:
        if name not in self._vars:
            self._vars[name] = z3.Int(name)
        return self._vars[name]

    def _env(self, preds: Iterable[Pred]) -> dict[str, z3.ArithRef]:
        for p in preds:
            for s in p.symbols():
                self.var(s)
        return self._vars

    def _term(self, p: Pred) -> z3.BoolRef:
        """`dims.pred_to_z3(p)`, translated once per solver."""
        found = self._terms.get(p)
        if found is None:
            found = self._terms[p] = pred_to_z3(p, self._env((p,)))
        return found

    def assumptions(self) -> tuple[Pred, ...]:
        return default_lower_bounds(self.symbols, self.requires) + self.requires + self.axioms \
            + tuple(self.facts)

    def prove(self, goal: Pred) -> dict[str, int] | None:
        """None when `goal` holds for every model of the assumptions, else a counterexample."""
        hyps = self.assumptions()
        key = (hyps, goal)
        found = _MEMO.get(key, _MISSING)
        if found is _MISSING:
            found = None if linear_proves(hyps, goal) else self._check(hyps, goal)
            if len(_MEMO) >= MEMO_LIMIT:
                _MEMO.clear()
            _MEMO[key] = found
        return None if found is None else dict(found)  # type: ignore[arg-type]

    def _refute(self, solver: Any, hyps: tuple[Pred, ...], goal: Pred) -> dict[str, Any]:
        """Load `solver` (a z3 Solver or Optimize) with the hypotheses and the negated goal; the symbols' variables."""
        env = self._env((*hyps, goal))
        limited(solver)
        for h in hyps:
            solver.add(self._term(h))
        solver.add(z3.Not(self._term(goal)))
        return env

    @staticmethod
    def _counterexample(model: Any, env: dict[str, Any], hyps: tuple[Pred, ...], goal: Pred) -> dict[str, int]:
        """The value `model` gives each symbol of the hypotheses and the goal."""
        names = sorted(goal.symbols() | frozenset().union(*(h.symbols() for h in hyps)))
        return {n: model.eval(env[n], model_completion=True).as_long() for n in names}

    def _check(self, hyps: tuple[Pred, ...], goal: Pred) -> dict[str, int]:
        s = z3.Solver()
        env = self._refute(s, hyps, goal)
        res = s.check()
        if res == z3.unsat:
            return None  # type: ignore[return-value]
        if res == z3.sat:
            return self._counterexample(s.model(), env, hyps, goal)
        return {}  # unknown: not proven, no model to show

    def proves(self, goal: Pred) -> bool:
        return self.prove(goal) is None

    def smallest_counterexample(self, goal: Pred, order: Iterable[str]) -> dict[str, int] | None:
        """Like `prove`, but the counterexample minimises the named symbols lexicographically (sizes
        first, say, then indices), so a diagnostic shows the same small instances on every run."""
        if self.prove(goal) is None:
            return None
        hyps = self.assumptions()
        o = z3.Optimize()
        env = self._refute(o, hyps, goal)
        for name in order:
            if name in env:
                o.minimize(env[name])
        if o.check() != z3.sat:
            return self.prove(goal)
        return self._counterexample(o.model(), env, hyps, goal)

    def equal(self, a: Dim, b: Dim) -> dict[str, int] | None:
        if a == b:
            return None
        return self.prove(PCmp("==", a, b))

    def unsat_explanation(self) -> str | None:
        """None when the refinements are satisfiable; else the conflicting predicates."""
        hyps = default_lower_bounds(self.symbols, self.requires) + self.requires + self.axioms
        found = _UNSAT_MEMO.get(hyps, _MISSING)
        if found is _MISSING:
            found = _UNSAT_MEMO[hyps] = self._unsat_explanation(hyps)
        return found  # type: ignore[return-value]

    def _unsat_explanation(self, hyps: tuple[Pred, ...]) -> str | None:
        if _only_lower_bounds(hyps):  # each symbol bounded below by a constant: satisfiable, no Z3 needed
            return None
        s = limited(z3.Solver())
        s.set("unsat_core", True)
        tags = {}
        for n, h in enumerate(hyps):
            t = z3.Bool(f"__h{n}")
            tags[str(t)] = h
            s.assert_and_track(self._term(h), t)
        if s.check() != z3.unsat:
            return None
        core = [str(tags[str(t)]) for t in s.unsat_core()]
        return "these refinements cannot all hold: " + ", ".join(core)


# ---------------------------------------------------------------------------------------------- linear reasoning
#
# A sufficient test that decides the common obligations (`0 <= i`, `i < N`, `i + 1 <= N`, `N - 1 >= 0`)
# without Z3. Dims become linear forms over atoms: a symbol, or a non-linear subterm (`N // 2`, `M * N`)
# kept opaque; every hypothesis and goal comparison becomes `form >= 0` (integers: `a < b` is
# `b - a - 1 >= 0`). The goal is proven when `goal - h` (h: none, or one or two hypotheses) is
# non-negative by the constant bounds of its atoms that hypotheses give. Every step is sound, so it
# only ever answers "proven"; whatever it cannot show goes to Z3.

Linear = tuple[int, dict[object, int]]  # (constant, atom -> coefficient)


def linear_form(d: Dim) -> Linear:
    """`d` as a constant plus integer multiples of atoms (symbol names, or opaque non-linear subterms)."""
    if isinstance(d, DConst):
        return d.value, {}
    if isinstance(d, DSym):
        return 0, {d.name: 1}
    assert isinstance(d, DBin)
    if d.op in ("+", "-"):
        (ca, ta), (cb, tb) = linear_form(d.lhs), linear_form(d.rhs)
        sign = 1 if d.op == "+" else -1
        terms = dict(ta)
        for atom, c in tb.items():
            terms[atom] = terms.get(atom, 0) + sign * c
        return ca + sign * cb, {a: c for a, c in terms.items() if c}
    if d.op == "*":
        (ca, ta), (cb, tb) = linear_form(d.lhs), linear_form(d.rhs)
        if not ta:
            return ca * cb, {a: ca * c for a, c in tb.items() if ca * c}
        if not tb:
            return ca * cb, {a: cb * c for a, c in ta.items() if cb * c}
    return 0, {d: 1}


def _difference(a: Linear, b: Linear, scale: int = 1) -> Linear:
    terms = dict(a[1])
    for atom, c in b[1].items():
        terms[atom] = terms.get(atom, 0) - scale * c
    return a[0] - scale * b[0], {k: c for k, c in terms.items() if c}


def _nonnegative_forms(p: Pred) -> list[Linear] | None:
    """`p` as forms that are all >= 0 (None when `p` is not a conjunction of comparisons)."""
    if isinstance(p, PAnd):
        out: list[Linear] = []
        for q in p.items:
            forms = _nonnegative_forms(q)
            if forms is None:
                return None
            out += forms
        return out
    if not isinstance(p, PCmp) or p.op == "!=":
        return None
    lhs, rhs = linear_form(p.lhs), linear_form(p.rhs)
    if p.op in ("<=", "<"):
        form = _difference(rhs, lhs)
    elif p.op in (">=", ">"):
        form = _difference(lhs, rhs)
    else:
        return [_difference(rhs, lhs), _difference(lhs, rhs)]
    return [(form[0] - 1, form[1])] if p.op in ("<", ">") else [form]


def _bounds(hyps: list[Linear]) -> tuple[dict[object, int], dict[object, int]]:
    lower: dict[object, int] = {}
    upper: dict[object, int] = {}
    for const, terms in hyps:
        if len(terms) != 1:
            continue
        ((atom, c),) = terms.items()
        if c > 0:  # c * a + k >= 0  ->  a >= ceil(-k / c)
            bound = -(const // c)
            lower[atom] = max(bound, lower.get(atom, bound))
        else:  # a <= floor(k / -c)
            bound = const // -c
            upper[atom] = min(bound, upper.get(atom, bound))
    return lower, upper


def _bounded_nonnegative(form: Linear, lower: Mapping[object, int], upper: Mapping[object, int]) -> bool:
    least = form[0]
    for atom, c in form[1].items():
        bound = (lower if c > 0 else upper).get(atom)
        if bound is None:
            return False
        least += c * bound
    return least >= 0


def linear_proves(hyps: Iterable[Pred], goal: Pred) -> bool:
    """True only when `goal` follows from `hyps` by the linear reasoning above (False: undecided)."""
    goals = _nonnegative_forms(goal)
    if goals is None:
        return False
    facts: list[Linear] = []
    for h in hyps:
        facts += _nonnegative_forms(h) or ()
    lower, upper = _bounds(facts)
    relational = [f for f in facts if len(f[1]) > 1]
    for g in goals:
        if _bounded_nonnegative(g, lower, upper):
            continue
        if any(_bounded_nonnegative(_difference(g, h), lower, upper) for h in relational):
            continue
        if not any(_bounded_nonnegative(_difference(_difference(g, h1), h2), lower, upper)
                   for n, h1 in enumerate(relational) for h2 in relational[n:]):
            return False
    return True


_SYMBOL = re.compile(r"[A-Za-z_%][A-Za-z0-9_#]*")


def with_names(text: str, names: Mapping[str, str]) -> str:
    """`text` (a printed predicate or dim) with internal symbols replaced by the author's names for them."""
    return _SYMBOL.sub(lambda m: names.get(m.group(0), m.group(0)), text) if names else text


def named_model(model: Mapping[str, int], names: Mapping[str, str]) -> dict[str, int]:
    return {names.get(k, k): v for k, v in model.items()}


def format_counterexample(model: Mapping[str, int]) -> str:
    if not model:
        return "the solver could not decide"
    return "counterexample " + ", ".join(f"{k} = {v}" for k, v in model.items())


def check_concrete(preds: Iterable[Pred], env: Mapping[str, int]) -> str | None:
    """Evaluate refinements on launch values; returns the first failure as `pred failed: S = v`."""
    for p in preds:
        try:
            ok = p.evaluate(env)
        except (KeyError, ZeroDivisionError) as exc:
            return f"{p} cannot be evaluated: {exc}"
        if not ok:
            vals = ", ".join(f"{s} = {env[s]}" for s in sorted(p.symbols()))
            return f"{p} failed: {vals}"
    return None


def dim_value(d: Dim, env: Mapping[str, int]) -> int:
    return d.evaluate(env)


def z3_term(d: Dim, solver: ShapeSolver):
    return dim_to_z3(d, solver._env([PCmp("==", d, d)]))
