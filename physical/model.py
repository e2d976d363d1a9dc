"""The physical program: how one kernel's logical work runs as Triton program instances.

A `Program` is everything the emitter (or an interpreter) needs, without KIR:

* the ABI: public parameters (tensors with their buffers, runtime scalars) and hidden invocation
  workspaces, plus the shape symbols bound at launch;
* a one-dimensional program space cut into `segments`, one per execution `Group`. Segment `g` has
  length `L_g` (launch expression, in programs) and offset `O_g = sum_{h<g} L_h`; the grid is
  `sum_g L_g`. A program `pid` runs group `g` iff `O_g <= pid < O_g + L_g` (uniform per program);
* each group's body: a region of physical ops over *fragments*. A program owns `BLOCK_I`
  consecutive row-major flattened instances of the group's `domain`; values that vary across those
  instances carry a leading lanes axis of size `BLOCK_I` (`Fragment.lanes`), inner tile axes follow;
* every memory access is an explicit `AccessRelation` (buffer, one coordinate SSA value per axis,
  active member mask, fill for reads, and exactly one bounds justification);
* buffers with scope, initialisation, ownership and lifetime; constexprs (name -> launch expression),
  `num_warps`, performance notes and origins (KIR identities, for diagnostics and verification only).

The op classes live in `physical/ops/` (one module per KIR family) and are re-exported here.
Everything is a frozen dataclass; values are identified by integer ids, never by names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Flag, auto
from typing import Any, ClassVar

from kir.core import Block, ParamKind, SSAValue
from kir.dims import DConst, Dim
from kir.dtypes import DType, SpelledEnum
from kir.errors import Loc

from .launch_expr import LaunchExpr, LConst, lcdiv, ldim, lprod

Literal = int | float | bool

# ---------------------------------------------------------------------------------------------- origins


@dataclass(frozen=True)
class Origin:
    """Where a physical item comes from in KIR (integers only; for diagnostics and verification).

    `op` is the ordinal of the KIR op in `kernel.walk()` order, `value` a KIR value id, `region` the
    ordinal of a KIR region (walk order of ops, then their regions), `arg` a region-argument position.
    """

    kernel: int = 0
    op: int | None = None
    value: int | None = None
    region: int | None = None
    arg: int | None = None


@dataclass(frozen=True)
class KirOpInfo:
    """A KIR op as diagnostics and generated-source comments see it (name for display only)."""

    op: int
    name: str
    loc: Loc | None = None
    detail: str = ""

    def where(self) -> str:
        if self.loc is None:
            return ""
        return f"{self.loc.file.rsplit('/', 1)[-1]}:{self.loc.line}"


@dataclass(frozen=True)
class Note:
    """A performance note: what the construction or a pass did conservatively, and what helps."""

    message: str
    loc: Loc | None = None
    origin: Origin | None = None

    def __str__(self) -> str:
        return f"{self.loc}: {self.message}" if self.loc else self.message


# ---------------------------------------------------------------------------------------------- types


@dataclass(frozen=True)
class TileAxis:
    """An inner axis of a fragment: logical `extent`, held in a power-of-two constexpr `block` >= extent.

    Elements at positions >= extent are padding: they are never members of any access or reduction.
    """

    extent: Dim
    block: str

    def __str__(self) -> str:
        return f"{self.extent}:{self.block}"


@dataclass(frozen=True)
class Fragment:
    """The type of a physical value.

    `lanes`: the value varies across the instances a program owns (a leading axis of size BLOCK_I).
    `tile`: inner axes. A scalar is `lanes=False, tile=()`.
    `index`: integer index arithmetic computed at the program's index width (the INDEX_64 flag:
    64-bit when set, 32-bit when the launcher has proven every offset fits); `dtype` is then the
    KIR dtype the value stands for.
    """

    dtype: DType
    lanes: bool = False
    tile: tuple[TileAxis, ...] = ()
    index: bool = False

    @property
    def rank(self) -> int:
        """Rank of the Triton value: lanes axis plus tile axes."""
        return int(self.lanes) + len(self.tile)

    @property
    def is_scalar(self) -> bool:
        return not self.lanes and not self.tile

    @property
    def uniform(self) -> bool:
        return not self.lanes

    def with_dtype(self, dtype: DType, index: bool = False) -> Fragment:
        return Fragment(dtype, self.lanes, self.tile, index)

    def with_lanes(self, lanes: bool) -> Fragment:
        return Fragment(self.dtype, lanes, self.tile, self.index)

    def with_tile(self, tile: tuple[TileAxis, ...]) -> Fragment:
        return Fragment(self.dtype, self.lanes, tile, self.index)

    def __str__(self) -> str:
        dims = (["I"] if self.lanes else []) + [str(t) for t in self.tile]
        kind = f"{self.dtype}" + ("(index)" if self.index else "")
        return f"{kind}[{', '.join(dims)}]" if dims else kind


def scalar_type(dtype: DType, index: bool = False) -> Fragment:
    return Fragment(dtype, False, (), index)


# ---------------------------------------------------------------------------------------------- values, ops, regions


@dataclass(frozen=True, repr=False)
class PValue(SSAValue[Fragment]):
    """A physical SSA value (its name, from KIR names, is a printing hint only)."""

    UNNAMED = "p"
    ID_MARK = ""


class Trait(Flag):
    """Properties an op class declares (`physical.ops.pop(name, traits)`); passes, analyses and the verifier
    ask for these instead of keeping their own lists of op classes. Every op class declares its set (possibly
    empty, `Trait(0)`), and tests/test_physical_traits.py checks the laws between them."""

    PURE = auto()          # no memory access and no effect: the results follow from operands and attributes
    ELEMENTWISE = auto()   # each result element from the operand elements at its position (broadcast mechanically)
    POSITIONWISE = auto()  # each result element (or effect) at a tile position from the operands at that position
    #                        and the position itself: the op can be recomputed chunk by chunk along a tile axis
    UNIFORM = auto()       # the value is fixed at launch: one for every program, lane and tile position
    READS = auto()         # reads memory through its own access relation
    WRITES = auto()        # writes memory the kernel's author observes (a store, an atomic, a region scan's output)
    EFFECTS = auto()       # must run where it stands (memory effects, device checks, barriers, control holding them)
    INVARIANT = auto()     # computed once per program it gives every block of instances the same value (a load:
    #                        when no op of the kernel writes its memory); persistent programs may hoist it
    CONTROL = auto()       # structured control flow (for, while, if, looped_rows): it runs the ops of its regions
    #                        and has no effect of its own, so it is as free of effects as they are (`effect_free`)
    LOOKBACK = auto()      # raises, waits for or retires the slot flags of a look-back sync buffer
    #                        (physical/ops/lookback.py): the rule lookback-protocol checks every such op


@dataclass(frozen=True, kw_only=True)
class POp:
    """Base of physical ops: fields are SSA operands (`PValue`), regions (`PRegion`) or attributes."""

    results: tuple[PValue, ...] = ()
    origin: Origin | None = field(default=None, compare=False)

    NAME: ClassVar[str] = "?"
    TERMINATOR: ClassVar[bool] = False
    TRAITS: ClassVar[Trait] = Trait(0)

    def fields(self) -> list[dataclasses.Field]:
        # a class's fields never change: found once per op class (every walk over a program asks for them)
        cls = type(self)
        found = cls.__dict__.get("_op_fields")
        if found is None:
            found = tuple(f for f in dataclasses.fields(cls) if f.name not in ("results", "origin"))
            cls._op_fields = found  # type: ignore[attr-defined]
        return list(found)

    def operands(self) -> tuple[PValue, ...]:
        out: list[PValue] = []
        for f in self.fields():
            out.extend(values_in(getattr(self, f.name)))
        return tuple(out)

    def regions(self) -> tuple[PRegion, ...]:
        return tuple(getattr(self, f.name) for f in self.fields() if isinstance(getattr(self, f.name), PRegion))

    @property
    def result(self) -> PValue:
        if len(self.results) != 1:
            raise ValueError(f"{self.NAME} has {len(self.results)} results")
        return self.results[0]

    def has_effects(self) -> bool:
        return Trait.EFFECTS in self.TRAITS

    def has(self, traits: Trait) -> bool:
        """Whether the op's class declares every trait of `traits`."""
        return traits in self.TRAITS


