"""Triton source emission: one `@triton.jit` kernel per physical program, plus generated helpers.

Emission makes no decisions: block sizes, masks, justifications, loop forms and index widths all
come from the physical program. Operands are broadcast mechanically to the fragment of the op
that uses them (lanes are a leading `[BLOCK_I]` axis; uniform tiles get a leading `None`).
Offsets and coordinates are computed at the width of `pid` (int64 when the `INDEX_64` constexpr
is set, else int32).
"""

from __future__ import annotations

import importlib
import keyword
import math
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kir.core import registrar
from kir.dims import DBin, DConst, Dim, DSym
from kir.dtypes import DType
from kir.errors import LaunchError
from physical import launch_expr as LE
from physical import ops as P
from physical.counts import operation_counts
from physical.model import Fragment, Group, POp, PRegion, Program, PValue

from .abi import AbiArg, ArgKind, ConstexprArg, EmittedKernel
from .names import comment_text, mangle
from .source import Block, IfElse, Stmt, render

EMIT: dict[type[POp], Callable[[Emitter, POp], None]] = {}


emits = registrar(EMIT, "Triton emitter for {key}")


TL_DTYPE = {DType.pred: "tl.int1", DType.i8: "tl.int8", DType.i16: "tl.int16", DType.i32: "tl.int32",
            DType.i64: "tl.int64", DType.u8: "tl.uint8", DType.u16: "tl.uint16", DType.u32: "tl.uint32",
            DType.u64: "tl.uint64", DType.f16: "tl.float16", DType.bf16: "tl.bfloat16", DType.f32: "tl.float32",
            DType.f64: "tl.float64", DType.f8e4m3: "tl.uint8", DType.f8e5m2: "tl.uint8", DType.i4: "tl.int8"}

# bf16 and fp8 values live in f32 registers (see numerics.py); buffers and pointers keep TL_DTYPE (fp8 buffers
# are read and written as their uint8 bits)
REGISTER_DTYPE = {**TL_DTYPE, DType.bf16: "tl.float32", DType.f8e4m3: "tl.float32", DType.f8e5m2: "tl.float32"}

DEVICE_FLAG = "ON_DEVICE"  # constexpr: compiled for a GPU (True) or run by Triton's interpreter (False)
INDEX = "pid.dtype"  # the program's index width: int64 under INDEX_64, else int32


def literal(value: object, dtype: DType) -> str:
    if dtype.is_pred:
        return "True" if value else "False"
    if dtype.is_float:
        v = float(value)  # type: ignore[arg-type]
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    return str(int(value))  # type: ignore[arg-type]


def ident(text: str) -> str:
    s = re.sub(r"\W", "_", text)
    if not s or s[0].isdigit():
        s = "v_" + s
    if keyword.iskeyword(s) or s in ("tl", "triton", "pid", "INDEX_64", DEVICE_FLAG, "range", "float", "int"):
        s = s + "_"
    return s


