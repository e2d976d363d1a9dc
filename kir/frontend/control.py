"""Control: `for ... in parallel(...)` -> parallel, `for ... in range(...)` -> for with loop-carried values,
`while` -> while, `if/else` -> if with results (or a compile-time choice when the condition is constant)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..control import INDEX_DTYPE, For, If, Parallel, While, Yield
from ..core import Region, TensorType, Value, scalar
from ..dims import DConst, Dim, PCmp
from ..dtypes import DType, ElemType
from .coerce import (
    _weak_kind,
    broadcast_shapes,
    broadcast_to,
    constant,
    default_dtype,
    is_int_like,
    is_weak,
    join_weak_kinds,
    to_tval,
    weak_to,
)
from .jagged_folds import plan_body
from .pointwise import condition, static_truth
from .scope import Dead, Env, assigned_names
from .values import BuiltinRef, DimExpr, FValue, Num, OpRef, RefV, TupleV, TVal, describe

if TYPE_CHECKING:
    from .lower import Lowerer


def lower_for(lw: Lowerer, node: ast.For) -> None:
    if node.orelse:
        raise lw.error(node.orelse[0], "for/else is not supported in kernel bodies; remove the else block")
    it = node.iter
    callee = lw.expr(it.func) if isinstance(it, ast.Call) else None
    if isinstance(callee, OpRef) and callee.name == "parallel":
        lower_parallel(lw, node, it)  # type: ignore[arg-type]
    elif isinstance(callee, BuiltinRef) and callee.name == "range":
        lower_range(lw, node, it)  # type: ignore[arg-type]
    else:
        raise lw.error(it, "a kernel loop iterates over parallel(...) (unordered instances) or range(...) (an "
                           "ordered loop), e.g. `for i in parallel(M):` or `for t in range(T):`")


def _target_names(lw: Lowerer, target: ast.AST, count: int, what: str) -> list[str]:
    if isinstance(target, ast.Name):
        if count != 1:
            raise lw.error(target, f"{what} has {count} axes; unpack them: `for {', '.join('ijkl'[:count])} in "
                                   f"{what}:`")
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List) and all(isinstance(e, ast.Name) for e in target.elts):
        names = [e.id for e in target.elts]  # type: ignore[attr-defined]
        if len(names) != count:
            raise lw.error(target, f"{what} has {count} axes but the loop unpacks {len(names)} names")
        return names
    raise lw.error(target, "a loop index must be a plain name (or a tuple of names for parallel(M, N))")


def _kill_after_loop(lw: Lowerer, child: Env, keep: set[str], targets: list[str], kind: str, line: int) -> None:
    for name in child.assigned():
        if name in keep:
            continue
        if name in targets:
            why = f"it is the index of the {kind} loop at line {line} and has no value after the loop"
        elif lw.env.live(name) is not None and kind == "parallel":
            why = (f"it is reassigned inside the parallel loop at line {line}, where every instance has its own "
                   f"value, so it has no single value after the loop; write results to memory instead")
        else:
            why = f"it is first assigned inside the {kind} loop at line {line} and has no value after the loop; " \
                  f"assign it before the loop to carry it"
        lw.env.kill(name, why)


# ---------------------------------------------------------------------------------------------- parallel


def lower_parallel(lw: Lowerer, node: ast.For, it: ast.Call) -> None:
    if it.keywords:
        raise lw.error(it, "parallel(...) takes extents only, e.g. parallel(M, N)")
    extents: list[Dim] = []
    for a in it.args:
        fv = lw.expr(a)
        parts = list(fv.items) if isinstance(fv, TupleV) else [fv]
        for p in parts:
            if isinstance(p, DimExpr):
                extents.append(p.dim)
            elif isinstance(p, Num) and isinstance(p.value, int) and not isinstance(p.value, bool) and p.value >= 0:
                extents.append(DConst(p.value))
            else:
                raise lw.error(a, f"parallel extents are shape expressions (dims or integer constants), got "
                                  f"{describe(p)}; for a trip count known only at run time use `for t in range(n)`")
    if not extents:
        raise lw.error(it, "parallel(...) needs at least one extent, e.g. parallel(N)")
    names = _target_names(lw, node.target, len(extents), f"parallel({', '.join(map(str, extents))})")
    syms = [lw.loop_symbol(n) for n in names]
    facts = [f for s, d in zip(syms, extents) for f in (PCmp(">=", s, DConst(0)), PCmp("<", s, d))]
    args = lw.b.begin_region((scalar(INDEX_DTYPE),) * len(extents), tuple(names))
    child = Env(parent=lw.env)
    for n, a, s in zip(names, args, syms):
        child.set(n, TVal(a, weak=True, affine=s))
    saved = lw.column_folds
    with lw.loop_facts(facts), lw.child_env(child):
        lw.column_folds = plan_body(lw, node.body)
        try:
            lw.block(node.body)
        finally:
            lw.column_folds = saved
    lw.make(Yield, node, values=())
    body = lw.b.end_region()
    lw.make(Parallel, node, domain=tuple(extents), body=body)
    _kill_after_loop(lw, child, set(), names, "parallel", lw.loc(node).line)


# ---------------------------------------------------------------------------------------------- carried values


@dataclass(frozen=True)
class Carry:
    name: str
    type: TensorType
    weak: bool


def _kind_of(dt: ElemType) -> str:
    from ..pointwise import is_float_like

    return "pred" if dt == DType.pred else "float" if is_float_like(dt) else "int"


def initial_carries(lw: Lowerer, names: list[str], node: ast.AST, kind: str) -> list[Carry]:
    out = []
    for n in names:
        fv = lw.env.live(n)
        if isinstance(fv, TVal):
            out.append(Carry(n, fv.type, fv.weak))
        elif isinstance(fv, Num | DimExpr):
            out.append(Carry(n, scalar(default_dtype(_weak_kind(fv))), True))
        elif isinstance(fv, RefV):
            raise lw.error(node, f"`{n}` names memory and is reassigned inside the {kind} loop; a buffer or tensor "
                                 f"name cannot be rebound in a loop: write into it (`{n}[i] = ...`) instead")
        else:
            raise lw.error(node, f"`{n}` is {describe(fv)} and is reassigned inside the {kind} loop; only tensor "
                                 f"values and numbers can change from one iteration to the next")
    return out


def fit_carry(lw: Lowerer, fv: FValue | Dead | None, c: Carry, node: ast.AST, kind: str) -> TVal | Carry:
    """The yielded value coerced to the carry's type, or the wider carry type the loop needs."""
    what = f"the loop-carried value `{c.name}`"
    if isinstance(fv, Dead):
        raise lw.error(node, f"`{c.name}` has no value at the end of the {kind} loop body: {fv.why}")
    if not isinstance(fv, TVal | Num | DimExpr):
        raise lw.error(node, f"{what} is assigned {describe(fv) if fv is not None else 'nothing'} in the loop; it "
                             f"must stay a tensor value or a number")
    shape = fv.shape if isinstance(fv, TVal) else ()
    joint = broadcast_shapes(lw, [c.type.shape, shape], node, what)
    if is_weak(fv):
        vkind, ckind = _weak_kind(fv), _kind_of(c.type.dtype)
        dtype = c.type.dtype
        if c.weak and join_weak_kinds([vkind, ckind]) != ckind:
            dtype = fv.dtype if isinstance(fv, TVal) else default_dtype(vkind)
        if dtype != c.type.dtype or joint != c.type.shape:
            return Carry(c.name, TensorType(dtype, joint), c.weak)
        tv = weak_to(lw, fv, c.type.dtype, node, what, keep_weak=c.weak)
        return broadcast_to(lw, tv, c.type.shape, node, what)
    assert isinstance(fv, TVal)
    if fv.dtype != c.type.dtype:
        if c.weak:
            return Carry(c.name, TensorType(fv.dtype, joint), False)
        raise lw.error(node, f"`{c.name}` is {c.type.dtype} before the {kind} loop but {fv.dtype} inside it; a "
                             f"loop-carried value keeps its dtype: convert with `.to({c.type.dtype})`, or use "
                             f"another name")
    if joint != c.type.shape:
        return Carry(c.name, TensorType(c.type.dtype, joint), c.weak)
    return broadcast_to(lw, fv, c.type.shape, node, what)