def effect_free(ops: tuple[POp, ...]) -> bool:
    """Whether running `ops` has no effect: none has effects of its own (control flow has none beyond its
    regions'), nested regions included; such work may run again, in another program, without changing the
    result."""
    return all((not op.has_effects() or op.has(Trait.CONTROL)) and all(effect_free(r.ops) for r in op.regions())
               for op in ops)


def values_in(x: object) -> Iterator[PValue]:
    """SSA operands held by a field (directly, in tuples, or inside access relations / justifications)."""
    if isinstance(x, PValue):
        yield x
    elif isinstance(x, tuple):
        for y in x:
            yield from values_in(y)
    elif isinstance(x, AccessRelation):
        yield from x.operands()
    elif isinstance(x, Guard):
        yield x.mask


def map_values(x: Any, fn: Callable[[PValue], PValue], region: Callable[[PRegion], PRegion] | None = None) -> Any:
    """`x` (an op field) with every value it holds replaced by `fn(value)`. A region becomes `region(x)`;
    by default its ops' operands are mapped and its arguments kept."""
    if isinstance(x, PValue):
        return fn(x)
    if isinstance(x, tuple):
        return tuple(map_values(y, fn, region) for y in x)
    if isinstance(x, AccessRelation):
        return dataclasses.replace(x, coords=map_values(x.coords, fn), mask=map_values(x.mask, fn),
                                   bounds=map_values(x.bounds, fn), copy=map_values(x.copy, fn))
    if isinstance(x, Guard):
        return Guard(fn(x.mask))
    if isinstance(x, PRegion):
        return region(x) if region is not None else PRegion(x.args, tuple(map_operands(op, fn) for op in x.ops))
    return x


