"""Z3 over shape symbols: satisfiability of `requires`, typing obligations, launch-time evaluation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import z3

from .dims import DConst, Dim, DSym, PCmp, Pred, dim_to_z3, pred_to_z3


def default_lower_bounds(symbols: Iterable[str], requires: Iterable[Pred]) -> tuple[Pred, ...]:
    """Every symbol is `>= 1` unless the kernel states `S >= 0` itself."""
    stated_nonneg = {p.lhs.name for p in requires
                     if isinstance(p, PCmp) and p.op == ">=" and isinstance(p.lhs, DSym) and p.rhs == DConst(0)}
    return tuple(PCmp(">=", DSym(s), DConst(0 if s in stated_nonneg else 1)) for s in symbols)


@dataclass
class ShapeSolver:
    """Discharges obligations `pred` under the kernel's refinements and axioms."""

    symbols: tuple[str, ...]
    requires: tuple[Pred, ...] = ()
    axioms: tuple[Pred, ...] = ()
    facts: list[Pred] = field(default_factory=list)  # extra local facts (loop ranges) pushed by callers

    def __post_init__(self) -> None:
        self._vars: dict[str, z3.ArithRef] = {s: z3.Int(s) for s in self.symbols}
        self._cache: dict[Pred, dict[str, int] | None] = {}

    def var(self, name: str) -> z3.ArithRef:
        if name not in self._vars:
            self._vars[name] = z3.Int(name)
        return self._vars[name]

    def _env(self, preds: Iterable[Pred]) -> dict[str, z3.ArithRef]:
        for p in preds:
            for s in p.symbols():
                self.var(s)
        return self._vars

    def assumptions(self) -> tuple[Pred, ...]:
        return default_lower_bounds(self.symbols, self.requires) + self.requires + self.axioms \
            + tuple(self.facts)

    def prove(self, goal: Pred) -> dict[str, int] | None:
        """None when `goal` holds for every model of the assumptions, else a counterexample."""
        key = goal if not self.facts else None
        if key is not None and key in self._cache:
            return self._cache[key]
        hyps = self.assumptions()
        env = self._env((*hyps, goal))
        s = z3.Solver()
        s.set("timeout", 2000)
        for h in hyps:
            s.add(pred_to_z3(h, env))
        s.add(z3.Not(pred_to_z3(goal, env)))
        res = s.check()
        if res == z3.unsat:
            out = None
        elif res == z3.sat:
            m = s.model()
            names = sorted(goal.symbols() | frozenset().union(*(h.symbols() for h in hyps)))
            out = {n: m.eval(env[n], model_completion=True).as_long() for n in names}
        else:  # unknown: not proven, no model to show
            out = {}
        if key is not None:
            self._cache[key] = out
        return out

    def proves(self, goal: Pred) -> bool:
        return self.prove(goal) is None

    def equal(self, a: Dim, b: Dim) -> dict[str, int] | None:
        if a == b:
            return None
        return self.prove(PCmp("==", a, b))

    def unsat_explanation(self) -> str | None:
        """None when the refinements are satisfiable; else the conflicting predicates."""
        hyps = default_lower_bounds(self.symbols, self.requires) + self.requires + self.axioms
        env = self._env(hyps)
        s = z3.Solver()
        s.set("timeout", 2000)
        s.set("unsat_core", True)
        tags = {}
        for n, h in enumerate(hyps):
            t = z3.Bool(f"__h{n}")
            tags[str(t)] = h
            s.assert_and_track(pred_to_z3(h, env), t)
        if s.check() != z3.unsat:
            return None
        core = [str(tags[str(t)]) for t in s.unsat_core()]
        return "these refinements cannot all hold: " + ", ".join(core)


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
