"""Affine forms of a group's integer values and facts of its masks, for Z3 proofs.

The verifier re-derives, independently of construction, what every integer SSA value is in terms of
*atoms*: shape symbols and ABI scalars (shared by all instances), and per-instance atoms (decoded
instance coordinates, tile positions, loop induction variables, chunk starts, loaded data). One
"copy" of the forms describes one member: one instance at one tile position. Two copies (atoms
renamed `A`/`B`) describe two members of different instances, which is how cross-instance
conflicts are decided.

Flattened instance indices (`owned_instances`, `chunk_lanes`, and induction variables of loops over
a flattened domain) are decoded row-major by `%` and `//` by the domain's extents; the decode is
recognised, so that coordinate `k` becomes an atom `C_k` in `[0, D_k)` and the leading quotient an
atom `Q` (below `D_0` when the lane is valid). Products of symbols stay non-linear terms for Z3.

Facts of a pred value are the Presburger predicates its `and`/`or`/`not`/compare tree states about
the forms; a mask's facts are what the members it keeps satisfy.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from kir.affine import Products, binary_form, cast_form, constant_form, neg_form
from kir.dims import DBin, DConst, Dim, DSym, PAnd, PCmp, PNot, POr, Pred, dim_bin
from kir.solver import default_lower_bounds

from .. import ops as P
from ..launch_expr import LaunchExpr, LBin, LConst, LConstexpr, LDim, LScalar, LSum
from ..model import Access, Group, POp, PRegion, PValue, TileAxis, Trait
from .function_facts import FunctionFacts
from .index import ProgramIndex, product
from .prover import PROVEN, REFUTED, UNDECIDED, Prover, prover_of, proves

_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


@dataclass
class FlatSource:
    """A flattened instance index and the atoms of its row-major decode over `domain`."""

    key: int
    domain: tuple[Dim, ...]
    flat: Dim                       # the flat index as a form (an atom, or base + lane for chunks)
    atoms: tuple[str, ...]          # Q, C_1 .. C_{r-1}
    always_valid: bool              # Q < D_0 holds without a lane-validity test
    base: Dim | None = None         # chunk lanes: the chunk's base (equal for two lanes of one chunk)
    facts: list[Pred] = field(default_factory=list)

    def identity(self) -> list[Dim]:
        return [DSym(a) for a in self.atoms] if len(self.domain) > 1 else [self.flat]


@dataclass(frozen=True)
class Call:
    """A per-copy atom that is a function of `args` (forms, or facts of pred values): `kind` names the function, so
    two calls of one kind with equal args have equal results (a quotient, an extremum, a search loop)."""

    kind: tuple
    args: tuple[Dim | Pred, ...]
    result: DSym


class Forms(FunctionFacts):
    """Forms and facts of the values of one group."""

    def __init__(self, index: ProgramIndex, group: Group) -> None:
        self.ix = index
        self.group = group
        self.prover = prover_of(index)
        self.forms: dict[int, Dim | None] = {}
        self.pred_facts: dict[int, Pred | None] = {}
        self.div: dict[int, tuple[int, int]] = {}       # value id -> (source key, k): flat // S_k
        self.sources: dict[int, FlatSource] = {}
        self.source_of_flat: dict[int, int] = {}        # value id of a flat index -> source key
        self.per_copy: set[str] = set()
        self.tiled_atoms: set[str] = set()              # atoms that differ between tile positions
        self.facts: list[Pred] = []                     # always-true facts about the atoms
        self.shared: dict[object, str] = {}
        self.tile_keys: dict[tuple[TileAxis, ...], int] = {}
        self.program_atom: DSym | None = None          # helper_index: tells the group's programs apart
        self.program_uniform: set[str] = set()          # atoms of values that are one per program
        self.helper_lanes: Pred | None = None           # a joined helper's lanes lie in its block (`_helper_block`)
        self.alike: dict[tuple, Dim] = {}               # (fn, operand forms, tiled) -> the form of a binary op
        # what only the rules that ask for them use (`function_facts`): atoms that are functions of their args, and
        # quotients by a divisor that may be 0 (a count of chunks), (dividend, divisor, quotient, remainder)
        self.calls: list[Call] = []
        self.guarded: list[tuple[Dim, Dim, DSym, DSym | None]] = []
        self._functions: dict[tuple[str, ...], list[Pred]] = {}  # copies -> function_facts
        self._n = itertools.count()
        self._base: dict[str, tuple[list[Pred], int]] = {}  # tag -> (base facts of that copy, facts covered)

    def compute_all(self) -> None:
        """Derive every value's form and fact up front, so that the facts about atoms are complete."""
        for d in sorted(self.ix.defs.values(), key=lambda d: d.order):
            if d.group == self.group.id:
                if d.value.type.dtype.is_pred:
                    self.fact(d.value)
                else:
                    self.form(d.value)

    # ------------------------------------------------------------------ atoms
    def atom(self, hint: str, tiled: bool = False) -> DSym:
        name = f"_{hint}{next(self._n)}"
        self.per_copy.add(name)
        if tiled:
            self.tiled_atoms.add(name)
        return DSym(name)

    def shared_atom(self, key: object, positive: bool = False) -> DSym:
        if key not in self.shared:
            self.shared[key] = f"_s{next(self._n)}"
            if positive:
                self.facts.append(PCmp(">=", DSym(self.shared[key]), DConst(1)))
        return DSym(self.shared[key])

    def tile_atom(self, tile: tuple[TileAxis, ...], axis: int) -> DSym:
        key = self.tile_keys.setdefault(tile, len(self.tile_keys))
        name = f"_p{key}_{axis}"
        if name not in self.per_copy:
            self.per_copy.add(name)
            self.facts.append(PCmp(">=", DSym(name), DConst(0)))
            if 0 <= axis < len(tile):
                from .tiles import position_bound

                bound = position_bound(self.ix, tile[axis])
                if bound is not None:
                    self.facts.append(PCmp("<", DSym(name), bound))
        return DSym(name)

    # ------------------------------------------------------------------ launch expressions as dims
    def launch_dim(self, e: LaunchExpr) -> Dim:
        if isinstance(e, LConst):
            return DConst(e.value)
        if isinstance(e, LDim):
            return e.dim
        if isinstance(e, LScalar):
            return DSym(e.name)
        if isinstance(e, LConstexpr):
            return self._constexpr_atom(self._canonical_constexprs().get(e.name, e.name))
        named = self._constexpr_named(e)
        if named is not None:  # a constexpr's definition written out (host-side extents): the same value
            return self._constexpr_atom(named)
        if isinstance(e, LBin) and e.op in ("+", "-", "*"):
            return dim_bin(e.op, self.launch_dim(e.lhs), self.launch_dim(e.rhs))
        if isinstance(e, LSum):
            out: Dim = DConst(0)
            for x in e.items:
                out = dim_bin("+", out, self.launch_dim(x))
            return out
        if isinstance(e, LBin) and e.op == "cdiv" and ("launch", e) not in self.shared:
            atom = self.shared_atom(("launch", e))  # a count of chunks: cdiv of an extent, never negative
            self.facts.append(PCmp(">=", atom, DConst(0)))
            return atom
        return self.shared_atom(("launch", e))

    def _constexpr_atom(self, name: str) -> DSym:
        """A constexpr's atom: at least 1 (block sizes, split counts), except a constexpr some sample launch
        sets below 1 (a flag such as SPLIT_g, a helper count), which is only known not to be negative."""
        key = ("constexpr", name)
        fresh = key not in self.shared
        values = self.ix.values(LConstexpr(name))
        small = any(x is not None and x < 1 for x in values)
        atom = self.shared_atom(key, positive=not small)
        if fresh and small and all(x is None or x >= 0 for x in values):
            self.facts.append(PCmp(">=", atom, DConst(0)))
        return atom

    def extent_dim(self, d: Dim) -> Dim:
        """A tile or buffer extent in the atoms of launch values: a name that is a constexpr of the launch, not a
        shape symbol (a slot axis's extent SPLITS_g), is the constexpr's atom, the value a `shape_value` of it
        gives, so a member set `position < SPLITS_g` bounds the axis."""
        names = {n: self.launch_dim(LConstexpr(n)) for n in d.symbols()
                 if n in self.ix.constexprs and n not in self.ix.program.symbols}
        return d.substitute(names) if names else d

    def _canonical_constexprs(self) -> dict[str, str]:
        """Each constexpr's atom name: the first constexpr (in program order) with the same definition.

        The launcher evaluates every constexpr from its definition, so constexprs defined alike are one value
        (two groups over one domain have equal BLOCK_I and SPLITS definitions), and a definition written out (a
        workspace's copy count, a host-side extent) is that value whichever of them it was taken from: all of
        them share one atom."""
        if not hasattr(self, "_canonical"):
            self._by_definition: dict[LaunchExpr, str] = {}
            self._canonical: dict[str, str] = {}
            for name, expr in self.ix.constexprs.items():
                try:
                    self._canonical[name] = self._by_definition.setdefault(expr, name)
                except TypeError:  # an unhashable expression: a value of its own
                    self._canonical[name] = name
        return self._canonical

    def _constexpr_named(self, e: LaunchExpr) -> str | None:
        if isinstance(e, LConst | LDim | LScalar):
            return None
        self._canonical_constexprs()
        try:
            return self._by_definition.get(e)
        except TypeError:  # an unhashable expression
            return None

    # ------------------------------------------------------------------ forms of integer values
    def form(self, v: PValue) -> Dim | None:
        if v.id in self.forms:
            return self.forms[v.id]
        self.forms[v.id] = None  # cycles (malformed programs) end here
        d = self.ix.defs.get(v.id)
        if d is None or not (v.type.dtype.is_int):
            out = None
        elif d.is_arg:
            out = self._arg_form(d.op, d.region, d.index, v)
        else:
            assert d.op is not None
            out = self._op_form(d.op, d.index, v)
        self.forms[v.id] = out
        return out

    def opaque(self, v: PValue, hint: str = "d") -> DSym:
        a = self.atom(hint, tiled=bool(v.type.tile))
        if self._once_per_program(v):
            self.program_uniform.add(a.name)
        return a

    def _once_per_program(self, v: PValue) -> bool:
        """Whether `v` is computed once per program: a uniform result of an op outside every loop (an `if` runs
        once), so that two members of one program see one value."""
        d = self.ix.defs.get(v.id)
        if d is None or d.is_arg or d.op is None or v.type.lanes or v.type.tile:
            return False
        pl = self.ix.place.get(id(d.op))
        return pl is not None and all(isinstance(p, P.If) for p in pl.parents)

    def _arg_form(self, owner: POp | None, region: PRegion | None, k: int, v: PValue) -> Dim | None:
        if isinstance(owner, P.For) and region is owner.body and k == 0:
            iv = self.atom("l")
            self._loop_facts(owner, iv)
            src = self._loop_source(owner, iv)
            if src is not None:
                self.div[v.id] = (src.key, len(src.domain) - 1)
                self.source_of_flat[v.id] = src.key
            return iv
        if isinstance(owner, P.RegionFold | P.RegionScan) and k == 0 and \
                (region is owner.source or (isinstance(owner, P.RegionScan) and region is owner.emit)):
            start = self.atom("k")
            self.facts.append(PCmp(">=", start, DConst(0)))
            return start
        return self.opaque(v)

    def _loop_facts(self, loop: P.For, iv: DSym) -> None:
        lo, hi, step = self.form(loop.start), self.form(loop.stop), self.form(loop.step)
        if lo is None or step is None or not self._positive(step):
            return
        self.facts.append(PCmp(">=", iv, lo))
        if hi is not None and not (loop.start.type.lanes or loop.stop.type.lanes or loop.step.type.lanes):
            self.facts.append(PCmp("<", iv, hi))

    def _positive(self, d: Dim) -> bool:
        """Whether `d` is at least 1 by its shape: a positive constant, an atom known to be (a block size), or a
        kernel symbol the kernel does not allow to be 0."""
        if isinstance(d, DConst):
            return d.value > 0
        if not isinstance(d, DSym):
            return False
        if any(PCmp(">=", d, DConst(1)) == f for f in self.facts):
            return True
        program = self.ix.program
        return d.name in program.symbols and \
            PCmp(">=", d, DConst(1)) in default_lower_bounds((d.name,), getattr(program, "requires", ()))

    def _loop_source(self, loop: P.For, iv: DSym) -> FlatSource | None:
        """A loop `for f in range(0, prod(domain), step)` walks a flattened domain (its decode is known)."""
        stop = self.ix.producer(loop.stop)
        start = self.form(loop.start)
        if not isinstance(stop, P.ShapeValue) or start != DConst(0):
            return None
        domain = _factors(stop.expr)
        if domain is None or len(domain) < 2:
            return None
        return self._source(id(loop), domain, iv, always_valid=True)

    def _source(self, key: int, domain: tuple[Dim, ...], flat: Dim, always_valid: bool,
                base: Dim | None = None) -> FlatSource:
        if key in self.sources:
            return self.sources[key]
        atoms = tuple(self.atom("q" if k == 0 else "c").name for k in range(len(domain)))
        src = FlatSource(key, domain, flat, atoms, always_valid, base)
        for k, a in enumerate(atoms):
            self.facts.append(PCmp(">=", DSym(a), DConst(0)))
            if k > 0 or always_valid:
                self.facts.append(PCmp("<", DSym(a), domain[k]))
        if len(domain) == 1:
            self.facts.append(PCmp("==", DSym(atoms[0]), flat))
        self.sources[key] = src
        return src

    def _op_form(self, op: POp, k: int, v: PValue) -> Dim | None:  # noqa: C901 (one case per op kind)
        if isinstance(op, P.Const):
            return constant_form(op.value)
        if isinstance(op, P.ShapeValue):
            return self.launch_dim(op.expr)
        if isinstance(op, P.ScalarParam):  # one launch value, shared by every instance
            return DSym(op.param) if v.type.dtype.is_int else None
        if isinstance(op, P.TileIndex):
            return self.tile_atom(v.type.tile, op.axis) if 0 <= op.axis < len(v.type.tile) else None
        if isinstance(op, P.OwnedInstances):
            return self._owned(op, v)
        if isinstance(op, P.SplitIndex):  # which of the S programs sharing the block: 0 <= s < S
            split = self.atom("sp")
            self.facts.append(PCmp(">=", split, DConst(0)))
            self.facts.append(PCmp("<", split, self.launch_dim(LConstexpr(op.splits))))
            return split
        if isinstance(op, P.HelperIndex):  # negative in the block programs, below H in the helpers
            if self.program_atom is None:  # (pid - O_g) - blocks: one value per program, another in each
                self.program_atom = self.atom("hp")
                self.facts.append(PCmp("<", self.program_atom, self.launch_dim(LConstexpr(op.helpers))))
            return self.program_atom
        if isinstance(op, P.OwnedTile):
            from .tiles import owned_tile_form

            return owned_tile_form(self, op, k, v)
        if isinstance(op, P.ChunkLanes):
            return self._chunk(op, v)
        if isinstance(op, P.Binary):
            return self._binary(op, v)
        if isinstance(op, P.If | P.Select) and not v.type.lanes and not v.type.tile:
            return self._choice(op, k, v)
        if isinstance(op, P.Unary):
            x = neg_form(self.form(op.x)) if op.fn.value == "neg" else None
            return x if x is not None else self.opaque(v)
        if isinstance(op, P.Cast):
            x = cast_form(self.form(op.x), op.x.type.dtype.is_int)
            if x is not None and op.x.id in self.div:
                self.div[v.id] = self.div[op.x.id]
            return x if x is not None else self.opaque(v)
        if isinstance(op, P.While):
            return self._while(op, k, v)
        if isinstance(op, P.Broadcast | P.Permute | P.ExpandDims | P.Squeeze):
            x = self.form(op.x)
            if x is None:
                return self.opaque(v)
            mapped = self.map_tile(x, op, op.x.type.tile, v.type.tile)
            if mapped is None:
                return self.opaque(v)
            if op.x.id in self.div and mapped == x:
                self.div[v.id] = self.div[op.x.id]
            return mapped
        return self.opaque(v)

    def _owned(self, op: P.OwnedInstances, v: PValue) -> Dim:
        domain = self.group.domain or (DConst(1),)
        block = self.ix.constexprs.get(op.block)
        always = block is not None and all(x == 1 for x in self.ix.values(block))
        flat = self.atom("f")
        self.facts.append(PCmp(">=", flat, DConst(0)))
        src = self._source(id(op), domain, flat, always)
        self.div[v.id] = (src.key, len(domain) - 1)
        self.source_of_flat[v.id] = src.key
        if op.helper_block is not None:
            self._helper_block(op, op.helper_block, flat)
        return flat

    def _helper_block(self, op: P.OwnedInstances, block: PValue, flat: DSym) -> None:
        """A program whose `helper_block` is not negative (a helper that joined a block) decodes that block:
        `helper_block * BLOCK <= flat < (helper_block + 1) * BLOCK`; a negative one leaves the program its own."""
        hb = self.form(block)
        if hb is None:
            return
        size = self.launch_dim(LConstexpr(op.block))
        first = dim_bin("*", hb, size)
        lanes = PAnd((PCmp(">=", flat, first), PCmp("<", flat, dim_bin("+", first, size))))
        self.helper_lanes = POr((PCmp("<", hb, DConst(0)), lanes))
        self.facts.append(self.helper_lanes)

    def _chunk(self, op: P.ChunkLanes, v: PValue) -> Dim:
        base = self.form(op.base)
        lane = self.atom("lane")
        self.facts.append(PCmp(">=", lane, DConst(0)))
        self.facts.append(PCmp("<", lane, self.launch_dim(LConstexpr(op.block))))
        flat: Dim = dim_bin("+", base, lane) if base is not None else lane
        loop = self._enclosing_loop(op)
        stop = self.ix.producer(loop.stop) if loop is not None else None
        domain = _factors(stop.expr) if isinstance(stop, P.ShapeValue) else None
        src = self._source(id(op), domain or (self.atom("n"),), flat, False, base)
        self.div[v.id] = (src.key, len(src.domain) - 1)
        self.source_of_flat[v.id] = src.key
        return flat

    def _enclosing_loop(self, op: POp) -> P.For | None:
        pl = self.ix.place.get(id(op))
        if pl is None:
            return None
        for parent in reversed(pl.parents):
            if isinstance(parent, P.For):
                return parent
        return None

    def _binary(self, op: P.Binary, v: PValue) -> Dim | None:
        fn = op.fn.value
        a, b = self.form(op.lhs), self.form(op.rhs)
        if fn in ("floordiv", "mod") and op.lhs.id in self.div and b is not None:
            key, k = self.div[op.lhs.id]
            src = self.sources[key]
            if k >= 1 and self._same(b, src.domain[k]):
                if fn == "mod":
                    return DSym(src.atoms[k])
                self.div[v.id] = (key, k - 1)
                return DSym(src.atoms[0]) if k - 1 == 0 else self.atom("r")
        if a is None or b is None:
            return self.opaque(v)
        # an op computed again from operands of the same forms (a helper's part, written in each form that needs
        # it) is the same value: the first one's form, not a fresh atom with facts of its own
        key = (fn, a, b, bool(v.type.tile))
        if key in self.alike:
            return self.alike[key]
        self.alike[key] = out = self._binary_form(fn, a, b, v)
        return out

    def _binary_form(self, fn: str, a: Dim, b: Dim, v: PValue) -> Dim:
        if fn in ("floordiv", "mod") and (isinstance(b, DConst) and b.value > 0 or self._positive(b)):
            # by a constant or a launch value >= 1 (a column count): the quotient and remainder facts
            return self._truncated(fn, a, b, None if isinstance(b, DConst) else self.opaque(v, "t"))
        form = binary_form(fn, a, b, products=Products.ANY)  # `kir.affine`'s rules; Z3 takes non-linear terms
        if form is not None:
            return form
        if fn in ("minimum", "maximum") and not v.type.tile:
            return self._extremum(fn, a, b, self.opaque(v))
        out = self.opaque(v)
        if fn in ("floordiv", "mod") and not v.type.tile and self._nonneg(b):
            # by a launch value that may be 0 (a count of chunks, 0 where the launch has none): the quotient's facts
            # hold only where it is at least 1, and only for the rules that ask (`function_facts`)
            self.guarded.append((a, b, out, None) if fn == "floordiv" else (a, b, DSym(f"{out.name}_q"), out))
            self.calls.append(Call(("div",), (a, b), self.guarded[-1][2]))
        return out

    def _extremum(self, fn: str, a: Dim, b: Dim, m: DSym) -> DSym:
        """`minimum(a, b)` or `maximum(a, b)` as the atom `m`: bounded by both operands and equal to one of them
        (so `maximum(h, 0)` is `h` wherever `h >= 0`). One member's value: a copy is one lane of one program."""
        cmp = "<=" if fn == "minimum" else ">="
        self.facts += [PCmp(cmp, m, a), PCmp(cmp, m, b), POr((PCmp("==", m, a), PCmp("==", m, b)))]
        self.calls.append(Call((fn,), (a, b), m))
        return m

    def _while(self, op: P.While, k: int, v: PValue) -> DSym:
        """A `while` loop's k-th result: an opaque value, but a function of its inputs (its initial values and the
        values its regions take from outside) where it has no effects, reads only buffers nothing in the launch
        writes and combines no lanes: two members with the same inputs get the same result (`function_facts`)."""
        r = self.opaque(v)
        inner = {x.id for region in op.regions() for x in _region_values(region)}
        outside: dict[int, PValue] = {x.id: x for x in op.inits}
        for region in op.regions():
            for inner_op in _walk(region):
                if inner_op.has_effects() and not inner_op.has(Trait.CONTROL):
                    return r
                if isinstance(inner_op, P.Load) and inner_op.access.buffer in self._written():
                    return r
                if any(_folds_over(x, y) for x in inner_op.operands() for y in inner_op.results):
                    return r  # a lane's result would depend on the other lanes' (or positions') values
                outside.update((x.id, x) for x in inner_op.operands() if x.id not in inner)
        args: list[Dim | Pred] = []
        for x in outside.values():
            arg = self.exact_fact(x) if x.type.dtype.is_pred else self.form(x)
            if arg is None:
                return r
            args.append(arg)
        self.calls.append(Call(("while", id(op), k), tuple(args), r))
        return r

    def _written(self) -> set[int]:
        """The buffers some op of the launch writes (a read of any other is one value for every member)."""
        if not hasattr(self, "_written_buffers"):
            self._written_buffers = {site.access.buffer for site in self.ix.accesses
                                     if site.kind is not Access.READ}
        return self._written_buffers

    def _choice(self, op: P.If | P.Select, k: int, v: PValue) -> Dim:
        """A uniform value an `if` yields or a `select` picks: the one chosen where the condition's exact fact
        holds, the other where it does not (an opaque value when the condition has no exact fact)."""
        r = self.opaque(v)
        if isinstance(op, P.If):
            cond, picks = op.cond, (op.then_.yielded[k], op.else_.yielded[k])
        else:
            cond, picks = op.cond, (op.on_true, op.on_false)
        c = self.exact_fact(cond)
        if c is None:
            return r
        for holds, pick in ((c, picks[0]), (PNot(c), picks[1])):
            form = self.form(pick)
            if form is not None:
                self.facts.append(POr((PNot(holds), PCmp("==", r, form))))
        return r

    def exact_fact(self, v: PValue) -> Pred | None:
        """A predicate that holds exactly where the pred value `v` is true (None where none is known): compares
        of integer forms, `and`, `or` and `not` of such, and constants."""
        op = self.ix.producer(v)
        if isinstance(op, P.Const) and isinstance(op.value, bool):
            return PAnd(()) if op.value else PCmp("<", DConst(0), DConst(0))
        if isinstance(op, P.Compare) and op.lhs.type.dtype.is_pred and op.fn.value in ("eq", "ne"):
            a, b = self.exact_fact(op.lhs), self.exact_fact(op.rhs)
            if a is None or b is None:
                return None
            same = POr((PAnd((a, b)), PAnd((PNot(a), PNot(b)))))
            return same if op.fn.value == "eq" else PNot(same)
        if isinstance(op, P.Compare):
            a, b = self.form(op.lhs), self.form(op.rhs)
            return PCmp(_CMP[op.fn.value], a, b) if a is not None and b is not None else None
        if isinstance(op, P.Binary) and op.fn.value in ("and", "or"):
            a, b = self.exact_fact(op.lhs), self.exact_fact(op.rhs)
            if a is None or b is None:
                return None
            return PAnd((a, b)) if op.fn.value == "and" else POr((a, b))
        if isinstance(op, P.Unary) and op.fn.value == "not":
            a = self.exact_fact(op.x)
            return PNot(a) if a is not None else None
        return None

    def _truncated(self, fn: str, a: Dim, b: Dim, q: DSym | None = None) -> Dim:
        """Integer `//` and `%` of the physical program by a positive `b` truncate toward zero (C); a dim's `//`
        and `%` floor (kir.dims, one meaning everywhere). By a constant they agree on a non-negative dividend
        (`kir.affine`'s rule); otherwise (a possibly negative dividend, or a divisor that is a launch value, such
        as a column count) the quotient is the fresh atom `q` with exact facts: the remainder a - b*q lies in
        [0, b) when a >= 0, in (-b, 0] when a < 0."""
        if isinstance(b, DConst):
            form = binary_form(fn, a, b, self._nonneg)
            if form is not None:
                return form
        q = q if q is not None else self.atom("t")
        self.calls.append(Call(("div",), (a, b), q))
        rem = dim_bin("-", a, dim_bin("*", b, q))
        zero = DConst(0)
        self.facts.append(POr((PAnd((PCmp(">=", a, zero), PCmp(">=", rem, zero), PCmp("<", rem, b))),
                               PAnd((PCmp("<", a, zero), PCmp("<=", rem, zero), PCmp(">", rem, neg_form(b)))))))
        return q if fn == "floordiv" else rem

    def _nonneg(self, d: Dim) -> bool:
        """Whether `d` is non-negative by its shape: constants, kernel symbols, atoms with a lower bound, and
        sums, products and floor divisions of such."""
        if isinstance(d, DConst):
            return d.value >= 0
        if isinstance(d, DSym):
            return d.name in self.ix.program.symbols or \
                PCmp(">=", d, DConst(0)) in self.facts or PCmp(">=", d, DConst(1)) in self.facts
        return isinstance(d, DBin) and d.op in ("+", "*", "//", "%") and self._nonneg(d.lhs) and self._nonneg(d.rhs)

    def _same(self, a: Dim, b: Dim) -> bool:
        if a == b:
            return True
        if a.symbols() & self.per_copy:
            return False
        return self.ix.same_value(a, b)

    def map_tile(self, x: Dim, op: POp, src: tuple[TileAxis, ...], dst: tuple[TileAxis, ...]) -> Dim | None:
        """Rename tile-position atoms from the operand tile to the result tile of a layout op."""
        if src == dst:
            return x
        names = x.symbols()
        if names & self.tiled_atoms:
            return None  # a per-element data value does not follow a position renaming
        env: dict[str, Dim] = {}
        for k in range(len(src)):
            old = f"_p{self.tile_keys.get(src, -1)}_{k}"
            if old not in names:
                continue
            target = _target_axis(op, k, len(src))
            if target is None or target >= len(dst):
                env[old] = DConst(0)
            elif src[k].extent != dst[target].extent:
                env[old] = DConst(0)
            else:
                env[old] = self.tile_atom(dst, target)
        return x.substitute(env) if env else x

    # ------------------------------------------------------------------ facts of masks
    def fact(self, v: PValue | None) -> Pred | None:
        if v is None:
            return None
        if v.id in self.pred_facts:
            return self.pred_facts[v.id]
        self.pred_facts[v.id] = None
        op = self.ix.producer(v)
        out = self._op_fact(op, v) if op is not None else None
        self.pred_facts[v.id] = out
        return out

    def _op_fact(self, op: POp, v: PValue) -> Pred | None:  # noqa: C901
        if isinstance(op, P.Compare) and op.lhs.type.dtype.is_pred:  # `p == false` (a `not`): exact, or nothing
            return self.exact_fact(v)
        if isinstance(op, P.Compare):
            a, b = self.form(op.lhs), self.form(op.rhs)
            if a is None or b is None:
                return None
            pred: Pred = PCmp(_CMP[op.fn.value], a, b)
            valid = self._lane_valid(op)
            return PAnd((pred, valid)) if valid is not None else pred
        if isinstance(op, P.Binary) and op.fn.value in ("and", "or"):
            fa, fb = self.fact(op.lhs), self.fact(op.rhs)
            if op.fn.value == "and":
                parts = tuple(f for f in (fa, fb) if f is not None)
                return PAnd(parts) if parts else None
            return POr((fa, fb)) if fa is not None and fb is not None else None
        if isinstance(op, P.Unary) and op.fn.value == "not":
            f = self.exact_fact(op.x)  # the negation of a fact x only implies would claim too much
            return PNot(f) if f is not None else None
        if isinstance(op, P.Const) and isinstance(op.value, bool):
            return PAnd(()) if op.value else PCmp("<", DConst(0), DConst(0))
        if isinstance(op, P.Broadcast | P.Permute | P.ExpandDims | P.Squeeze):
            f = self.fact(op.x)
            if f is None:
                return None
            return self.map_tile_pred(f, op, op.x.type.tile, v.type.tile)
        if isinstance(op, P.If) and not v.type.tile:
            return self._if_fact(op, op.results.index(v))
        return None

    def _if_fact(self, op: P.If, k: int) -> Pred | None:
        """What the members an `if`'s k-th pred result keeps satisfy: the fact of the value the branch taken
        yields, under the condition's exact fact where it has one (a branch whose value has no fact claims
        nothing but its condition)."""
        c = self.exact_fact(op.cond)
        ft, fe = self.fact(op.then_.yielded[k]), self.fact(op.else_.yielded[k])
        if c is None:
            return POr((ft, fe)) if ft is not None and fe is not None else None
        then_ = PAnd((c, ft)) if ft is not None else c
        else_ = PAnd((PNot(c), fe)) if fe is not None else PNot(c)
        return POr((then_, else_)) if ft is not None or fe is not None else None

    def map_tile_pred(self, f: Pred, op: POp, src: tuple[TileAxis, ...], dst: tuple[TileAxis, ...]) -> Pred | None:
        if src == dst:
            return f
        if f.symbols() & self.tiled_atoms:
            return None
        env: dict[str, Dim] = {}
        for k in range(len(src)):
            target = _target_axis(op, k, len(src))
            old = f"_p{self.tile_keys.get(src, -1)}_{k}"
            if target is None or target >= len(dst) or src[k].extent != dst[target].extent:
                env[old] = DConst(0)
            else:
                env[old] = self.tile_atom(dst, target)
        return f.substitute(env)

    def _lane_valid(self, op: P.Compare) -> Pred | None:
        """`flat < prod(domain)` also bounds the leading decoded coordinate: Q < D_0."""
        if op.fn.value != "lt" or op.lhs.id not in self.source_of_flat:
            return None
        src = self.sources[self.source_of_flat[op.lhs.id]]
        b = self.form(op.rhs)
        if b is None or len(src.domain) < 2 or not self._same(b, product(src.domain)):
            return None
        return PCmp("<", DSym(src.atoms[0]), src.domain[0])

    # ------------------------------------------------------------------ instances apart from their programs
    def instance_facts(self) -> list[Pred]:
        """`base_facts()` without the fact that a joined helper's lanes lie in its block: the flat index then
        stands for any instance of the domain, not only for those the program holds (a helper's join test is
        asked about every instance of its owner's segment)."""
        return [f for f in self.base_facts() if self.helper_lanes is None or f != self.helper_lanes]

    def on_launch(self, env: dict[str, int]) -> dict[str, Dim]:
        """The launch values of the forms' atoms on the sample launch `env` (shape symbols, integer scalars,
        constexprs and launch expressions), so a query about one launch is linear; an atom whose value does not
        evaluate there stays a symbol."""
        from .index import evaluate

        out: dict[str, Dim] = {n: DConst(x) for n, x in env.items() if n in self.ix.program.symbols
                               or n in self.ix.scalar_params}
        for key, name in self.shared.items():
            kind, what = key  # type: ignore[misc]
            x = env.get(what) if kind == "constexpr" else evaluate(what, env)
            if x is not None:
                out[name] = DConst(x)
        return out

    # ------------------------------------------------------------------ copies and proofs
    def rename(self, x: Dim | Pred, tag: str) -> Dim | Pred:
        names = x.symbols() & self.per_copy
        if not names:
            return x
        return x.substitute({n: DSym(n + tag) for n in names})

    def base_facts(self, tag: str = "") -> list[Pred]:
        """The kernel's facts and the group's facts about copy `tag`'s atoms (a fresh list: callers extend it).
        Facts only grow (a form derived late may add some), so the renamed list is kept per tag with the count
        of facts it covers and extended, never recomputed, when more arrive."""
        kept = self._base.get(tag)
        if kept is None:
            kernel_facts = list(default_lower_bounds(self.ix.program.symbols, self.ix.program.requires))
            kernel_facts += [p for p in self.ix.program.requires if isinstance(p, Pred)]
            kept = self._base[tag] = (kernel_facts, 0)
        renamed, covered = kept
        if covered < len(self.facts):
            renamed = renamed + [self.rename(f, tag) for f in self.facts[covered:]]  # type: ignore[misc]
            self._base[tag] = (renamed, len(self.facts))
        return list(renamed)

    def same_program(self, a: str = "A", b: str = "B") -> list[Pred]:
        """Copies `a` and `b` with one program index are members of one program: they see one value of everything
        computed once per program (empty where the group does not number its programs)."""
        if self.program_atom is None or not self.program_uniform:
            return []
        same = PAnd(tuple(PCmp("==", DSym(n + a), DSym(n + b)) for n in sorted(self.program_uniform)))
        hp = self.program_atom.name
        return [POr((PCmp("!=", DSym(hp + a), DSym(hp + b)), same))]

    def distinct(self, src: FlatSource) -> tuple[list[Pred], Pred]:
        """Hypotheses and the disjunction saying copies A and B are different instances of `src`."""
        ids = src.identity()
        hyps: list[Pred] = []
        if src.base is not None:
            hyps.append(PCmp("==", self.rename(src.base, "A"), self.rename(src.base, "B")))  # type: ignore
        if len(src.domain) > 1:
            fa, fb = self.rename(src.flat, "A"), self.rename(src.flat, "B")
            same_atoms = PAnd(tuple(PCmp("==", self.rename(a, "A"), self.rename(a, "B")) for a in ids))  # type: ignore
            hyps.append(POr((PNot(PCmp("==", fa, fb)), same_atoms)))  # type: ignore[arg-type]
            hyps.append(POr((PNot(same_atoms), PCmp("==", fa, fb))))  # type: ignore[arg-type]
        differ = POr(tuple(PCmp("!=", self.rename(a, "A"), self.rename(a, "B")) for a in ids))  # type: ignore
        return hyps, differ


