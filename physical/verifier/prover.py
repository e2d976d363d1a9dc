"""The Z3 side of the verifier's proofs: one `Prover` per program decides each query once, telling a
counterexample (REFUTED) from a resource budget that ran out (UNDECIDED)."""

from __future__ import annotations

from collections.abc import Iterable

import z3

from kir.dims import Pred, pred_to_z3
from kir.solver import limited

from .index import ProgramIndex

PROVEN, REFUTED, UNDECIDED = "proven", "refuted", "undecided"


class _Ints(dict):
    """Symbol name -> its Z3 integer, made on first use."""

    def __missing__(self, name: str) -> z3.ArithRef:
        v = self[name] = z3.Int(name)
        return v


class Prover:
    """The Z3 queries of one verification: each predicate is translated once and each query decided once.

    `decide(hyps, goal)` answers PROVEN, REFUTED (Z3 found a model of the facts where the goal fails: a real
    counterexample to the query as stated) or UNDECIDED (the resource budget ran out first: adding facts can do
    that to a query that used to pass, so a rule reports it as such, never as a proven violation).

    The solver first sees only the facts near the goal: those over the goal's symbols, then those sharing a
    symbol with the facts taken so far, ring by ring, and last all of them. A goal proven from some of the facts
    is proven from all, so the rings only add proofs; they matter because a group's facts include nonlinear
    ones (a helper's block times BLOCK, divisions by launch values) on which the resource budget can run out
    before the solver reaches the two linear facts that decide `0 <= flat < S + 1`. The verdict of a query that
    no ring proves is that of the whole set."""

    def __init__(self) -> None:
        self._ints = _Ints()
        # Facts are mostly the same objects query after query (a group's base facts are kept per copy), and a
        # deep predicate hashes slowly: they are known by identity, each kept alive with what is known of it
        # (so that its id stays its own). A goal, built afresh for each query, is known by value.
        self._known: dict[int, tuple[Pred, frozenset[str], z3.BoolRef | None]] = {}
        self._goals: dict[Pred, z3.BoolRef] = {}
        self._terms: dict[Pred, z3.BoolRef] = {}  # by value: a fact built again (the next program of a pipeline)
        self._verdicts: dict[tuple[tuple[int, ...], Pred], str] = {}
        self._same: dict[tuple[tuple[Pred, ...], Pred], str] = {}  # the verdicts by value
        self.undecided: list[Pred] = []  # the goals of the queries the budget left undecided, in order
        self._solved: dict[tuple[tuple[int, ...], Pred], str] = {}  # the verdicts of `proves_solving`

    def proves(self, hyps: Iterable[Pred], goal: Pred) -> bool:
        return self.decide(hyps, goal) == PROVEN

    def mark(self) -> int:
        """A point in this prover's queries, for `note` to tell what the queries after it left undecided."""
        return len(self.undecided)

    def note(self, mark: int) -> str:
        """The suffix of a violation found by the queries since `mark`: empty when Z3 decided each of them (a
        refuted query has a counterexample), else it says that the budget ran out, so the violation may be none:
        facts added for another rule can make a query that used to pass exhaust the budget."""
        goals = self.undecided[mark:]
        if not goals:
            return ""
        more = f" and {len(goals) - 1} more" if len(goals) > 1 else ""
        return f" (undecided: Z3 ran out of its resource budget on `{goals[0]}`{more}; no counterexample was found)"

    def decide(self, hyps: Iterable[Pred], goal: Pred) -> str:
        facts = list(hyps)
        key = self._key(facts, goal)
        verdict = self._verdicts.get(key)
        if verdict is None:  # the same query may come with facts built afresh (two rules ask about one pair)
            same = (tuple(facts), goal)
            verdict = self._same.get(same)
            if verdict is None:
                verdict = UNDECIDED
                for ring in _rings(facts, goal, self._symbols(facts)):
                    verdict = self._check(ring, goal)
                    if verdict == PROVEN:
                        break
                self._same[same] = verdict
            self._verdicts[key] = verdict
        if verdict == UNDECIDED:
            self.undecided.append(goal)
        return verdict

    def proves_solving(self, hyps: Iterable[Pred], goal: Pred) -> bool:
        """`proves`, the solver first eliminating the symbols that equalities among the facts define (Z3's
        `solve-eqs`, after `simplify` has settled constant conditions): where a query's facts chain many equalities
        through products (a mask's conjuncts under a launch flag, two copies' equal search results) the plain solver
        can spend its whole budget on the products those equalities remove. Only the rules that ask use it, so every
        other query is decided as it always was."""
        facts = list(hyps)
        key = self._key(facts, goal)
        verdict = self._solved.get(key)
        if verdict is None:  # by value where the facts were built afresh (the next program of a pipeline)
            same = (tuple(facts), goal, "solve-eqs")
            verdict = self._same.get(same)  # type: ignore[call-overload]
        if verdict is None:
            # all the facts first: with the equalities solved the whole set is mostly decided at once, and a
            # counterexample to it is one to every ring; the rings only where the budget ran out
            verdict = self._check(facts, goal, z3.Then("simplify", "solve-eqs", "smt").solver())
            if verdict == UNDECIDED:
                for ring in _rings(facts, goal, self._symbols(facts))[:-1]:
                    if self._check(ring, goal, z3.Then("simplify", "solve-eqs", "smt").solver()) == PROVEN:
                        verdict = PROVEN
                        break
            self._same[same] = verdict  # type: ignore[index]
        self._solved[key] = verdict
        if verdict == UNDECIDED:
            self.undecided.append(goal)
        return verdict == PROVEN

    def _key(self, facts: list[Pred], goal: Pred) -> tuple[tuple[int, ...], Pred]:
        """The query's key by the facts' identities (each fact kept known, so its id stays its own)."""
        for p in facts:
            if id(p) not in self._known:
                self._known[id(p)] = (p, p.symbols(), None)
        return tuple(id(p) for p in facts), goal

    def _symbols(self, facts: list[Pred]) -> list[frozenset[str]]:
        return [self._known[id(p)][1] for p in facts]

    def _term(self, p: Pred) -> z3.BoolRef:
        p_, names, t = self._known[id(p)]
        if t is None:
            t = self._terms.get(p)
            if t is None:
                t = self._terms[p] = pred_to_z3(p, self._ints)
            self._known[id(p)] = (p, names, t)
        return t

    def _goal(self, p: Pred) -> z3.BoolRef:
        t = self._goals.get(p)
        if t is None:
            t = self._goals[p] = pred_to_z3(p, self._ints)
        return t

    def _check(self, hyps: list[Pred], goal: Pred, solver: z3.Solver | None = None) -> str:
        # Z3's SMT core without the tactic front end of `z3.Solver()`: the rules' queries are small and many, and the
        # front end's preprocessing cost more than the search (three times the time over the queries of the
        # bench kernels verified after every pass, with the same verdict for each)
        s = limited(solver if solver is not None else z3.SimpleSolver())
        for h in hyps:
            s.add(self._term(h))
        s.add(z3.Not(self._goal(goal)))
        answer = s.check()
        return PROVEN if answer == z3.unsat else REFUTED if answer == z3.sat else UNDECIDED


