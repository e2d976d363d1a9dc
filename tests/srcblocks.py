"""The blocks a generated source kernel is made of (see `tests/srcgen.py`): each adds its parameters,
kernel lines and reference lines to a `Gen`."""

from __future__ import annotations

from tests.diffinputs import InputSpec
from tests.srcgen import ALL_FLOATS, DTYPES, FLOATS, FP8, INTS, Gen, Val, _indent, castable


def _rows_shape(g: Gen, short: bool = False, long: bool = False) -> tuple[str, str]:
    """M, N: boundary sizes; sometimes many short rows, sometimes (`long`) a few rows longer than a tile."""
    if short or g.r.random() < 0.12:
        g.notes.append("many short rows")
        return g.symbol("M", 1025), g.symbol("N", g.r.choice((1, 2)))
    if long and not g.small and g.r.random() < 0.15:
        g.notes.append("long rows")
        return g.symbol("M", g.r.choice((1, 2, 3))), g.symbol("N", g.r.choice((255, 257, 1000, 4097)))
    return g.symbol("M", g.r.choice(g.sizes)), g.symbol("N", g.r.choice(g.sizes))


def block_rows(g: Gen) -> None:
    """`parallel(M)` over rows: pointwise chains, reductions broadcast back, scans, argmax."""
    m, n = _rows_shape(g, long=True)
    dt = g.r.choice(FLOATS + FP8 + ("i32", "i8", "i64", "u16"))
    x = g.param("x", dt, (m, n))
    # rows (x[i, :] for i in parallel(M)) or columns (x[:, i] for i in parallel(N)): the reference works on
    # the tensor with the parallel axis first
    cols = g.r.random() < 0.3
    at, tr, ext = ("[:, i]", ".T", "N") if cols else ("[i, :]", "", "M")
    if cols:
        g.notes.append("columns")
    leaves = [Val(f"{x}{at}", f"a[{x!r}]{tr}", dt)]
    if g.r.random() < 0.5:
        dt2 = g.r.choice(DTYPES[:-1])
        y = g.param("y", dt2, (m, n))
        leaves.append(Val(f"{y}{at}", f"a[{y!r}]{tr}", dt2))
    if dt in FLOATS and g.r.random() < 0.4:
        w = g.param("w", dt, None)
        leaves.append(Val(w, f"_torch.tensor(a[{w!r}], dtype=_torch.float64)", dt, True, True))
    lines: list[str] = []
    per_row: list[Val] = []
    for _ in range(g.r.randint(1, 3)):
        e = g.expr(leaves, dt, g.r.randint(1, 3))
        name = g.fresh("e")
        lines.append(f"{name} = {e.src}")
        g.ref.append(f"{name} = {e.ref}")
        leaves.append(Val(name, name, dt, e.exact, e.scalar, e.bounded))
        red = None if e.scalar else reduction(g, leaves[-1], f"a[{x!r}]{tr}.shape")
        if red is not None:
            rname = g.fresh("r")
            lines.append(f"{rname} = {red.src}")
            g.ref.append(f"{rname} = {red.ref}")
            leaves.append(Val(rname, rname, red.dt, red.exact, red.scalar, red.bounded))
            if red.scalar:
                per_row.append(leaves[-1])
    # one vector output (reductions broadcast back over the row) and one per-row output
    vec = g.expr(leaves, dt, 2)
    if vec.scalar:  # a vector output: meet the row again
        row = leaves[0]
        vec = Val(
            f"intent.maximum({vec.src}, {row.src})", f"_torch.maximum({vec.ref}, {row.ref})", dt, vec.exact, False
        )
    o = g.param("o", dt, (m, n), "out")
    lines.append(f"{o}{at} = {vec.src}")
    g.ref.append(f"out[{o!r}] = ({vec.ref}).expand(a[{x!r}]{tr}.shape){tr}.clone()")
    g.output(o, vec.exact)
    if per_row:
        v = g.r.choice(per_row)
        o2 = g.param("o", v.dt, (ext,), "out")
        lines.append(f"{o2}[i] = {v.src}")
        g.ref.append(f"out[{o2!r}] = {v.ref}[:, 0]")
        g.output(o2, v.exact)
    if dt in FLOATS + ("i32", "i64") and g.r.random() < 0.3:  # an update in place
        io = g.param("io", dt, (m, n), "inout")
        c, cref = g.const(dt)
        lines.append(f"{io}{at} += {x}{at} * {c}")
        rd = "rnd" if dt in ALL_FLOATS else "wrap"
        g.ref.append(f"out[{io!r}] = {rd}(a[{io!r}] + {rd}(a[{x!r}] * {cref}, {dt!r}), {dt!r})")
        g.output(io, True)
        g.notes.append("+= in place")
    g.body += [f"for i in parallel({ext}):", *_indent(lines)]


