"""Blocks of generated source kernels (see `tests/srcgen.py`) over 3-D and 4-D tensors at top level:
layout changes (the attention head split `permute(reshape(x, (B, T, H, D // H)), (0, 2, 1, 3))` and its
inverse, permutes, transposes, reshapes that regroup axes) and sorting (`sort`, `argsort`, `topk` along any
axis, NaN and ties included), over every dtype with an order, `i4` (two values a byte) included.

These blocks use their own symbols (B, T, H, D, C) and are drawn from a stream of their own
(`EXTRA_SHARE` of the cases get one), so the kernels the other blocks generate for a seed stay as they were.
"""

from __future__ import annotations

import itertools

from tests.diffinputs import InputSpec
from tests.srcgen import ALL_FLOATS, FLOATS, FP8, Gen, Val

EXTRA_SHARE = 0.3
ORDERED = FLOATS + FP8 + ("i4", "i8", "i16", "i32", "i64", "u8", "u16", "u32")  # u64 is int64 bits in torch
HEADS = (2, 3, 4)


def _sizes(g: Gen, even: bool) -> tuple[int, ...]:
    """Extents up to 17 (`even`: an i4 tensor's last axis holds two values a byte, so every axis that can
    come last is even)."""
    pool = tuple(n for n in g.sizes if n <= 17)
    return tuple(n for n in pool if n % 2 == 0) if even else pool


def _ref_shape(shape: tuple[str, ...], env: dict[str, int]) -> str:
    """The reference's spelling of a symbolic shape at the case's sizes."""
    return "(" + "".join(f"{eval(d, {}, dict(env))}, " for d in shape) + ")"  # noqa: S307 (our own dims)


def _finish(g: Gen, lay: Val, shape: tuple[str, ...], dt: str) -> None:
    """Meet `lay` (a tensor of `shape`) with another input of its shape and a `keepdims` reduction of it, and
    store the result."""
    leaves = [lay]
    if g.r.random() < 0.5:
        y = g.param("y", dt, shape, spec=_spec(g, dt))
        leaves.append(Val(y, f"a[{y!r}]", dt))
    if g.r.random() < 0.4 and dt != "i4":
        axis = g.r.randrange(len(shape))
        fn = g.r.choice(("sum", "max", "min") if dt in ALL_FLOATS else ("max", "min"))
        name = g.fresh("r")
        g.body.append(f"{name} = intent.{fn}({lay.src}, axis={axis}, keepdims=True)")
        ref = f"rnd({lay.ref}.sum({axis}, keepdim=True), {dt!r})" if fn == "sum" else \
            f"{lay.ref}.a{fn}({axis}, keepdim=True)"
        g.ref.append(f"{name} = {ref}")
        leaves.append(Val(name, name, dt, lay.exact and fn != "sum"))
        g.notes.append(f"layout {fn} axis {axis}")
    v = g.expr(leaves, dt, 2) if g.r.random() < 0.7 else lay
    if v.scalar:
        v = lay
    if lay.src not in v.src:  # the layout change must reach the output
        rd = "rnd" if dt in ALL_FLOATS else "wrap"
        v = Val(f"({v.src} + {lay.src})", f"{rd}({v.ref} + {lay.ref}, {dt!r})", dt, v.exact)
    o = g.param("o", dt, shape, "out")
    g.body.append(f"{o}[{', '.join(':' * len(shape))}] = {v.src}")
    g.ref.append(f"out[{o!r}] = _torch.broadcast_to({v.ref}, {_ref_shape(shape, g.shapes)}).clone()")
    g.output(o, v.exact)


def _spec(g: Gen, dt: str) -> InputSpec:
    return InputSpec("values", None, dt != "i4" and dt not in ALL_FLOATS and g.r.random() < 0.2,
                     dt in ALL_FLOATS and g.r.random() < 0.3)