def carry_loop(lw: Lowerer, node: ast.stmt, carries: list[Carry], lead_types: tuple[TensorType, ...],
               lead_names: tuple[str, ...], bind_lead: Callable[[Env, tuple[Value, ...]], None],
               facts: list, kind: str) -> tuple[Region, list[Carry], Env, list[bool]]:
    """Lower the loop body until the carried types settle (a weak `acc = 0.0` takes the dtype and shape its
    updates give it); returns the body region, the carries, the body's names and which yields are weak."""
    for _ in range(6):
        args = lw.b.begin_region(lead_types + tuple(c.type for c in carries),
                                 lead_names + tuple(c.name for c in carries))
        child = Env(parent=lw.env)
        bind_lead(child, args[:len(lead_types)])
        for c, a in zip(carries, args[len(lead_types):]):
            child.set(c.name, TVal(a, weak=c.weak))
        with lw.loop_facts(facts), lw.child_env(child):
            lw.block(node.body)  # type: ignore[attr-defined]
            fitted = [fit_carry(lw, child.lookup(c.name), c, node, kind) for c in carries]
        if all(isinstance(f, TVal) for f in fitted):
            yields = [f for f in fitted if isinstance(f, TVal)]
            lw.make(Yield, node, values=tuple(y.value for y in yields))
            return lw.b.end_region(), carries, child, [y.weak for y in yields]
        lw.b.end_region()  # this attempt is dropped; its ops never reach the kernel
        carries = [f if isinstance(f, Carry) else c for f, c in zip(fitted, carries)]
    raise lw.error(node, f"the types of the values carried by this {kind} loop do not settle; give them explicit "
                         f"types before the loop, e.g. `acc = f32(0.0)`")


