"""An SSA text builder for StableHLO: one method per StableHLO op, each returning the result `Val`.

Simple ops use the dialect's pretty syntax; ops with regions or structured attributes use the
generic form (`"stablehlo.reduce"(...) ({...}) {attrs} : (types) -> types`), which is stable across
StableHLO versions. Names of emitted temporaries always contain a `.`, so they never collide with
the parameters' names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kir.dtypes import DType

from .values import Val, literal

RegionBody = Callable[[list[Val]], Sequence[Val]]


def _ints(xs: Sequence[int]) -> str:
    return f"array<i64{': ' if xs else ''}{', '.join(str(int(x)) for x in xs)}>"


def _list(xs: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(x)) for x in xs) + "]"


def _types(vals: Sequence[Val]) -> str:
    return ", ".join(v.type for v in vals)


def _result_types(types: Sequence[str]) -> str:
    return types[0] if len(types) == 1 else "(" + ", ".join(types) + ")"


def cmp_type(dtype: DType) -> str:
    if dtype.is_float:
        return "FLOAT"
    if dtype.is_pred or not dtype.is_signed:
        return "UNSIGNED"
    return "SIGNED"


_UNSIGNED = {DType.i8: DType.u8, DType.i16: DType.u16, DType.i32: DType.u32, DType.i64: DType.u64}


class SSA:
    """Accumulates the lines of one function body."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 4
        self._counter = 0
        self.used: set[str] = set()

    # ------------------------------------------------------------------------------------- plumbing
    def fresh(self, hint: str | None = None) -> str:
        self._counter += 1
        base = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in (hint or "t"))[:24] or "t"
        return f"%{base}.{self._counter}"

    def emit(self, line: str) -> None:
        self.lines.append(" " * self.indent + line)

    def comment(self, text: str) -> None:
        self.emit("// " + "".join(c if c.isprintable() else " " for c in text))

    def use(self, *vals: Val) -> str:
        for v in vals:
            self.used.add(v.name.split("#")[0])
        return ", ".join(v.name for v in vals)

    def mark(self) -> int:
        return len(self.lines)

    def rewind(self, mark: int) -> None:
        del self.lines[mark:]

    def _result(self, dtype: DType, shape: tuple[int, ...], depth: int, hint: str | None) -> Val:
        return Val(self.fresh(hint), dtype, tuple(shape), depth)

    # ------------------------------------------------------------------------------------- leaves
    def constant(self, value: int | float | bool, dtype: DType, shape: tuple[int, ...] = (), depth: int = 0,
                 hint: str | None = "c") -> Val:
        r = self._result(dtype, shape, depth, hint)
        if dtype.is_int and isinstance(value, int) and not isinstance(value, bool):
            lo, hi = dtype.int_range  # an identity written for another integer type wraps, as in KIR
            value = (value - lo) % (hi - lo + 1) + lo
        self.emit(f"{r.name} = stablehlo.constant dense<{literal(value, dtype)}> : {r.type}")
        return r

    def iota(self, dtype: DType, shape: tuple[int, ...], dim: int, depth: int = 0, hint: str | None = "iota") -> Val:
        r = self._result(dtype, shape, depth, hint)
        self.emit(f"{r.name} = stablehlo.iota dim = {dim} : {r.type}")
        return r

    # ------------------------------------------------------------------------------------- elementwise
    def unary(self, name: str, x: Val, hint: str | None = None) -> Val:
        r = self._result(x.dtype, x.shape, x.depth, hint)
        self.emit(f"{r.name} = stablehlo.{name} {self.use(x)} : {r.type}")
        return r

    @staticmethod
    def _pair_depth(name: str, a: Val, b: Val) -> int:
        """The batch depth of a two-operand op's result; its operands must agree in shape and dtype."""
        if a.shape != b.shape or a.dtype != b.dtype:
            raise AssertionError(f"stablehlo.{name} operands differ: {a.type} vs {b.type}")
        return max(a.depth, b.depth)

    def binary(self, name: str, a: Val, b: Val, hint: str | None = None) -> Val:
        r = self._result(a.dtype, a.shape, self._pair_depth(name, a, b), hint)
        self.emit(f"{r.name} = stablehlo.{name} {self.use(a, b)} : {r.type}")
        return r

    def compare(self, direction: str, a: Val, b: Val, hint: str | None = None) -> Val:
        r = self._result(DType.pred, a.shape, self._pair_depth("compare", a, b), hint)
        self.emit(f"{r.name} = stablehlo.compare {direction}, {self.use(a, b)}, {cmp_type(a.dtype)} : "
                  f"({a.type}, {b.type}) -> {r.type}")
        return r

    def select(self, cond: Val, a: Val, b: Val, hint: str | None = None) -> Val:
        if not (cond.shape == a.shape == b.shape) or a.dtype != b.dtype:
            raise AssertionError(f"stablehlo.select operands differ: {cond.type}, {a.type}, {b.type}")
        r = self._result(a.dtype, a.shape, max(cond.depth, a.depth, b.depth), hint)
        self.emit(f"{r.name} = stablehlo.select {self.use(cond, a, b)} : {cond.type}, {r.type}")
        return r

    def optimization_barrier(self, x: Val, hint: str | None = None) -> Val:
        r = self._result(x.dtype, x.shape, x.depth, hint)
        self.emit(f"{r.name} = stablehlo.optimization_barrier {self.use(x)} : {r.type}")
        return r

    def reduce_precision(self, x: Val, exponent_bits: int, mantissa_bits: int, hint: str | None = None) -> Val:
        r = self._result(x.dtype, x.shape, x.depth, hint)
        self.emit(f'{r.name} = "stablehlo.reduce_precision"({self.use(x)}) {{exponent_bits = {exponent_bits} : i32, '
                  f"mantissa_bits = {mantissa_bits} : i32}} : ({x.type}) -> {r.type}")
        return r

    def convert(self, x: Val, dtype: DType, hint: str | None = None) -> Val:
        unsigned = _UNSIGNED.get(x.dtype), _UNSIGNED.get(dtype)
        if unsigned[0] is not None and unsigned[1] is not None and dtype.bits < x.dtype.bits:
            # A signed narrowing convert (i64 -> i32) feeding a bitwise and/or crashes XLA's CPU compiler
            # (jaxlib 0.10.2 segfaults on `or(convert(y: i64 -> i32), x)`, with or without a barrier
            # between); the same truncation through the unsigned types compiles: bits in, bits out.
            wide = self._retyped("bitcast_convert", x, unsigned[0], hint)
            return self._retyped("bitcast_convert", self._retyped("convert", wide, unsigned[1], hint), dtype, hint)
        return self._retyped("convert", x, dtype, hint)

    def bitcast(self, x: Val, dtype: DType, hint: str | None = None) -> Val:
        return self._retyped("bitcast_convert", x, dtype, hint)

    def _retyped(self, op: str, x: Val, dtype: DType, hint: str | None) -> Val:
        """`x` through `stablehlo.<op>` to `dtype` (no op when it has that dtype already)."""
        if x.dtype == dtype:
            return x
        r = self._result(dtype, x.shape, x.depth, hint)
        self.emit(f"{r.name} = stablehlo.{op} {self.use(x)} : ({x.type}) -> {r.type}")
        return r

    # ------------------------------------------------------------------------------------- layout
    def broadcast_in_dim(self, x: Val, shape: tuple[int, ...], dims: Sequence[int], depth: int,
                         hint: str | None = None) -> Val:
        if tuple(shape) == x.shape and list(dims) == list(range(x.rank)):
            return Val(x.name, x.dtype, x.shape, depth)
        r = self._result(x.dtype, shape, depth, hint)
        self.emit(f"{r.name} = stablehlo.broadcast_in_dim {self.use(x)}, dims = {_list(dims)} : "
                  f"({x.type}) -> {r.type}")
        return r

    def reshape(self, x: Val, shape: tuple[int, ...], depth: int, hint: str | None = None) -> Val:
        if tuple(shape) == x.shape:
            return Val(x.name, x.dtype, x.shape, depth)
        r = self._result(x.dtype, shape, depth, hint)
        self.emit(f"{r.name} = stablehlo.reshape {self.use(x)} : ({x.type}) -> {r.type}")
        return r

    def transpose(self, x: Val, perm: Sequence[int], depth: int, hint: str | None = None) -> Val:
        if list(perm) == list(range(x.rank)):
            return Val(x.name, x.dtype, x.shape, depth)
        r = self._result(x.dtype, tuple(x.shape[p] for p in perm), depth, hint)
        self.emit(f"{r.name} = stablehlo.transpose {self.use(x)}, dims = {_list(perm)} : ({x.type}) -> {r.type}")
        return r

    def slice(self, x: Val, starts: Sequence[int], limits: Sequence[int], strides: Sequence[int] | None = None,
              depth: int | None = None, hint: str | None = None) -> Val:
        strides = list(strides) if strides is not None else [1] * x.rank
        if list(starts) == [0] * x.rank and list(limits) == list(x.shape) and strides == [1] * x.rank:
            return Val(x.name, x.dtype, x.shape, x.depth if depth is None else depth)
        shape = tuple(max(0, -(-(hi - lo) // s)) for lo, hi, s in zip(starts, limits, strides))
        r = self._result(x.dtype, shape, x.depth if depth is None else depth, hint)
        self.emit(f'{r.name} = "stablehlo.slice"({self.use(x)}) {{start_indices = {_ints(starts)}, '
                  f"limit_indices = {_ints(limits)}, strides = {_ints(strides)}}} : ({x.type}) -> {r.type}")
        return r

    def dynamic_slice(self, x: Val, starts: Sequence[Val], sizes: Sequence[int], depth: int,
                      hint: str | None = None) -> Val:
        r = self._result(x.dtype, tuple(sizes), depth, hint)
        self.emit(f'{r.name} = "stablehlo.dynamic_slice"({self.use(x, *starts)}) {{slice_sizes = {_ints(sizes)}}} '
                  f": ({x.type}, {_types(starts)}) -> {r.type}")
        return r

    def dynamic_update_slice(self, x: Val, update: Val, starts: Sequence[Val], hint: str | None = None) -> Val:
        r = self._result(x.dtype, x.shape, x.depth, hint)
        self.emit(f'{r.name} = "stablehlo.dynamic_update_slice"({self.use(x, update, *starts)}) : '
                  f"({x.type}, {update.type}, {_types(starts)}) -> {r.type}")
        return r

    def concatenate(self, xs: Sequence[Val], dim: int, depth: int, hint: str | None = None) -> Val:
        if len(xs) == 1:
            return xs[0]
        shape = list(xs[0].shape)
        shape[dim] = sum(x.shape[dim] for x in xs)
        r = self._result(xs[0].dtype, tuple(shape), depth, hint)
        self.emit(f'{r.name} = "stablehlo.concatenate"({self.use(*xs)}) {{dimension = {dim} : i64}} : '
                  f"({_types(xs)}) -> {r.type}")
        return r

    def reverse(self, x: Val, dims: Sequence[int], hint: str | None = None) -> Val:
        r = self._result(x.dtype, x.shape, x.depth, hint)
        self.emit(f'{r.name} = "stablehlo.reverse"({self.use(x)}) {{dimensions = {_ints(dims)}}} : '
                  f"({x.type}) -> {r.type}")
        return r

    def pad(self, x: Val, value: Val, low: Sequence[int], high: Sequence[int], hint: str | None = None) -> Val:
        shape = tuple(d + lo + hi for d, lo, hi in zip(x.shape, low, high))
        r = self._result(x.dtype, shape, x.depth, hint)
        self.emit(f'{r.name} = "stablehlo.pad"({self.use(x, value)}) {{edge_padding_high = {_ints(high)}, '
                  f"edge_padding_low = {_ints(low)}, interior_padding = {_ints([0] * x.rank)}}} : "
                  f"({x.type}, {value.type}) -> {r.type}")
        return r

    # ------------------------------------------------------------------------------------- structured
    def _multi(self, n: int, hint: str | None) -> tuple[str, list[str]]:
        base = self.fresh(hint)
        if n == 1:
            return base, [base]
        return f"{base}:{n}", [f"{base}#{i}" for i in range(n)]

    def region(self, arg_types: Sequence[tuple[DType, tuple[int, ...], int]], body: RegionBody,
               closing: str) -> list[Val]:
        """Emit `^bb0(args): ... stablehlo.return ...` followed by `closing`; returns what `body` yielded."""
        args = [Val(self.fresh("arg"), dt, shape, depth) for dt, shape, depth in arg_types]
        step = 2 if args else 0
        if args:
            self.emit("^bb0(" + ", ".join(f"{a.name}: {a.type}" for a in args) + "):")
        self.indent += step
        outs = list(body(args))
        self.emit(f"stablehlo.return {self.use(*outs)} : {_types(outs)}")
        self.indent -= step
        self.lines.append(" " * (self.indent - 2) + closing)
        return outs

    def reduce(self, inputs: Sequence[Val], inits: Sequence[Val], dims: Sequence[int], body: RegionBody,
               depth: int, hint: str | None = None) -> list[Val]:
        keep = [i for i in range(inputs[0].rank) if i not in dims]
        shape = tuple(inputs[0].shape[i] for i in keep)
        head, names = self._multi(len(inputs), hint)
        outs = [Val(n, x.dtype, shape, depth) for n, x in zip(names, inputs)]
        self.emit(f'{head} = "stablehlo.reduce"({self.use(*inputs, *inits)}) ({{')
        self.indent += 2
        arg_types = [(x.dtype, (), 0) for x in inputs] * 2
        self.region(arg_types, body, f"}}) {{dimensions = {_ints(dims)}}} : ({_types(inputs)}, {_types(inits)}) -> "
                    f"{_result_types([o.type for o in outs])}")
        self.indent -= 2
        return outs

    def sort(self, inputs: Sequence[Val], dim: int, body: RegionBody, hint: str | None = None) -> list[Val]:
        """A stable sort of `inputs` along `dim`; `body(lhs_0, rhs_0, lhs_1, rhs_1, ...)` yields `lhs < rhs`."""
        head, names = self._multi(len(inputs), hint)
        outs = [Val(n, x.dtype, x.shape, x.depth) for n, x in zip(names, inputs)]
        self.emit(f'{head} = "stablehlo.sort"({self.use(*inputs)}) ({{')
        self.indent += 2
        arg_types = [(x.dtype, (), 0) for x in inputs for _ in range(2)]
        self.region(arg_types, body, f"}}) {{dimension = {dim} : i64, is_stable = true}} : ({_types(inputs)}) -> "
                    f"{_result_types([o.type for o in outs])}")
        self.indent -= 2
        return outs

    def gather_points(self, operand: Val, indices: Val, depth: int, hint: str | None = None) -> Val:
        """`operand[indices[..., :]]`: indices has shape U + [rank]; the result has shape U (clamped)."""
        rank = operand.rank
        u = indices.shape[:-1]
        r = self._result(operand.dtype, u, depth, hint)
        axes = _list(range(rank))
        self.emit(f'{r.name} = "stablehlo.gather"({self.use(operand, indices)}) {{dimension_numbers = '
                  f"#stablehlo.gather<collapsed_slice_dims = {axes}, start_index_map = {axes}, "
                  f"index_vector_dim = {len(u)}>, indices_are_sorted = false, slice_sizes = {_ints([1] * rank)}}} "
                  f": ({operand.type}, {indices.type}) -> {r.type}")
        return r

    def scatter_points(self, operand: Val, indices: Val, updates: Val,
                       combine: Callable[[Val, Val], Val] | None, hint: str | None = None) -> Val:
        """Scatter `updates` (shape U) at `indices` (U + [rank]); `combine(old, new)` or replace when None."""
        rank = operand.rank
        u = indices.shape[:-1]
        r = self._result(operand.dtype, operand.shape, operand.depth, hint)
        axes = _list(range(rank))
        self.emit(f'{r.name} = "stablehlo.scatter"({self.use(operand, indices, updates)}) ({{')
        self.indent += 2

        def body(args: list[Val]) -> list[Val]:
            return [args[1] if combine is None else combine(args[0], args[1])]

        self.region([(operand.dtype, (), 0)] * 2, body,
                    f"}}) {{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<"
                    f"inserted_window_dims = {axes}, scatter_dims_to_operand_dims = {axes}, "
                    f"index_vector_dim = {len(u)}>, unique_indices = false}} : "
                    f"({operand.type}, {indices.type}, {updates.type}) -> {r.type}")
        self.indent -= 2
        return r

    def while_(self, inits: Sequence[Val], cond: RegionBody, body: RegionBody, hint: str | None = "loop"
               ) -> list[Val]:
        head, names = self._multi(len(inits), hint)
        outs = [Val(n, v.dtype, v.shape, v.depth) for n, v in zip(names, inits)]
        arg_types = [(v.dtype, v.shape, v.depth) for v in inits]
        self.emit(f'{head} = "stablehlo.while"({self.use(*inits)}) ({{')
        self.indent += 2
        self.region(arg_types, cond, "}, {")
        self.region(arg_types, body, f"}}) : ({_types(inits)}) -> {_result_types([v.type for v in inits])}")
        self.indent -= 2
        return outs

    def if_(self, pred: Val, then: Callable[[], Sequence[Val]], else_: Callable[[], Sequence[Val]],
            hint: str | None = "if") -> list[Val]:
        """`stablehlo.if`: both branches yield values of the same types (the types `then` yields)."""
        head_at = self.mark()
        self.emit("")  # the header, written once the result types are known
        self.indent += 2
        outs = self.region([], lambda _: then(), "}, {")
        types = [o.type for o in outs]
        self.region([], lambda _: else_(), f"}}) : ({pred.type}) -> {_result_types(types) if types else '()'}")
        self.indent -= 2
        head, names = self._multi(len(outs), hint)
        self.lines[head_at] = " " * self.indent + f'{head} = "stablehlo.if"({self.use(pred)}) ({{'
        return [Val(n, o.dtype, o.shape, o.depth) for n, o in zip(names, outs)]

    def dot_general(self, lhs: Val, rhs: Val, lhs_batch: Sequence[int], rhs_batch: Sequence[int],
                    lhs_contract: Sequence[int], rhs_contract: Sequence[int], precision: str, depth: int,
                    hint: str | None = "dot") -> Val:
        shape = [lhs.shape[d] for d in lhs_batch]
        shape += [d for i, d in enumerate(lhs.shape) if i not in (*lhs_batch, *lhs_contract)]
        shape += [d for i, d in enumerate(rhs.shape) if i not in (*rhs_batch, *rhs_contract)]
        r = self._result(lhs.dtype, tuple(shape), depth, hint)
        self.emit(f'{r.name} = "stablehlo.dot_general"({self.use(lhs, rhs)}) {{dot_dimension_numbers = '
                  f"#stablehlo.dot<lhs_batching_dimensions = {_list(lhs_batch)}, "
                  f"rhs_batching_dimensions = {_list(rhs_batch)}, lhs_contracting_dimensions = {_list(lhs_contract)}, "
                  f"rhs_contracting_dimensions = {_list(rhs_contract)}>, precision_config = "
                  f"[#stablehlo<precision {precision}>, #stablehlo<precision {precision}>]}} : "
                  f"({lhs.type}, {rhs.type}) -> {r.type}")
        return r
