"""Facts of a group's forms that only the rules that ask for them take (`FunctionFacts.function_facts`): each
makes every query it joins larger, so they stay out of the base facts every rule's query carries."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from kir.affine import neg_form
from kir.dims import DConst, Dim, DSym, PAnd, PCmp, PNot, POr, Pred, dim_bin

from ..launch_expr import LBin, LConstexpr
from .index import product

if TYPE_CHECKING:
    from .affine import Forms


class FunctionFacts:
    """The part of `Forms` that states the decode of flat indices, constexpr definitions, guarded quotients and
    equal results of calls with equal inputs (mixed into `Forms`: it reads the forms' sources, calls and atoms)."""

    def function_facts(self: Forms, tags: tuple[str, ...] = ("",)) -> list[Pred]:
        """Facts that only the rules that need them ask for (each makes every query it joins larger), for the copies
        `tags`:

        * a flat index decoded over several axes is its decode: `flat = Q * (D_1 * ...) + ... + C_{r-1}` (flat >= 0);
        * a constexpr defined as a product, sum or difference (`HELPERS_g = CHUNKS_g * HELPER_SPAN_g`) is that of the
          atoms of its operands;
        * a quotient by a launch value that may be 0 has the truncation facts where the divisor is at least 1;
        * a function of its inputs (`Call`: a quotient, an extremum, a search loop) gives equal results for equal
          inputs: within a copy where the inputs are the same forms (two ops computing one value), and between the
          copies where the inputs are equal."""
        kept = self._functions.get(tags)  # one list per copies, the same objects each time (the prover knows them)
        if kept is None:
            kept = []
            for tag in tags:
                kept += [self.rename(f, tag) for f in self._decode_facts() + self._guarded_facts()]  # type: ignore
            kept += self.definition_facts()
            kept += self._same_calls(tags)
            self._functions[tags] = kept
        return list(kept)

    def _decode_facts(self: Forms) -> list[Pred]:
        out: list[Pred] = []
        for src in self.sources.values():
            if len(src.domain) < 2:
                continue
            whole: Dim = DConst(0)
            for k, a in enumerate(src.atoms):
                whole = dim_bin("+", whole, dim_bin("*", DSym(a), product(src.domain[k + 1:])))
            out.append(POr((PCmp("<", src.flat, DConst(0)), PCmp("==", src.flat, whole))))
        return out

    def _guarded_facts(self: Forms) -> list[Pred]:
        out: list[Pred] = []
        zero = DConst(0)
        for a, b, q, r in self.guarded:
            self.per_copy.add(q.name)
            rem = dim_bin("-", a, dim_bin("*", b, q))
            exact = POr((PAnd((PCmp(">=", a, zero), PCmp(">=", rem, zero), PCmp("<", rem, b))),
                         PAnd((PCmp("<", a, zero), PCmp("<=", rem, zero), PCmp(">", rem, neg_form(b))))))
            parts = (exact,) if r is None else (exact, PCmp("==", r, rem))
            out.append(POr((PCmp("<", b, DConst(1)), PAnd(parts))))
        return out

    def definition_facts(self: Forms) -> list[Pred]:
        """`N == a op b` for each constexpr N defined as `a op b` (+, - or *), in the atoms `launch_dim` gives the
        operands (another constexpr's definition is that constexpr's atom)."""
        out: list[Pred] = []
        for name, e in self.ix.constexprs.items():
            if isinstance(e, LBin) and e.op in ("+", "-", "*") and self._canonical_constexprs().get(name) == name:
                whole = self.launch_dim(LConstexpr(name))
                out.append(PCmp("==", whole, dim_bin(e.op, self.launch_dim(e.lhs), self.launch_dim(e.rhs))))
        return out

    def _same_calls(self: Forms, tags: tuple[str, ...]) -> list[Pred]:
        """Equal results of calls with equal inputs: two calls of one kind whose args are the same forms (up to
        atoms already found equal) in every copy, and each call's results in two copies whose args are equal."""
        rep: dict[str, str] = {}

        def find(n: str) -> str:
            while rep.get(n, n) != n:
                n = rep[n]
            return n

        changed = True
        while changed:  # congruence closure over the calls' arguments
            changed = False
            seen: dict[object, str] = {}
            for c in self.calls:
                names = {n: DSym(find(n)) for n in set().union(*(a.symbols() for a in c.args)) if find(n) != n}
                key = (c.kind, tuple(a.substitute(names) if names else a for a in c.args))
                first = seen.setdefault(key, find(c.result.name))
                if find(c.result.name) != first:
                    rep[find(c.result.name)] = first
                    changed = True
        out: list[Pred] = []
        same = [PCmp("==", DSym(n), DSym(find(n))) for n in sorted(rep)]
        for tag in tags:
            out += [self.rename(f, tag) for f in same]  # type: ignore[misc]
        for a, b in itertools.combinations(tags, 2):
            for c in self.calls:
                if find(c.result.name) != c.result.name or not any(x.symbols() & self.per_copy for x in c.args):
                    continue
                equal = [_equal(self.rename(x, a), self.rename(x, b)) for x in c.args  # type: ignore[arg-type]
                         if x.symbols() & self.per_copy]
                out.append(POr((PNot(PAnd(tuple(equal))), PCmp("==", self.rename(c.result, a),  # type: ignore
                                                                 self.rename(c.result, b)))))
        return out


def _equal(a: Dim | Pred, b: Dim | Pred) -> Pred:
    """`a == b` for two forms, `a <=> b` for two facts."""
    if isinstance(a, Pred):
        return POr((PAnd((a, b)), PAnd((PNot(a), PNot(b)))))  # type: ignore[arg-type]
    return PCmp("==", a, b)  # type: ignore[arg-type]


__all__ = ["FunctionFacts"]
