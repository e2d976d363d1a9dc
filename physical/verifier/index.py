"""One pass over a physical program that every rule reads: definitions, op placement and accesses.

`ProgramIndex` records, for every op, its group and the chain of enclosing ops; for every SSA value
its definition (an op result or a region argument, with the owning op and region); every access
relation with its kind (read, write, read-modify-write). It also evaluates launch expressions on a
few sample bindings of the shape symbols and integer ABI scalars, which is how rules compare
expressions (offsets against sums of lengths, lengths against domains) without algebra.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

from intent.runtime.checks import settle
from kir.dims import DConst, Dim
from kir.errors import IntentError

from .. import ops as P
from ..launch_expr import DEVICE_SMS, LaunchExpr
from ..model import Access, AccessRelation, Buffer, Group, ParamKind, POp, PRegion, Program, PValue, Trait

# The long extents of the skewed samples, longest first (2**22 + 3, 2**17 + 3): past every split threshold on 132
# multiprocessors, where the split counts come from the device (multiples of 132), not powers of two, so slot
# tiles hold padding.
LONG = (4194307, 131075)


@dataclass(frozen=True)
class Placed:
    """An op, its group, the ops whose regions enclose it (outermost first) and the form of its group's body
    it runs in (one of `P.forms(group.body)`)."""

    op: POp
    group: int
    parents: tuple[POp, ...]
    order: int  # position in the program's walk order
    form: PRegion

    @property
    def nested(self) -> bool:
        """Whether the op sits inside a nested region of its group's body. A form of the body (a region of
        its `looped_rows` op) is the body as that form runs it, and the body of a loop over blocks of
        instances at a form's top is the body of one block: neither is a nested region (`instance_ops`)."""
        parents = self.parents
        if parents and isinstance(parents[0], P.LoopedRows):
            parents = parents[1:]
        if parents and isinstance(parents[0], P.BlockLoop):
            parents = parents[1:]
        return bool(parents)


@dataclass(frozen=True)
class Definition:
    """Where a value is defined: the result `index` of `op`, or argument `index` of `region` of `op`.

    A region argument of a group body has `op` None.
    """

    value: PValue
    group: int
    op: POp | None
    region: PRegion | None
    index: int
    order: int

    @property
    def is_arg(self) -> bool:
        return self.region is not None


@dataclass(frozen=True)
class AccessSite:
    placed: Placed
    access: AccessRelation
    kind: Access

    @property
    def op(self) -> POp:
        return self.placed.op