def _folds_over(x: PValue, y: PValue) -> bool:
    """Whether an op taking `x` to `y` may combine the values of several lanes or tile positions (`y` lacks `x`'s
    lanes, or has another tile)."""
    return bool(x.type.lanes and not y.type.lanes or x.type.tile and x.type.tile != y.type.tile)


def _walk(region: PRegion) -> Iterable[POp]:
    for op in region.ops:
        yield op
        for inner in op.regions():
            yield from _walk(inner)


def _region_values(region: PRegion) -> Iterable[PValue]:
    """The values `region` defines: its arguments and its ops' results, nested regions' included."""
    yield from region.args
    for op in region.ops:
        yield from op.results
        for inner in op.regions():
            yield from _region_values(inner)


def _target_axis(op: POp, k: int, rank: int) -> int | None:
    if isinstance(op, P.Broadcast):
        return op.dims[k] if k < len(op.dims) else None
    if isinstance(op, P.Permute):
        return op.perm.index(k) if k in op.perm else None
    if isinstance(op, P.ExpandDims):
        return k if k < op.axis else k + 1
    if isinstance(op, P.Squeeze):
        return None if k == op.axis else (k if k < op.axis else k - 1)
    return k


def _factors(e: LaunchExpr) -> tuple[Dim, ...] | None:
    """The dims whose product an `lprod` expression is (in order), or None."""
    if isinstance(e, LBin) and e.op == "*":
        a, b = _factors(e.lhs), _factors(e.rhs)
        return a + b if a is not None and b is not None else None
    if isinstance(e, LDim):
        return (e.dim,)
    if isinstance(e, LConst):
        return (DConst(e.value),)
    return None


def forms_of(index: ProgramIndex, group: Group) -> Forms:
    """The affine forms of `group`'s values, computed once per program index (the index holds them)."""
    hit = index.forms.get(group.id)
    if not isinstance(hit, Forms):
        hit = Forms(index, group)
        hit.compute_all()
        index.forms[group.id] = hit
    return hit


__all__ = ["Call", "Forms", "FlatSource", "forms_of", "prover_of", "proves", "Prover", "PROVEN", "REFUTED", "UNDECIDED"]