def block_layout(g: Gen) -> None:
    """Top-level layout changes of 3-D and 4-D tensors, their result met with other inputs and stored."""
    dt = g.r.choice(ORDERED + ("u64", "pred"))
    even = dt == "i4"
    kind = g.r.choice(("split", "merge", "permute", "transpose", "reshape", "unflatten"))
    g.notes.append(f"layout {dt}")
    b = g.symbol("B", g.r.choice((2,) if even else (1, 2, 3)))
    t = g.symbol("T", g.r.choice(_sizes(g, even)))
    lay = g.fresh("h")
    g.notes.append(f"layout {kind}")
    if kind in ("split", "merge"):
        symbolic = g.r.random() < 0.5
        hv = g.r.choice((2, 4) if even else HEADS)
        h = g.symbol("H", hv) if symbolic else str(hv)
        hv = g.shapes["H"] if symbolic else hv
        per = g.r.choice((2, 4) if even else (1, 2, 3, 4, 8))
        if kind == "split":
            g.symbol("D", hv * per)
            g.requires.append(f"D % {h} == 0")
            x = g.param("x", dt, (b, t, "D"), spec=_spec(g, dt))
            shape = (b, h, t, f"D // {h}")
            g.body.append(f"{lay} = intent.permute(intent.reshape({x}, ({b}, {t}, {h}, D // {h})), (0, 2, 1, 3))")
            g.ref.append(f"{lay} = a[{x!r}].reshape({g.shapes[b]}, {g.shapes[t]}, {hv}, {per}).permute(0, 2, 1, 3)")
        else:
            c = g.symbol("C", per)
            y = g.param("x", dt, (b, h, t, c), spec=_spec(g, dt))
            shape = (b, t, f"{h} * {c}")
            g.body.append(f"{lay} = intent.reshape(intent.permute({y}, (0, 2, 1, 3)), ({b}, {t}, {h} * {c}))")
            g.ref.append(f"{lay} = a[{y!r}].permute(0, 2, 1, 3).reshape({g.shapes[b]}, {g.shapes[t]}, {hv * per})")
    elif kind in ("permute", "transpose"):
        four = g.r.random() < 0.4
        names = (b, "H", t, "D") if four else (b, t, "D")
        g.symbol("D", g.r.choice(_sizes(g, even)))
        if four:
            g.symbol("H", g.r.choice((2,) if even else (1, 2, 3)))
        x = g.param("x", dt, names, spec=_spec(g, dt))
        perms = [p for p in itertools.permutations(range(len(names))) if p != tuple(range(len(names)))]
        perm = g.r.choice(perms)
        if kind == "transpose" and g.r.random() < 0.5:
            perm = tuple(reversed(range(len(names))))
            g.body.append(f"{lay} = intent.transpose({x})")
        elif kind == "transpose":
            g.body.append(f"{lay} = intent.transpose({x}, axes={perm})")
        else:
            g.body.append(f"{lay} = intent.permute({x}, {perm})")
        g.ref.append(f"{lay} = a[{x!r}].permute{perm}")
        shape = tuple(names[k] for k in perm)
    else:
        d = g.symbol("D", g.r.choice(_sizes(g, even)))
        if kind == "reshape":
            x = g.param("x", dt, (b, t, d), spec=_spec(g, dt))
            shape, spelled = g.r.choice([
                ((f"{b} * {t}", d), f"({b} * {t}, {d})"),
                ((b, f"{t} * {d}"), f"({b}, {t} * {d})"),
                ((f"{b} * {t}", d), f"(-1, {d})"),
                ((t, b, d), f"({t}, {b}, {d})"),  # regroups, not a permute
                ((f"{b} * {t} * {d}",), "(-1,)"),
            ])
        else:  # unflatten: one axis into two
            x = g.param("x", dt, (b, f"{t} * {d}"), spec=_spec(g, dt))
            shape, spelled = (b, t, d), f"({b}, {t}, {d})"
        g.body.append(f"{lay} = intent.reshape({x}, {spelled})")
        g.ref.append(f"{lay} = a[{x!r}].reshape{_ref_shape(shape, g.shapes)}")
    if dt in ("u64", "pred"):  # no arithmetic the reference models exactly: the layout itself is the output
        o = g.param("o", dt, shape, "out")
        g.body.append(f"{o}[{', '.join(':' * len(shape))}] = {lay}")
        g.ref.append(f"out[{o!r}] = {lay}.clone()")
        g.output(o, True)
        return
    _finish(g, Val(lay, lay, dt), shape, dt)