def map_operands(op: POp, fn: Callable[[PValue], PValue]) -> POp:
    """`op` with every operand (nested regions' included) replaced by `fn(operand)`; results stay."""
    fields = {f.name: map_values(getattr(op, f.name), fn) for f in op.fields()}
    return type(op)(results=op.results, origin=op.origin, **fields)


@dataclass(frozen=True)
class PRegion(Block[PValue, POp]):
    """A block of physical ops with arguments; nested regions end with a `Yield`."""


# ---------------------------------------------------------------------------------------------- access relations


@dataclass(frozen=True)
class Guard:
    """Bounds justified by an explicit guard: `mask` is true exactly where the coordinates are in range.

    It must be a conjunct of the access's active-member mask.
    """

    mask: PValue

    def __str__(self) -> str:
        return f"guard %{self.mask.name or 'p'}{self.mask.id}"


@dataclass(frozen=True)
class Proven:
    """Bounds proven at construction (Z3, under the refinements, loop ranges and tile membership)."""

    predicate: str

    def __str__(self) -> str:
        return f"proven {self.predicate}"


@dataclass(frozen=True)
class AssumeInBounds:
    """Bounds assumed on the author's word (an explicit, canonical assumption)."""

    reason: str

    def __str__(self) -> str:
        return f"assume_in_bounds ({self.reason})"


Justification = Guard | Proven | AssumeInBounds


@dataclass(frozen=True)
class AccessRelation:
    """One memory access: `buffer[coords]` for the members in `mask`.

    `coords` holds one index value per buffer axis (after `copy` for buffers with several copies);
    every coordinate is a fragment whose tile is empty or equal to the access's tile. Members outside
    `mask` (None: every member) touch no memory; reads give them `fill`. `bounds` is the single
    justification that every active member's coordinates lie inside the buffer.
    """

    buffer: int
    coords: tuple[PValue, ...]
    mask: PValue | None
    bounds: Justification
    fill: Literal | None = None
    copy: PValue | None = None  # which copy of a buffer with `copies > 1` (program-private storage)

    def operands(self) -> tuple[PValue, ...]:
        out = list(self.coords)
        if self.copy is not None:
            out.insert(0, self.copy)
        if self.mask is not None:
            out.append(self.mask)
        if isinstance(self.bounds, Guard):
            out.append(self.bounds.mask)
        return tuple(out)


# ---------------------------------------------------------------------------------------------- buffers