def reduction(g: Gen, v: Val, like: str) -> Val | None:
    """A reduction or scan of row `v` (reference: over the last axis, keepdim for broadcasting)."""
    dt = v.dt
    roll = g.r.random()
    if dt in ALL_FLOATS:
        if roll < 0.3:
            g.notes.append("sum")
            return Val(
                f"intent.sum({v.src})",
                f"rnd(_torch.broadcast_to({v.ref}, {like}).sum(-1, keepdim=True), {dt!r})",
                dt,
                False,
                True,
            )
        if roll < 0.55:
            fn = g.r.choice(("max", "min"))
            g.notes.append(fn)
            return Val(
                f"intent.{fn}({v.src})",
                f"_torch.broadcast_to({v.ref}, {like}).a{fn}(-1, keepdim=True)",
                dt,
                v.exact,
                True,
                v.bounded,
            )
        if roll < 0.65:
            g.notes.append("mean")
            return Val(
                f"intent.mean({v.src})",
                f"rnd(_torch.broadcast_to({v.ref}, {like}).mean(-1, keepdim=True), {dt!r})",
                dt,
                False,
                True,
            )
        if roll < 0.75 and v.exact:
            g.notes.append("argmax")
            return Val(
                f"intent.argmax({v.src}).to({dt})",
                f"cast(_torch.broadcast_to({v.ref}, {like}).argmax(-1, keepdim=True), 'i64', {dt!r})",
                dt,
                True,
                True,
            )
        if roll < 0.85:
            g.notes.append("cumsum")
            return Val(
                f"intent.cumsum({v.src})",
                f"rnd(_torch.broadcast_to({v.ref}, {like}).cumsum(-1), {dt!r})",
                dt,
                False,
                False,
            )
        return None
    if roll < 0.3 and dt in ("i32", "i64"):
        g.notes.append("int sum")
        return Val(
            f"intent.sum({v.src})",
            f"wrap(_torch.broadcast_to({v.ref}, {like}).sum(-1, keepdim=True), {dt!r})",
            dt,
            True,
            True,
        )
    if roll < 0.6:
        fn = g.r.choice(("max", "min"))
        return Val(
            f"intent.{fn}({v.src})", f"_torch.broadcast_to({v.ref}, {like}).a{fn}(-1, keepdim=True)", dt, True, True
        )
    return None