class Emitter:
    """Writes one module: helpers first, then the kernel function."""

    def __init__(self, program: Program, sanitize: bool = False) -> None:
        self.p = program
        self.sanitize = sanitize  # the memory sanitizer's checks on every access (`emit_triton.sanitize`)
        self.body: list[Stmt] = []  # the statement list being written (see `block`, `branches`)
        self.pending_comment: str | None = None  # an op's origin, written before its first statement
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.literals: set[int] = set()   # values emitted as Python literals (constexpr in Triton)
        self.helpers: list[str] = []
        self.helper_keys: dict[str, str] = {}
        self.lanes_block = "1"
        self.group: Group | None = None
        self.block_index: str | None = None  # the block a persistent group's loop is at (else program_index)
        self.program_index = "pid"  # pid - O_g: the program's index within its group's segment
        self.ticket: str | None = None  # a ticket group's position (its program's ticket), once drawn
        self.last_origin: object = None
        self.buffers = {b.id: b for b in program.buffers}
        self.symbol_arg: dict[str, str] = {}
        self.param_names: dict[str, str] = {}
        self.stride_names: dict[tuple[str, int], str] = {}
        self.workspace_names: dict[str, str] = {}
        self.counter = 0
        self.uses_device_flag = False  # a helper takes the DEVICE_FLAG constexpr (see `abi.EmittedKernel`)
        # a constexpr's definition written out (a host-side extent, e.g. a split count) is that constexpr
        self.constexpr_of: dict[object, str] = {}
        for name, e in program.constexprs:
            self.constexpr_of.setdefault(e, name)

    # ------------------------------------------------------------------ names and statements
    def line(self, text: str) -> None:
        """Append one simple statement to the list being written."""
        self._flush_comment()
        self.body.append(text)

    def _flush_comment(self) -> None:
        if self.pending_comment is not None:
            self.body.append(self.pending_comment)
            self.pending_comment = None

    @contextmanager
    def into(self, stmts: list[Stmt]) -> Iterator[None]:
        """Write into `stmts` (a compound statement's body) until the block ends."""
        self._flush_comment()
        outer, self.body = self.body, stmts
        try:
            yield
        finally:
            self.pending_comment = None  # an origin whose op wrote nothing in the block
            self.body = outer

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        """`head:` (a `for`, `while` or `if` without `else`) with the statements written in the block."""
        self._flush_comment()
        node = Block(head)
        self.body.append(node)
        with self.into(node.body):
            yield

    def branches(self, cond: str) -> IfElse:
        """An `if cond: ... else: ...`; write each branch with `into(node.then)` / `into(node.otherwise)`."""
        self._flush_comment()
        node = IfElse(cond)
        self.body.append(node)
        return node

    def restart_comments(self) -> None:
        """The next op names its origin again (a new body starts)."""
        self.last_origin = None
        self.pending_comment = None

    def fresh(self, base: str) -> str:
        base = ident(base)
        name = base
        n = 1
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    def define(self, v: PValue, hint: str = "t") -> str:
        """A new name for `v`: its (mangled) KIR name, else the emitter's `hint` and its id."""
        name = self.fresh(mangle(v.name, "value") if v.name else f"{hint}{v.id}")
        self.names[v.id] = name
        return name

    def alias(self, v: PValue, name: str) -> None:
        self.names[v.id] = name

    def name(self, v: PValue) -> str:
        return self.names[v.id]

    def comment(self, op: POp) -> None:
        if op.origin is None or op.origin == self.last_origin:
            return
        self.last_origin = op.origin
        info = self.p.op_info(op.origin)
        if info is not None:
            detail = f" {info.detail}" if info.detail else ""
            where = f"  {info.where()}" if info.where() else ""
            self.pending_comment = f"# {comment_text(f'{info.name}{detail}{where}')}"

    # ------------------------------------------------------------------ types and operands
    def shape(self, t: Fragment) -> str:
        dims = ([self.lanes_block] if t.lanes else []) + [a.block for a in t.tile]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def dtype(self, t: Fragment) -> str:
        return INDEX if t.index else REGISTER_DTYPE[t.dtype]

    def arg(self, v: PValue, target: Fragment, value_of: bool = False) -> str:
        """`v` as an operand of an op whose values have fragment `target` (mechanical broadcast).

        `value_of`: the consumer needs the KIR value (not index arithmetic): index values are cast.
        """
        s = self.name(v)
        if value_of and v.type.index:
            s = f"{s}.to({REGISTER_DTYPE[v.type.dtype]})"
        t = v.type
        if t.dtype is DType.pred and v.id in self.literals and target.rank > 0:
            return self.tensor(v)
        if t.rank == 0 or (t.lanes == target.lanes and t.tile == target.tile):
            return s
        if t.lanes and not target.lanes:
            raise AssertionError(f"operand {v!r} has lanes but its use {target} does not")
        idx = []
        if target.lanes:
            idx.append(":" if t.lanes else "None")
        if t.tile:
            idx += [":"] * len(target.tile)
        else:
            idx += ["None"] * len(target.tile)
        if all(i == ":" for i in idx):
            return s
        return f"{s}[{', '.join(idx)}]"

    def full(self, v: PValue, target: Fragment) -> str:
        """`v` materialised with exactly `target`'s shape (loop carries, yields, store values)."""
        s = self.arg(v, target)
        if target.rank == 0:
            return f"tl.cast({s}, {self.dtype(target)})" if v.id in self.literals or \
                self.dtype(v.type) != self.dtype(target) else s
        if v.type.lanes == target.lanes and v.type.tile == target.tile and v.id not in self.literals \
                and self.dtype(v.type) == self.dtype(target):
            return s
        return f"tl.cast(tl.broadcast_to({s}, {self.shape(target)}), {self.dtype(target)})"

    def tensor(self, v: PValue) -> str:
        """`v` as a tensor (a literal constexpr becomes a typed 0-d tensor)."""
        if v.id in self.literals and v.type.dtype is DType.pred:
            # a comparison of two literals: a constexpr bool on the device, but a 0-d tensor holding its
            # operands' dtype under the interpreter (which `tl.full` would keep); a select makes it int1
            return f"tl.where({self.name(v)}, True, False)"  # numerics.as_int1
        if v.id in self.literals:
            return f"tl.full((), {self.name(v)}, {self.dtype(v.type)})"
        return self.name(v)

    def launch(self, e: LE.LaunchExpr) -> str:
        """A launch expression as Triton code over the symbol and scalar arguments (a part that is one of the
        program's constexprs, e.g. a split count from the device's size inside a workspace's extent, is that
        constexpr's name)."""
        if isinstance(e, LE.LConst):
            return str(e.value)
        named = next((n for n, x in self.p.constexprs if x == e), None)
        if named is not None:
            return named
        if isinstance(e, LE.LDim):
            return self.dim(e.dim)
        if isinstance(e, LE.LScalar):
            return self.param_names.get(e.name, e.name)
        if isinstance(e, LE.LConstexpr):
            return e.name
        if e in self.constexpr_of:
            return self.constexpr_of[e]
        if isinstance(e, LE.LBin):
            a, b = self.launch(e.lhs), self.launch(e.rhs)
            return f"tl.cdiv({a}, {b})" if e.op == "cdiv" else f"({a} {e.op} {b})"
        if isinstance(e, LE.LSum):
            return "(" + " + ".join(self.launch(x) for x in e.items) + ")"
        if isinstance(e, LE.LSelect):
            return f"({self.launch(e.when_set)} if {self.launch(e.cond)} else {self.launch(e.otherwise)})"
        if isinstance(e, LE.LMinMax):
            out = self.launch(e.items[0])
            for x in e.items[1:]:
                out = f"tl.{'minimum' if e.op == 'min' else 'maximum'}({out}, {self.launch(x)})"
            return out
        if isinstance(e, LE.LNextPow2 | LE.LTileBlock | LE.LWarps):
            raise AssertionError(f"{e} is a launcher-side expression; pass it as a constexpr")
        raise AssertionError(f"unknown launch expression {e!r}")

    def dim(self, d: Dim) -> str:
        if isinstance(d, DConst):
            return str(d.value)
        if isinstance(d, DSym):  # a shape symbol, or a constexpr (a launch-time extent such as a split count)
            return self.symbol_arg.get(d.name, d.name)
        assert isinstance(d, DBin)
        return f"({self.dim(d.lhs)} {d.op} {self.dim(d.rhs)})"

    # ------------------------------------------------------------------ regions
    def ops(self, ops: tuple[POp, ...]) -> None:
        for o in ops:
            if isinstance(o, P.Yield):
                continue
            self.comment(o)
            EMIT[type(o)](self, o)
            # an op of literals computes a Python value (a constexpr); a cast writes a typed tensor
            if o.results and o.operands() and all(v.id in self.literals for v in o.operands()) and \
                    all(r.type.rank == 0 for r in o.results) and not isinstance(o, P.Cast | P.Bitcast):
                self.literals.update(r.id for r in o.results)

    def inline(self, r: PRegion, args: tuple[str, ...]) -> tuple[str, ...]:
        """Emit a region's ops in place with its arguments bound to `args`; returns its yields."""
        for a, s in zip(r.args, args):
            self.alias(a, s)
        self.ops(r.ops)
        return tuple(self.name(v) for v in r.yielded)

    # ------------------------------------------------------------------ helpers
    def helper(self, region: PRegion, what: str) -> str:
        """A generated @triton.jit function from a scalar combine region."""
        sub = Emitter(self.p)
        params = [sub.define(a, f"a{k}") for k, a in enumerate(region.args)]
        sub.ops(region.ops)
        rets = [sub.full(v, v.type) if v.id in sub.literals else sub.name(v) for v in region.yielded]
        sub.line(f"return {', '.join(rets)}")
        body = "\n".join(render(sub.body, 1))
        text = f"def NAME({', '.join(params)}):\n{body}\n"
        if text in self.helper_keys:
            return self.helper_keys[text]
        self.counter += 1
        name = f"_{what}_{len(self.helper_keys) + 1}"
        self.helper_keys[text] = name
        self.helpers.append("@triton.jit\n" + text.replace("def NAME(", f"def {name}(", 1))
        return name

    def exclusive_helper(self, base: str, k: int) -> str:
        """(excl, incl) pairs: the exclusive scan of any associative combine, without subtraction."""
        key = f"excl:{base}:{k}"
        if key in self.helper_keys:
            return self.helper_keys[key]
        ea = [f"ea{i}" for i in range(k)]
        ia = [f"ia{i}" for i in range(k)]
        eb = [f"eb{i}" for i in range(k)]
        ib = [f"ib{i}" for i in range(k)]
        name = f"{base}_exclusive"
        text = (f"@triton.jit\ndef {name}({', '.join(ea + ia + eb + ib)}):\n"
                f"    # a segment's (all but its last, all) combined: exclusive prefixes without inverses\n"
                f"    return {base}({', '.join(ia + eb)}), {base}({', '.join(ia + ib)})\n")
        if k > 1:
            text = (f"@triton.jit\ndef {name}({', '.join(ea + ia + eb + ib)}):\n"
                    f"    e = {base}({', '.join(ia + eb)})\n    i = {base}({', '.join(ia + ib)})\n"
                    f"    return {', '.join(f'e[{j}]' for j in range(k))}, {', '.join(f'i[{j}]' for j in range(k))}\n")
        self.helper_keys[key] = name
        self.helpers.append(text)
        return name


