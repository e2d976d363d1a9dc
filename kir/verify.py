"""The KIR verifier: SSA scoping, terminators, each op's typing rule, roles, and in-bounds point loads.

Point indices of `load`/`store` must be affine in loop indices, shape symbols and constants, and
proven within the extent by Z3 under the loop ranges and the kernel's refinements (data-dependent
indices go through `gather`/`scatter`, whose out-of-range semantics are defined).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .access import Load, Store
from .affine import kir_form, nonnegative_by
from .control import For, Parallel
from .core import Kernel, Op, RefType, Region, Role, Slice, TensorType, TypeContext, Value
from .dims import DConst, Dim, DSym, PCmp, Pred
from .errors import VerifyError
from .region import RegionFold, RegionScan
from .solver import ShapeSolver, format_counterexample, named_model, with_names


class Verifier:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.solver = kernel.solver()
        self.scopes: list[set[int]] = []
        self.affine: dict[int, Dim] = {}
        self.names: dict[str, str] = {}  # loop symbol -> the author's name of the loop index

    def error(self, message: str, op: Op | None) -> VerifyError:
        return VerifyError(message, op.loc if op is not None else self.kernel.loc)

    @contextmanager
    def scope(self, args: tuple[Value, ...]) -> Iterator[None]:
        self.scopes.append({a.id for a in args})
        try:
            yield
        finally:
            self.scopes.pop()

    def defined(self, v: Value) -> bool:
        return any(v.id in s for s in self.scopes)

    def run(self) -> None:
        k = self.kernel
        expl = self.solver.unsat_explanation()
        if expl is not None:
            raise self.error(f"kernel {k.name}: requires is unsatisfiable; {expl}", None)
        if tuple(p.value for p in k.params) != k.body.args:
            raise self.error("kernel parameters and body arguments differ", None)
        names = [p.name for p in k.params]
        if len(set(names)) != len(names):
            raise self.error(f"duplicate parameter names in {names}", None)
        for p in k.params:
            if isinstance(p.type, RefType) and p.type.role is Role.LOCAL:
                raise self.error(f"parameter {p.name} cannot have role local", None)
            self.check_symbols(p.type.shape, None, f"parameter {p.name}")
        for pred in k.requires + k.axioms:
            self.check_symbols(pred, None, "requires")
        self.region(k.body, "kernel body", top=True)

    def check_symbols(self, item: object, o: Op | None, what: str) -> None:
        """Every shape symbol used must be declared: the launcher binds only declared symbols."""
        unknown = sorted(_symbols_in(item) - set(self.kernel.symbols))
        if unknown:
            declared = ", ".join(self.kernel.symbols) or "none"
            raise self.error(f"{what} uses the undeclared shape symbol {unknown[0]} (declared symbols: {declared})",
                             o)

    def region(self, r: Region, what: str, top: bool = False) -> None:
        with self.scope(r.args):
            for n, o in enumerate(r.ops):
                last = n == len(r.ops) - 1
                if o.TERMINATOR and not last:
                    raise self.error(f"{o.NAME} must be the last op of its region", o)
                self.op(o)
            if not top and (not r.ops or not r.ops[-1].TERMINATOR):
                raise self.error(f"{what} region does not end with yield", r.ops[-1] if r.ops else None)
            if top and r.ops and r.ops[-1].TERMINATOR and r.yielded:
                raise self.error("the kernel body yields no values", r.ops[-1])

    def op(self, o: Op) -> None:
        for v in o.operands():
            if not self.defined(v):
                raise self.error(f"{o.NAME} uses {v!r} before it is defined", o)
        self.check_symbols(tuple(getattr(o, f.name) for f in o.fields() if not isinstance(getattr(o, f.name), Region))
                           + tuple(v.type.shape for v in o.results), o, o.NAME)
        for r in o.regions():
            self.nested(o, r)
        ctx = TypeContext(self.solver, o.loc)
        try:
            want = o.infer(ctx)
        except VerifyError:
            raise
        except Exception as exc:  # typing rules raise DiagnosticError; keep them located
            raise self.error(str(getattr(exc, "message", exc)), o) from None
        got = tuple(v.type for v in o.results)
        if got != want and not self.equal_types(got, want):
            raise self.error(f"{o.NAME} results are ({', '.join(map(str, got))}) but its typing rule gives "
                             f"({', '.join(map(str, want))})", o)
        for v in o.results:
            if self.defined(v):
                raise self.error(f"{v!r} is defined twice", o)
        self.scopes[-1].update(v.id for v in o.results)
        self.track_affine(o)
        if isinstance(o, Load | Store):
            self.check_points(o, o.src if isinstance(o, Load) else o.dst, o.index)

    def equal_types(self, got: tuple, want: tuple) -> bool:
        """Result types written with other but provably equal dims (`1` for `N - (N - 1)`) are accepted."""
        if len(got) != len(want):
            return False
        for a, b in zip(got, want):
            if type(a) is not type(b) or a.dtype != b.dtype or len(a.shape) != len(b.shape) or \
                    getattr(a, "role", None) != getattr(b, "role", None):
                return False
            if any(self.solver.equal(x, y) is not None for x, y in zip(a.shape, b.shape)):
                return False
        return True

    def nested(self, o: Op, r: Region) -> None:
        facts_before = len(self.solver.facts)
        if isinstance(o, Parallel) and r is o.body:
            for a, d in zip(r.args, o.domain):
                sym = self.loop_symbol(a)
                self.solver.facts += [PCmp(">=", sym, DConst(0)), PCmp("<", sym, d)]
        elif isinstance(o, For) and r is o.body:
            lo, hi, st = (self.affine.get(v.id) for v in (o.start, o.stop, o.step))
            iv = r.args[0]
            if lo is not None and hi is not None and isinstance(st, DConst) and st.value > 0:
                sym = self.loop_symbol(iv)
                self.solver.facts += [PCmp(">=", sym, lo), PCmp("<", sym, hi)]
        try:
            self.region(r, o.NAME)
        finally:
            del self.solver.facts[facts_before:]

    def loop_symbol(self, v: Value) -> Dim:
        sym = DSym(f"_i{v.id}")
        self.affine[v.id] = sym
        if v.name:  # the author's name for the index, in messages (the symbol itself stays unique)
            self.names[sym.name] = v.name
        return sym

    def track_affine(self, o: Op) -> None:
        if not o.results or not isinstance(o.results[0].type, TensorType) or o.results[0].type.shape:
            return
        form = kir_form(o, self.affine, nonnegative_by(self.solver.proves))
        if form is not None:
            self.affine[o.results[0].id] = form

    def check_points(self, o: Op, ref: Value, index: tuple) -> None:
        shape = ref.type.shape  # type: ignore[union-attr]
        for ax, it in enumerate(index):
            if not isinstance(it, Value):
                continue
            e = self.affine.get(it.id)
            if e is None:
                raise self.error(f"{o.NAME} index on axis {ax} is not affine in loop indices and shape "
                                 f"symbols; use a gather/scatter for data-dependent indices", o)
            for pred in (PCmp(">=", e, DConst(0)), PCmp("<", e, shape[ax])):
                cex = self.solver.prove(pred)
                if cex is not None:
                    names = self.display_names(pred)
                    raise self.error(f"{o.NAME} index on axis {ax} may be out of bounds: cannot prove "
                                     f"{with_names(str(pred), names)}: "
                                     f"{format_counterexample(named_model(cex, names))}", o)

    def display_names(self, pred: Pred) -> dict[str, str]:
        """The author's names of the loop symbols (a name twice, or a shape symbol's name, gets the symbol's
        number too, so that a counterexample stays unambiguous)."""
        taken = set(self.kernel.symbols)
        out: dict[str, str] = {}
        counts: dict[str, int] = {}
        for name in self.names.values():
            counts[name] = counts.get(name, 0) + 1
        for sym, name in self.names.items():
            out[sym] = name if counts[name] == 1 and name not in taken else f"{name}#{sym[2:]}"
        return out


def _symbols_in(item: object) -> set[str]:
    """Shape symbols of dims, predicates, slices and value types inside `item` (not nested regions)."""
    if isinstance(item, Dim | Pred):
        return set(item.symbols())
    if isinstance(item, Slice):
        return _symbols_in(item.start) | _symbols_in(item.stop)
    if isinstance(item, Value):
        return _symbols_in(item.type.shape)
    if isinstance(item, tuple):
        out: set[str] = set()
        for x in item:
            out |= _symbols_in(x)
        return out
    return set()


def verify(kernel: Kernel) -> Kernel:
    Verifier(kernel).run()
    return kernel


def solver_for(kernel: Kernel) -> ShapeSolver:
    return kernel.solver()


__all__ = ["verify", "Verifier", "RegionFold", "RegionScan", "Slice"]