class ProgramIndex:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.placed: list[Placed] = []
        self.place: dict[int, Placed] = {}            # id(op) -> placement
        self.defs: dict[int, Definition] = {}          # value id -> its first definition
        self.duplicates: list[Definition] = []         # later definitions of an already defined id
        self.accesses: list[AccessSite] = []
        self.buffers: dict[int, Buffer] = {}
        self.duplicate_buffers: list[Buffer] = []
        self.forms: dict[int, object] = {}  # group id -> its affine forms (affine.forms_of), built on first use
        self.prover: object | None = None  # the Z3 queries of this program's rules (affine.prover_of)
        self._values: dict[LaunchExpr | Dim, tuple[int | None, ...]] = {}  # expression -> its sample values
        for b in program.buffers:
            if b.id in self.buffers:
                self.duplicate_buffers.append(b)
            else:
                self.buffers[b.id] = b
        self.groups: dict[int, Group] = {g.id: g for g in program.groups}
        self.constexprs: dict[str, LaunchExpr] = dict(program.constexprs)
        for g in program.groups:
            self._region(g.body, g.id, (), None, g.body)

    # ------------------------------------------------------------------ construction
    def _define(self, d: Definition) -> None:
        if d.value.id in self.defs:
            self.duplicates.append(d)
        else:
            self.defs[d.value.id] = d

    def _region(self, region: PRegion, gid: int, parents: tuple[POp, ...], owner: POp | None,
                form: PRegion) -> None:
        for k, a in enumerate(region.args):
            self._define(Definition(a, gid, owner, region, k, len(self.placed)))
        for op in region.ops:
            pl = Placed(op, gid, parents, len(self.placed), form)
            self.placed.append(pl)
            self.place[id(op)] = pl
            for f in op.fields():
                x = getattr(op, f.name)
                if isinstance(x, AccessRelation):
                    self.accesses.append(AccessSite(pl, x, access_kind(op)))
            for r in op.regions():
                top_form = not parents and isinstance(op, P.LoopedRows)  # each region is a form of the body
                self._region(r, gid, parents + (op,), op, r if top_form else form)
            for k, v in enumerate(op.results):
                self._define(Definition(v, gid, op, None, k, pl.order))

    # ------------------------------------------------------------------ queries
    def producer(self, v: PValue) -> POp | None:
        d = self.defs.get(v.id)
        return d.op if d is not None and not d.is_arg else None

    def group_ops(self, gid: int) -> list[Placed]:
        return [p for p in self.placed if p.group == gid]

    def _and_tree(self, mask: PValue | None) -> Iterator[tuple[PValue, bool]]:
        """Each node of the `and` tree that defines `mask` once, leaves left to right, and whether it is a leaf."""
        seen: set[int] = set()
        work = [mask] if mask is not None else []
        while work:
            v = work.pop()
            if v.id in seen:
                continue
            seen.add(v.id)
            op = self.producer(v)
            inner = isinstance(op, P.Binary) and op.fn.value == "and" and op.results[0].type.dtype.is_pred
            if inner:
                work += [op.rhs, op.lhs]
            yield v, not inner

    def conjuncts(self, mask: PValue | None) -> list[PValue]:
        """The leaves of the `and` tree that defines `mask` (the mask itself when it is no `and`)."""
        return [v for v, leaf in self._and_tree(mask) if leaf]

    def is_conjunct(self, mask: PValue | None, part: PValue) -> bool:
        """Whether `part` is `mask` or a node of the `and` tree defining it (so mask implies part)."""
        return any(v.id == part.id for v, _ in self._and_tree(mask))

    # ------------------------------------------------------------------ launch expressions on samples
    @cached_property
    def scalar_params(self) -> dict[str, bool]:
        """Runtime scalar parameters: name -> whether it is an integer (usable in launch expressions)."""
        return {q.name: q.dtype.is_int for q in self.program.params if q.kind is ParamKind.SCALAR}

    @cached_property
    def envs(self) -> list[dict[str, int]]:
        """Sample launch bindings: symbols and integer scalars, then every constexpr that evaluates."""
        names = list(self.program.symbols) + [n for n, is_int in self.scalar_params.items() if is_int]
        primes = [3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47]
        samples = [[1] * len(names), [2] * len(names),
                   [primes[k % len(primes)] for k in range(len(names))],
                   [97 + 34 * k for k in range(len(names))], [4099 + 17 * k for k in range(len(names))]]
        out = []
        for k, values in enumerate(samples):
            env = dict(zip(names, values))
            env[DEVICE_SMS] = (0, 132, 1, 0, 132)[k]  # the interpreter, an H200, one multiprocessor
            _bind_constexprs(self.constexprs, env)
            out.append(env)
        # Few long rows, few huge segments on an H200: the launches where the split passes (split-reductions,
        # split-scans, split-rows, split-segments with balance-segments' helpers, split-region-scans) select their
        # split forms, so that every launch-dependent check also sees SPLITS_g > 1, SPLIT_g = 1 and HELPERS_g > 0.
        # Which name counts the rows (or segments) depends on the kernel: every other name is small, then every
        # other long. The longest extent the kernel launches with is taken (one that keeps an axis in one tile
        # refuses the longest), so that every constexpr the other samples bind evaluates.
        bound = {n for env in out for n in self.constexprs if n in env}
        for parity in (0, 1):
            for long in LONG:
                env = {n: (2 + k, long + 34 * k)[(k + parity) % 2] for k, n in enumerate(names)}
                env[DEVICE_SMS] = 132
                _bind_constexprs(self.constexprs, env)
                if bound <= env.keys():
                    out.append(env)
                    break
        return out

    def values(self, e: LaunchExpr | Dim) -> list[int | None]:
        """The expression on every sample binding (None where it cannot be evaluated); each expression is evaluated
        once per program (the rules ask for the same extents and split counts again and again)."""
        got = self._values.get(e)
        if got is None:
            got = self._values[e] = tuple(evaluate(e, env) for env in self.envs)
        return list(got)

    def runs_form(self, group: Group, form: PRegion, env: Mapping[str, int]) -> bool:
        """Whether the launch `env` runs `form` of the group's body (one of `P.forms(group.body)`): the split form
        where its flag is set, else the whole or the looped form as the looped flag says. A flag the sample cannot
        evaluate selects every form (a check then holds for each)."""
        choice = P.looped_rows(group.body)
        if choice is None:
            return True
        split = env.get(choice.split_flag) if choice.split_flag is not None else 0
        if choice.split is not None and form is choice.split:
            return split is None or bool(split)
        looped = env.get(choice.flag)
        if split:
            return False
        return split is None or looped is None or bool(looped) == (form is choice.looped)

    def same_value(self, a: LaunchExpr | Dim, b: LaunchExpr | Dim) -> bool:
        """Whether two expressions agree on every sample where both evaluate (and on at least one)."""
        both = [(x, y) for x, y in zip(self.values(a), self.values(b)) if x is not None and y is not None]
        return bool(both) and all(x == y for x, y in both)



def access_kind(op: POp) -> Access:
    """How an access op touches its buffer (an atomic update reads and writes it)."""
    if op.has(Trait.READS | Trait.WRITES):
        return Access.READ_WRITE
    if op.has(Trait.WRITES):
        return Access.WRITE
    return Access.READ


def _bind_constexprs(constexprs: Iterable[tuple[str, LaunchExpr]], env: dict[str, int]) -> None:
    """Add to `env` every constexpr that evaluates on it (a constexpr may use others; of two of the same name,
    the later one holds)."""

    def resolve(constexpr: tuple[str, LaunchExpr]) -> bool:
        value = evaluate(constexpr[1], env)
        if value is not None:
            env[constexpr[0]] = value
        return value is not None

    settle(list(dict(constexprs).items()), resolve)


def evaluate(e: object, env: Mapping[str, int]) -> int | None:
    """Evaluate a launch expression or dim; None when a name is unbound or the value is undefined."""
    try:
        v = e.evaluate(env)  # type: ignore[attr-defined]
    except (KeyError, ZeroDivisionError, IntentError, AttributeError, TypeError, ValueError, OverflowError):
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def product(dims: tuple[Dim, ...]) -> Dim:
    from kir.dims import dim_bin

    out: Dim = DConst(1)
    for d in dims:
        out = dim_bin("*", out, d)
    return out


_CACHE: list[tuple[Program, ProgramIndex]] = []


def index_of(program: Program) -> ProgramIndex:
    """The (cached) index of a program; programs are immutable, so identity is a safe key."""
    for p, ix in _CACHE:
        if p is program:
            return ix
    ix = ProgramIndex(program)
    _CACHE.append((program, ix))
    del _CACHE[:-4]
    return ix


__all__ = ["ProgramIndex", "Placed", "Definition", "AccessSite", "index_of", "evaluate", "product",
           "access_kind"]