def block_sort(g: Gen) -> None:
    """`sort`, `argsort` and `topk` along any axis of a 2-D or 3-D tensor (or of a head split of one)."""
    dt = g.r.choice(ORDERED)
    even = dt == "i4"
    rank = g.r.choice((2, 3))
    b = g.symbol("B", g.r.choice((2,) if even else (1, 2, 3, 5)))
    t = g.symbol("T", g.r.choice(_sizes(g, even)))
    names = (b, t) if rank == 2 else (b, t, g.symbol("D", g.r.choice(_sizes(g, even))))
    x = g.param("x", dt, names, spec=_spec(g, dt))
    leaves = [Val(x, f"a[{x!r}]", dt)]
    if g.r.random() < 0.4 and dt != "i4":
        y = g.param("y", dt, names, spec=_spec(g, dt))
        leaves.append(Val(y, f"a[{y!r}]", dt))
    v = g.expr(leaves, dt, 1, exact=True) if g.r.random() < 0.5 else leaves[0]
    if v.scalar or not v.exact:
        v = leaves[0]
    axis = g.r.randrange(rank)
    spelled_axis = g.r.choice((axis, axis - rank))
    desc = g.r.random() < 0.5
    kind = g.r.choice(("sort", "sort indices", "argsort", "topk"))
    g.notes.append(f"{kind} {dt}" + (" descending" if desc else ""))
    src = g.fresh("s")
    g.body.append(f"{src} = {v.src}")
    g.ref.append(f"{src} = {v.ref}")
    colons = ", ".join(":" * rank)
    # the documented order is torch.sort(stable=True)'s: NaN largest, ties in index order
    if kind == "topk":
        k = 2 if even else g.r.choice((1, 2, 3))  # an i4 result's last axis is even
        ext = names[axis]
        g.requires.append(f"{ext} >= {k}")
        g.shapes[ext] = max(g.shapes[ext], k)
        largest = g.r.random() < 0.6
        shape = tuple(str(k) if a == axis else n for a, n in enumerate(names))
        ov, oi = g.param("o", dt, shape, "out"), g.param("o", "i64", shape, "out")
        g.body.append(f"{ov}[{colons}], {oi}[{colons}] = intent.topk({src}, {k}, axis={spelled_axis}"
                      f"{'' if largest else ', largest=False'})")
        g.ref += [f"{src}v, {src}i = _torch.sort({src}, dim={axis}, descending={largest}, stable=True)",
                  f"out[{ov!r}] = {src}v.narrow({axis}, 0, {k}).clone()",
                  f"out[{oi!r}] = {src}i.narrow({axis}, 0, {k}).clone()"]
        g.output(ov, True)
        g.output(oi, True)
        return
    flag = ", descending=True" if desc else ""
    g.ref.append(f"{src}v, {src}i = _torch.sort({src}, dim={axis}, descending={desc}, stable=True)")
    if kind == "argsort":
        oi = g.param("o", "i64", names, "out")
        g.body.append(f"{oi}[{colons}] = intent.argsort({src}, axis={spelled_axis}{flag})")
        g.ref.append(f"out[{oi!r}] = {src}i.clone()")
        g.output(oi, True)
        return
    ov = g.param("o", dt, names, "out")
    if kind == "sort":
        g.body.append(f"{ov}[{colons}] = intent.sort({src}, axis={spelled_axis}{flag})")
    else:
        oi = g.param("o", "i64", names, "out")
        g.body.append(f"{ov}[{colons}], {oi}[{colons}] = intent.sort({src}, axis={spelled_axis}{flag}, "
                      "return_indices=True)")
        g.ref.append(f"out[{oi!r}] = {src}i.clone()")
        g.output(oi, True)
    g.ref.append(f"out[{ov!r}] = {src}v.clone()")
    g.output(ov, True)


EXTRA_BLOCKS = {"layout": block_layout, "sort": block_sort}