# ---------------------------------------------------------------------------------------------- kernel


def _abi(em: Emitter) -> tuple[list[AbiArg], list[ConstexprArg], list[str]]:
    p = em.p
    args: list[AbiArg] = []
    sig: list[str] = []
    for q in p.params:
        name = em.fresh(mangle(q.name, "param" if q.kind.value == "tensor" else "scalar"))
        em.param_names[q.name] = name
        if q.kind.value == "tensor":
            args.append(AbiArg(ArgKind.TENSOR, name, param=q.name, dtype=q.dtype))
            sig.append(name)
            for ax in range(len(q.shape)):
                s = em.fresh(f"{name}_stride_{ax}")
                em.stride_names[(q.name, ax)] = s
                args.append(AbiArg(ArgKind.STRIDE, s, param=q.name, axis=ax))
                sig.append(s)
        else:
            args.append(AbiArg(ArgKind.SCALAR, name, param=q.name, dtype=q.dtype))
            sig.append(name)
    for s in p.symbols:
        name = em.fresh(mangle(s, "symbol"))
        em.symbol_arg[s] = name
        args.append(AbiArg(ArgKind.SYMBOL, name, expr=LE.LDim(DSym(s))))
        sig.append(name)
    for seg in p.segments:
        if len(p.segments) > 1:
            for what, e in (("offset", seg.offset), ("length", seg.length)):
                name = em.fresh(f"seg{seg.group}_{what}")
                args.append(AbiArg(ArgKind.SYMBOL, name, expr=e))
                sig.append(name)
    for w in p.workspaces:
        name = em.fresh(mangle(w.name, "workspace"))
        em.workspace_names[w.name] = name
        args.append(AbiArg(ArgKind.WORKSPACE, name, dtype=w.dtype, expr=w.count, fill=w.fill, resets=w.resets))
        sig.append(name)
    consts = [ConstexprArg(n, e) for n, e in p.constexprs]
    for c in consts:
        em.used.add(c.name)
    sig += [f"{c.name}: tl.constexpr" for c in consts] + ["INDEX_64: tl.constexpr"]
    return args, consts, sig