def carry_inits(lw: Lowerer, carries: list[Carry], node: ast.AST) -> tuple[Value, ...]:
    out = []
    for c in carries:
        fv = lw.env.live(c.name)
        assert fv is not None
        tv = weak_to(lw, fv, c.type.dtype, node, f"the initial value of `{c.name}`") if is_weak(fv) \
            else to_tval(lw, fv, node, c.name)
        out.append(broadcast_to(lw, tv, c.type.shape, node, f"the initial value of `{c.name}`").value)
    return tuple(out)


def _carried_names(lw: Lowerer, body: list[ast.stmt], exclude: list[str]) -> list[str]:
    return [n for n in assigned_names(body) if n not in exclude and lw.env.live(n) is not None]


# ---------------------------------------------------------------------------------------------- for, while


def _range_bound(lw: Lowerer, fv: FValue, node: ast.AST) -> FValue:
    if isinstance(fv, Num) and isinstance(fv.value, int) and not isinstance(fv.value, bool):
        return fv
    if isinstance(fv, DimExpr):
        return fv
    if isinstance(fv, TVal) and not fv.shape and is_int_like(fv.dtype):
        return fv
    raise lw.error(node, f"range() bounds are integers (constants, dims or integer scalars), got {describe(fv)}")


def lower_range(lw: Lowerer, node: ast.For, it: ast.Call) -> None:
    if it.keywords or not 1 <= len(it.args) <= 3:
        raise lw.error(it, "range() takes 1 to 3 positional arguments: range(stop), range(start, stop[, step])")
    vals = [_range_bound(lw, lw.expr(a), a) for a in it.args]
    if len(vals) == 1:
        vals = [Num(0), vals[0], Num(1)]
    elif len(vals) == 2:
        vals = [vals[0], vals[1], Num(1)]
    step = vals[2]
    if isinstance(step, Num) and step.value == 0:
        raise lw.error(it.args[2], "range() step must not be zero")
    strong = [v.dtype for v in vals if isinstance(v, TVal) and not v.weak]
    dtype = strong[0] if strong else next((v.dtype for v in vals if isinstance(v, TVal)), INDEX_DTYPE)
    for d in strong:
        if d != dtype:
            raise lw.error(it, f"range() bounds mix {dtype} and {d}; convert one with `.to({dtype})`")
    start, stop, stp = (weak_to(lw, v, dtype, it, "range()") for v in vals)
    names = _target_names(lw, node.target, 1, "range(...)")
    affine_bounds = [_affine(v) for v in (vals[0], vals[1])]
    sym = None
    facts: list = []
    if all(a is not None for a in affine_bounds) and isinstance(step, Num) and step.value > 0:
        sym = lw.loop_symbol(names[0])
        facts = [PCmp(">=", sym, affine_bounds[0]), PCmp("<", sym, affine_bounds[1])]
    carried = _carried_names(lw, node.body, names)
    carries = initial_carries(lw, carried, node, "for")

    def bind(env: Env, lead: tuple[Value, ...]) -> None:
        env.set(names[0], TVal(lead[0], weak=True, affine=sym))

    body, carries, child, weak = carry_loop(lw, node, carries, (scalar(dtype),), (names[0],), bind, facts, "for")
    inits = carry_inits(lw, carries, node)
    op = lw.make(For, node, names=tuple(c.name for c in carries), start=start.value, stop=stop.value,
                 step=stp.value, inits=inits, body=body)
    for c, r, w in zip(carries, op.results, weak):
        lw.env.set(c.name, TVal(r, weak=c.weak and w))
    _kill_after_loop(lw, child, {c.name for c in carries}, names, "for", lw.loc(node).line)