class BufferScope(SpelledEnum):
    EXTERNAL_VIEW = "external_view"          # a public tensor parameter; host owns contents and lifetime
    PROGRAM_PRIVATE = "program_private"      # one copy per owning instance
    ITERATION_PRIVATE = "iteration_private"  # one copy per dynamic execution of the enclosing ordered loop
    INVOCATION_WORKSPACE = "invocation_workspace"  # compiler-private, shared through ownership slices


class BufferInit(SpelledEnum):
    EXTERNAL = "external"            # contents come from the host (tensor parameters)
    UNINITIALISED = "uninitialised"  # the author's first-write obligation stands; never default-filled
    FULL = "full"                    # set to `fill` exactly once per allocation instance
    # Invocation workspaces the launcher allocates zeroed once (cached per plan, stream and thread) and
    # every launch leaves zero again: the kernel restores what it changes (a ticket counter's last holder
    # resets it), so no launch pays a fill before it runs.
    SELF_RESETTING = "self_resetting"


class Lifetime(SpelledEnum):
    HOST = "host"            # external views: beyond the kernel
    INVOCATION = "invocation"
    INSTANCE = "instance"    # one logical instance's execution of the group body
    ITERATION = "iteration"  # one iteration of the enclosing ordered loop


class Access(SpelledEnum):
    READ = "read"
    WRITE = "write"
    READ_WRITE = "read_write"


@dataclass(frozen=True)
class Buffer:
    """A logical buffer and its physical placement.

    External views belong to a tensor parameter (`param`); local buffers are backed by a hidden
    invocation workspace (`storage`, an ABI name) holding `copies` slices, one per owner.
    """

    id: int
    name: str
    dtype: DType
    shape: tuple[Dim, ...]
    scope: BufferScope
    init: BufferInit
    lifetime: Lifetime
    access: Access = Access.READ
    fill: Literal | None = None
    param: str | None = None
    storage: str | None = None
    copies: LaunchExpr | None = None
    owner_group: int | None = None
    origin: Origin | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)


# ---------------------------------------------------------------------------------------------- ABI


@dataclass(frozen=True)
class ProgramParam:
    """A public kernel parameter: a tensor (with its external-view buffer) or a runtime scalar."""

    name: str
    kind: ParamKind
    dtype: DType
    shape: tuple[Dim, ...] = ()
    role: str = "in"  # in | out | inout
    buffer: int | None = None


@dataclass(frozen=True)
class Workspace:
    """A hidden ABI argument the launcher allocates per invocation (`count` elements of `dtype`).

    `fill`: set before every launch (None: left as it is). `resets`: allocated holding `fill` once and
    kept between launches, because every launch restores it (`BufferInit.SELF_RESETTING`); no launch
    fills it.
    """

    name: str
    dtype: DType
    count: LaunchExpr
    fill: Literal | None = None
    buffer: int | None = None
    resets: bool = False


# ---------------------------------------------------------------------------------------------- groups and segments


@dataclass(frozen=True)
class Ownership:
    """What one program of a group owns.

    Blocks of instances (`tiles` empty): `block` (a constexpr) consecutive instances of the row-major
    flattened domain; the values that vary across them carry the lanes axis. Tiles: one tile of the trailing
    `len(tiles)` domain axes, `tiles[k]` (constexprs) consecutive coordinates along each, and one coordinate
    of every leading axis, decoded by one `owned_tile`; `block` is then 1.
    """

    block: str
    tiles: tuple[str, ...] = ()

    @property
    def tiled(self) -> bool:
        return bool(self.tiles)

    def axes(self, domain: tuple[Dim, ...]) -> tuple[tuple[Dim, ...], tuple[Dim, ...]]:
        """`domain` split into its leading axes (one coordinate per program) and its tiled ones."""
        lead = len(domain) - len(self.tiles)
        return domain[:lead], domain[lead:]

    def programs(self, domain: tuple[Dim, ...], constexprs: dict[str, LaunchExpr]) -> LaunchExpr:
        """How many programs own `domain` (1 for a single instance): cdiv(prod(domain), block), or for tiles
        prod(leading extents) * prod(cdiv(extent_k, tiles_k))."""
        if not domain:
            return LConst(1)
        if not self.tiled:
            return lcdiv(lprod(tuple(ldim(d) for d in domain)), constexprs[self.block])
        lead, tiled = self.axes(domain)
        return lprod(tuple(ldim(d) for d in lead) +
                     tuple(lcdiv(ldim(d), constexprs[b]) for d, b in zip(tiled, self.tiles)))

    def __str__(self) -> str:
        return f"one {' x '.join(self.tiles)} tile" if self.tiled else f"{self.block} instances"