def block_points(g: Gen) -> None:
    """2-D `parallel`, transposed and reversed indices, `if`/`else` with compound predicates, casts."""
    m, n = g.symbol("M", g.r.choice(g.sizes)), g.symbol("N", g.r.choice(g.sizes))
    dt = g.r.choice(FLOATS + INTS + FP8)
    specials = dt in ALL_FLOATS and g.r.random() < 0.3
    x = g.param("x", dt, (m, n), spec=InputSpec("values", None, False, specials) if dt in ALL_FLOATS else None)
    xt = g.param("xt", dt, (n, m))
    s = g.param("s", "i32", None)
    leaves = [
        Val(f"{x}[i, j]", f"a[{x!r}]", dt, True, True),
        Val(f"{xt}[j, i]", f"a[{xt!r}].T", dt, True, True),
        Val(f"{x}[i, N - 1 - j]", f"a[{x!r}].flip(1)", dt, True, True),
        Val(s, f"_torch.tensor(a[{s!r}], dtype=_torch.int64)", "i32", True, True),
    ]
    if g.r.random() < 0.5:
        dt2 = g.r.choice(DTYPES)
        y = g.param("y", dt2, (m, n))
        leaves.append(Val(f"{y}[i, j]", f"a[{y!r}]", dt2, True, True))
    if g.r.random() < 0.4:  # a vector every row reads
        r = g.param("r", dt, (n,))
        leaves.append(Val(f"{r}[j]", f"a[{r!r}][None, :]", dt, True, True))
    lines: list[str] = []
    depth = 1 if specials else 2  # specials: keep to exact-friendly shallow chains
    for _ in range(g.r.randint(1, 2)):
        p = g.pred_op(leaves, 2)
        t = g.fresh("t")
        a, b = g.expr(leaves, dt, depth), g.expr(leaves, dt, depth)
        lines += [f"if {p.src}:", f"    {t} = {a.src}", "else:", f"    {t} = {b.src}"]
        g.ref.append(f"{t} = _torch.where(({p.ref}).expand(a[{x!r}].shape), {a.ref}, {b.ref})")
        leaves.append(Val(t, t, dt, a.exact and b.exact, True))
        g.notes.append("if/else")
    if g.r.random() < 0.4:  # stores in the branches
        p = g.pred_op(leaves, 2)
        a, b = g.expr(leaves, dt, depth), g.expr(leaves, dt, depth)
        ob = g.param("o", dt, (m, n), "out")
        lines += [f"if {p.src}:", f"    {ob}[i, j] = {a.src}", "else:", f"    {ob}[i, j] = {b.src}"]
        g.ref.append(f"out[{ob!r}] = _torch.where(({p.ref}).expand(a[{x!r}].shape), {a.ref}, {b.ref}).clone()")
        g.output(ob, a.exact and b.exact)
        g.notes.append("stores in branches")
    v = g.expr(leaves, dt, depth)
    o = g.param("o", dt, (m, n), "out")
    lines.append(f"{o}[i, j] = {v.src}")
    g.ref.append(f"out[{o!r}] = ({v.ref}).expand(a[{x!r}].shape).clone()")
    g.output(o, v.exact)
    exact = [v for v in leaves if v.exact]
    src = g.r.choice(exact)
    dst = g.r.choice([d for d in DTYPES if castable(src.dt, d)])
    chain = g.r.choice([d for d in DTYPES if castable(dst, d)]) if g.r.random() < 0.4 else None
    c = Val(f"{src.src}.to({dst})", f"cast({src.ref}, {src.dt!r}, {dst!r})", dst)
    if chain:
        c = Val(f"{c.src}.to({chain})", f"cast({c.ref}, {dst!r}, {chain!r})", chain)
    g.notes.append(f"cast {src.dt}->{dst}" + (f"->{chain}" if chain else ""))
    oc = g.param("o", c.dt, (m, n), "out")
    lines.append(f"{oc}[i, j] = {c.src}")
    g.ref.append(f"out[{oc!r}] = ({c.ref}).expand(a[{x!r}].shape).clone()")
    g.output(oc, True)
    if g.r.random() < 0.5:
        g.body += ["for i, j in parallel(M, N):", *_indent(lines)]
    else:
        g.notes.append("nested parallel")
        g.body += ["for i in parallel(M):", "    for j in parallel(N):", *_indent(lines, 2)]


def block_tensor(g: Gen) -> None:
    """Whole-tensor expressions at top level, with `keepdims` reductions broadcast back."""
    m, n = _rows_shape(g, long=True)
    dt = g.r.choice(FLOATS + ("i32", "i64"))
    x = g.param("x", dt, (m, n))
    y = g.param("y", dt, (m, n))
    leaves = [Val(x, f"a[{x!r}]", dt), Val(y, f"a[{y!r}]", dt)]
    for _ in range(g.r.randint(1, 2)):
        v = g.expr(leaves, dt, 2)
        if v.scalar:
            continue
        axis = g.r.randint(0, 1)
        fn = g.r.choice(("sum", "max", "min") if dt in ALL_FLOATS else ("max", "min"))
        ref = v.ref  # its own shape: a (M, 1) value reduced over axis 1 has one element per row
        ref = f"rnd({ref}.sum({axis}, keepdim=True), {dt!r})" if fn == "sum" else f"{ref}.a{fn}({axis}, keepdim=True)"
        name = g.fresh("r")
        g.body.append(f"{name} = intent.{fn}({v.src}, axis={axis}, keepdims=True)")
        g.ref.append(f"{name} = {ref}")
        leaves.append(Val(name, name, dt, v.exact and fn != "sum"))
        g.notes.append(f"tensor {fn} axis {axis}")
    v = g.expr(leaves, dt, 2)
    o = g.param("o", dt, (m, n), "out")
    if v.scalar or v.src in (x, y):
        v = Val(f"({v.src} + {x})", f"{'rnd' if dt in ALL_FLOATS else 'wrap'}({v.ref} + a[{x!r}], {dt!r})", dt, v.exact)
    g.body.append(f"{o}[:, :] = {v.src}")
    g.ref.append(f"out[{o!r}] = _torch.broadcast_to({v.ref}, a[{x!r}].shape).clone()")
    g.output(o, v.exact)