def _affine(fv: FValue) -> Dim | None:
    if isinstance(fv, Num):
        return DConst(int(fv.value))
    if isinstance(fv, DimExpr):
        return fv.dim
    return fv.affine if isinstance(fv, TVal) else None


def lower_while(lw: Lowerer, node: ast.While) -> None:
    if node.orelse:
        raise lw.error(node.orelse[0], "while/else is not supported in kernel bodies; remove the else block")
    carried = _carried_names(lw, node.body, [])
    carries = initial_carries(lw, carried, node, "while")
    body, carries, child, weak = carry_loop(lw, node, carries, (), (), lambda env, lead: None, [], "while")
    args = lw.b.begin_region(tuple(c.type for c in carries), tuple(c.name for c in carries))
    cenv = Env(parent=lw.env)
    for c, a in zip(carries, args):
        cenv.set(c.name, TVal(a, weak=c.weak))
    with lw.child_env(cenv):
        test = lw.expr(node.test)
        truth = static_truth(test)
        cond = constant(lw, truth, DType.pred, node.test) if truth is not None \
            else condition(lw, test, node.test, "a while condition")
    lw.make(Yield, node.test, values=(cond.value,))
    cond_region = lw.b.end_region()
    inits = carry_inits(lw, carries, node)
    op = lw.make(While, node, names=tuple(c.name for c in carries), inits=inits, cond=cond_region, body=body)
    for c, r, w in zip(carries, op.results, weak):
        lw.env.set(c.name, TVal(r, weak=c.weak and w))
    _kill_after_loop(lw, child, {c.name for c in carries}, [], "while", lw.loc(node).line)


# ---------------------------------------------------------------------------------------------- if