@dataclass(frozen=True)
class Group:
    """An execution group: a launch-visible instance `domain` (flattened row-major) and its body.

    `ownership` says what a program owns: `BLOCK_I` consecutive flattened instances (`block` names that
    constexpr), or one tile of the trailing axes. A group with `domain == ()` is a single-instance group.
    `serial` is set when the group runs work whose independence could not be proven: everything then runs in
    order inside its one instance.

    A group whose programs walk its blocks of instances (persistent programs) says so in its body: a
    `block_loop` op holds the per-block work, after what runs once per program. A group whose row a launch
    may walk in chunks says so in its body too: a `looped_rows` op holds the body in each form.
    """

    id: int
    name: str
    domain: tuple[Dim, ...]
    ownership: Ownership
    body: PRegion
    serial: bool = False
    origins: tuple[Origin, ...] = ()
    loc: Loc | None = None

    @property
    def single_instance(self) -> bool:
        return not self.domain

    @property
    def block(self) -> str:
        """The constexpr of the instances a program owns (1 for tiles)."""
        return self.ownership.block

    @property
    def tiles(self) -> tuple[str, ...]:
        """The tile blocks of a tile-owning group's ownership (empty for blocks of instances)."""
        return self.ownership.tiles


@dataclass(frozen=True)
class Segment:
    """Group `group` runs for programs `offset <= pid < offset + length`."""

    group: int
    length: LaunchExpr
    offset: LaunchExpr


@dataclass(frozen=True)
class Program:
    name: str
    params: tuple[ProgramParam, ...]
    workspaces: tuple[Workspace, ...]
    symbols: tuple[str, ...]
    segments: tuple[Segment, ...]
    groups: tuple[Group, ...]
    buffers: tuple[Buffer, ...]
    constexprs: tuple[tuple[str, LaunchExpr], ...]
    grid: LaunchExpr
    num_warps: LaunchExpr | int = 4
    # Triton's software-pipelining depth for the kernel's loops: two stages overlap the loads of the next
    # iteration with the current one's arithmetic without a third buffer's shared memory
    num_stages: LaunchExpr | int = 2
    notes: tuple[Note, ...] = ()
    origins: tuple[KirOpInfo, ...] = ()
    requires: tuple[object, ...] = ()  # the kernel's refinements (kir preds), for proofs and printing
    checks: bool = False
    # proof symbol (`_c3`, `_l14`, `_t6`) -> what the author calls it (`i`, `t`, a position along N): explain
    symbol_names: tuple[tuple[str, str], ...] = ()

    def group(self, gid: int) -> Group:
        for g in self.groups:
            if g.id == gid:
                return g
        raise KeyError(gid)

    def buffer(self, bid: int) -> Buffer:
        for b in self.buffers:
            if b.id == bid:
                return b
        raise KeyError(bid)

    def constexpr(self, name: str) -> LaunchExpr:
        for n, e in self.constexprs:
            if n == name:
                return e
        raise KeyError(name)

    def op_info(self, origin: Origin | None) -> KirOpInfo | None:
        if origin is None or origin.op is None:
            return None
        for info in self.origins:
            if info.op == origin.op:
                return info
        return None

    def walk(self) -> Iterator[POp]:
        for g in self.groups:
            yield from g.body.walk()

    def replace(self, **changes: object) -> Program:
        return dataclasses.replace(self, **changes)


def one() -> Dim:
    return DConst(1)


def __getattr__(name: str) -> object:
    """The op classes (and `OP_CLASSES`) are part of the model; they live in `physical.ops`, which imports
    this module, so they are looked up there on first use rather than imported here (that made importing
    `physical.ops` before the model a circular import)."""
    from . import ops

    if name in ops.__all__:
        return getattr(ops, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