def proves(hyps: Iterable[Pred], goal: Pred) -> bool:
    """Whether `goal` holds in every model of `hyps` (an undecided query counts as not proven): one query of a
    fresh `Prover` (a rule with a group's forms at hand asks `forms.prover`, which remembers its answers)."""
    return Prover().proves(hyps, goal)


def _rings(hyps: list[Pred], goal: Pred, symbols: list[frozenset[str]]) -> list[list[Pred]]:
    """Growing subsets of `hyps` (whose symbols are `symbols`) around `goal`'s symbols, ending with `hyps` itself
    (each subset once)."""
    near = set(goal.symbols())
    rings: list[list[Pred]] = []
    taken = [bool(s) and s <= near for s in symbols]
    while True:
        ring = [h for h, t in zip(hyps, taken) if t]
        if ring and (not rings or len(ring) > len(rings[-1])) and len(ring) < len(hyps):
            rings.append(ring)
        grow = [i for i, s in enumerate(symbols) if not taken[i] and s & near]
        if not grow:
            break
        for i in grow:
            taken[i] = True
            near |= symbols[i]
    rings.append(hyps)
    return rings


def prover_of(index: ProgramIndex) -> Prover:
    """The prover of one program's queries (kept by its index, so every rule's identical query is decided once)."""
    prover = getattr(index, "prover", None)  # a hand-made index (tests of the forms alone) may not have one yet
    if not isinstance(prover, Prover):
        prover = index.prover = Prover()
    return prover


__all__ = ["PROVEN", "REFUTED", "UNDECIDED", "Prover", "prover_of", "proves"]