def static_flag(program: Program, name: str) -> int | None:
    """The value of the constexpr `name` when it is the same for every launch (it reads no shape symbol,
    scalar or device property), else None: a form whose flag has one value either always or never runs."""
    env: dict[str, int] = {}
    pending = [name]
    consts = dict(program.constexprs)
    while pending:
        n = pending.pop()
        if n in env:
            continue
        if n not in consts:
            return None
        missing = [m for m in consts[n].names() if m not in env]
        if missing:
            if any(m not in consts or m == n for m in missing):
                return None
            pending += [n, *missing]
            continue
        try:
            env[n] = consts[n].evaluate(env)
        except (ArithmeticError, KeyError, LaunchError):
            return None
    return env[name]


def choose(em: Emitter, flag: str, when_set: Callable[[], None], otherwise: Callable[[], None]) -> None:
    """`if flag: when_set() else: otherwise()`, or only the branch a flag fixed for every launch takes."""
    value = static_flag(em.p, flag)
    if value is not None:
        em.restart_comments()
        (when_set if value else otherwise)()
        return
    node = em.branches(flag)
    for stmts, write in ((node.then, when_set), (node.otherwise, otherwise)):
        with em.into(stmts):
            em.restart_comments()
            write()


def _group(em: Emitter, g: Group) -> None:
    """A group's body (each form a launch can select is an op of it: `looped_rows`, `block_loop`)."""
    em.restart_comments()
    em.ops(g.body.ops)