def block_loop(g: Gen) -> None:
    """Ordered loops with carries (and `if` inside) per row; local buffers written and read back."""
    short = "local_init_tile" not in g.avoid and g.r.random() < 0.3
    m, n = _rows_shape(g, short)
    dt = g.r.choice(FLOATS + FP8 + ("i32", "i16"))
    x = g.param("x", dt, (m, n))
    f = dt in ALL_FLOATS
    rd = "rnd" if f else "wrap"
    zero = f"{dt}(0.0)" if f else f"{dt}(0)"
    lines = [f"acc = {zero}"]
    g.ref += [f"acc = _torch.zeros(a[{x!r}].shape[0], dtype=_torch.{'float64' if f else 'int64'})"]
    rng, rref = g.r.choice(
        [
            ("range(N)", "range(a[{x!r}].shape[1])"),
            ("range(1, N, 2)", "range(1, a[{x!r}].shape[1], 2)"),
            ("range(N - 1)", "range(a[{x!r}].shape[1] - 1)"),
            ("range(n)", "range(a[{n!r}])"),  # a runtime trip count (negative: no iteration)
        ]
    )
    if rng == "range(n)":
        # small values only: a full-range i32 trip count runs for hours under the interpreter
        ns = g.param("n", "i32", None, spec=InputSpec("values", None, False, False))
        rng, rref = f"range({ns})", f"range(a[{ns!r}])"
        g.notes.append("runtime trip count")
        lines.append(f"for t in {rng}:")
        g.ref.append(f"for t in {rref}:")
        lines.append(f"    v = {x}[i, t % N]")
        g.ref.append(f"    v = a[{x!r}][:, t % a[{x!r}].shape[1]]")
    else:
        lines.append(f"for t in {rng}:")
        g.ref.append(f"for t in {rref.format(x=x)}:")
        lines.append(f"    v = {x}[i, t]")
        g.ref.append(f"    v = a[{x!r}][:, t]")
    kind = g.r.choice(("affine", "max", "if", "while"))
    if kind == "while":  # a data-dependent trip count: stop at the row's end or once the carry is large
        lines[-2:] = [
            "t = 0",
            f"while (t < N) & (acc < {'2.5' if f else '20'}):",
            f"    acc = acc + {x}[i, t]",
            "    t = t + 1",
        ]
        g.ref[-2:] = [
            f"t = _torch.zeros(a[{x!r}].shape[0], dtype=_torch.int64)",
            f"for _ in range(a[{x!r}].shape[1]):",
            f"    live = (t < a[{x!r}].shape[1]) & (acc < {'2.5' if f else '20'})",
            f"    v = a[{x!r}].gather(1, t.clamp(max=a[{x!r}].shape[1] - 1)[:, None])[:, 0]",
            f"    acc = _torch.where(live, {rd}(acc + v, {dt!r}), acc)",
            "    t = _torch.where(live, t + 1, t)",
        ]
        ot = g.param("o", "i64", (m,), "out")
        lines.append(f"{ot}[i] = t")
        g.ref.append(f"out[{ot!r}] = t.clone()")
        g.output(ot, True)
    half = "0.5" if f else "3"
    if kind == "while":
        pass
    elif kind == "affine" and g.r.random() < 0.3:
        lines.append(f"    acc += v * {half}")
        g.ref.append(f"    acc = {rd}(acc + {rd}(v * {half}, {dt!r}), {dt!r})")
    elif kind == "affine":
        lines.append(f"    acc = acc * {half} + v")
        g.ref.append(f"    acc = {rd}({rd}(acc * {half}, {dt!r}) + v, {dt!r})")
    elif kind == "max":
        lines.append("    acc = intent.maximum(acc, v - acc)")
        g.ref.append(f"    acc = _torch.maximum(acc, {rd}(v - acc, {dt!r}))")
    else:
        lines += ["    if (v > acc) | (v < -2):", "        acc = v - acc", "    else:", "        acc = acc + 1"]
        g.ref.append(f"    acc = _torch.where((v > acc) | (v < -2), {rd}(v - acc, {dt!r}), {rd}(acc + 1, {dt!r}))")
    g.notes.append(f"loop {kind}")
    o = g.param("o", dt, (m,), "out")
    lines.append(f"{o}[i] = acc")
    g.ref.append(f"out[{o!r}] = acc.clone()")
    g.output(o, True)
    if "local_init_tile" in g.avoid and g.shapes["M"] > 512:
        g.body += ["for i in parallel(M):", *_indent(lines)]
        return
    # a local buffer of K elements per row: K constant or the row length
    k = g.r.choice(("1", "2", "3", "N"))
    kv = g.shapes["N"] if k == "N" else int(k)
    init = g.r.choice(("zeros", "full", "empty"))
    g.notes.append(f"local {init} ({k})")
    if init != "empty" and g.shapes["M"] > 512:
        g.notes.append("local zeros/full in short rows")
    ob = g.param("o", dt, (m, k) if k == "N" else (m, k), "out")
    if init == "empty":
        lines += [f"buf = intent.empty(({k},), {dt})", f"for t in range({k}):", f"    buf[t] = {x}[i, t % N] * 2"]
        g.ref += [
            f"buf = _torch.zeros(a[{x!r}].shape[0], {kv}, dtype=acc.dtype)",
            f"for t in range({kv}):",
            f"    buf[:, t] = {rd}(a[{x!r}][:, t % a[{x!r}].shape[1]] * 2, {dt!r})",
        ]
    else:
        fill = f"intent.zeros(({k},), {dt})" if init == "zeros" else f"intent.full(({k},), 3, {dt})"
        lines.append(f"buf = {fill}")
        g.ref.append(f"buf = _torch.full((a[{x!r}].shape[0], {kv}), {0 if init == 'zeros' else 3}, dtype=acc.dtype)")
    lines += ["for t in range(N):", f"    buf[t % {k}] = buf[t % {k}] + {x}[i, t]"]
    g.ref += [
        f"for t in range(a[{x!r}].shape[1]):",
        f"    buf[:, t % {kv}] = {rd}(buf[:, t % {kv}] + a[{x!r}][:, t], {dt!r})",
    ]
    lines.append(f"{ob}[i, :] = buf")
    g.ref.append(f"out[{ob!r}] = buf.clone()")
    g.output(ob, True)
    g.body += ["for i in parallel(M):", *_indent(lines)]