def lower_if(lw: Lowerer, node: ast.If) -> None:
    test = lw.expr(node.test)
    truth = static_truth(test)
    if truth is not None:  # decided at compile time (constants, const parameters): only one branch exists
        lw.block(node.body if truth else node.orelse)
        return
    cond = condition(lw, test, node.test, "an if condition")
    branches = []
    for stmts in (node.body, node.orelse):
        lw.b.begin_region(())
        env = Env(parent=lw.env)
        with lw.child_env(env):
            lw.block(stmts)
        branches.append((lw.b.end_region(), env))
    (then_r, then_env), (else_r, else_env) = branches
    line = lw.loc(node).line
    results: list[tuple[str, FValue, FValue]] = []
    for name in dict.fromkeys(then_env.assigned() + else_env.assigned()):
        a, b = then_env.lookup(name), else_env.lookup(name)
        if a is None or b is None or isinstance(a, Dead) or isinstance(b, Dead):
            lw.env.kill(name, f"it is assigned in only one branch of the if at line {line}; assign it before the if "
                              f"or in both branches")
            continue
        if not isinstance(a, TVal | Num | DimExpr) or not isinstance(b, TVal | Num | DimExpr):
            if a == b:
                lw.env.set(name, a)
                continue
            raise lw.error(node, f"`{name}` is assigned different non-value objects in the branches of this if "
                                 f"({describe(a)} / {describe(b)}); only tensor values and numbers can depend on a "
                                 f"runtime condition")
        if isinstance(a, TVal) and isinstance(b, TVal) and not a.weak and not b.weak and a.dtype != b.dtype:
            # A branch-local value: fine as long as nothing reads it after the if.
            lw.env.kill(name, f"it is {a.dtype} in one branch and {b.dtype} in the other of the if at line {line}; "
                              f"convert one with `.to({a.dtype})` to use it after the if")
            continue
        results.append((name, a, b))
    types = [_join(lw, name, a, b, node) for name, a, b in results]
    regions = []
    for region, side in ((then_r, 1), (else_r, 2)):
        lw.b.begin_region(())
        lw.b.current_ops().extend(region.ops)
        vals = []
        for (name, *pair), (t, weak) in zip(results, types):
            fv = pair[side - 1]
            tv = weak_to(lw, fv, t.dtype, node, f"`{name}`", keep_weak=weak) if is_weak(fv) \
                else to_tval(lw, fv, node, name)
            vals.append(broadcast_to(lw, tv, t.shape, node, f"`{name}`").value)
        lw.make(Yield, node, values=tuple(vals))
        regions.append(lw.b.end_region())
    op = lw.make(If, node, names=tuple(n for n, _, _ in results), cond=cond.value, then_=regions[0],
                 else_=regions[1])
    for (name, _, _), (_, weak), r in zip(results, types, op.results):
        lw.env.set(name, TVal(r, weak=weak))


def _join(lw: Lowerer, name: str, a: FValue, b: FValue, node: ast.AST) -> tuple[TensorType, bool]:
    sa = a.shape if isinstance(a, TVal) else ()
    sb = b.shape if isinstance(b, TVal) else ()
    shape = broadcast_shapes(lw, [sa, sb], node, f"the branches of `{name}`")
    wa, wb = is_weak(a), is_weak(b)
    if not wa and not wb:
        assert isinstance(a, TVal) and isinstance(b, TVal)
        if a.dtype != b.dtype:
            raise lw.error(node, f"`{name}` is {a.dtype} in one branch and {b.dtype} in the other; convert one with "
                                 f"`.to({a.dtype})`")
        return TensorType(a.dtype, shape), False
    if wa != wb:
        strong = a if not wa else b
        assert isinstance(strong, TVal)
        return TensorType(strong.dtype, shape), False
    kind = join_weak_kinds([_weak_kind(a), _weak_kind(b)])
    dt = next((v.dtype for v in (a, b) if isinstance(v, TVal) and _weak_kind(v) == kind), default_dtype(kind))
    return TensorType(dt, shape), True