def emit(program: Program, sanitize: bool = False) -> EmittedKernel:
    """Generate the Triton module of `program` and its ABI (`sanitize`: with the memory sanitizer's
    checks, see `emit_triton.sanitize`)."""
    load_emitters()
    em = Emitter(program, sanitize)
    kname = mangle(program.name, "kernel")
    em.used.update({kname})
    args, consts, sig = _abi(em)
    em.line("pid = tl.program_id(0)")
    with em.block("if INDEX_64"):
        em.line("pid = pid.to(tl.int64)")
    seg_args = {a.name: a for a in args if a.kind is ArgKind.SYMBOL and a.name.startswith("seg")}
    for g in program.groups:
        em.lanes_block = g.block
        em.group = g
        em.ticket = None
        dom = ", ".join(str(d) for d in g.domain) if g.domain else "single instance"
        em.line(f"# {comment_text(f'group {g.id}: {g.name} over ({dom}), {g.ownership} per program')}")
        if len(program.segments) > 1:
            off, length = f"seg{g.id}_offset", f"seg{g.id}_length"
            assert off in seg_args and length in seg_args
            em.program_index = f"(pid - {off})"
            with em.block(f"if (pid >= {off}) & (pid < {off} + {length})"):
                _group(em, g)
        else:
            em.program_index = "pid"
            _group(em, g)
    header = ["import triton", "import triton.language as tl", "", ""]
    helpers = []
    for h in em.helpers:
        helpers += h.rstrip("\n").split("\n") + ["", ""]
    if em.uses_device_flag:
        sig.append(f"{DEVICE_FLAG}: tl.constexpr")
    src = header + helpers + ["@triton.jit", f"def {kname}(" + ", ".join(sig) + "):"] + render(em.body, 1)
    return EmittedKernel(name=kname, source="\n".join(src) + "\n", args=tuple(args), constexprs=tuple(consts),
                         grid=program.grid, num_warps=program.num_warps, num_stages=program.num_stages,
                         notes=tuple(str(n) for n in program.notes),
                         device_flag=DEVICE_FLAG if em.uses_device_flag else None, counts=_counts(program))


def _counts(program: Program) -> tuple[tuple[str, LE.LaunchExpr], ...]:
    """The launch's bytes and FLOPs as launch expressions, for the profiler (`physical.counts`)."""
    counted = operation_counts(program)
    return (("bytes", counted.bytes), ("flops", counted.flops), ("exact", LE.LConst(int(counted.exact))))


# The modules that register emitters into EMIT (each imports this module).
EMITTER_MODULES = ("emit_access", "emit_contract", "emit_control", "emit_histogram", "emit_layout", "emit_pointwise",
                   "emit_program", "emit_reduce", "emit_region", "emit_lookback",
                   "emit_sort")


def load_emitters() -> None:
    """Import every emitter module (a no-op once they are loaded)."""
    for name in EMITTER_MODULES:
        importlib.import_module(f"{__package__}.{name}")


# Registered now, unless a module that imports this one and is imported by the emitters is what is importing it:
# it is only partly executed, and the emitters import names from it; then `emit` registers them on its first call.
if not any(f"{__package__}.{name}" in sys.modules for name in (*EMITTER_MODULES, "emit_combine", "numerics")):
    load_emitters()

__all__ = ["emit", "EMIT", "Emitter", "TL_DTYPE", "REGISTER_DTYPE", "literal"]