def block_elements(g: Gen) -> None:
    """Gathers through computed indices, scatters through permutations, integer atomics, compaction."""
    e = g.symbol("E", g.r.choice((0,) + g.sizes))
    k = g.symbol("K", g.r.choice(g.sizes))
    dt = g.r.choice(FLOATS + ("i32", "i64", "u8"))
    v = g.param("v", dt, (k,))
    vn = g.param("vn", dt, (e,))
    idx = g.param("idx", "i32", (e,), spec=InputSpec("index", "K"))
    lines = ["j = " + g.r.choice((f"{idx}[n]", f"({idx}[n] * 3 + 1) % K", f"K - 1 - {idx}[n]", f"{idx}[n] // 2"))]
    jref = {
        f"{idx}[n]": f"a[{idx!r}].long()",
        f"({idx}[n] * 3 + 1) % K": f"_torch.fmod(a[{idx!r}].long() * 3 + 1, {g.shapes['K']})",
        f"K - 1 - {idx}[n]": f"{g.shapes['K']} - 1 - a[{idx!r}].long()",
        f"{idx}[n] // 2": f"_torch.div(a[{idx!r}].long(), 2, rounding_mode='trunc')",
    }[lines[0][4:]]
    g.ref.append(f"j = {jref}")
    og = g.param("o", dt, (e,), "out")
    if g.r.random() < 0.5:
        lines.append(f"{og}[n] = {v}[j]")
        g.ref.append(f"out[{og!r}] = gather(a[{v!r}], j)")
    else:  # a masked read with a fill of the author's choosing
        lines.append(f"{og}[n] = intent.gather({v}, j, 3)")
        g.ref.append(f"out[{og!r}] = gather(a[{v!r}], j, 3)")
    g.output(og, True)
    g.notes.append("gather")
    what = g.r.choice(("scatter", "hist", "unique_atomic", "compact"))
    g.notes.append(what)
    if what == "scatter":
        perm = g.param("perm", "i32", (e,), spec=InputSpec("perm", "K"))
        os_ = g.param("o", dt, (k,), "inout")
        lines.append(f"intent.store({os_}, {perm}[n], {vn}[n], unique=True)")
        g.ref.append(f"out[{os_!r}] = scatter(out[{os_!r}], a[{perm!r}].long(), a[{vn!r}])")
        g.output(os_, True)
    elif what == "hist":
        idx2 = g.param("bin", "i32", (e,), spec=InputSpec("index", "K"))
        h = g.param("h", "i32", (k,), "inout")
        if dt in ("f32", "f64") and g.r.random() < 0.4:  # float max/min: the result does not depend on order
            hf = g.param("h", dt, (k,), "inout")
            fn = g.r.choice(("max", "min"))
            lines.append(f"intent.atomic_{fn}({hf}, {idx2}[n], {vn}[n])")
            g.ref.append(f"out[{hf!r}] = scatter_reduce(out[{hf!r}], a[{idx2!r}].long(), a[{vn!r}], 'a{fn}')")
            g.output(hf, True)
            g.notes.append(f"float atomic {fn}")
        fn = g.r.choice(("add", "max", "min"))
        val = g.r.choice(("1", f"{idx}[n]"))
        vref = "1" if val == "1" else f"a[{idx!r}].long()"
        lines.append(f"intent.atomic_{fn}({h}, {idx2}[n], {val})")
        if fn == "add":
            g.ref.append(f"out[{h!r}] = wrap(scatter_add(out[{h!r}], a[{idx2!r}].long(), {vref}), 'i32')")
        else:
            g.ref.append(f"out[{h!r}] = scatter_reduce(out[{h!r}], a[{idx2!r}].long(), {vref}, 'a{fn}')")
        g.output(h, True)
    elif what == "unique_atomic":
        perm = g.param("perm", "i32", (e,), spec=InputSpec("perm", "K"))
        c = g.param("c", "i32", (k,), "inout")
        oo = g.param("o", "i32", (e,), "out")
        lines += [
            f"p = {perm}[n]",
            "if (p >= 0) & (p < K):",
            f"    {oo}[n] = intent.atomic_add({c}, p, 2)",
            "else:",
            f"    {oo}[n] = -1",
        ]
        g.ref += [
            f"p = a[{perm!r}].long()",
            f"ok = (p >= 0) & (p < {g.shapes['K']})",
            f"out[{oo!r}] = _torch.where(ok, gather(out[{c!r}], p), -1)",
            f"out[{c!r}] = wrap(scatter_add(out[{c!r}], p, 2), 'i32')",
        ]
        g.output(oo, True)
        g.output(c, True)
    else:  # stream compaction: a counter, then a unique store at the slot it gave
        cnt = g.param("cnt", "i32", ("1",), "inout", InputSpec("zeros"))
        oc = g.param("o", dt, (e,), "inout")
        at = "n - n" if "not_of_0d_compare" in g.avoid else "0"
        cond = g.r.random() < 0.5 and "not_of_0d_compare" not in g.avoid
        body = [f"slot = intent.atomic_add({cnt}, {at}, 1)", f"intent.store({oc}, slot, {vn}[n], unique=True)"]
        lines += [f"if {vn}[n] > 0:", *_indent(body)] if cond else body
        sel = f"a[{vn!r}] > 0" if cond else f"_torch.ones({g.shapes['E']}, dtype=_torch.bool)"
        g.ref += [
            f"sel = {sel}",
            f"kept = a[{vn!r}][sel]",
            f"out[{cnt!r}] = out[{cnt!r}] + int(sel.sum())",
            f"out[{oc!r}] = out[{oc!r}].clone()",
            f"out[{oc!r}][:kept.shape[0]] = kept",
        ]
        g.output(oc, True)
        g.output(cnt, True)
        g.unordered.add(oc)
    g.body += ["for n in parallel(E):", *_indent(lines)]


def block_segments(g: Gen) -> None:
    """Folds and scans over subregions `v[offs[q]:offs[q + 1]]`, empty segments included."""
    s = g.symbol("S", g.r.choice(g.sizes[:8]))
    e = g.symbol("E", g.r.choice((0,) + g.sizes))
    dt = g.r.choice(FLOATS + ("i32", "i64"))
    v = g.param("v", dt, (e,))
    offs = g.param("offs", "i64", ("S + 1",), spec=InputSpec("offsets", "E"))
    fn = g.r.choice(("sum", "max", "min") if dt in ALL_FLOATS else ("sum", "max", "min"))
    o = g.param("o", dt, (s,), "out")
    lines = [f"b = {offs}[q]", f"e = {offs}[q + 1]", f"{o}[q] = intent.{fn}({v}[b:e])"]
    f = dt in ALL_FLOATS
    if fn == "sum":
        one = f"rnd(seg.sum(), {dt!r})" if f else f"wrap(seg.sum(), {dt!r})"
    else:
        ident = (
            ("-_np.inf" if fn == "max" else "_np.inf")
            if f
            else ("-(1 << 63)" if dt == "i64" else "-(1 << 31)")
            if fn == "max"
            else ("(1 << 63) - 1" if dt == "i64" else "(1 << 31) - 1")
        )
        one = f"(seg.a{fn}() if seg.numel() else _torch.tensor({ident}, dtype=seg.dtype))"
    g.ref += [
        f"out[{o!r}] = _torch.zeros({g.shapes['S']}, dtype=a[{v!r}].dtype)",
        f"for q in range({g.shapes['S']}):",
        f"    seg = a[{v!r}][int(a[{offs!r}][q]):int(a[{offs!r}][q + 1])]",
        f"    out[{o!r}][q] = {one}",
    ]
    g.output(o, fn != "sum" or not f)
    g.notes.append(f"segment {fn}")
    if g.r.random() < 0.4:  # an ordered loop over the segment, carrying a value
        ol = g.param("o", dt, (s,), "out")
        rd, half = ("rnd", "0.5") if f else ("wrap", "3")
        lines += [f"acc = {dt}(0)", "for t in range(b, e):", f"    acc = acc * {half} + {v}[t]", f"{ol}[q] = acc"]
        g.ref += [
            f"out[{ol!r}] = _torch.zeros({g.shapes['S']}, dtype=a[{v!r}].dtype)",
            f"for q in range({g.shapes['S']}):",
            f"    acc = _torch.zeros((), dtype=out[{ol!r}].dtype)",
            f"    for t in range(int(a[{offs!r}][q]), int(a[{offs!r}][q + 1])):",
            f"        acc = {rd}({rd}(acc * {half}, {dt!r}) + a[{v!r}][t], {dt!r})",
            f"    out[{ol!r}][q] = acc",
        ]
        g.output(ol, True)
        g.notes.append("segment loop")
    if g.r.random() < 0.5:
        oc = g.param("o", dt, (e,), "inout")
        rev = g.r.random() < 0.3
        lines.append(f"{oc}[b:e] = intent.cumsum({v}[b:e]{', reverse=True' if rev else ''})")
        scan = "seg.flip(0).cumsum(0).flip(0)" if rev else "seg.cumsum(0)"
        g.ref += [
            f"for q in range({g.shapes['S']}):",
            f"    b, e = int(a[{offs!r}][q]), int(a[{offs!r}][q + 1])",
            f"    seg = a[{v!r}][b:e]",
            f"    out[{oc!r}][b:e] = {'rnd' if f else 'wrap'}({scan}, {dt!r})",
        ]
        g.output(oc, not f)
        g.notes.append("segment cumsum" + (" reverse" if rev else ""))
    g.body += ["for q in parallel(S):", *_indent(lines)]


BLOCKS = {
    "rows": block_rows,
    "points": block_points,
    "tensor": block_tensor,
    "loop": block_loop,
    "elements": block_elements,
    "segments": block_segments,
}
